/**
 * tollgate as a stand-alone HTTP rate-limit service (`npm start`).
 *
 * @since 0.1.0
 */

/**
 * Admin bearer-token authorization.
 *
 * @since 0.1.0
 */
export * as AdminAuth from "./AdminAuth.ts"

/**
 * Bounded, validated JSON request bodies.
 *
 * @since 0.1.0
 */
export * as Body from "./Body.ts"

/**
 * `field = value: reason` validation errors.
 *
 * @since 0.1.0
 */
export * as FieldErrors from "./FieldErrors.ts"

/**
 * Forward authentication for gateways (`/v1/check`).
 *
 * @since 0.2.0
 */
export * as ForwardAuth from "./ForwardAuth.ts"

/**
 * The service's HTTP metrics.
 *
 * @since 0.1.0
 */
export * as HttpMetrics from "./HttpMetrics.ts"

/**
 * Draining on shutdown.
 *
 * @since 0.1.0
 */
export * as Lifecycle from "./Lifecycle.ts"

/**
 * Policies as configuration.
 *
 * @since 0.1.0
 */
export * as PolicySpec from "./PolicySpec.ts"

/**
 * The HTTP API.
 *
 * @since 0.1.0
 */
export * as Routes from "./Routes.ts"

/**
 * The assembled service.
 *
 * @since 0.1.0
 */
export * as Server from "./Server.ts"

/**
 * Configuration from a file and the environment.
 *
 * @since 0.1.0
 */
export * as ServiceConfig from "./ServiceConfig.ts"

/**
 * Where keys' state lives: in-process or Redis.
 *
 * @since 0.1.0
 */
export * as ServiceStore from "./ServiceStore.ts"

/**
 * The service core below HTTP.
 *
 * @since 0.1.0
 */
export * as Tollgate from "./Tollgate.ts"
