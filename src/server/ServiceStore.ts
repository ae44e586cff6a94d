/**
 * Where the service keeps keys' state: in-process when neither Redis nor a
 * cluster is configured; in Redis (`RedisStore.layer`), which provides
 * `Store.CurrentStore` to the service's limiter, so that every instance on
 * the same Redis and prefix shares each key's limit; or with each key's
 * owner on a cluster (`ClusterRunner.layerPostgres`): every instance on the
 * same Postgres is a runner of one cluster, and the service's limiter is a
 * `ClusterLimiter` on it ({@link makeLimiter}).
 *
 * A Redis that cannot be used at start-up stops the service with one line
 * (exit code 1), whether it refuses the connection or accepts it and never
 * answers: connecting is bounded by {@link connectTimeout}. Closing is
 * bounded too, so a hung Redis cannot hold the shutdown up.
 *
 * @since 0.1.0
 */
import {
  Cause,
  Context,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Logger,
  Option,
  Predicate,
  Redacted,
  Schema,
  Scope
} from "effect"
import type { Sharding } from "effect/cluster"
import type * as ClusterLimiter from "../cluster/ClusterLimiter.ts"
import type { ClusterStorage } from "../cluster/ClusterStorage.ts"
import type { InvalidPolicy } from "../Errors.ts"
import type * as Policy from "../Policy.ts"
import { RateLimiter } from "../RateLimiter.ts"
import * as ServiceConfig from "./ServiceConfig.ts"

// The cluster's and Redis's modules are loaded when the configuration asks
// for them: a service on the in-process default does not load Effect Cluster
// (some 60 files) or the Redis store.
const clusterLimiter = Effect.promise(() => import("../cluster/ClusterLimiter.ts"))
const clusterRunner = Effect.promise(() => import("../cluster/ClusterRunner.ts"))
const redisStore = Effect.promise(() => import("../redis/RedisStore.ts"))

/**
 * Redis could not be used at start-up: the connection was refused, failed,
 * or got no answer within {@link connectTimeout}. The URL is shown without
 * its user name and password.
 *
 * @example
 * ```ts
 * import { ServiceStore } from "tollgate/server"
 *
 * new ServiceStore.RedisUnavailable({
 *   field: "REDIS_URL",
 *   url: "redis://127.0.0.1:6379",
 *   reason: "connect ECONNREFUSED 127.0.0.1:6379"
 * }).message // "cannot use Redis at redis://127.0.0.1:6379 (REDIS_URL): connect ECONNREFUSED 127.0.0.1:6379"
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export class RedisUnavailable extends Schema.TaggedError<RedisUnavailable>()("RedisUnavailable", {
  field: Schema.String,
  url: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `cannot use Redis at ${this.url} (${this.field}): ${this.reason}`
  }
}

/**
 * How long start-up waits for Redis to connect and answer.
 *
 * @example
 * ```ts
 * import { Duration } from "effect"
 * import { ServiceStore } from "tollgate/server"
 *
 * Duration.toSeconds(ServiceStore.connectTimeout) // 5
 * ```
 *
 * @category constants
 * @since 0.1.0
 */
export const connectTimeout: Duration.Duration = Duration.seconds(5)

// How long shutdown waits for the client to close: node-redis's close waits
// for the replies of commands already sent, which a hung server never sends.
const closeTimeout = Duration.seconds(2)

/**
 * The store, as one phrase for the start-up log (the URL without credentials).
 *
 * @example
 * ```ts
 * import { ServiceStore } from "tollgate/server"
 *
 * declare const settings: ServiceStore.Settings
 * ServiceStore.describe(settings) // "in-process", or "Redis at redis://cache:6379 (prefix \"tollgate:\", ...)"
 * ```
 *
 * @category formatting
 * @since 0.1.0
 */
export const describe = (settings: Settings): string =>
  Option.match(settings.redis, {
    onNone: () =>
      Option.match(settings.cluster, {
        onNone: () => "in-process",
        onSome: (cluster) => {
          const { mode, retryAfter, share, timeout } = cluster.fallback
          const url = ServiceConfig.redactUrl(Redacted.value(cluster.url))
          const fallback = mode === "local" ? `local with share ${share}` : mode
          return `cluster on ${url} (this runner ${cluster.host}:${cluster.port}; fallback ${fallback} after ` +
            `${Duration.format(timeout)} without an answer, a shard tried again after ${Duration.format(retryAfter)})`
        }
      }),
    onSome: (redis) => {
      const { mode, retryAfter, share, timeout } = redis.fallback
      const url = urlsOf(redis).map(ServiceConfig.redactUrl).join(",")
      const fallback = mode === "local" ? `local with share ${share}` : mode
      const where = redis.topology === "cluster"
        ? `a Redis Cluster from ${url}`
        : redis.topology === "sentinel"
        ? `the primary of ${JSON.stringify(redis.sentinelName)} behind Sentinel at ${url}`
        : url
      return `Redis at ${where} (prefix ${JSON.stringify(redis.prefix)}, ${redis.clock} clock; fallback ${fallback} ` +
        `after ${Duration.format(timeout)} without an answer, Redis tried again after ${Duration.format(retryAfter)})`
    }
  })

