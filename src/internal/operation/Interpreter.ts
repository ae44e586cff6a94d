/**
 * The one interpreter of operations over a key's stored state: the
 * semantics every backend runs. A bucket in process runs it on the state in
 * its `Ref`; the in-memory store on the states in its `Map`; Redis runs it
 * compiled to Lua; a cluster's owner runs it as a bucket does. Each
 * operation's transition is defined once, in {@link transitions}.
 *
 * A key's stored value is `undefined` (none: it reads as fresh), the
 * algorithm's own state, or a {@link Block.Stored} (a block beside it).
 * Take, Admit, a partial take, Force, the adds, Fill, Set and Block give a
 * key with no state its state; Peek, Get and WaitTime never do. While a block
 * lasts, Take, Admit, Peek, a partial take and WaitTime are refused with the
 * block's figures and change nothing; a Take the policy itself refuses
 * starts a block of `blockMillis`, if the policy has one. Reset, Fill, Set
 * and Delete end a block; Release, Force and the adds work underneath it.
 *
 * Pure: no Effect, no clock (`now` comes in), no mutation of what it is
 * given.
 *
 * @since 0.3.0
 */
import type { Outcome, Rule, Signal } from "../algorithm/Algorithm.ts"
import * as Block from "../algorithm/Block.ts"
import * as Op from "./Op.ts"

/**
 * What the interpreter needs of a policy: its rule, and how long a refusal
 * by the policy itself blocks the key (0: it does not).
 *
 * @since 0.3.0
 */
export interface Policy {
  readonly rule: Rule
  readonly blockMillis: number
}

// The key while its operations run: its state (undefined: none), and the
// end of a block (-Infinity: none).
interface Key {
  readonly rule: Rule
  readonly blockMillis: number
  readonly now: number
  state: unknown
  until: number
}

type Transition = (key: Key, op: Op.Op) => Op.Reply

/**
 * A reply from an algorithm's outcome (with `value`, when the operation
 * answers one).
 *
 * @example
 * ```ts
 * import * as Interpreter from "./Interpreter.ts"
 *
 * Interpreter.replyOf({ allowed: true, state: 0, remaining: 4, retryAfter: 0, resetAfter: 200, limit: 5 })
 * ```
 *
 * @since 0.3.0
 */
export const replyOf = (o: Outcome<unknown>, value?: number): Op.Reply => {
  const reply: Op.Reply = {
    allowed: o.allowed,
    remaining: o.remaining,
    retryAfter: o.retryAfter,
    resetAfter: o.resetAfter,
    limit: o.limit
  }
  const shaped = o.allowed && o.delay !== undefined && o.delay > 0 ? { ...reply, delay: o.delay } : reply
  return value === undefined ? shaped : { ...shaped, value }
}

/**
 * What a request of `cost` gets when `held` units are already spoken for
 * (holds of calls over several keys): they count as taken. It is admitted
 * only if the held units and its own cost both fit; it takes only its own.
 * A denial the held units cause says when the request would fit behind them.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "../algorithm/TokenBucket.ts"
 * import { bind } from "../algorithm/Algorithm.ts"
 * import * as Interpreter from "./Interpreter.ts"
 *
 * const rule = bind(TokenBucket.algorithm, TokenBucket.config({ capacity: 2, tokens: 1, periodMillis: 1000 }))
 * Interpreter.fit(rule, rule.initial(0), 0, 1, 1).allowed // true: 1 held + 1 fit in 2
 * Interpreter.fit(rule, rule.initial(0), 0, 2, 1).allowed // false, retryAfter 1000
 * ```
 *
 * @since 0.3.0
 */
export const fit = (rule: Rule, state: unknown, now: number, cost: number, held: number): Outcome<unknown> => {
  if (held === 0) return rule.step(state, now, cost)
  const both = rule.step(state, now, held + cost)
  if (!both.allowed) {
    return { ...behind(rule, state, now, held, cost), remaining: Math.max(0, both.remaining - held) }
  }
  const own = rule.step(state, now, cost)
  return own.allowed ? { ...own, remaining: Math.max(0, own.remaining - held) } : own
}

/**
 * A request of `cost` behind `queued` units (waiters, or holds): denied,
 * with when it would be admitted and when the key would be fresh again.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "../algorithm/TokenBucket.ts"
 * import { bind } from "../algorithm/Algorithm.ts"
 * import * as Interpreter from "./Interpreter.ts"
 *
 * const rule = bind(TokenBucket.algorithm, TokenBucket.config({ capacity: 2, tokens: 1, periodMillis: 1000 }))
 * Interpreter.behind(rule, rule.initial(0), 0, 2, 1).retryAfter // 1000
 * ```
 *
 * @since 0.3.0
 */
