/**
 * A decision with the figures callers and HTTP headers act on.
 *
 * @since 0.1.0
 */
import { Duration } from "effect"
import type { Outcome } from "./algorithm/Algorithm.ts"

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
export const fromOutcome = (outcome: Outcome<unknown>): Decision => ({
  allowed: outcome.allowed,
  remaining: outcome.remaining,
  retryAfter: millis(outcome.retryAfter),
  resetAfter: millis(outcome.resetAfter),
  limit: outcome.limit
})

/**
 * The decision `peek` reports: whether a request of `cost` would be admitted,
 * with `remaining` as it stands now (nothing taken).
 *
 * @example
 * ```ts
 * import { Decision, TokenBucket } from "tollgate"
 *
 * const c = TokenBucket.config({ capacity: 5, tokens: 1, periodMillis: 1000 })
 * const d = Decision.peek(TokenBucket.step(c, TokenBucket.initial(c, 0), 0, 1), 1) // remaining 5
 * ```
 *
 * @since 0.1.0
 */
export const peek = (outcome: Outcome<unknown>, cost: number): Decision => {
  const decision = fromOutcome(outcome)
  return outcome.allowed ? { ...decision, remaining: outcome.remaining + cost } : decision
}
