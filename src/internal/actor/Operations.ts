/**
 * What each request means, defined once: for every kind of request, the
 * checks it must pass (its cost against what the policy can ever grant,
 * what the policy can do at all), the operation it runs on the key's state
 * (see `operation/Interpreter.ts`), and how the operation's reply becomes
 * the caller's answer. A bucket in process and a bucket on a shared store
 * run the same definitions: they differ only in where the operation runs
 * (on the state in the bucket's `Ref`, or in the store).
 *
 * Waiting in line (`wait`, `reserve`), holds and transactions over several
 * keys are extensions the bucket makes of these (see `Local.ts`, `Remote.ts`
 * and `Line.ts`); they run the same operations (`Admit`, `WaitTime`).
 *
 * @since 0.3.0
 */
import { Duration, Effect, Exit, Option } from "effect"
import type { Decision } from "../../Decision.ts"
import { InvalidRequest } from "../../Errors.ts"
import type { Limit } from "../Limit.ts"
import * as Op from "../operation/Op.ts"
import type { Recorder } from "../Recorder.ts"
import * as Monotone from "./Monotone.ts"
import * as Request from "./Request.ts"

/**
 * Where a key stands for a request decided now: units of waiters in its line
 * (a request may not jump it), units held for calls over several keys, and
 * whether anything else is pending for it (what makes a key live for `get`
 * and `delete`).
 *
 * @since 0.3.0
 */
export interface Queue {
  readonly line: number
  readonly held: number
  readonly busy: boolean
}

/**
 * A key with nobody in line, nothing held, nothing pending.
 *
 * @since 0.3.0
 */
export const quiet: Queue = { line: 0, held: 0, busy: false }

/**
 * What turns a reply into an answer: the limiter's counts, the key's
 * policy, whether a fallback decided (`degraded`), and how far the limiter's
 * clock stands above the caller's (`behind`: durations told to callers add
 * it).
 *
 * @since 0.3.0
 */
export interface Answering {
  readonly recorder: Recorder
  readonly policy: Limit
  readonly degraded: boolean
  readonly behind: number
}

/**
 * One kind of request, defined once.
 *
 * @since 0.3.0
 */
export interface Definition<K extends Request.Kind> {
  /** Its cost is checked against the most the policy can ever grant. */
  readonly limited: boolean
  /** What the key's policy cannot do: refused before anything runs. */
  readonly refuse: (policy: Limit, key: string, payload: Request.Payload | undefined) => InvalidRequest | undefined
  /**
   * The operation it runs on the key's state; `undefined` for the kinds a
   * bucket serves itself (waiting in line, holds, transactions, and a
   * reconfigure in process, which changes the bucket's policy).
   */
  readonly op: ((cost: number, payload: Request.Payload | undefined, queue: Queue) => Op.Op) | undefined
  /** The caller's answer, from the operation's reply. */
  readonly answer: (answering: Answering, op: Op.Op, reply: Op.Reply) => Request.Answer<K>
  /** Running it is activity: the key decided something (what keeps its bucket from being reaped as idle). */
  readonly touches: boolean
}

const never = () => undefined

const millis = (ms: number): Duration.Duration => ms === Infinity ? Duration.infinity : Duration.millis(ms)

/**
 * A `Decision` from an operation's reply, its durations counted on the
 * caller's clock (`behind`: see `Monotone.Now`). A request behind waiters
 * (`WaitTime`) is denied, with nothing remaining.
 *
 * @example
 * ```ts
 * import * as Op from "../operation/Op.ts"
 * import * as Operations from "./Operations.ts"
 *
 * const reply = { allowed: true, remaining: 4, retryAfter: 0, resetAfter: 200, limit: 5 }
 * Operations.decision(Op.make(Op.Kind.Take, 1), reply, false, 0).remaining // 4
 * ```
 *
 * @since 0.3.0
 */
