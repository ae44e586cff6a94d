/**
 * The stand-alone service, assembled: configuration, the store (in-process
 * or Redis), the limiter, the HTTP API on Node's HTTP server, and an orderly
 * shutdown. Layers are released in
 * reverse order, so on SIGTERM/SIGINT the service first starts draining
 * (waiters are answered at once, the HTTP server stops listening and answers
 * with `Connection: close`), then waits for every connection to close after
 * its answers (up to `TOLLGATE_SHUTDOWN_TIMEOUT`), then the limiter stops,
 * then the connection to Redis closes.
 *
 * Node's HTTP server and file system come from `@effect/platform-node`, an
 * optional peer dependency loaded when the server starts: without it this
 * module loads (the routes, the configuration and `Tollgate` work on any
 * platform), and the layers here fail with a `MissingPackage` naming it.
 *
 * @since 0.1.0
 */
import { ByteSize, Console, Duration, Effect, Equal, Layer, Option, Queue, Redacted, Result } from "effect"
import { HttpIncomingMessage, HttpRouter } from "effect/http"
import type { HttpServerError } from "effect/http"
import * as RlsServer from "../envoy/RlsServer.ts"
import * as RlsService from "../envoy/RlsService.ts"
import type { InvalidPolicy, MissingPackage } from "../Errors.ts"
import * as OptionalPackage from "../internal/OptionalPackage.ts"
import * as NodeServer from "./internal/NodeServer.ts"
import * as Lifecycle from "./Lifecycle.ts"
import * as Routes from "./Routes.ts"
import * as ServiceConfig from "./ServiceConfig.ts"
import * as ServiceStore from "./ServiceStore.ts"
import * as Tollgate from "./Tollgate.ts"

// Loaded when a layer that needs it is built, not when this module is, and
// each module alone: the package's index loads every Node module it has
// (node-redis's client among them, some 650 files), which made the service
// take twice as long to start.
const nodeHttpServer = OptionalPackage.load(
  "the HTTP service",
  "@effect/platform-node",
  () => import("@effect/platform-node/NodeHttpServer").then(Result.succeed, Result.fail)
)
const nodeFileSystem = OptionalPackage.load(
  "the HTTP service",
  "@effect/platform-node",
  () => import("@effect/platform-node/NodeFileSystem").then(Result.succeed, Result.fail)
)

const describePolicies = (settings: ServiceConfig.Settings): string =>
  [...settings.policies].map(([name, policy]) =>
    policy._tag === "TokenBucket"
      ? `${name} (token bucket: ${policy.capacity} burst, ${policy.refill.tokens} per ${
        Duration.format(policy.refill.per)
      })`
      : `${name} (${(policy as { readonly _tag: string })._tag})`
  ).join(", ")

const describeCheck = (settings: ServiceConfig.Settings): string =>
  settings.forwardAuth.rules.length === 0
    ? ""
    : `; forward-auth rules ${settings.forwardAuth.rules.map((r) => `${r.name} -> ${r.policy}`).join(", ")}`

const describeRls = (settings: ServiceConfig.Settings): string =>
  Option.match(settings.rls, {
    onNone: () => "",
    onSome: (rls) => `; Envoy rate limit service: ${RlsService.describe(rls.config)}`
  })

const logStartup = ServiceConfig.ServiceConfig.use((settings) =>
  Effect.logInfo(
    `tollgate policies: ${describePolicies(settings)}; default ${settings.defaultPolicy}` +
      (settings.rules.length === 0
        ? ""
        : `; rules ${settings.rules.map((r) => `${r.prefix}* -> ${r.policy}`).join(", ")}`) +
      describeCheck(settings) +
      describeRls(settings) +
      `; admin API ${Option.isSome(settings.adminToken) ? "enabled" : "disabled"}` +
      `; store ${ServiceStore.describe(settings)}` +
      `; configured from ${settings.sources.length === 0 ? "defaults" : settings.sources.join(", ")}`
  )
)

