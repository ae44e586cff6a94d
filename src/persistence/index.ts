/**
 * tollgate for `effect/persistence`: Effect's `RateLimiterStore` backed by
 * tollgate's buckets, a drop-in for `RateLimiter.layerStoreMemory`.
 *
 * @since 0.2.0
 */
import * as RateLimiterStore from "./RateLimiterStore.ts"

export {
  /**
   * Effect's `RateLimiterStore` backed by tollgate (one bucket per key).
   *
   * @example
   * ```ts
   * import { Layer } from "effect"
   * import { RateLimiter } from "effect/persistence"
   * import { RateLimiterStore } from "tollgate/persistence"
   *
   * const Limiter = RateLimiter.layer.pipe(Layer.provide(RateLimiterStore.layer()))
   * ```
   *
   * @category modules
   * @since 0.2.0
   */
  RateLimiterStore
}
