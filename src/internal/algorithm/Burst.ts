/**
 * A base limit with a burst allowance beside it, as rate-limiter-flexible's
 * `BurstyRateLimiter` (its `RateLimiterBurst`): a request is admitted by the
 * base limit if it can be; otherwise by the burst limit; otherwise it is
 * denied. Each limit takes the request's cost only when it is the one that
 * admits it; a denial leaves each as its own denial left it (a base limit
 * that counts denials, as rate-limiter-flexible's fixed window does, counts
 * the hit that went to the burst).
 *
 * The figures describe both: `remaining` is the base's plus the burst's
 * (unit requests still admitted now, one way or the other), `limit` their
 * sum, `retryAfter` the sooner of the two (either may admit), `resetAfter`
 * the later. `maxCost` is the larger of the two. `waitTime` with nobody
 * ahead is exact (the sooner of the two); behind waiters it is the sooner of
 * the two as if all the waiters went to each, which is a bound from above
 * when they split.
 *
 * Beyond the limit: `force` and `forceAdd` go to the base limit (a
 * rate-limiter-flexible `penalty` or `reward` on a bursty limiter is one on
 * its base), and so does `release` (a refund cannot tell which of the two a
 * request came from; the base is the one that refills to serve the rate).
 *
 * @since 0.2.0
 */
import type { Algorithm, Outcome } from "./Algorithm.ts"
import type { Part } from "./Composite.ts"

/**
 * A validated burst configuration: the base limit and the burst allowance.
 *
 * @since 0.2.0
 */
export interface Config {
  readonly base: Part
  readonly burst: Part
}

/**
 * The state of one key: the base's and the burst's.
 *
 * @since 0.2.0
 */
export type State = readonly [unknown, unknown]

/**
 * An outcome that also says which limit admitted the request.
 *
 * @since 0.2.0
 */
export interface Either<S> extends Outcome<S> {
  /** `"base"`, `"burst"`, or `undefined` when denied. */
  readonly by: "base" | "burst" | undefined
}

/**
 * Builds a configuration; the caller has validated both parts.
 *
 * @example
 * ```ts
 * import * as Burst from "./Burst.ts"
 * import * as Composite from "./Composite.ts"
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * // 10 per second, and 20 more per minute when that is not enough
 * const c = Burst.config(
 *   Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 10, windowMillis: 1000 })),
 *   Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 20, windowMillis: 60_000 }))
 * )
 * ```
 *
 * @since 0.2.0
 */
export const config = (base: Part, burst: Part): Config => ({ base, burst })

/**
 * Both limits' initial states.
 *
 * @since 0.2.0
 */
export const initial = (c: Config, now: number): State => [
  c.base.algorithm.initial(c.base.config, now),
  c.burst.algorithm.initial(c.burst.config, now)
]

// The figures of a part's state as it stands (a step of no units).
const probe = (p: Part, s: unknown, now: number): Outcome<unknown> => p.algorithm.step(p.config, s, now, 0)

/**
 * Decides one request: the base limit, else the burst allowance.
 *
 * @example
 * ```ts
 * import * as Burst from "./Burst.ts"
 * import * as Composite from "./Composite.ts"
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = Burst.config(
 *   Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 1, windowMillis: 1000 })),
 *   Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 1, windowMillis: 60_000 }))
 * )
 * const a = Burst.step(c, Burst.initial(c, 0), 0, 1) // by the base
 * const b = Burst.step(c, a.state, 0, 1) // by the burst
 * ```
 *
 * @since 0.2.0
 */
