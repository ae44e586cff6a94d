/**
 * tollgate behind Envoy: the rate limit service (RateLimitService v3 over
 * gRPC), configured with envoyproxy/ratelimit's YAML.
 *
 * @since 0.2.0
 */

/**
 * envoyproxy/ratelimit's YAML configuration, compiled.
 *
 * @since 0.2.0
 */
export * as RlsConfig from "./RlsConfig.ts"

/**
 * The gRPC server.
 *
 * @since 0.2.0
 */
export * as RlsServer from "./RlsServer.ts"

/**
 * `ShouldRateLimit` over a tollgate limiter.
 *
 * @since 0.2.0
 */
export * as RlsService from "./RlsService.ts"
