/**
 * A decision with the figures callers and HTTP headers act on.
 *
 * @since 0.1.0
 */
import { Duration } from "effect"
import type { Algorithm, Outcome } from "./algorithm/Algorithm.ts"

/**
 * The answer to `consume`: whether the request was admitted and what the
 * caller can do next.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   const d = yield* limiter.consume("user:42")
 *   if (!d.allowed) yield* Effect.sleep(d.retryAfter)
 * })
 * ```
 *
 * @since 0.1.0
 */
export interface Decision {
  /** Whether the request was admitted (and its cost taken). */
  readonly allowed: boolean
  /** Whole units left for later requests right now. */
  readonly remaining: number
  /** How long until this request could succeed: zero when allowed. */
  readonly retryAfter: Duration.Duration
  /** How long until the key is back to its fresh state (a full bucket). */
  readonly resetAfter: Duration.Duration
  /** The policy's limit (a token bucket's capacity). */
  readonly limit: number
  /** Set when a shared store did not answer and the limiter's fallback decided. */
  readonly degraded?: boolean | undefined
  /** For shapers (the leaky bucket): how long the admitted request should wait before it proceeds. */
  readonly delay?: Duration.Duration | undefined
}

const millis = (ms: number): Duration.Duration => ms === Infinity ? Duration.infinity : Duration.millis(ms)

/**
 * Builds a `Decision` from an algorithm's outcome.
 *
 * @example
 * ```ts
 * import { Decision, TokenBucket } from "tollgate"
 *
 * const c = TokenBucket.config({ capacity: 1, tokens: 1, periodMillis: 1000 })
 * const d = Decision.fromOutcome(TokenBucket.step(c, TokenBucket.initial(c, 0), 0, 1))
 * ```
 *
 * @since 0.1.0
 */
export const fromOutcome = (outcome: Outcome<unknown>): Decision => {
  const decision: Decision = {
    allowed: outcome.allowed,
    remaining: outcome.remaining,
    retryAfter: millis(outcome.retryAfter),
    resetAfter: millis(outcome.resetAfter),
    limit: outcome.limit
  }
  return outcome.delay !== undefined && outcome.delay > 0 ? { ...decision, delay: millis(outcome.delay) } : decision
}

/**
 * The outcome `peek` reports: whether a request of `cost` would be admitted
 * and when it could be (from a step with the cost), with `remaining` and
 * `resetAfter` as they stand now (from a step that takes nothing).
 *
 * @example
 * ```ts
 * import { Decision, TokenBucket } from "tollgate"
 *
 * const c = TokenBucket.config({ capacity: 5, tokens: 1, periodMillis: 1000 })
 * const s = TokenBucket.initial(c, 0)
 * const d = Decision.fromOutcome(Decision.peekOutcome(TokenBucket.algorithm, c, s, 0, 2)) // remaining 5
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