/**
 * The HTTP server with the API's routes, listening where the configuration
 * says, with the configured request and headers timeouts. Requests Node's
 * parser refuses (a URL or headers over Node's `maxHeaderSize`, a request
 * that does not arrive in time, malformed HTTP) are answered with a problem
 * (414, 431, 408, 400) rather than reset. When the drain starts, it stops
 * listening and closes each connection after its next answer (`Connection:
 * close`); its release waits until every connection has closed, up to
 * `TOLLGATE_SHUTDOWN_TIMEOUT`.
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
  HttpServerError.ServeError | MissingPackage,
  ServiceConfig.ServiceConfig | Tollgate.Tollgate | Lifecycle.Lifecycle
> = Layer.unwrap(
  Effect.flatMap(nodeHttpServer, (NodeHttpServer) =>
    ServiceConfig.ServiceConfig.use((settings) =>
      Effect.sync(() => {
        const node = NodeServer.make({
          requestTimeoutMillis: settings.limits.requestTimeoutMillis,
          headersTimeoutMillis: settings.limits.headersTimeoutMillis
        })
        const serve = HttpRouter.serve(Routes.layer, { disableLogger: true }).pipe(
          // Every request's body is bounded here once, rather than per read.
          Layer.provide(Layer.succeed(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(settings.limits.maxBodyBytes))),
          Layer.provide(
            NodeHttpServer.layer(() => node.server, {
              host: settings.host,
              port: settings.port,
              gracefulShutdownTimeout: settings.shutdownTimeout
            })
          )
        )
        // Built after the server, so released before it: the server's own release then finds it closed.
        const drain = Layer.effectDiscard(Lifecycle.Lifecycle.use((lifecycle) =>
          Effect.gen(function*() {
            const drained = node.drain(settings.shutdownTimeout)
            yield* Effect.forkScoped(Effect.andThen(lifecycle.draining, drained))
            // Also when the service stops without a drain (a layer after this one failed to start).
            yield* Effect.addFinalizer(() => drained)
          })
        ))
        return drain.pipe(Layer.provide(serve))
      })
    ))
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
  config: Layer.Layer<ServiceConfig.ServiceConfig, E, R>,
  options?: {
    /** Reads the configuration again on SIGHUP (none: SIGHUP is not handled). */
    readonly reload?: Effect.Effect<ServiceConfig.Settings, ServiceConfig.InvalidConfig> | undefined
  }
): Layer.Layer<
  never,
  | E
  | InvalidPolicy
  | ServiceConfig.InvalidConfig
  | ServiceStore.RedisUnavailable
  | ServiceStore.ClusterUnavailable
  | HttpServerError.ServeError
  | RlsServer.RlsServerError
  | MissingPackage,
  R
> => {
  // The gRPC packages are checked with the configuration, so that a service that cannot serve the
  // rate limit service stops before it listens on anything.
  const packages = Layer.effectDiscard(
    ServiceConfig.ServiceConfig.use((settings) => Option.isSome(settings.rls) ? RlsServer.checkPackages : Effect.void)
  )
  const core = Layer.mergeAll(Tollgate.Tollgate.layer, Lifecycle.Lifecycle.layer, packages).pipe(
    Layer.provideMerge(config)
  )
  const gateways = Layer.unwrap(
    ServiceConfig.ServiceConfig.use((settings) =>
      Effect.succeed(Option.match(settings.rls, {
        onNone: () => layerReload(options?.reload),
        onSome: (rls) =>
          Layer.mergeAll(RlsServer.layer({ host: rls.host, port: rls.port }), layerReload(options?.reload)).pipe(
            Layer.provide(layerRlsService(settings, rls))
          )
      }))
    )
  )
  // Built in this order (core, HTTP, gateways, drain trigger), released in reverse: drain, stop the
  // gateways and HTTP, stop the limiter.
  return Layer.effectDiscard(logStartup).pipe(
    Layer.provideMerge(Lifecycle.Lifecycle.drainOnRelease),
    Layer.provide(gateways),
    Layer.provide(layerHttp),
    Layer.provide(core)
  )
}

const layerRlsService = (
  settings: ServiceConfig.Settings,
  rls: ServiceConfig.RlsSettings
): Layer.Layer<
  RlsService.RlsService,
  InvalidPolicy | ServiceStore.RedisUnavailable | ServiceStore.ClusterUnavailable | ServiceConfig.InvalidConfig
> =>
  Layer.effect(
    RlsService.RlsService,
    RlsService.RlsService.make({
      config: rls.config,
      responseHeaders: rls.responseHeaders,
      limiter: {
        idleTimeout: settings.limiter.idleTimeout,
        mailboxCapacity: settings.limiter.mailboxCapacity,
        maxWaiters: settings.limiter.maxWaiters,
        fallback: Option.match(settings.redis, {
          onNone: () => Option.getOrUndefined(Option.map(settings.cluster, (cluster) => cluster.fallback)),
          onSome: (redis) => redis.fallback
        })
      },
      makeLimiter: ServiceStore.makeLimiter
    })
  ).pipe(Layer.provide(ServiceStore.layer), Layer.provide(Layer.succeed(ServiceConfig.ServiceConfig, settings)))