// The URLs of the settings' place: one server's, a cluster's nodes, the sentinels.
const urlsOf = (redis: ServiceConfig.RedisSettings): ReadonlyArray<string> =>
  Redacted.value(redis.url).split(",").map((u) => u.trim()).filter((u) => u !== "")

/**
 * The configuration this module reads.
 *
 * @example
 * ```ts
 * import type { ServiceStore } from "tollgate/server"
 *
 * declare const settings: ServiceStore.Settings
 * const shared = settings.redis._tag === "Some"
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type Settings = Pick<ServiceConfig.Settings, "redis" | "cluster" | "policies">

/**
 * The cluster cannot be used at start-up (Postgres does not answer, the
 * runner's port is taken); names the setting and the URL (credentials
 * hidden).
 *
 * @example
 * ```ts
 * import { ServiceStore } from "tollgate/server"
 *
 * const error = new ServiceStore.ClusterUnavailable({
 *   field: "TOLLGATE_CLUSTER",
 *   url: "postgres://***@db:5432/tollgate",
 *   reason: "cannot reach Postgres"
 * })
 * ```
 *
 * @category errors
 * @since 0.3.0
 */
export class ClusterUnavailable extends Schema.TaggedError<ClusterUnavailable>()("ClusterUnavailable", {
  field: Schema.String,
  url: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `cannot join the cluster on ${this.url} (${this.field}): ${this.reason}`
  }
}

/**
 * The cluster this instance is a runner of, once started (its sharding and
 * hand-over storage): set by {@link layer} when a cluster is configured.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ServiceStore } from "tollgate/server"
 *
 * const onCluster = Effect.gen(function*() {
 *   return (yield* ServiceStore.CurrentCluster) !== undefined
 * })
 * ```
 *
 * @category services
 * @since 0.3.0
 */
export const CurrentCluster = Context.Reference<
  Context.Context<Sharding.Sharding | ClusterStorage> | undefined
>("tollgate/server/ServiceStore/CurrentCluster", { defaultValue: () => undefined })

/**
 * Makes the service's limiter where its keys' state lives: a `ClusterLimiter`
 * on {@link CurrentCluster} when there is one, else `RateLimiter.make` (on
 * `Store.CurrentStore`, if any).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Policy } from "tollgate"
 * import { ServiceStore } from "tollgate/server"
 *
 * const limiter = Effect.scoped(ServiceStore.makeLimiter({ policy: Policy.fixedWindow({ limit: 10, window: "1 minute" }) }))
 * ```
 *
 * @category constructors
 * @since 0.3.0
 */
export const makeLimiter = (
  options: ClusterLimiter.Options
): Effect.Effect<RateLimiter["Service"], InvalidPolicy, Scope.Scope> =>
  Effect.gen(function*() {
    const cluster = yield* CurrentCluster
    if (cluster === undefined) return yield* RateLimiter.make(options)
    const ClusterLimiter = yield* clusterLimiter
    return yield* Effect.provideContext(ClusterLimiter.make(options), cluster)
  })

const joinCluster = Effect.fnUntraced(function*(cluster: ServiceConfig.ClusterSettings) {
  const url = ServiceConfig.redactUrl(Redacted.value(cluster.url))
  const unavailable = (reason: string) => new ClusterUnavailable({ field: cluster.urlField, url, reason })
  const ClusterRunner = yield* clusterRunner
  const runtime = ClusterRunner.layerPostgres({
    url: cluster.url,
    runner: { host: cluster.host, port: cluster.port },
    listen: cluster.listenHost === undefined ? undefined : { host: cluster.listenHost, port: cluster.port }
  })
  const scope = yield* Scope.make()
  const building = yield* Layer.buildWithScope(runtime, scope).pipe(Effect.forkDetach)
  const built = yield* Fiber.await(building).pipe(Effect.timeoutOption(connectTimeout))
  if (Option.isNone(built)) {
    building.interruptUnsafe()
    yield* Effect.forkDetach(Scope.close(scope, Exit.void))
    return yield* unavailable(`no answer within ${Duration.format(connectTimeout)}`)
  }
  if (Exit.isFailure(built.value)) {
    yield* Effect.forkDetach(Scope.close(scope, Exit.void))
    const failure = Exit.findErrorOption(built.value)
    if (Option.isNone(failure)) return yield* unavailable(reasonOf(Cause.squash(built.value.cause)))
    // (a missing package's message is its one line: what needs it, and the command that installs it)
    return yield* unavailable(failure.value._tag === "MissingPackage" ? failure.value.message : failure.value.reason)
  }
  // the runner leaves the cluster (its shards handed over) when the service stops
  yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
  return Context.make(CurrentCluster, built.value.value)
})

