/**
 * A decision with the figures callers and HTTP headers act on.
 *
 * @since 0.1.0
 */
import { Duration } from "effect"

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
 * @category models
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
  /**
   * How long the admitted request should wait before it proceeds: a
   * shaper's delay (the leaky bucket, a fixed window with `execEvenly`), or,
   * for a take that ignored the limit (`force`), how long until the key is
   * out of the debt it left.
   */
  readonly delay?: Duration.Duration | undefined
  /**
   * Set when the policy runs dry (nginx's `limit_req_dry_run`) and would
   * have refused this request: it was let through; `retryAfter` says when it
   * would have been admitted.
   */
  readonly dryRun?: boolean | undefined
  /**
   * For a call over several keys (all or nothing): each key's own decision,
   * in the order the keys were given. The figures above are then the most
   * restrictive of them: the smallest `remaining`, the longest `retryAfter`
   * and `resetAfter`, and the `limit` of the binding key.
   */
  readonly keys?: ReadonlyArray<KeyDecision> | undefined
}

/**
 * One key's part of a decision over several keys: what that key took when
 * the call was admitted, what it alone would decide when it was not.
 *
 * @example
 * ```ts
 * import type { Decision } from "tollgate"
 *
 * const deniedBy = (d: Decision.Decision) => d.keys?.find((k) => !k.decision.allowed)?.key
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface KeyDecision {
  readonly key: string
  readonly decision: Decision
}

/**
 * The answer to a partial take (`consumeUpTo`, Bucket4j's
 * `tryConsumeAsMuchAsPossible`): the key after it, and how many units it
 * took (`allowed` when at least one).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   const t = yield* limiter.consumeUpTo("user:42", { cost: 10 })
 *   return t.taken // 0 to 10
 * })
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface Taken extends Decision {
  /** The units taken: at most the `cost` asked for. */
  readonly taken: number
}
