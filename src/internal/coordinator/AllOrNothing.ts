/**
 * A call over several keys, all or nothing (a user, its organisation and a
 * global limit; nginx's several zones in one request): the cost is taken
 * from every key's bucket or from none.
 *
 * No lock is put around any bucket. Each key keeps its single writer (its
 * bucket) and its line; the coordinator only sends them messages, in a
 * fixed order of the keys (sorted), and decides:
 *
 * ```
 * coordinator (caller's fiber)        bucket k1          bucket k2          bucket k3
 * ----------------------------        ---------          ---------          ---------
 * sort the keys: k1 < k2 < k3
 * Hold(cost) ------------------------> in order with
 *                                     k1's requests:
 *                                     fits (with what is
 *                                     already held)? held += cost
 *            <------------------------ Held
 * Hold(cost) -------------------------------------------> held += cost
 *            <------------------------------------------- Held
 * Hold(cost) ------------------------------------------------------------> refused
 *            <------------------------------------------------------------ not held
 * give back: held -= cost on k1, k2 (nothing was taken: exact)
 * ... or, all held: COMMIT, in one synchronous section:
 *   now = the limiter's clock; each key's step(state, now, cost) must admit;
 *   then every state is written and every hold dropped (or, if one does not
 *   admit, every hold is given back and the call is denied)
 * ```
 *
 * - **A hold takes nothing.** Held units are not taken from the key's
 *   state: they count against every other decision of the key while they
 *   are held (a request is admitted only if the held units and its own cost
 *   both fit). Giving them back is dropping the count: the state is exactly
 *   what it would be without the call. No partial take ever reaches a
 *   key's state.
 * - **The commit is atomic.** In process, a bucket's batch is served
 *   synchronously, so between two fiber steps no bucket is in the middle of
 *   one: writing every key's state in one synchronous section is atomic with
 *   respect to every other request, as the fast path's decision is. The
 *   hold took its place in each key's order; the commit completes it.
 * - **FIFO on each key, no deadlock.** A call that waits (`wait` over
 *   several keys) waits in each key's line in turn, in the fixed order, and
 *   holds what it was granted meanwhile. Every call takes its holds in the
 *   same order, so no two can each hold what the other waits for: no cycle,
 *   no deadlock (the resource ordering of Havender, 1968). On each key it is
 *   one waiter in the line, in arrival (or priority) order.
 * - **Interruption gives back every hold**, the ones granted and one
 *   granted in the very instant the caller left (`Bucket.leave`).
 *
 * With a shared store (Redis), the store is the single writer of all the
 * keys: the call is one atomic script over them (`Store.applyAll`), with the
 * limiter's fallback when the store does not answer; a waiting call asks
 * again when the slowest key could admit it.
 *
 * @since 0.2.0
 */
import { Clock, Duration, Effect } from "effect"
import type { Decision, KeyDecision } from "../../Decision.ts"
import { RateLimitExceeded } from "../../Errors.ts"
import * as Bucket from "../actor/Bucket.ts"
import * as Local from "../actor/Local.ts"
import * as Operations from "../actor/Operations.ts"
import * as Request from "../actor/Request.ts"
import * as Op from "../operation/Op.ts"
import type * as Supervisor from "../supervisor/Supervisor.ts"

/**
 * What a call over several keys may fail with.
 *
 * @since 0.2.0
 */
export type Failure = Request.Failure | Supervisor.SubmitError

/**
 * Combines the keys' decisions into one, as a composite policy reports its
 * parts: the smallest `remaining`, the longest `retryAfter`, `resetAfter`
 * and `delay`, the `limit` of the binding key (the one with the longest
 * `retryAfter` when denied, the smallest `remaining` when admitted; ties go
 * to the earlier key), and each key's own decision in `keys`.
 *
 * @example
 * ```ts
 * import { Duration } from "effect"
 * import * as AllOrNothing from "./AllOrNothing.ts"
 *
 * const d = (allowed: boolean, remaining: number) => ({
 *   allowed, remaining, retryAfter: Duration.zero, resetAfter: Duration.zero, limit: 10
 * })
 * AllOrNothing.combine(true, ["a", "b"], [d(true, 3), d(true, 7)]).remaining // 3
 * ```
 *
 * @since 0.2.0
 */