export const decision = (op: Op.Op, r: Op.Reply, degraded: boolean, behind: number): Decision => {
  const waiting = op.kind === Op.Kind.WaitTime
  const d: Decision = {
    allowed: !waiting && r.allowed,
    remaining: waiting ? 0 : r.remaining,
    retryAfter: millis(Monotone.onClock(r.retryAfter, behind)),
    resetAfter: millis(Monotone.onClock(r.resetAfter, behind)),
    limit: r.limit
  }
  const flagged = degraded ? { ...d, degraded: true } : d
  // a shaper's delay
  return !waiting && r.delay !== undefined && r.delay > 0 ? { ...flagged, delay: Duration.millis(r.delay) } : flagged
}

/**
 * How long an admitted request sleeps before it proceeds: a shaper's delay
 * (none under a dry run).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import * as Operations from "./Operations.ts"
 *
 * const policy = Policy.leakyBucket({ rate: { tokens: 1, per: "1 second" }, burst: 2 }) as Policy.Valid
 * Operations.shaping({ allowed: true, remaining: 0, retryAfter: 0, resetAfter: 0, limit: 3, delay: 500 }, policy) // 500
 * ```
 *
 * @since 0.3.0
 */
export const shaping = (r: Op.Reply, policy: Limit): number => policy.dryRun || r.delay === undefined ? 0 : r.delay

/**
 * A dry-run policy lets a refusal through, counted (nginx's
 * `limit_req_dry_run`).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import { Recorder } from "../Recorder.ts"
 * import * as Operations from "./Operations.ts"
 *
 * const policy = Policy.fixedWindow({ limit: 1, window: "1 second", dryRun: true }) as Policy.Valid
 * Operations.dryRun(new Recorder(), policy) // true, and counted
 * ```
 *
 * @since 0.3.0
 */
export const dryRun = (recorder: Recorder, policy: Limit): boolean => {
  if (!policy.dryRun) return false
  recorder.dryRun++
  return true
}

// Counts a decision: allowed, or denied (a request behind the line is denied).
const counted = (recorder: Recorder, op: Op.Op, r: Op.Reply): boolean => {
  const allowed = op.kind !== Op.Kind.WaitTime && r.allowed
  if (allowed) recorder.allowed++
  else recorder.denied++
  return allowed
}

const exitTrue = Exit.succeed(true)
const exitFalse = Exit.succeed(false)

// The figures of the key as it stands (the operations that change a key
// without deciding a request answer them).
const standing = (a: Answering, op: Op.Op, r: Op.Reply) => Exit.succeed(decision(op, r, a.degraded, a.behind))

const done = () => Exit.void

// The window a request carries (a duration per call, a block's length), or 0.
const windowOf = (payload: Request.Payload | undefined): number =>
  payload !== undefined && "window" in payload ? payload.window : 0

const signalCodes = { ok: 0, throttled: 1, latency: 2 } as const

// The most common operation, shared (operations are never mutated).
const takeOne = Op.make(Op.Kind.Take, 1)

// A decide-now request on a key whose line is not empty is denied: the
// waiters come first. It is told when its turn would come behind them.
const take =
  (kind: typeof Op.Kind.Take | typeof Op.Kind.Peek) =>
  (cost: number, payload: Request.Payload | undefined, q: Queue): Op.Op =>
    q.line > 0
      ? Op.make(Op.Kind.WaitTime, cost, q.line + q.held)
      : kind === Op.Kind.Take && cost === 1 && q.held === 0 && payload === undefined
      ? takeOne
      : Op.make(kind, cost, q.held, windowOf(payload))

const described = (policy: Limit) => `its policy (${policy.rule.name})`

const cannotRelease = (policy: Limit, key: string) =>
  policy.rule.release === undefined
    ? new InvalidRequest({
      field: "key",
      value: JSON.stringify(key),
      reason: `${described(policy)} has no release: units come back by themselves`
    })
    : undefined

const cannotHoldMore = (policy: Limit) =>
  policy.rule.forceAdd === undefined
    ? new InvalidRequest({
      field: "overLimit",
      value: "true",
      reason: `${described(policy)} cannot hold more than its limit`
    })
    : undefined