export const behind = (rule: Rule, state: unknown, now: number, queued: number, cost: number): Outcome<unknown> => ({
  allowed: false,
  state,
  remaining: 0,
  retryAfter: rule.waitTime(state, now, queued, cost),
  resetAfter: rule.waitTime(state, now, queued, rule.maxCost),
  limit: rule.maxCost
})

const current = (key: Key): unknown => key.state === undefined ? key.rule.initial(key.now) : key.state

const blocked = (key: Key): boolean => key.now < key.until

// The rule a windowed operation runs (a duration per call), else the policy's.
const windowed = (key: Key, op: Op.Op): Rule =>
  op.window === undefined || op.window === 0 ? key.rule : key.rule.withWindow(op.window) ?? key.rule

// Whether the key has state worth keeping: some, blocked or not yet settled
// (a settled key reads as one never seen), or others wait on it.
const live = (key: Key, op: Op.Op): boolean =>
  op.queued > 0 ||
  (key.state !== undefined && (blocked(key) || key.now < key.rule.settledAt(key.state)))

// The key as it stands, as a unit request sees it.
const standing = (key: Key, value?: number): Op.Reply =>
  replyOf(
    blocked(key)
      ? Block.outcome(key.rule, current(key), key.now, key.until, 1)
      : key.rule.peek(current(key), key.now, 1),
    value
  )

// An operation that decides nothing and answers nothing but the limit.
const done = (key: Key): Op.Reply => ({
  allowed: true,
  remaining: 0,
  retryAfter: 0,
  resetAfter: 0,
  limit: key.rule.maxCost
})

// Take and Admit: decide `cost` (with `queued` units held), and take it if
// admitted.
const take = (key: Key, op: Op.Op): Op.Reply => {
  const before = current(key)
  if (blocked(key)) {
    if (key.state === undefined) key.state = before
    return replyOf(Block.outcome(key.rule, before, key.now, key.until, op.cost))
  }
  const outcome = fit(windowed(key, op), before, key.now, op.cost, op.queued)
  // A denial keeps the state as it was (Admit) or the one it produced
  // (Take: the same, or an attempt logged); a fresh key still gets its
  // initial state (its first use anchors it, as a bucket's start does).
  key.state = op.kind === Op.Kind.Take || outcome.allowed ? outcome.state : before
  if (op.kind === Op.Kind.Take && !outcome.allowed && key.blockMillis > 0) {
    // a request the policy itself refuses blocks the key (blockDuration)
    key.until = key.now + key.blockMillis
    return replyOf(Block.outcome(key.rule, key.state, key.now, key.until, op.cost))
  }
  return replyOf(outcome)
}

// OpKind.Adapt's cost: which signal.
const signals: ReadonlyArray<Signal> = ["ok", "throttled", "latency"]

/**
 * Each operation's transition: what it does to the key and what it answers
 * (see {@link Op.names} for what each means).
 *
 * @since 0.3.0
 */
