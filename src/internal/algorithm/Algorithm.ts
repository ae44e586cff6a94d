/**
 * The contract every rate-limiting algorithm fulfils. Algorithms are pure:
 * no Effect, no clock, no mutation. The bucket actor owns the state and the
 * clock and calls these functions; the same functions are what the property
 * tests check against each formal model.
 *
 * Times are milliseconds on the limiter's clock; durations are milliseconds.
 *
 * @since 0.1.0
 */

/**
 * What one `step` decided, with the figures a caller (or an HTTP header)
 * needs to act on it.
 *
 * @since 0.1.0
 */
export interface Outcome<S> {
  /** Whether the request was admitted. */
  readonly allowed: boolean
  /** The state after the request (unchanged when denied). */
  readonly state: S
  /** Whole units that a later request could still take right now. */
  readonly remaining: number
  /** Milliseconds until this request could succeed: 0 when allowed, Infinity when never. */
  readonly retryAfter: number
  /** Milliseconds until the state is back to fresh (a full bucket). */
  readonly resetAfter: number
  /** The policy's headline limit (the capacity of a token bucket). */
  readonly limit: number
  /** For shapers (the leaky bucket): milliseconds an admitted request waits before it proceeds. */
  readonly delay?: number | undefined
}

/**
 * A rate-limiting algorithm over its configuration `C` and its state `S`.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const config = TokenBucket.config({ capacity: 2, tokens: 1, periodMillis: 1000 })
 * const s0 = TokenBucket.algorithm.initial(config, 0)
 * const { allowed } = TokenBucket.algorithm.step(config, s0, 0, 1)
 * ```
 *
 * @since 0.1.0
 */
export interface Algorithm<C, S> {
  readonly name: string
  /** The state of a key that has never been seen (or has been forgotten). */
  readonly initial: (config: C, now: number) => S
  /** Decide one request of `cost` at `now`. Pure and total: never throws, never NaN. */
  readonly step: (config: C, state: S, now: number, cost: number) => Outcome<S>
  /**
   * Milliseconds, from `now`, until a request of `cost` standing behind
   * `queued` units of earlier waiters would be admitted (0 when it could be
   * admitted now and nothing is queued; Infinity when never).
   */
  readonly waitTime: (config: C, state: S, now: number, queued: number, cost: number) => number
  /**
   * The earliest time from which forgetting the state cannot change any later
   * decision (DESIGN invariant 2): for a token bucket, the moment it is full.
   */
  readonly settledAt: (config: C, state: S) => number
  /** The largest cost that can ever succeed. */
  readonly maxCost: (config: C) => number
  /**
   * Optional shortcut for `acquire`, which needs no figures: admits `cost` by
   * writing `step(...).state` into `state` itself and returns `true`, or
   * returns `false` and leaves `state` as it was. Only for a caller that owns
   * `state` alone (a bucket's own state): no allocation per admission, so a
   * hot bucket makes no garbage and an old bucket's state never points at a
   * young object. Must agree with `step` exactly (a law test checks it).
   */
  readonly takeInPlace?: ((config: C, state: S, now: number, cost: number) => boolean) | undefined
  /**
   * Gives `amount` units back (a refund, or a permit returned), never above
   * what the policy holds when fresh. Algorithms without it cannot release.
   */
  readonly release?: ((config: C, state: S, now: number, amount: number) => S) | undefined
  /**
   * Carries a state over to a new configuration of the same algorithm.
   * Without it, a reconfigured key starts afresh.
   */
  readonly reconfigure?: ((from: C, state: S, to: C, now: number, carry: Carry) => S) | undefined
}

/**
 * How a reconfigured key keeps its usage (as Bucket4j's `TokensInheritanceStrategy`):
 * `"reset"` starts afresh under the new policy; `"proportional"` keeps the
 * same fraction of the limit available; `"as-is"` keeps the same number of
 * units available, capped by the new limit.
 *
 * @since 0.1.0
 */
export type Carry = "reset" | "proportional" | "as-is"

/**
 * The outcome `peek` reports: whether a request of `cost` would be admitted
 * and when it could be (from a step with the cost), with `remaining` and
 * `resetAfter` as they stand now (from a step that takes nothing).
 *
 * @example
 * ```ts
 * import { peekOutcome } from "./Algorithm.ts"
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const c = TokenBucket.config({ capacity: 5, tokens: 1, periodMillis: 1000 })
 * const s = TokenBucket.initial(c, 0)
 * const o = peekOutcome(TokenBucket.algorithm, c, s, 0, 2) // remaining 5
 * ```
 *
 * @since 0.1.0
 */
export const peekOutcome = <C, S>(
  algorithm: Algorithm<C, S>,
  config: C,
  state: S,
  now: number,
  cost: number
): Outcome<S> => {
  const withCost = algorithm.step(config, state, now, cost)
  const asIs = algorithm.step(config, state, now, 0)
  return {
    allowed: withCost.allowed,
    state,
    remaining: asIs.remaining,
    retryAfter: withCost.retryAfter,
    resetAfter: asIs.resetAfter,
    limit: withCost.limit
  }
}
