/**
 * tollgate: a rate limiter for Effect programs, built the actor way.
 *
 * @since 0.1.0
 */

/**
 * The algorithm contract.
 *
 * @since 0.1.0
 */
export * as Algorithm from "./algorithm/Algorithm.ts"

/**
 * Several limits on one key, all or none.
 *
 * @since 0.1.0
 */
export * as Composite from "./algorithm/Composite.ts"

/**
 * A concurrency limit with capped release.
 *
 * @since 0.1.0
 */
export * as Concurrency from "./algorithm/Concurrency.ts"

/**
 * The fixed window counter.
 *
 * @since 0.1.0
 */
export * as FixedWindow from "./algorithm/FixedWindow.ts"

/**
 * GCRA (theoretical arrival time).
 *
 * @since 0.1.0
 */
export * as Gcra from "./algorithm/Gcra.ts"

/**
 * The leaky bucket shaper.
 *
 * @since 0.1.0
 */
export * as LeakyBucket from "./algorithm/LeakyBucket.ts"

/**
 * The exact sliding log.
 *
 * @since 0.1.0
 */
export * as SlidingLog from "./algorithm/SlidingLog.ts"

/**
 * The sliding window counter.
 *
 * @since 0.1.0
 */
export * as SlidingWindow from "./algorithm/SlidingWindow.ts"

/**
 * The pure token bucket.
 *
 * @since 0.1.0
 */
export * as TokenBucket from "./algorithm/TokenBucket.ts"

/**
 * Guava's smooth rate, with and without warm-up.
 *
 * @since 0.1.0
 */
export * as WarmUp from "./algorithm/WarmUp.ts"

/**
 * The bucket actor.
 *
 * @since 0.1.0
 */
export * as Bucket from "./actor/Bucket.ts"

/**
 * Decisions.
 *
 * @since 0.1.0
 */
export * as Decision from "./Decision.ts"

/**
 * Typed errors.
 *
 * @since 0.1.0
 */
export * from "./Errors.ts"

/**
 * Metrics.
 *
 * @since 0.1.0
 */
export * as Metrics from "./Metrics.ts"

/**
 * Policies.
 *
 * @since 0.1.0
 */
export * as Policy from "./Policy.ts"

/**
 * The service.
 *
 * @since 0.1.0
 */
export { RateLimiter } from "./RateLimiter.ts"

/**
 * The store seam (where keys' state lives).
 *
 * @since 0.1.0
 */
export * as Store from "./store/Store.ts"

/**
 * The in-memory reference store.
 *
 * @since 0.1.0
 */
export * as MemoryStore from "./store/MemoryStore.ts"

/**
 * The Redis store: limits shared across processes.
 *
 * @since 0.1.0
 */
export * as RedisStore from "./store/RedisStore.ts"

/**
 * The store-backed bucket actor.
 *
 * @since 0.1.0
 */
export * as Remote from "./actor/Remote.ts"

/**
 * The supervisor.
 *
 * @since 0.1.0
 */
export * as Supervisor from "./supervisor/Supervisor.ts"
