/**
 * Ready-made runtimes for `ClusterLimiter`: what a process needs to be one of
 * the cluster's runners (or a client of it).
 *
 * - {@link layerPostgres}: runners on one Postgres database (shard locks
 *   and runners in Effect's own tables, hand-overs in tollgate's), talking
 *   to each other over TCP. Every tollgate runner started on the same
 *   database forms one cluster.
 * - {@link layerLocal}: a cluster of one, in this process's memory (tests,
 *   and a program that wants the cluster's API on one machine).
 *
 * @since 0.3.0
 */
import { Cause, Duration, Effect, Layer, Option, Predicate, Redacted, Result } from "effect"
import {
  MessageStorage,
  RunnerAddress,
  RunnerHealth,
  Runners,
  RunnerStorage,
  Sharding,
  ShardingConfig,
  SocketRunner,
  SqlRunnerStorage
} from "effect/cluster"
import { RpcSerialization } from "effect/rpc"
import { MissingPackage } from "../Errors.ts"
import * as OptionalPackage from "../internal/OptionalPackage.ts"
import { StoreUnavailable } from "../Store.ts"
import * as ClusterStorage from "./ClusterStorage.ts"

const reasonOf = (error: unknown): string => {
  const cause = Predicate.hasProperty(error, "cause") && error.cause !== undefined ? error.cause : error
  const message = Predicate.isError(cause) ? cause.message : String(cause)
  return message === "" ? String(cause) : message
}

/**
 * What tollgate sets on the cluster's `ShardingConfig` unless told
 * otherwise: assignments refreshed every second (a shard that moves is
 * taken by its next owner sooner) and runners' health checked every 5
 * seconds (a crashed runner's shards find a new owner sooner).
 *
 * @example
 * ```ts
 * import { ClusterRunner } from "tollgate/cluster"
 *
 * const interval = ClusterRunner.defaults.refreshAssignmentsInterval // Duration.seconds(1)
 * ```
 *
 * @category defaults
 * @since 0.3.0
 */
export const defaults: Partial<ShardingConfig.ShardingConfig["Service"]> = {
  refreshAssignmentsInterval: Duration.seconds(1),
  runnerHealthCheckInterval: Duration.seconds(5)
}

/**
 * Options of {@link layerPostgres}.
 *
 * @example
 * ```ts
 * import type { ClusterRunner } from "tollgate/cluster"
 *
 * const options: ClusterRunner.PostgresOptions = {
 *   url: "postgres://tollgate@db:5432/tollgate",
 *   runner: { host: "10.0.0.7", port: 34431 }
 * }
 * ```
 *
 * @category models
 * @since 0.3.0
 */
export interface PostgresOptions {
  /** The database every runner shares. */
  readonly url: string | Redacted.Redacted
  /**
   * This runner's address as the others reach it (and, unless `listen` says
   * otherwise, where it listens). Absent: a client-only node, which calls
   * but owns no shard.
   */
  readonly runner?: { readonly host: string; readonly port: number } | undefined
  /** Where to listen, when it is not the address the others use (behind NAT, in a container). */
  readonly listen?: { readonly host: string; readonly port: number } | undefined
  /** Settings of the cluster's `ShardingConfig`, over {@link defaults}. */
  readonly sharding?: Partial<ShardingConfig.ShardingConfig["Service"]> | undefined
}

/**
 * A runner on Postgres: Effect Cluster's socket runner (binary
 * serialization, health checked by ping), its runner storage and shard
 * locks in Postgres, and tollgate's hand-over storage in the same database.
 * Needs `@effect/sql-pg` and `@effect/platform-node` (optional peers of
 * tollgate), loaded when the layer is built.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Policy } from "tollgate"
 * import { ClusterLimiter, ClusterRunner } from "tollgate/cluster"
 *
 * const Limiter = ClusterLimiter.layer({
 *   policy: Policy.gcra({ rate: { count: 30, per: "1 minute" }, maxBurst: 15 })
 * }).pipe(Layer.provide(ClusterRunner.layerPostgres({
 *   url: "postgres://tollgate@db:5432/tollgate",
 *   runner: { host: "10.0.0.7", port: 34431 }
 * })))
 * ```
 *
 * @category layers
 * @since 0.3.0
 */