export const combine = (
  allowed: boolean,
  keys: ReadonlyArray<string>,
  decisions: ReadonlyArray<Decision>
): Decision => {
  let binding = 0
  let remaining = Infinity
  let retryAfter = Duration.zero
  let resetAfter = Duration.zero
  let delay = Duration.zero
  let degraded = false
  const parts: Array<KeyDecision> = []
  for (let i = 0; i < decisions.length; i++) {
    const d = decisions[i]
    parts.push({ key: keys[i], decision: d })
    if (allowed ? d.remaining < remaining : Duration.isGreaterThan(d.retryAfter, retryAfter)) binding = i
    if (d.remaining < remaining) remaining = d.remaining
    if (Duration.isGreaterThan(d.retryAfter, retryAfter)) retryAfter = d.retryAfter
    if (Duration.isGreaterThan(d.resetAfter, resetAfter)) resetAfter = d.resetAfter
    if (d.delay !== undefined && Duration.isGreaterThan(d.delay, delay)) delay = d.delay
    if (d.degraded === true) degraded = true
  }
  if (!allowed && !Duration.isGreaterThan(retryAfter, Duration.zero)) {
    // nobody alone would deny any more (a race): report the first that did not admit
    binding = Math.max(0, decisions.findIndex((d) => !d.allowed))
  }
  const combined: Decision = {
    allowed,
    remaining: remaining === Infinity ? 0 : remaining,
    retryAfter: allowed ? Duration.zero : retryAfter,
    resetAfter,
    limit: decisions.length === 0 ? 0 : decisions[binding].limit,
    keys: parts
  }
  return {
    ...combined,
    ...(Duration.isGreaterThan(delay, Duration.zero) ? { delay } : {}),
    ...(degraded ? { degraded: true } : {})
  }
}

// The keys in the fixed order every call takes them in.
const sortedOf = (keys: ReadonlyArray<string>): ReadonlyArray<string> => [...keys].sort()

// What each key alone would decide now (a denied call's figures).
const peekAll = (supervisor: Supervisor.Supervisor, keys: ReadonlyArray<string>, cost: number) =>
  Effect.forEach(keys, (key) => supervisor.submitUnsafe(key, Request.Kind.Peek, cost, 0))

interface Holds {
  readonly buckets: Array<Bucket.Bucket>
  done: boolean
}

// Gives back every hold not yet committed.
const giveBack = (limiter: Bucket.Limiter, holds: Holds, cost: number): Effect.Effect<void> =>
  Effect.sync(() => {
    if (holds.done) return
    holds.done = true
    for (const bucket of holds.buckets) Bucket.unhold(limiter, bucket, cost)
  })

// Every key holds the cost: take it from each at one instant, or from none.
const commit = (limiter: Bucket.Limiter, holds: Holds, cost: number): ReadonlyArray<Op.Reply> | undefined => {
  const replies = Local.commit(limiter, holds.buckets, cost)
  if (replies !== undefined) holds.done = true
  return replies
}

// Each committed key's figures, in the order the keys were given.
const committed = (
  limiter: Bucket.Limiter,
  keys: ReadonlyArray<string>,
  holds: Holds,
  replies: ReadonlyArray<Op.Reply>
): Decision => {
  const byKey = new Map<string, Decision>()
  holds.buckets.forEach((bucket, i) => {
    byKey.set(bucket.key, Operations.decision(take, replies[i], false, limiter.clock.behind))
  })
  return combine(true, keys, keys.map((key) => byKey.get(key)!))
}

// (what a decision's figures are read as: a take's)
const take = Op.make(Op.Kind.Take, 1)

// An admitted decision's shaper delay (ms): how long the caller sleeps first.
const shaped = (decision: Decision): number =>
  decision.allowed && decision.delay !== undefined ? Duration.toMillis(decision.delay) : 0

// The longest shaper's delay among the keys' replies.
const delayOf = (replies: ReadonlyArray<Op.Reply>): number => replies.reduce((max, r) => Math.max(max, r.delay ?? 0), 0)

interface Decided {
  readonly allowed: boolean
  /** The combined decision, when figures were asked for. */
  readonly decision: Decision | undefined
  /** A shaper's delay (ms) before an admitted call proceeds. */
  readonly delay: number
}

const deniedPlain: Decided = { allowed: false, decision: undefined, delay: 0 }

