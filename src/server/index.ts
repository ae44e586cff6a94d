/**
 * tollgate as a stand-alone HTTP rate-limit service, as a library: the
 * service that `npx tollgate` (and `npm start` in a clone) runs, to launch
 * from your own program, to configure in code, or to mount its routes in
 * your own effect/http server. The module loads with `effect` alone; the
 * service's layers (`Server`) need `@effect/platform-node` (and `redis`, its
 * peer); on Redis `ioredis`, as a cluster's runner `@effect/sql-pg`, and its
 * Envoy rate limit service `@grpc/grpc-js`, `@grpc/proto-loader` and `yaml`: optional peer dependencies, whose
 * absence fails those layers with a `MissingPackage` that names them.
 *
 * @since 0.1.0
 */
import * as ForwardAuth from "./ForwardAuth.ts"
import * as Lifecycle from "./Lifecycle.ts"
import * as PolicySpec from "./PolicySpec.ts"
import * as Routes from "./Routes.ts"
import * as Server from "./Server.ts"
import * as ServiceConfig from "./ServiceConfig.ts"
import * as ServiceStore from "./ServiceStore.ts"
import * as Tollgate from "./Tollgate.ts"

export {
  /**
   * Forward authentication for gateways (`/v1/check`): nginx `auth_request`,
   * Traefik ForwardAuth, Envoy `ext_authz`.
   *
   * @example
   * ```ts
   * import { ForwardAuth } from "tollgate/server"
   *
   * const path = ForwardAuth.normalizePath("//login/../login") // "/login"
   * ```
   *
   * @category modules
   * @since 0.2.0
   */
  ForwardAuth,
  /**
   * Draining on shutdown.
   *
   * @example
   * ```ts
   * import { Lifecycle } from "tollgate/server"
   *
   * const draining = Lifecycle.Lifecycle.use((lifecycle) => lifecycle.isDraining)
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  Lifecycle,
  /**
   * Policies as configuration (JSON).
   *
   * @example
   * ```ts
   * import { PolicySpec } from "tollgate/server"
   *
   * const policy = PolicySpec.toPolicy({ kind: "tokenBucket", capacity: 10, refill: { tokens: 1, per: "1 second" } })
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  PolicySpec,
  /**
   * The HTTP API, as routes to serve or to mount in your own router.
   *
   * @example
   * ```ts
   * import { HttpRouter } from "effect/http"
   * import { Routes } from "tollgate/server"
   *
   * const Http = HttpRouter.serve(Routes.layer)
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  Routes,
  /**
   * The assembled service.
   *
   * @example
   * ```ts
   * import { NodeRuntime } from "@effect/platform-node"
   * import { Layer } from "effect"
   * import { Server } from "tollgate/server"
   *
   * const main = () => Layer.launch(Server.layer).pipe(NodeRuntime.runMain)
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  Server,
  /**
   * Configuration from a file and the environment.
   *
   * @example
   * ```ts
   * import { ServiceConfig } from "tollgate/server"
   *
   * const config = ServiceConfig.ServiceConfig.layerFrom({ env: { PORT: "9090", TOLLGATE_MAX_WAIT: "5000" } })
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  ServiceConfig,
  /**
   * Where keys' state lives: in-process or Redis.
   *
   * @example
   * ```ts
   * import { ServiceStore } from "tollgate/server"
   *
   * const error = new ServiceStore.RedisUnavailable({
   *   field: "REDIS_URL",
   *   url: "redis://localhost:6379",
   *   reason: "connection refused"
   * })
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  ServiceStore,
  /**
   * The service core below HTTP: decisions by key and policy name.
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const consume = Tollgate.Tollgate.use((tollgate) => tollgate.consume({ key: "user:42" }))
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  Tollgate
}
