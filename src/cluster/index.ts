/**
 * tollgate on Effect Cluster: each key has one owner among the cluster's
 * runners (the runner holding its shard's lock), which decides every call
 * for it, from any runner, in one line. Shards move with their keys' state
 * and line; a crashed runner's keys come back empty. `ClusterRunner.layerPostgres`
 * needs the optional peer dependencies `@effect/sql-pg` and
 * `@effect/platform-node`.
 *
 * @since 0.3.0
 */
import * as ClusterLimiter from "./ClusterLimiter.ts"
import * as ClusterRunner from "./ClusterRunner.ts"
import * as ClusterStorage from "./ClusterStorage.ts"

export {
  /**
   * The `RateLimiter` routed over an Effect Cluster.
   *
   * @example
   * ```ts
   * import { Layer } from "effect"
   * import { Policy } from "tollgate"
   * import { ClusterLimiter, ClusterRunner } from "tollgate/cluster"
   *
   * const Limiter = ClusterLimiter.layer({
   *   policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
   * }).pipe(Layer.provide(ClusterRunner.layerLocal()))
   * ```
   *
   * @category modules
   * @since 0.3.0
   */
  ClusterLimiter,
  /**
   * Runtimes for a cluster limiter: runners on Postgres, or a cluster of one.
   *
   * @example
   * ```ts
   * import { ClusterRunner } from "tollgate/cluster"
   *
   * const Runner = ClusterRunner.layerPostgres({
   *   url: "postgres://tollgate@db:5432/tollgate",
   *   runner: { host: "10.0.0.7", port: 34431 }
   * })
   * ```
   *
   * @category modules
   * @since 0.3.0
   */
  ClusterRunner,
  /**
   * Where hand-overs and keys' records outlive a shard's owner.
   *
   * @example
   * ```ts
   * import { ClusterStorage } from "tollgate/cluster"
   *
   * const Storage = ClusterStorage.layerMemory
   * ```
   *
   * @category modules
   * @since 0.3.0
   */
  ClusterStorage
}
