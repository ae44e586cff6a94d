/**
 * A `Store` in a plain `Map`, running the pure algorithms: the reference every
 * other store must agree with, and a way to run the remote path (coalescing,
 * fallback) without a server. Its time is the Effect `Clock`'s.
 *
 * @since 0.1.0
 */
import { Clock, Effect } from "effect"
import type { Outcome, Rule, Signal } from "./internal/algorithm/Algorithm.ts"
import * as Block from "./internal/algorithm/Block.ts"
import type * as Policy from "./Policy.ts"
import { type AllReply, type Entry, type Op, OpKind, type Reply, type Store } from "./Store.ts"

const replyOf = (o: Outcome<unknown>, value?: number): Reply => {
  const reply: Reply = {
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
 * Applies ops to a state with the policy's algorithm: the semantics every
 * store implements. Returns the replies and the state after.
 *
 * A key's state is `undefined` (none: it reads as fresh), the algorithm's
 * own, or a `Block.Stored` (a block beside it). Take, Admit, a partial take,
 * Force, the adds, Fill, Set and Block give a key with no state its state;
 * Peek, Get and WaitTime never do. Get and Delete answer in `value` whether
 * the key had state worth keeping (1) or none, or only a settled one (0). While a block lasts, Take, Admit, Peek, a
 * partial take and WaitTime are refused with the block's figures
 * (`Block.outcome`) and change nothing; a Take the policy itself refuses
 * starts a block of `policy.blockMillis`, if it has one. Reset, Fill, Set and
 * Delete end a block; Release, Force and the adds work underneath it.
 *
 * @example
 * ```ts
 * import { MemoryStore, Policy, Store } from "tollgate"
 *
 * const policy = Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * const [replies] = MemoryStore.applyOps(policy, undefined, 0, [{ kind: Store.OpKind.Take, cost: 1, queued: 0 }])
 * ```
 *
 * @category algorithms
 * @since 0.1.0
 */
export const applyOps = (
  policy: Policy.Valid,
  stored: unknown,
  now: number,
  ops: ReadonlyArray<Op>
): readonly [ReadonlyArray<Reply>, unknown] => {
  const rule = policy.rule
  let until = -Infinity
  let state = stored
  if (stored instanceof Block.Stored) {
    until = stored.until
    state = stored.state
  }
  const current = () => state === undefined ? rule.initial(now) : state
  // The rule a windowed operation runs (a duration per call), else the policy's.
  const windowed = (op: Op): Rule =>
    op.window === undefined || op.window === 0 ? rule : rule.withWindow(op.window) ?? rule
  // Whether the key has state worth keeping: some, blocked or not yet
  // settled (a settled key reads as one never seen, as in-process).
  const live = () => state !== undefined && (now < until || now < rule.settledAt(state))
  // The key as it stands, as a unit request sees it.
  const standing = (value?: number): Reply =>
    replyOf(now < until ? Block.outcome(rule, current(), now, until, 1) : rule.peek(current(), now, 1), value)
  const replies: Array<Reply> = []
  for (const op of ops) {
    const blocked = now < until
    switch (op.kind) {
      case OpKind.Take:
      case OpKind.Admit: {
        const before = current()
        if (blocked) {
          if (state === undefined) state = before
          replies.push(replyOf(Block.outcome(rule, before, now, until, op.cost)))
          break
        }
        const outcome = windowed(op).step(before, now, op.cost)
        // A denial keeps the state as it was (Admit) or the one it produced
        // (Take: the same, or an attempt logged); a fresh key still gets its
        // initial state (its first use anchors it, as a bucket's start does).
        state = op.kind === OpKind.Take || outcome.allowed ? outcome.state : before
        if (op.kind === OpKind.Take && !outcome.allowed && policy.blockMillis > 0) {
          // a request the policy refuses blocks the key (blockDuration)
          until = now + policy.blockMillis
          replies.push(replyOf(Block.outcome(rule, state, now, until, op.cost)))
        } else {
          replies.push(replyOf(outcome))
        }
        break
      }
      case OpKind.Peek:
        replies.push(
          replyOf(blocked ? Block.outcome(rule, current(), now, until, op.cost) : rule.peek(current(), now, op.cost))
        )
        break
      case OpKind.Reset:
        if (state !== undefined) state = rule.initial(now)
        until = -Infinity
        replies.push(done(policy))
        break
      case OpKind.Release:
        // Units go back to the key's state, a fresh key's initial one included
        // (as in-process, where a release starts the bucket of a key that
        // starts below its limit). A key with no state whose initial state is
        // settled (it starts full) stays without: a release could give it
        // nothing, and a state kept from now would anchor its refill at this
        // moment (in-process, such a release starts no bucket).
        if (rule.release !== undefined && !(state === undefined && now >= rule.settledAt(rule.initial(now)))) {
          state = rule.release(current(), now, op.cost)
        }
        replies.push(standing())
        break
      case OpKind.WaitTime: {
        // A request behind `queued` units of waiters: denied, with when it
        // would be admitted and when the key would be fresh again.
        const limit = rule.maxCost
        const cur = current()
        const wait = (cost: number) =>
          blocked
            ? Block.waitTime(rule, cur, now, until, op.queued, cost)
            : rule.waitTime(cur, now, op.queued, cost)
        replies.push({ allowed: false, remaining: 0, retryAfter: wait(op.cost), resetAfter: wait(limit), limit })
        break
      }
      case OpKind.Adapt: {
        // A signal for an adaptive rate (a key with no state gets its
        // initial one); other policies are left as they are.
        if (rule.adapt !== undefined) state = rule.adapt(current(), now, signals[op.cost] ?? "ok", op.queued)
        replies.push(done(policy))
        break
      }
      case OpKind.Force: {
        const r = windowed(op)
        state = r.force(current(), now, op.cost)
        // How long the debt lasts: until a request of no units is admitted again.
        const within = blocked ? Block.outcome(rule, state, now, until, 0) : r.step(state, now, 0)
        // (a shaper's delay for no units is no debt)
        const { delay: _, ...figures } = replyOf(within)
        replies.push({ ...figures, allowed: true, retryAfter: within.allowed ? 0 : within.retryAfter })
        break
      }
      case OpKind.ForceAdd:
        if (rule.forceAdd !== undefined) state = rule.forceAdd(current(), now, op.cost)
        replies.push(standing())
        break
      case OpKind.Fill:
        state = rule.full(now)
        until = -Infinity
        replies.push(standing())
        break
      case OpKind.TakeUpTo: {
        const before = current()
        state = before
        if (blocked) {
          replies.push(replyOf(Block.outcome(rule, before, now, until, 1), 0))
          break
        }
        const { outcome, taken } = rule.takeUpTo(before, now, op.cost)
        if (taken > 0) state = outcome.state
        replies.push(replyOf(outcome, taken))
        break
      }
      case OpKind.Get:
        replies.push(standing(live() ? 1 : 0))
        break
      case OpKind.Set: {
        const r = windowed(op)
        state = r.force(r.full(now), now, op.cost)
        until = -Infinity
        replies.push(standing())
        break
      }
      case OpKind.Delete: {
        const had = live() ? 1 : 0
        state = undefined
        until = -Infinity
        replies.push(standing(had))
        break
      }
      case OpKind.Block:
        state = current()
        until = now + op.cost
        replies.push(standing())
        break
      case OpKind.SetRate:
        // a key with no state stays so: it starts under the new rate (as in-process)
        if (rule.rate !== undefined && state !== undefined) state = rule.rate.carry([op.cost, op.queued], state, now)
        replies.push(standing())
        break
    }
  }
  return [replies, state !== undefined && now < until ? new Block.Stored(until, state) : state]
}

// OpKind.Adapt's cost: which signal.
const signals: ReadonlyArray<Signal> = ["ok", "throttled", "latency"]

/**
 * Takes each entry's cost from its key's state, from every key or from none:
 * the semantics of `Store.applyAll` every store implements. Each key is
 * stepped on its own state at `now`; if all admit, the replies are what each
 * took and the states after are returned; if one denies, nothing changes
 * (the states come back as they were, a key with none still has none) and
 * each reply is what that key alone would decide.
 *
 * @example
 * ```ts
 * import { MemoryStore, Policy } from "tollgate"
 *
 * const small = Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * const large = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * const [all] = MemoryStore.applyAllOps(
 *   [{ key: "user", policy: small, cost: 2 }, { key: "global", policy: large, cost: 2 }],
 *   [undefined, undefined],
 *   0
 * )
 * // all.allowed: false (the user's limit is 1); the global key is untouched
 * ```
 *
 * @category algorithms
 * @since 0.2.0
 */
export const applyAllOps = (
  entries: ReadonlyArray<Entry>,
  stored: ReadonlyArray<unknown>,
  now: number
): readonly [AllReply, ReadonlyArray<unknown>] => {
  const replies: Array<Reply> = []
  const next: Array<unknown> = []
  let allowed = true
  for (let i = 0; i < entries.length; i++) {
    const { cost, policy } = entries[i]
    const rule = policy.rule
    // a blocked key refuses (Block.Stored keeps the block beside the state)
    const kept = stored[i]
    const blocked = kept instanceof Block.Stored && now < kept.until
    const raw = kept instanceof Block.Stored ? kept.state : kept
    const state = raw === undefined ? rule.initial(now) : raw
    const outcome = blocked ? Block.outcome(rule, state, now, kept.until, cost) : rule.step(state, now, cost)
    if (!outcome.allowed) allowed = false
    next.push(outcome.state)
    replies.push(replyOf(outcome))
  }
  return [{ allowed, replies }, allowed ? next : stored]
}

const done = (policy: Policy.Valid): Reply => ({
  allowed: true,
  remaining: 0,
  retryAfter: 0,
  resetAfter: 0,
  limit: policy.rule.maxCost
})

/**
 * When a stored state (a block beside it, or not) may be forgotten.
 *
 * @example
 * ```ts
 * import { MemoryStore, Policy } from "tollgate"
 *
 * const policy = Policy.fixedWindow({ limit: 1, window: "1 second" }) as Policy.Valid
 * MemoryStore.settledAt(policy, undefined) // -Infinity: nothing to keep
 * ```
 *
 * @category algorithms
 * @since 0.2.0
 */
export const settledAt = (policy: Policy.Valid, stored: unknown): number =>
  stored === undefined
    ? -Infinity
    : stored instanceof Block.Stored
    ? Block.settledAt(policy.rule, stored.state, stored.until)
    : policy.rule.settledAt(stored)

/**
 * Makes an in-memory store (its states live as long as it does).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { MemoryStore } from "tollgate"
 *
 * const program = Effect.gen(function*() {
 *   const store = yield* MemoryStore.make
 * })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: Effect.Effect<Store> = Effect.gen(function*() {
  const clock = yield* Clock.Clock
  const states = new Map<string, unknown>()
  return {
    name: "memory",
    apply: (key, policy, ops) =>
      Effect.sync(() => {
        const [replies, state] = applyOps(policy, states.get(key), clock.currentTimeMillisUnsafe(), ops)
        if (state !== undefined) states.set(key, state)
        else states.delete(key)
        return replies
      }),
    applyAll: (entries) =>
      Effect.sync(() => {
        const [reply, after] = applyAllOps(
          entries,
          entries.map((e) => states.get(e.key)),
          clock.currentTimeMillisUnsafe()
        )
        if (reply.allowed) entries.forEach((e, i) => states.set(e.key, after[i]))
        return reply
      })
  }
})
