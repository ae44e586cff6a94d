/**
 * tollgate for effect/http apps: rate-limit middleware, the IETF RateLimit
 * headers, client address resolution, and problem+json errors.
 *
 * @since 0.1.0
 */

/**
 * Who the client is: socket peer, or trusted proxies' forwarding header.
 *
 * @since 0.1.0
 */
export * as ClientAddress from "./ClientAddress.ts"

/**
 * RFC 9457 problem details responses.
 *
 * @since 0.1.0
 */
export * as Problem from "./Problem.ts"

/**
 * The `RateLimit`, `RateLimit-Policy` and `Retry-After` headers.
 *
 * @since 0.1.0
 */
export * as RateLimitHeaders from "./RateLimitHeaders.ts"

/**
 * The middleware.
 *
 * @since 0.1.0
 */
export * as RateLimitMiddleware from "./RateLimitMiddleware.ts"
