/**
 * No limit at all: x/time/rate's `rate.Inf` ("the infinite rate limit; it
 * allows all events, even if burst is zero"). Every request is admitted at
 * once, whatever its cost; nothing is counted, so a key never holds state
 * worth keeping (it is settled from the start).
 *
 * The figures: `remaining` and `limit` are `Infinity` (the HTTP layer
 * writes no `RateLimit` header for them), `retryAfter` and `resetAfter` 0.
 *
 * @since 0.2.0
 */
import type { Algorithm, Outcome } from "./Algorithm.ts"

/**
 * An unlimited policy has nothing to configure.
 *
 * @since 0.2.0
 */
export type Config = Record<string, never>

/**
 * Nor anything to remember.
 *
 * @since 0.2.0
 */
export type State = Record<string, never>

const state: State = Object.freeze({})

/**
 * The configuration.
 *
 * @since 0.2.0
 */
export const config: Config = Object.freeze({})

const admitted: Outcome<State> = Object.freeze({
  allowed: true,
  state,
  remaining: Infinity,
  retryAfter: 0,
  resetAfter: 0,
  limit: Infinity
})

const same = (_c: Config, s: State): State => s

/**
 * No limit as an {@link Algorithm}.
 *
 * @example
 * ```ts
 * import * as Unlimited from "./Unlimited.ts"
 *
 * Unlimited.algorithm.step(Unlimited.config, Unlimited.algorithm.initial(Unlimited.config, 0), 0, 1e9).allowed // true
 * ```
 *
 * @since 0.2.0
 */
export const algorithm: Algorithm<Config, State> = {
  name: "unlimited",
  initial: () => state,
  step: () => admitted,
  waitTime: () => 0,
  settledAt: () => -Infinity,
  maxCost: () => Infinity,
  takeInPlace: () => true,
  release: same,
  force: same,
  forceAdd: same
}