// The fast path over several keys: when every key is quiet (no actor work
// queued, nobody in line, nothing held), each hold would be decided at once
// on the caller's fiber and the commit would follow, with nothing between
// them: deciding every key in one synchronous step here is the same
// decision, without the holds (as one key's fast path is its actor serving
// it at once). `undefined`: a key is busy, or a step threw; the holds decide.
const decideQuiet = (
  supervisor: Supervisor.Supervisor,
  keys: ReadonlyArray<string>,
  cost: number,
  figures: boolean
): Effect.Effect<Decided, Failure> | undefined => {
  const { limiter } = supervisor
  const buckets: Array<Bucket.Bucket> = []
  for (const key of keys) {
    const bucket = supervisor.bucketFor(key, cost)
    if (!(bucket instanceof Bucket.Bucket)) return bucket
    if (!Bucket.quiet(bucket)) return undefined
    buckets.push(bucket)
  }
  // At the cap, a later key's start may have made room by forgetting an
  // earlier key's bucket (quiet and full again): what the call took from it
  // would be lost, so the holds decide (a held bucket is never forgotten).
  for (const bucket of buckets) if (Bucket.isForgotten(bucket)) return undefined
  let taken: Local.Taken
  try {
    taken = Local.takeAll(limiter, buckets, cost)
  } catch {
    return undefined
  }
  const { allowed, replies } = taken
  const delay = allowed ? delayOf(replies) : 0
  if (!figures) return Effect.succeed(allowed ? { allowed, decision: undefined, delay } : deniedPlain)
  const decisions = replies.map((r) => Operations.decision(allowed ? take : peek, r, false, limiter.clock.behind))
  return Effect.succeed({ allowed, decision: combine(allowed, keys, decisions), delay })
}

const peek = Op.make(Op.Kind.Peek, 1)

// Decides now, all or nothing, with figures (`consume`) or without (`acquire`).
const decideWith = (
  supervisor: Supervisor.Supervisor,
  keys: ReadonlyArray<string>,
  cost: number,
  figures: boolean
): Effect.Effect<Decided, Failure> => {
  const { limiter } = supervisor
  if (limiter.backend.all !== undefined) {
    const all = limiter.backend.all
    return Effect.suspend((): Effect.Effect<Decided, Failure> => {
      const buckets: Array<Bucket.Bucket> = []
      for (const key of keys) {
        const bucket = supervisor.bucketFor(key, cost)
        if (!(bucket instanceof Bucket.Bucket)) return bucket
        buckets.push(bucket)
      }
      return Effect.map(all(limiter, buckets, cost), (answer): Decided => {
        const decision = combine(answer.allowed, keys, answer.decisions)
        return { allowed: answer.allowed, decision, delay: shaped(decision) }
      })
    })
  }
  return Effect.uninterruptibleMask((restore) =>
    Effect.suspend(() => {
      const quick = limiter.fastPath ? decideQuiet(supervisor, keys, cost, figures) : undefined
      if (quick !== undefined) return quick
      const sorted = sortedOf(keys)
      const holds: Holds = { buckets: [], done: false }
      const denied = Effect.andThen(
        giveBack(limiter, holds, cost),
        Effect.suspend(() => {
          limiter.recorder.denied++
          if (!figures) return Effect.succeed(deniedPlain)
          return Effect.map(
            restore(peekAll(supervisor, keys, cost)),
            (ds): Decided => ({ allowed: false, decision: combine(false, keys, ds), delay: 0 })
          )
        })
      )
      const step = (i: number): Effect.Effect<Decided, Failure> => {
        if (i === sorted.length) {
          const replies = commit(limiter, holds, cost)
          if (replies === undefined) return denied
          return Effect.succeed({
            allowed: true,
            decision: figures ? committed(limiter, keys, holds, replies) : undefined,
            delay: delayOf(replies)
          })
        }
        return Effect.flatMap(restore(supervisor.submitUnsafe(sorted[i], Request.Kind.Hold, cost, 0)), (held) => {
          if (!(held.holder instanceof Bucket.Bucket)) return denied
          holds.buckets.push(held.holder)
          return step(i + 1)
        })
      }
      return Effect.onExit(step(0), () => giveBack(limiter, holds, cost))
    })
  )
}

/**
 * Decides now, all or nothing: `true` (the cost was taken from every key;
 * after a shaper's delay, if a key shapes) or `false` (from none). `keys`
 * are valid and distinct (checked by the caller); each bucket checks the
 * cost against its policy.
 *
 * @since 0.2.0
 */
