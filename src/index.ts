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
 * The pure token bucket.
 *
 * @since 0.1.0
 */
export * as TokenBucket from "./algorithm/TokenBucket.ts"

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