// The client's own log lines (a warning with a stack trace for every failed
// reconnect) as one line each. Before the first connection there are none:
// a start-up failure is reported once, as RedisUnavailable.
const oneLineLogs = (connected: { value: boolean }) =>
  Effect.gen(function*() {
    const loggers = yield* Logger.CurrentLoggers
    const oneLine = Logger.make((options) => {
      if (!connected.value) return
      const parts = Array.isArray(options.message) ? options.message : [options.message]
      const message = `Redis: ${parts.map((part) => Predicate.isError(part) ? part.message : String(part)).join(": ")}`
      for (const logger of loggers) logger.log({ ...options, message })
    })
    return new Set([oneLine])
  })

const reasonOf = (error: unknown): string => {
  const cause = Predicate.hasProperty(error, "cause") ? error.cause : error
  const message = Predicate.isError(cause) ? cause.message : String(cause)
  return message === "" ? String(cause) : message
}

const connect = Effect.fn("ServiceStore.connect")(
  function*(settings: Settings, redis: ServiceConfig.RedisSettings) {
    const unavailable = (reason: string) =>
      new RedisUnavailable({
        field: redis.urlField,
        url: urlsOf(redis).map(ServiceConfig.redactUrl).join(","),
        reason
      })
    const RedisStore = yield* redisStore
    // A policy without a script would be decided by the fallback for ever: refuse it now.
    const unsupported = [...settings.policies].filter(([, policy]) => !RedisStore.supports(policy as Policy.Valid))
    if (unsupported.length > 0) {
      return yield* new ServiceConfig.InvalidConfig({
        errors: unsupported.map(([name, policy]) => ({
          field: `policies.${name}`,
          value: policy._tag,
          reason: `the Redis store has no script for this algorithm (it runs ${RedisStore.supported.join(", ")})`
        }))
      })
    }
    const connected = { value: false }
    const loggers = yield* oneLineLogs(connected)
    // Built in a scope of its own, on a fiber of its own: a connection that
    // hangs is left behind (with its scope) rather than waited for.
    const scope = yield* Scope.make()
    const urls = urlsOf(redis)
    const store = RedisStore.layer({
      ...(redis.topology === "cluster"
        ? { cluster: { nodes: urls } }
        : redis.topology === "sentinel"
        ? { sentinel: { name: redis.sentinelName ?? "", sentinels: urls } }
        : { url: urls[0] }),
      prefix: redis.prefix,
      clock: redis.clock
    })
    const building = yield* Layer.buildWithScope(store, scope).pipe(
      Effect.provideService(Logger.CurrentLoggers, loggers),
      Effect.forkDetach
    )
    const built = yield* Fiber.await(building).pipe(Effect.timeoutOption(connectTimeout))
    if (Option.isNone(built)) {
      building.interruptUnsafe()
      yield* Effect.forkDetach(Scope.close(scope, Exit.void))
      return yield* unavailable(`no answer within ${Duration.format(connectTimeout)}`)
    }
    const exit = built.value
    if (Exit.isFailure(exit)) {
      yield* Effect.forkDetach(Scope.close(scope, Exit.void))
      const failure = Exit.findErrorOption(exit)
      if (Option.isSome(failure) && failure.value._tag === "InvalidPolicy") {
        const e = failure.value
        return yield* new ServiceConfig.InvalidConfig({
          errors: [{ field: `redis.${e.field}`, value: e.value, reason: e.reason }]
        })
      }
      return yield* unavailable(reasonOf(Option.isSome(failure) ? failure.value : Cause.squash(exit.cause)))
    }
    connected.value = true
    yield* Effect.addFinalizer(() =>
      Effect.forkDetach(Scope.close(scope, Exit.void)).pipe(
        Effect.flatMap((closing) => Fiber.await(closing).pipe(Effect.timeoutOption(closeTimeout))),
        Effect.flatMap((closed) =>
          Option.isSome(closed)
            ? Effect.void
            : Effect.logWarning(`Redis: the connection did not close within ${Duration.format(closeTimeout)}; left`)
        )
      )
    )
    return exit.value
  }
)

/**
 * The store of the configuration: nothing (in-process) without a Redis URL
 * or a cluster, else `RedisStore.layer` on Redis, connected before the
 * limiter starts, or this instance's runner of the cluster (see
 * {@link CurrentCluster}), started before the limiter.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { ServiceConfig, ServiceStore, Tollgate } from "tollgate/server"
 *
 * const core = Tollgate.Tollgate.layer.pipe(
 *   Layer.provide(ServiceStore.layer),
 *   Layer.provide(ServiceConfig.ServiceConfig.layerFrom({ env: { PORT: "0" } }))
 * )
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layer: Layer.Layer<
  never,
  RedisUnavailable | ClusterUnavailable | ServiceConfig.InvalidConfig,
  ServiceConfig.ServiceConfig
> = Layer.effectContext(
  Effect.gen(function*() {
    const settings = yield* ServiceConfig.ServiceConfig
    if (Option.isSome(settings.cluster)) return yield* joinCluster(settings.cluster.value)
    if (Option.isNone(settings.redis)) return Context.empty()
    return yield* connect(settings, settings.redis.value)
  })
)