export const layerPostgres = (
  options: PostgresOptions
): Layer.Layer<Sharding.Sharding | ClusterStorage.ClusterStorage, StoreUnavailable | MissingPackage> =>
  Layer.unwrap(Effect.gen(function*() {
    // optional peers: loaded here, so `tollgate/cluster` loads without them;
    // one line names every one that is missing
    const feature = "the cluster's runners on Postgres (ClusterRunner.layerPostgres)"
    const [sqlPg, platform] = yield* Effect.all([
      Effect.result(
        OptionalPackage.load(
          feature,
          "@effect/sql-pg",
          () => import("@effect/sql-pg").then(Result.succeed, Result.fail)
        )
      ),
      Effect.result(
        OptionalPackage.load(
          feature,
          "@effect/platform-node",
          () => import("@effect/platform-node/NodeClusterSocket").then(Result.succeed, Result.fail)
        )
      )
    ])
    if (Result.isFailure(sqlPg) || Result.isFailure(platform)) {
      const missing = [
        ...(Result.isFailure(sqlPg) ? sqlPg.failure.packages : []),
        ...(Result.isFailure(platform) ? platform.failure.packages : [])
      ]
      return yield* new MissingPackage({ feature, packages: missing })
    }
    const { PgClient } = sqlPg.success
    const NodeClusterSocket = platform.success
    const url = Redacted.isRedacted(options.url) ? options.url : Redacted.make(options.url)
    const Pg = Layer.effectContext(
      Layer.build(PgClient.layer({ url })).pipe(
        Effect.mapError((error) =>
          new StoreUnavailable({ store: "cluster", reason: `cannot reach Postgres: ${error.message}` })
        )
      )
    )
    const runner = options.runner
    const config = ShardingConfig.layer({
      ...defaults,
      ...options.sharding,
      runnerAddress: runner === undefined ? Option.none() : Option.some(RunnerAddress.make(runner.host, runner.port)),
      runnerListenAddress: options.listen === undefined
        ? Option.none()
        : Option.some(RunnerAddress.make(options.listen.host, options.listen.port))
    })
    const transport = runner === undefined
      ? Layer.provide(SocketRunner.layerClientOnly, NodeClusterSocket.layerClientProtocol)
      : Layer.provide(SocketRunner.layer, [NodeClusterSocket.layerSocketServer, NodeClusterSocket.layerClientProtocol])
        .pipe(
          Layer.provide(
            RunnerHealth.layerPing.pipe(
              Layer.provide(Runners.layerRpc),
              Layer.provide(NodeClusterSocket.layerClientProtocol)
            )
          )
        )
    const runtime = Layer.mergeAll(
      transport.pipe(
        // tollgate's messages are volatile: no message storage
        Layer.provide(MessageStorage.layerNoop),
        Layer.provide(SqlRunnerStorage.layer),
        Layer.provide(config),
        Layer.provide(RpcSerialization.layerSchemaBinary())
      ),
      ClusterStorage.layerSql
    ).pipe(Layer.provide(Pg))
    // What stops a runner from starting (its port taken, its tables not
    // made), as one typed error.
    return Layer.effectContext(
      Layer.build(runtime).pipe(
        Effect.catchCause((cause) =>
          Effect.fail(
            Cause.hasFails(cause) && Cause.squash(cause) instanceof StoreUnavailable
              ? Cause.squash(cause) as StoreUnavailable
              : new StoreUnavailable({ store: "cluster", reason: `cannot start: ${reasonOf(Cause.squash(cause))}` })
          )
        )
      )
    )
  }))

/**
 * A cluster of one in this process: Effect Cluster's sharding over in-memory
 * runner storage, every shard owned here, hand-overs in memory.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Policy, RateLimiter } from "tollgate"
 * import { ClusterLimiter, ClusterRunner } from "tollgate/cluster"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   return yield* limiter.acquire("user:42")
 * }).pipe(Effect.provide(
 *   ClusterLimiter.layer({ policy: Policy.fixedWindow({ limit: 10, window: "1 minute" }) }).pipe(
 *     Layer.provide(ClusterRunner.layerLocal())
 *   )
 * ))
 * ```
 *
 * @category layers
 * @since 0.3.0
 */
export const layerLocal = (
  sharding?: Partial<ShardingConfig.ShardingConfig["Service"]>
): Layer.Layer<Sharding.Sharding | ClusterStorage.ClusterStorage> =>
  Layer.mergeAll(
    Sharding.layer.pipe(
      Layer.provide(Runners.layerNoop),
      Layer.provide(MessageStorage.layerNoop),
      Layer.provide([RunnerStorage.layerMemory, RunnerHealth.layerNoop]),
      Layer.provide(ShardingConfig.layer({ ...defaults, ...sharding }))
    ),
    ClusterStorage.layerMemory
  )
