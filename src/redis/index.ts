/**
 * tollgate on Redis: one limit shared by every process that points at the
 * same Redis. `RedisStore.layer` runs on a client of its own and needs the
 * optional peer dependency `ioredis` (Node 20 and later); `RedisStore.make`
 * runs on the application's `Redis` service (for example
 * `@effect/platform-node`'s `NodeRedis`, Node 22.19 or later).
 *
 * @since 0.2.0
 */
import * as RedisStore from "./RedisStore.ts"

export {
  /**
   * The Redis store: one limit shared by every process on the same Redis and prefix.
   *
   * @example
   * ```ts
   * import { Layer } from "effect"
   * import { Policy, RateLimiter } from "tollgate"
   * import { RedisStore } from "tollgate/redis"
   *
   * const Limiter = RateLimiter.layer({
   *   policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
   * }).pipe(Layer.provide(RedisStore.layer({ url: "redis://localhost:6379" })))
   * ```
   *
   * @category modules
   * @since 0.2.0
   */
  RedisStore
}