const fixedRate = (policy: Limit, key: string) =>
  policy.rule.adapt === undefined
    ? new InvalidRequest({
      field: "key",
      value: JSON.stringify(key),
      reason: `${described(policy)} has a fixed rate: feedback needs Policy.adaptive`
    })
    : undefined

// A call that gives its own window: only a policy with windows of a length
// per call has one.
const windowless = (policy: Limit, _: string, payload: Request.Payload | undefined) =>
  payload !== undefined && "window" in payload && policy.rule.withWindow(payload.window) === undefined
    ? new InvalidRequest({
      field: "duration",
      value: String(payload.window),
      reason:
        `only a fixed window that opens at its first hit lasts as long as the call says; this key's policy is ${policy.rule.name}`
    })
    : undefined

type Defined = { readonly [K in Request.Kind]: Definition<K> }

const inBucket = <K extends Request.Kind>(limited: boolean, touches = false): Definition<K> => ({
  limited,
  refuse: never,
  op: undefined,
  answer: () => Exit.die("served by the bucket itself") as Request.Answer<K>,
  touches
})

/**
 * Every kind of request, defined once.
 *
 * @since 0.3.0
 */
export const table: Defined = {
  [Request.Kind.Acquire]: {
    limited: true,
    refuse: windowless,
    op: take(Op.Kind.Take),
    answer: (a, op, r) => {
      if (!counted(a.recorder, op, r)) return dryRun(a.recorder, a.policy) ? exitTrue : exitFalse
      // a shaper admits now and spaces the caller out: it proceeds after the delay
      const delay = shaping(r, a.policy)
      return delay > 0 ? Effect.as(Effect.sleep(Duration.millis(delay)), true) : exitTrue
    },
    touches: true
  },
  [Request.Kind.Consume]: {
    limited: true,
    refuse: windowless,
    op: take(Op.Kind.Take),
    answer: (a, op, r) => {
      const d = decision(op, r, a.degraded, a.behind)
      if (counted(a.recorder, op, r) || !dryRun(a.recorder, a.policy)) return Exit.succeed(d)
      // let through: what it would have been told is kept, a shaper's delay is not applied
      const { delay: _, ...rest } = d
      return Exit.succeed({ ...rest, allowed: true, dryRun: true })
    },
    touches: true
  },
  [Request.Kind.Peek]: {
    limited: false,
    refuse: windowless,
    op: take(Op.Kind.Peek),
    answer: standing,
    touches: false
  },
  [Request.Kind.Reset]: {
    limited: false,
    refuse: never,
    op: () => Op.make(Op.Kind.Reset, 0),
    answer: done,
    touches: false
  },
  [Request.Kind.Release]: {
    limited: false,
    refuse: cannotRelease,
    op: (cost) => Op.make(Op.Kind.Release, cost),
    answer: done,
    touches: false
  },
  [Request.Kind.Reconfigure]: {
    limited: false,
    refuse: never,
    // On a store, a change of rate only carries the key over by the
    // algorithm's rate rule (Guava's setRate); any other reconfigure starts
    // it afresh (a store keeps no other carry-over). In process, the bucket
    // carries the key over itself (it has both policies).
    op: (_, payload) => {
      const rate = payload !== undefined && "policy" in payload ? payload.rate : undefined
      return rate === undefined ? Op.make(Op.Kind.Reset, 0) : Op.make(Op.Kind.SetRate, rate[0], rate[1])
    },
    answer: done,
    touches: false
  },
  [Request.Kind.Wait]: inBucket(true),
  [Request.Kind.Reserve]: inBucket(true),
  [Request.Kind.Poke]: inBucket(false),
  [Request.Kind.Force]: {
    limited: false,
    refuse: windowless,
    op: (cost, payload) => Op.make(Op.Kind.Force, cost, 0, windowOf(payload)),
    answer: (a, op, r) => {
      // the reply's retryAfter is how long the debt lasts
      const d = { ...decision(op, r, a.degraded, a.behind), allowed: true, retryAfter: Duration.zero }
      return Exit.succeed(r.retryAfter > 0 ? { ...d, delay: millis(Monotone.onClock(r.retryAfter, a.behind)) } : d)
    },
    touches: true
  },
  [Request.Kind.Add]: {
    limited: false,
    refuse: cannotRelease,
    op: (cost) => Op.make(Op.Kind.Release, cost),
    answer: standing,
    touches: false
  },
  [Request.Kind.ForceAdd]: {
    limited: false,
    refuse: cannotHoldMore,
    op: (cost) => Op.make(Op.Kind.ForceAdd, cost),
    answer: standing,
    touches: true
  },
  [Request.Kind.Fill]: {
    limited: false,
    refuse: never,
    op: () => Op.make(Op.Kind.Fill, 0),
    answer: standing,
    touches: false
  },
  [Request.Kind.TakeUpTo]: {
    limited: false,
    refuse: never,
    // nobody jumps the line: behind waiters, nothing is taken
    op: (cost, _, q) =>
      q.line > 0 ? Op.make(Op.Kind.WaitTime, 1, q.line + q.held) : Op.make(Op.Kind.TakeUpTo, cost, q.held),
    answer: (a, op, r) => {
      const taken = op.kind === Op.Kind.TakeUpTo ? r.value ?? 0 : 0
      if (taken > 0) a.recorder.allowed++
      else a.recorder.denied++
      return Exit.succeed({ ...decision(op, r, a.degraded, a.behind), allowed: taken > 0, taken })
    },
    touches: true
  },
  [Request.Kind.Get]: {
    limited: false,
    refuse: never,
    op: (_, __, q) => Op.make(Op.Kind.Get, 0, q.busy ? 1 : 0),
    answer: (a, op, r) =>
      Exit.succeed(r.value === 1 ? Option.some(decision(op, r, a.degraded, a.behind)) : Option.none()),
    touches: false
  },
  [Request.Kind.Set]: {
    limited: false,
    refuse: windowless,
    op: (cost, payload) => Op.make(Op.Kind.Set, cost, 0, windowOf(payload)),
    answer: standing,
    touches: true
  },
  [Request.Kind.Delete]: {
    limited: false,
    refuse: never,
    op: (_, __, q) => Op.make(Op.Kind.Delete, 0, q.busy ? 1 : 0),
    answer: (_, __, r) => Exit.succeed(r.value === 1),
    touches: false
  },
  [Request.Kind.Block]: {
    limited: false,
    refuse: never,
    op: (_, payload) => Op.make(Op.Kind.Block, windowOf(payload)),
    answer: standing,
    touches: true
  },
  [Request.Kind.Hold]: inBucket(true, true),
  [Request.Kind.HoldWait]: inBucket(true),
  [Request.Kind.Feedback]: {
    limited: false,
    refuse: fixedRate,
    op: (_, payload) =>
      payload !== undefined && "signal" in payload
        ? Op.make(Op.Kind.Adapt, signalCodes[payload.signal], payload.millis)
        : Op.make(Op.Kind.Peek, 0),
    answer: done,
    touches: false
  },
  [Request.Kind.Transact]: inBucket(false, true)
}

/**
 * The request can never succeed under `policy`: its cost is above the most
 * the policy can ever grant (saying so beats a denial that suggests
 * retrying; a peek is not refused: "never" is its answer), or the policy
 * cannot do what it asks. One place for every such refusal, whoever then
 * runs the request.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import * as Operations from "./Operations.ts"
 * import * as Request from "./Request.ts"
 *
 * const policy = Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * Operations.refuse(policy, "k", Request.Kind.Acquire, 6)?.field // "cost"
 * ```
 *
 * @since 0.3.0
 */
export const refuse = (
  policy: Limit,
  key: string,
  kind: Request.Kind,
  cost: number,
  payload?: Request.Payload
): InvalidRequest | undefined => {
  const definition = table[kind]
  const max = policy.rule.maxCost
  if (cost > max && definition.limited) {
    return new InvalidRequest({
      field: "cost",
      value: String(cost),
      reason: `exceeds the limit ${max}: it can never succeed`
    })
  }
  return definition.refuse(policy, key, payload)
}