export const acquire = (
  supervisor: Supervisor.Supervisor,
  keys: ReadonlyArray<string>,
  cost: number
): Effect.Effect<boolean, Failure> =>
  Effect.flatMap(
    decideWith(supervisor, keys, cost, false),
    (d) => d.delay > 0 ? Effect.as(Effect.sleep(Duration.millis(d.delay)), true) : Effect.succeed(d.allowed)
  )

/**
 * Decides now, all or nothing, with the figures: the combined decision (see
 * {@link combine}), each key's in `keys`. Denied, each key's figures are what
 * it alone would decide now.
 *
 * @since 0.2.0
 */
export const consume = (
  supervisor: Supervisor.Supervisor,
  keys: ReadonlyArray<string>,
  cost: number
): Effect.Effect<Decision, Failure> =>
  Effect.map(decideWith(supervisor, keys, cost, true), (d) => d.decision ?? combine(d.allowed, keys, []))

/**
 * Waits until every key admits the cost, all or nothing, for at most
 * `maxWait` ms: in each key's line in turn (the fixed order), holding what
 * it was granted, then one commit. Fails with `RateLimitExceeded` when a
 * key's turn would come past what is left of `maxWait`.
 *
 * @since 0.2.0
 */
export const wait = (
  supervisor: Supervisor.Supervisor,
  keys: ReadonlyArray<string>,
  cost: number,
  maxWait: number,
  order: Request.Order | undefined
): Effect.Effect<void, Failure | RateLimitExceeded> => {
  const { limiter } = supervisor
  if (limiter.backend.all !== undefined) return waitStore(supervisor, limiter.backend.all, keys, cost, maxWait)
  const sorted = sortedOf(keys)
  const attempt = (start: number): Effect.Effect<void, Failure | RateLimitExceeded> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        const holds: Holds = { buckets: [], done: false }
        const step = (i: number): Effect.Effect<void, Failure | RateLimitExceeded> => {
          if (i === sorted.length) {
            const replies = commit(limiter, holds, cost)
            if (replies === undefined) {
              // a key changed under its hold (reconfigured): try again while time is left
              return Effect.andThen(giveBack(limiter, holds, cost), attempt(start))
            }
            const delay = delayOf(replies)
            return delay > 0 ? restore(Effect.sleep(delay)) : Effect.void
          }
          const left = Math.max(0, start + maxWait - limiter.clock.currentTimeMillisUnsafe())
          return Effect.flatMap(
            restore(supervisor.submitUnsafe(sorted[i], Request.Kind.HoldWait, cost, left, order)),
            (held) => {
              if (held.holder instanceof Bucket.Bucket) holds.buckets.push(held.holder)
              return step(i + 1)
            }
          )
        }
        return Effect.onExit(step(0), () => giveBack(limiter, holds, cost))
      })
    )
  return Effect.suspend(() => attempt(limiter.clock.currentTimeMillisUnsafe()))
}

// On a shared store: ask for all the keys at once; when denied, sleep until
// the slowest key could admit the call, and ask again, within maxWait.
const waitStore = (
  supervisor: Supervisor.Supervisor,
  all: NonNullable<Bucket.Backend["all"]>,
  keys: ReadonlyArray<string>,
  cost: number,
  maxWait: number
): Effect.Effect<void, Failure | RateLimitExceeded> =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    while (true) {
      const buckets: Array<Bucket.Bucket> = []
      for (const key of keys) {
        const bucket = supervisor.bucketFor(key, cost)
        if (!(bucket instanceof Bucket.Bucket)) return yield* bucket
        buckets.push(bucket)
      }
      const answer = yield* all(supervisor.limiter, buckets, cost)
      if (answer.allowed) {
        const delay = shaped(combine(true, keys, answer.decisions))
        if (delay > 0) yield* Effect.sleep(Duration.millis(delay))
        return
      }
      const decision = combine(false, keys, answer.decisions)
      const retry = Duration.toMillis(decision.retryAfter)
      const waited = (yield* Clock.currentTimeMillis) - start
      if (answer.final === true || waited + retry > maxWait) {
        const key = decision.keys?.find((k) => Duration.equals(k.decision.retryAfter, decision.retryAfter))?.key
        return yield* new RateLimitExceeded({ key: key ?? keys[0], retryAfter: decision.retryAfter })
      }
      yield* Effect.sleep(Duration.millis(Math.max(1, retry)))
    }
  })