export const step = (c: Config, s: State, now: number, cost: number): Either<State> => {
  const { base, burst } = c
  const ob: Outcome<unknown> = base.algorithm.step(base.config, s[0], now, cost)
  if (ob.allowed) {
    const rest = probe(burst, s[1], now)
    return {
      allowed: true,
      state: [ob.state, s[1]],
      remaining: ob.remaining + rest.remaining,
      retryAfter: 0,
      resetAfter: Math.max(ob.resetAfter, rest.resetAfter),
      limit: ob.limit + rest.limit,
      by: "base",
      ...(ob.delay === undefined ? {} : { delay: ob.delay })
    }
  }
  const ox: Outcome<unknown> = burst.algorithm.step(burst.config, s[1], now, cost)
  const state: State = ob.state === s[0] && ox.state === s[1] ? s : [ob.state, ox.state]
  if (ox.allowed) {
    // the base's own figures as they stand after its denial
    const left = probe(base, ob.state, now)
    return {
      allowed: true,
      state,
      remaining: left.remaining + ox.remaining,
      retryAfter: 0,
      resetAfter: Math.max(left.resetAfter, ox.resetAfter),
      limit: ob.limit + ox.limit,
      by: "burst",
      ...(ox.delay === undefined ? {} : { delay: ox.delay })
    }
  }
  return {
    allowed: false,
    state,
    remaining: ob.remaining + ox.remaining,
    retryAfter: Math.min(ob.retryAfter, ox.retryAfter),
    resetAfter: Math.max(ob.resetAfter, ox.resetAfter),
    limit: ob.limit + ox.limit,
    by: undefined
  }
}

/**
 * Milliseconds until a request of `cost` behind `queued` waiting units is
 * admitted by either limit (see the module's description).
 *
 * @since 0.2.0
 */
export const waitTime = (c: Config, s: State, now: number, queued: number, cost: number): number =>
  Math.min(
    c.base.algorithm.waitTime(c.base.config, s[0], now, queued, cost),
    c.burst.algorithm.waitTime(c.burst.config, s[1], now, queued, cost)
  )

/**
 * When both limits have settled.
 *
 * @since 0.2.0
 */
export const settledAt = (c: Config, s: State): number =>
  Math.max(c.base.algorithm.settledAt(c.base.config, s[0]), c.burst.algorithm.settledAt(c.burst.config, s[1]))

/**
 * The larger of the two limits' largest costs.
 *
 * @since 0.2.0
 */
export const maxCost = (c: Config): number =>
  Math.max(c.base.algorithm.maxCost(c.base.config), c.burst.algorithm.maxCost(c.burst.config))

const onBase = (s: State, base: unknown): State => base === s[0] ? s : [base, s[1]]

/**
 * Gives `amount` back to the base limit (see the module's description).
 *
 * @since 0.2.0
 */
export const release = (c: Config, s: State, now: number, amount: number): State => {
  const r = c.base.algorithm.release
  return r === undefined ? s : onBase(s, r(c.base.config, s[0], now, amount))
}

/**
 * Takes `cost` from the base limit whatever it holds.
 *
 * @since 0.2.0
 */
export const force = (c: Config, s: State, now: number, cost: number): State =>
  onBase(s, c.base.algorithm.force(c.base.config, s[0], now, cost))

/**
 * Adds `amount` to the base limit with no cap, if it can hold more.
 *
 * @since 0.2.0
 */
export const forceAdd = (c: Config, s: State, now: number, amount: number): State => {
  const add = c.base.algorithm.forceAdd
  return add === undefined ? s : onBase(s, add(c.base.config, s[0], now, amount))
}

/**
 * Both limits full.
 *
 * @since 0.2.0
 */
export const full = (c: Config, now: number): State => [
  c.base.algorithm.full?.(c.base.config, now) ?? c.base.algorithm.initial(c.base.config, now),
  c.burst.algorithm.full?.(c.burst.config, now) ?? c.burst.algorithm.initial(c.burst.config, now)
]

/**
 * The burst policy as an {@link Algorithm}; its `step` returns {@link Either}
 * outcomes.
 *
 * @example
 * ```ts
 * import * as Burst from "./Burst.ts"
 *
 * Burst.algorithm.name // "burst"
 * ```
 *
 * @since 0.2.0
 */
export const algorithm: Algorithm<Config, State> = {
  name: "burst",
  initial,
  step,
  waitTime,
  settledAt,
  maxCost,
  release,
  force,
  forceAdd,
  full
}