export const transitions: { readonly [K in Op.Kind]: Transition } = {
  [Op.Kind.Take]: take,
  [Op.Kind.Admit]: take,
  [Op.Kind.Peek]: (key, op) => {
    const state = current(key)
    if (blocked(key)) return replyOf(Block.outcome(key.rule, state, key.now, key.until, op.cost))
    // (a window of the call's own, as the take it stands for would use)
    const rule = windowed(key, op)
    if (op.queued === 0) return replyOf(rule.peek(state, key.now, op.cost))
    // with units held: admitted as a take would be; what remains, as a peek
    // sees it, less the units held (they are not there for anyone else)
    const held = fit(rule, state, key.now, op.cost, op.queued)
    return replyOf({ ...held, remaining: Math.max(0, rule.peek(state, key.now, op.cost).remaining - op.queued) })
  },
  [Op.Kind.Reset]: (key) => {
    if (key.state !== undefined) key.state = key.rule.initial(key.now)
    key.until = -Infinity
    return done(key)
  },
  [Op.Kind.Release]: (key, op) => {
    // Units go back to the key's state, a fresh key's initial one included
    // (a key that starts below its limit). A key with no state whose
    // initial state is settled (it starts full) stays without: a release
    // could give it nothing, and a state kept from now would anchor its
    // refill at this moment.
    const { rule, now } = key
    if (rule.release !== undefined && !(key.state === undefined && now >= rule.settledAt(rule.initial(now)))) {
      key.state = rule.release(current(key), now, op.cost)
    }
    return standing(key)
  },
  [Op.Kind.WaitTime]: (key, op) => {
    const { rule, now } = key
    const state = current(key)
    const wait = (cost: number) =>
      blocked(key)
        ? Block.waitTime(rule, state, now, key.until, op.queued, cost)
        : rule.waitTime(state, now, op.queued, cost)
    return {
      allowed: false,
      remaining: 0,
      retryAfter: wait(op.cost),
      resetAfter: wait(rule.maxCost),
      limit: rule.maxCost
    }
  },
  [Op.Kind.Force]: (key, op) => {
    const rule = windowed(key, op)
    key.state = rule.force(current(key), key.now, op.cost)
    // How long the debt lasts: until a request of no units is admitted again.
    const within = blocked(key)
      ? Block.outcome(key.rule, key.state, key.now, key.until, 0)
      : rule.step(key.state, key.now, 0)
    // (a shaper's delay for no units is no debt)
    const { delay: _, ...figures } = replyOf(within)
    return { ...figures, allowed: true, retryAfter: within.allowed ? 0 : within.retryAfter }
  },
  [Op.Kind.ForceAdd]: (key, op) => {
    const forceAdd = key.rule.forceAdd
    if (forceAdd !== undefined) key.state = forceAdd(current(key), key.now, op.cost)
    return standing(key)
  },
  [Op.Kind.Fill]: (key) => {
    key.state = key.rule.full(key.now)
    key.until = -Infinity
    return standing(key)
  },
  [Op.Kind.TakeUpTo]: (key, op) => {
    const before = current(key)
    key.state = before
    if (blocked(key)) return replyOf(Block.outcome(key.rule, before, key.now, key.until, 1), 0)
    if (op.queued === 0) {
      const { outcome, taken } = key.rule.takeUpTo(before, key.now, op.cost)
      if (taken > 0) key.state = outcome.state
      return replyOf(outcome, taken)
    }
    // Units held come first, as for a take: the most that fits beside them.
    const taken = Math.max(0, key.rule.takeUpTo(before, key.now, op.queued + op.cost).taken - op.queued)
    const outcome = fit(key.rule, before, key.now, Math.max(1, taken), op.queued)
    if (taken > 0) key.state = outcome.state
    return replyOf(taken > 0 ? outcome : { ...outcome, allowed: false }, taken)
  },
  [Op.Kind.Get]: (key, op) => standing(key, live(key, op) ? 1 : 0),
  [Op.Kind.Set]: (key, op) => {
    const rule = windowed(key, op)
    key.state = rule.force(rule.full(key.now), key.now, op.cost)
    key.until = -Infinity
    return standing(key)
  },
  [Op.Kind.Delete]: (key, op) => {
    const had = live(key, op) ? 1 : 0
    key.state = undefined
    key.until = -Infinity
    return standing(key, had)
  },
  [Op.Kind.Block]: (key, op) => {
    key.state = current(key)
    key.until = key.now + op.cost
    return standing(key)
  },
  [Op.Kind.SetRate]: (key, op) => {
    // a key with no state stays so: it starts under the new rate
    const rate = key.rule.rate
    if (rate !== undefined && key.state !== undefined) key.state = rate.carry([op.cost, op.queued], key.state, key.now)
    return standing(key)
  },
  [Op.Kind.Adapt]: (key, op) => {
    // a key with no state gets its initial one; other policies are left as they are
    const adapt = key.rule.adapt
    if (adapt !== undefined) key.state = adapt(current(key), key.now, signals[op.cost] ?? "ok", op.queued)
    return done(key)
  }
}

const open = (policy: Policy, stored: unknown, now: number): Key => {
  const key: Key = { rule: policy.rule, blockMillis: policy.blockMillis, now, state: stored, until: -Infinity }
  if (stored instanceof Block.Stored) {
    key.until = stored.until
    key.state = stored.state
  }
  return key
}

// The stored value after the operations: a block still in force is kept
// beside the state.
const close = (key: Key): unknown =>
  key.state !== undefined && key.now < key.until ? new Block.Stored(key.until, key.state) : key.state

/**
 * Applies `ops` in order to a key's stored value at `now`: the replies, and
 * the stored value after. Replies are read-only: an operation repeated (the
 * same object) on a key it left unchanged answers with the same reply object.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import * as Interpreter from "./Interpreter.ts"
 * import * as Op from "./Op.ts"
 *
 * const policy = Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * const [replies, stored] = Interpreter.apply(policy, undefined, 0, [Op.make(Op.Kind.Take, 1)])
 * replies[0].remaining // 1
 * ```
 *
 * @since 0.3.0
 */
