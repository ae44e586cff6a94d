/**
 * The stand-alone service, assembled: configuration, the store (in-process
 * or Redis), the limiter, the HTTP API on Node's HTTP server, and an orderly
 * shutdown. Layers are released in
 * reverse order, so on SIGTERM/SIGINT the service first starts draining
 * (waiters are answered at once), then the HTTP server stops accepting and
 * waits for every accepted request to be answered (up to
 * `TOLLGATE_SHUTDOWN_TIMEOUT`), then the limiter stops, then the
 * connection to Redis closes.
 *
 * @since 0.1.0
 */
import { NodeFileSystem, NodeHttpServer } from "@effect/platform-node"
import { Duration, Effect, Layer, Option } from "effect"
import { HttpRouter } from "effect/http"
import type { HttpServerError } from "effect/http"
import { createServer } from "node:http"
import type { InvalidPolicy } from "../Errors.ts"
import * as Lifecycle from "./Lifecycle.ts"
import * as Routes from "./Routes.ts"
import * as ServiceConfig from "./ServiceConfig.ts"
import * as ServiceStore from "./ServiceStore.ts"
import * as Tollgate from "./Tollgate.ts"

const describePolicies = (settings: ServiceConfig.Settings): string =>
  [...settings.policies].map(([name, policy]) =>
    policy._tag === "TokenBucket"
      ? `${name} (token bucket: ${policy.capacity} burst, ${policy.refill.tokens} per ${
        Duration.format(policy.refill.per)
      })`
      : `${name} (${(policy as { readonly _tag: string })._tag})`
  ).join(", ")

const logStartup = ServiceConfig.ServiceConfig.use((settings) =>
  Effect.logInfo(
    `tollgate policies: ${describePolicies(settings)}; default ${settings.defaultPolicy}` +
      (settings.rules.length === 0
        ? ""
        : `; rules ${settings.rules.map((r) => `${r.prefix}* -> ${r.policy}`).join(", ")}`) +
      `; admin API ${Option.isSome(settings.adminToken) ? "enabled" : "disabled"}` +
      `; store ${ServiceStore.describe(settings)}` +
      `; configured from ${settings.sources.length === 0 ? "defaults" : settings.sources.join(", ")}`
  )
)

/**
 * The HTTP server with the API's routes, listening where the configuration says.
 *
 * @example
 * ```ts
 * import { Server } from "tollgate/server"
 *
 * const http = Server.layerHttp // needs ServiceConfig, Tollgate and Lifecycle
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layerHttp: Layer.Layer<
  never,
  HttpServerError.ServeError,
  ServiceConfig.ServiceConfig | Tollgate.Tollgate | Lifecycle.Lifecycle
> = Layer.unwrap(
  ServiceConfig.ServiceConfig.use((settings) =>
    Effect.succeed(
      HttpRouter.serve(Routes.layer, { disableLogger: true }).pipe(
        Layer.provide(
          NodeHttpServer.layer(createServer, {
            host: settings.host,
            port: settings.port,
            gracefulShutdownTimeout: settings.shutdownTimeout
          })
        )
      )
    )
  )
)

/**
 * The whole service on a given configuration layer.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Server, ServiceConfig } from "tollgate/server"
 *
 * const service = Server.layerWith(ServiceConfig.ServiceConfig.layerFrom({ env: { PORT: "0" } }))
 * const main = Layer.launch(service)
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layerWith = <E, R>(
  config: Layer.Layer<ServiceConfig.ServiceConfig, E, R>
): Layer.Layer<
  never,
  E | InvalidPolicy | ServiceConfig.InvalidConfig | ServiceStore.RedisUnavailable | HttpServerError.ServeError,
  R
> => {
  const core = Layer.mergeAll(Tollgate.Tollgate.layer, Lifecycle.Lifecycle.layer).pipe(Layer.provideMerge(config))
  // Built in this order (core, HTTP, drain trigger), released in reverse: drain, stop HTTP, stop the limiter.
  return Layer.effectDiscard(logStartup).pipe(
    Layer.provideMerge(Lifecycle.Lifecycle.drainOnRelease),
    Layer.provide(layerHttp),
    Layer.provide(core)
  )
}

/**
 * The service configured from the environment and `TOLLGATE_CONFIG`.
 *
 * @example
 * ```ts
 * import { NodeRuntime } from "@effect/platform-node"
 * import { Layer } from "effect"
 * import { Server } from "tollgate/server"
 *
 * Layer.launch(Server.layer).pipe(NodeRuntime.runMain)
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layer: Layer.Layer<
  never,
  ServiceConfig.InvalidConfig | InvalidPolicy | ServiceStore.RedisUnavailable | HttpServerError.ServeError
> = layerWith(ServiceConfig.ServiceConfig.layer.pipe(Layer.provide(NodeFileSystem.layer)))