// Settings that a reload cannot change in a running service: they are read at start only.
const restartOnly = (a: ServiceConfig.Settings, b: ServiceConfig.Settings): ReadonlyArray<string> => {
  const same = (x: unknown, y: unknown) => JSON.stringify(x) === JSON.stringify(y)
  const out: Array<string> = []
  if (a.host !== b.host || a.port !== b.port) out.push("HOST/PORT")
  if (!same(a.limits, b.limits)) out.push("limits")
  if (!same(a.limiter, b.limiter)) out.push("limiter")
  if (!Equal.equals(a.shutdownTimeout, b.shutdownTimeout)) out.push("TOLLGATE_SHUTDOWN_TIMEOUT")
  const token = (s: ServiceConfig.Settings) => Option.map(s.adminToken, Redacted.value)
  if (!Equal.equals(token(a), token(b))) out.push("TOLLGATE_ADMIN_TOKEN")
  const redis = (s: ServiceConfig.Settings) =>
    Option.map(
      s.redis,
      (r) => ({
        ...r,
        url: Redacted.value(r.url),
        fallback: { ...r.fallback, timeout: String(r.fallback.timeout), retryAfter: String(r.fallback.retryAfter) }
      })
    )
  if (!same(redis(a), redis(b))) out.push("redis")
  const cluster = (s: ServiceConfig.Settings) =>
    Option.map(s.cluster, (c) => ({ ...c, url: Redacted.value(c.url), fallback: String(c.fallback.mode) }))
  if (!same(cluster(a), cluster(b))) out.push("cluster")
  const rlsAddress = (s: ServiceConfig.Settings) => Option.map(s.rls, (r) => `${r.host}:${r.port}:${r.responseHeaders}`)
  if (!Equal.equals(rlsAddress(a), rlsAddress(b))) out.push("rls (host, port, responseHeaders)")
  return out
}

const describeSummary = (summary: Tollgate.ReloadSummary): string => {
  const parts: Array<string> = []
  if (summary.unchanged.length > 0) parts.push(`unchanged (state kept): ${summary.unchanged.join(", ")}`)
  if (summary.changed.length > 0) parts.push(`changed (their keys start afresh): ${summary.changed.join(", ")}`)
  if (summary.added.length > 0) parts.push(`added: ${summary.added.join(", ")}`)
  if (summary.removed.length > 0) parts.push(`removed: ${summary.removed.join(", ")}`)
  return parts.join("; ")
}

/**
 * Reloads the configuration on SIGHUP: policies, prefix rules, the default
 * policy, forward-auth rules and the Envoy rate limit service's descriptors
 * take effect at once, and policies that did not change keep their keys'
 * state. A configuration that does not validate is refused with one line on
 * stderr, and the one in force stays. Settings read only at start (where it
 * listens, Redis, limits) are named in a warning when they changed.
 *
 * @since 0.2.0
 */
const layerReload = (
  reload: Effect.Effect<ServiceConfig.Settings, ServiceConfig.InvalidConfig> | undefined
): Layer.Layer<never, never, Tollgate.Tollgate> =>
  reload === undefined ? Layer.empty : Layer.effectDiscard(Effect.gen(function*() {
    const tollgate = yield* Tollgate.Tollgate
    const rls = yield* Effect.serviceOption(RlsService.RlsService)
    const apply = Effect.gen(function*() {
      const before = tollgate.settings()
      const next = yield* reload
      if (Option.isSome(next.rls)) {
        if (Option.isSome(rls)) yield* rls.value.reload(next.rls.value.config)
      }
      const summary = yield* tollgate.reload(next)
      const ignored = restartOnly(before, next)
      yield* Effect.logInfo(
        `tollgate configuration reloaded: policies ${describeSummary(summary)}` + describeCheck(next) +
          describeRls(next)
      )
      if (ignored.length > 0) {
        yield* Effect.logWarning(
          `tollgate: changed settings that take effect after a restart only: ${ignored.join(", ")}`
        )
      }
    }).pipe(
      Effect.catchTag(
        "InvalidConfig",
        (error) => Console.error(`tollgate: reload refused (the configuration in force stays): ${error.message}`)
      )
    )
    const signals = yield* Queue.unbounded<void>()
    const onSignal = () => {
      Queue.offerUnsafe(signals, undefined)
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => process.on("SIGHUP", onSignal)),
      () => Effect.sync(() => process.off("SIGHUP", onSignal))
    )
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Queue.take(signals), apply)))
  }))

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
  | ServiceConfig.InvalidConfig
  | InvalidPolicy
  | ServiceStore.RedisUnavailable
  | ServiceStore.ClusterUnavailable
  | HttpServerError.ServeError
  | RlsServer.RlsServerError
  | MissingPackage
> = Layer.unwrap(
  Effect.map(
    nodeFileSystem,
    (NodeFileSystem) =>
      layerWith(ServiceConfig.ServiceConfig.layer.pipe(Layer.provide(NodeFileSystem.layer)), {
        reload: ServiceConfig.load.pipe(Effect.provide(NodeFileSystem.layer))
      })
  )
)
