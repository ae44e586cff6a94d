/**
 * tollgate behind Envoy: the rate limit service (RateLimitService v3 over
 * gRPC), configured with envoyproxy/ratelimit's YAML. Loads with nothing but
 * `effect`, on Node 20 and later; the gRPC server needs `@grpc/grpc-js`, a
 * client's definition (`RlsServer.loadDefinition`) `@grpc/proto-loader`,
 * reading YAML needs `yaml` (optional peer
 * dependencies: without them those parts fail with a `MissingPackage` that
 * names them).
 *
 * @since 0.2.0
 */
import * as RlsConfig from "./RlsConfig.ts"
import * as RlsServer from "./RlsServer.ts"
import * as RlsService from "./RlsService.ts"

export {
  /**
   * envoyproxy/ratelimit's YAML configuration, compiled: domains, nested
   * descriptors, units, `shadow_mode`, `unlimited`, and any tollgate policy.
   *
   * @example
   * ```ts
   * import { RlsConfig } from "tollgate/envoy"
   *
   * const document = RlsConfig.parseYaml("domain: edge\n", "edge.yaml")
   * ```
   *
   * @category modules
   * @since 0.2.0
   */
  RlsConfig,
  /**
   * The gRPC server (`@grpc/grpc-js`) in front of {@link RlsService}.
   *
   * @example
   * ```ts
   * import { RlsServer } from "tollgate/envoy"
   *
   * const found = RlsServer.protoDirectory() !== undefined
   * ```
   *
   * @category modules
   * @since 0.2.0
   */
  RlsServer,
  /**
   * `ShouldRateLimit` over a tollgate limiter.
   *
   * @example
   * ```ts
   * import { RlsService } from "tollgate/envoy"
   *
   * const program = RlsService.RlsService.use((rls) =>
   *   rls.shouldRateLimit({ domain: "edge", descriptors: [{ entries: [{ key: "remote_address", value: "203.0.113.7" }] }] })
   * )
   * ```
   *
   * @category modules
   * @since 0.2.0
   */
  RlsService
}