export const apply = (
  policy: Policy,
  stored: unknown,
  now: number,
  ops: ReadonlyArray<Op.Op>
): readonly [ReadonlyArray<Op.Reply>, unknown] => {
  const key = open(policy, stored, now)
  const replies: Array<Op.Reply> = []
  // A transition is a function of the key and the operation: the same
  // operation (object) again, after one that left the key as it was,
  // answers what it did (a hot key's run of refusals, each a step and a
  // reply, costs a comparison instead).
  let last: Op.Op | undefined = undefined
  let kept: Op.Reply | undefined = undefined
  for (const op of ops) {
    if (kept !== undefined && op === last) {
      replies.push(kept)
    } else {
      const state = key.state
      const until = key.until
      const reply = transitions[op.kind](key, op)
      replies.push(reply)
      last = op
      kept = key.state === state && key.until === until ? reply : undefined
    }
  }
  return [replies, close(key)]
}

/**
 * Applies one operation: its reply, and the stored value after.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import * as Interpreter from "./Interpreter.ts"
 * import * as Op from "./Op.ts"
 *
 * const policy = Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * const [reply] = Interpreter.applyOne(policy, undefined, 0, Op.make(Op.Kind.Peek, 1))
 * reply.allowed // true
 * ```
 *
 * @since 0.3.0
 */
export const applyOne = (
  policy: Policy,
  stored: unknown,
  now: number,
  op: Op.Op
): readonly [Op.Reply, unknown] => {
  const key = open(policy, stored, now)
  const reply = transitions[op.kind](key, op)
  return [reply, close(key)]
}

/**
 * One key of a take over several keys: its policy and its cost.
 *
 * @since 0.3.0
 */
export interface Entry {
  readonly policy: Policy
  readonly cost: number
}

/**
 * Takes each entry's cost from its key's stored value, from every key or
 * from none. Each key is stepped on its own state at `now`; if all admit,
 * the replies are what each took and the values after are returned; if one
 * denies, nothing changes (the values come back as they were, a key with
 * none still has none): a key that denies replies as it alone would, and a
 * key that would have admitted replies as a peek at it sees it (nothing was
 * taken from it).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import * as Interpreter from "./Interpreter.ts"
 *
 * const small = Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * const large = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * const [all] = Interpreter.applyAll(
 *   [{ policy: small, cost: 2 }, { policy: large, cost: 2 }],
 *   [undefined, undefined],
 *   0
 * )
 * all.allowed // false: the first key's limit is 1; the second is untouched
 * ```
 *
 * @since 0.3.0
 */
export const applyAll = (
  entries: ReadonlyArray<Entry>,
  stored: ReadonlyArray<unknown>,
  now: number
): readonly [Op.AllReply, ReadonlyArray<unknown>] => {
  const replies: Array<Op.Reply> = []
  const next: Array<unknown> = []
  let allowed = true
  for (let i = 0; i < entries.length; i++) {
    const { cost, policy } = entries[i]
    const key = open(policy, stored[i], now)
    const state = current(key)
    const outcome = blocked(key)
      ? Block.outcome(key.rule, state, now, key.until, cost)
      : key.rule.step(state, now, cost)
    if (!outcome.allowed) allowed = false
    next.push(outcome.state)
    replies.push(replyOf(outcome))
  }
  if (allowed) return [{ allowed, replies }, next]
  // Refused: nothing was taken, so a key that would have admitted reports
  // what it has now, as a peek sees it (as the call in process does).
  for (let i = 0; i < entries.length; i++) {
    if (replies[i].allowed) {
      const { cost, policy } = entries[i]
      const key = open(policy, stored[i], now)
      replies[i] = replyOf(key.rule.peek(current(key), now, cost))
    }
  }
  return [{ allowed, replies }, stored]
}

/**
 * When a stored value (a block beside it, or not) may be forgotten.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import * as Interpreter from "./Interpreter.ts"
 *
 * const policy = Policy.fixedWindow({ limit: 1, window: "1 second" }) as Policy.Valid
 * Interpreter.settledAt(policy, undefined) // -Infinity: nothing to keep
 * ```
 *
 * @since 0.3.0
 */
export const settledAt = (policy: Policy, stored: unknown): number =>
  stored === undefined
    ? -Infinity
    : stored instanceof Block.Stored
    ? Block.settledAt(policy.rule, stored.state, stored.until)
    : policy.rule.settledAt(stored)
