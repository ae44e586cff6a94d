/**
 * tollgate: a rate limiter for Effect programs, built the actor way.
 *
 * This entry point is the limiter itself: the `RateLimiter` service, the
 * policies, decisions, errors and metrics, and the `Store` seam with its
 * in-memory reference store. It loads nothing but `effect`, so it runs
 * wherever Effect does (Node 20 and later). The HTTP middleware is in
 * `tollgate/http`, the Redis store in `tollgate/redis`, and the stand-alone
 * service in `tollgate/server`.
 *
 * @since 0.1.0
 */

/**
 * Decisions: what a call to the limiter answers.
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
 * The in-memory reference store.
 *
 * @since 0.1.0
 */
export * as MemoryStore from "./MemoryStore.ts"

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
 * The store seam: where keys' state lives.
 *
 * @since 0.1.0
 */
export * as Store from "./Store.ts"
