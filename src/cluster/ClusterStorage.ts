/**
 * Where a cluster limiter keeps what outlives a shard's owner: for each
 * shard, who claimed it last (an epoch) and whether it was handed over
 * (the keys' states and line, written by the owner that let it go, before
 * its shard lock was released); and, for each key, what was set on it by
 * hand (a policy it was reconfigured to, a rate, a block), written before
 * the call that set it is answered.
 *
 * A new owner claims a shard before it serves anything for it:
 *
 * - never claimed before: its keys start fresh;
 * - handed over: its keys start from the states and line it was handed;
 * - claimed and never handed over: its last owner crashed (or lost its lock);
 *   its keys start empty (see `ClusterLimiter`).
 *
 * A hand-over is fenced by the epoch of the claim: an owner that lost its
 * shard meanwhile cannot write over the next owner's.
 *
 * @since 0.3.0
 */
import { Context, Effect, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { StoreUnavailable } from "../Store.ts"

/**
 * What a claim found.
 *
 * @example
 * ```ts
 * import type { ClusterStorage } from "tollgate/cluster"
 *
 * const crashed = (claim: ClusterStorage.Claim) => claim.previous === "owned"
 * ```
 *
 * @category models
 * @since 0.3.0
 */
export interface Claim {
  /** This claim's epoch: what a hand-over is fenced by. */
  readonly epoch: number
  /** How the shard was left: never claimed, handed over, or still owned (its owner stopped without handing it over). */
  readonly previous: "none" | "released" | "owned"
  /** The hand-over, when the shard was handed over. */
  readonly handoff: string | undefined
  /** Each key's record of what was set on it by hand. */
  readonly keys: ReadonlyArray<{ readonly key: string; readonly record: string }>
}

/**
 * The storage of hand-overs and keys' records.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ClusterStorage } from "tollgate/cluster"
 *
 * const program = Effect.gen(function*() {
 *   const storage = yield* ClusterStorage.ClusterStorage
 *   const claim = yield* storage.claim("api", 7, "10.0.0.1:34431")
 *   return claim.previous
 * }).pipe(Effect.provide(ClusterStorage.layerMemory))
 * ```
 *
 * @category services
 * @since 0.3.0
 */
export class ClusterStorage extends Context.Service<ClusterStorage, {
  /**
   * Claims `shard` of limiter `name` for `owner`: a new epoch, and what the last owner left.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { ClusterStorage } from "tollgate/cluster"
   *
   * const claimed = Effect.gen(function*() {
   *   const storage = yield* ClusterStorage.ClusterStorage
   *   return (yield* storage.claim("api", 7, "runner-a")).epoch // 1 on a shard never claimed
   * }).pipe(Effect.provide(ClusterStorage.layerMemory))
   * ```
   */
  readonly claim: (name: string, shard: number, owner: string) => Effect.Effect<Claim, StoreUnavailable>
  /**
   * Hands `shard` over, if the claim of `epoch` is still the last one; `false` when it is not.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { ClusterStorage } from "tollgate/cluster"
   *
   * const handedOver = Effect.gen(function*() {
   *   const storage = yield* ClusterStorage.ClusterStorage
   *   const { epoch } = yield* storage.claim("api", 7, "runner-a")
   *   return yield* storage.release("api", 7, epoch, "[]") // true: no one claimed it since
   * }).pipe(Effect.provide(ClusterStorage.layerMemory))
   * ```
   */
  readonly release: (
    name: string,
    shard: number,
    epoch: number,
    handoff: string
  ) => Effect.Effect<boolean, StoreUnavailable>
  /**
   * Writes `key`'s record (`undefined`: deletes it).
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { ClusterStorage } from "tollgate/cluster"
   *
   * const saved = Effect.gen(function*() {
   *   const storage = yield* ClusterStorage.ClusterStorage
   *   yield* storage.saveKey("api", 7, "user:42", "{}")
   *   return (yield* storage.claim("api", 7, "runner-b")).keys // [{ key: "user:42", record: "{}" }]
   * }).pipe(Effect.provide(ClusterStorage.layerMemory))
   * ```
   */
  readonly saveKey: (
    name: string,
    shard: number,
    key: string,
    record: string | undefined
  ) => Effect.Effect<void, StoreUnavailable>
}>()("tollgate/cluster/ClusterStorage") {}

interface MemoryShard {
  epoch: number
  state: "owned" | "released"
  handoff: string | undefined
}

/**
 * The storage in this process's memory: for one process (tests, a single
 * runner). Lost with the process.
 *
 * @example
 * ```ts
 * import { ClusterStorage } from "tollgate/cluster"
 *
 * const Storage = ClusterStorage.layerMemory
 * ```
 *
 * @category layers
 * @since 0.3.0
 */
export const layerMemory: Layer.Layer<ClusterStorage> = Layer.sync(ClusterStorage, () => {
  const shards = new Map<string, MemoryShard>()
  const keys = new Map<string, Map<string, { readonly shard: number; readonly record: string }>>()
  const keysOf = (name: string) => {
    let map = keys.get(name)
    if (map === undefined) keys.set(name, map = new Map())
    return map
  }
  return ClusterStorage.of({
    claim: (name, shard, _owner) =>
      Effect.sync(() => {
        const id = `${name}\u0000${shard}`
        const found = shards.get(id)
        const claim: Claim = {
          epoch: (found?.epoch ?? 0) + 1,
          previous: found === undefined ? "none" : found.state,
          handoff: found?.state === "released" ? found.handoff : undefined,
          keys: Array.from(keysOf(name), ([key, { record, shard: s }]) => s === shard ? { key, record } : undefined)
            .filter((k) => k !== undefined)
        }
        shards.set(id, { epoch: claim.epoch, state: "owned", handoff: undefined })
        return claim
      }),
    release: (name, shard, epoch, handoff) =>
      Effect.sync(() => {
        const found = shards.get(`${name}\u0000${shard}`)
        if (found === undefined || found.epoch !== epoch || found.state !== "owned") return false
        found.state = "released"
        found.handoff = handoff
        return true
      }),
    saveKey: (name, shard, key, record) =>
      Effect.sync(() => {
        if (record === undefined) keysOf(name).delete(key)
        else keysOf(name).set(key, { shard, record })
      })
  })
})

const unavailable = (what: string) => (error: { readonly message: string }) =>
  new StoreUnavailable({ store: "cluster", reason: `${what}: ${error.message}` })

/**
 * The storage in SQL tables (`tollgate_cluster_shards`,
 * `tollgate_cluster_keys`, made when missing), over the application's
 * `SqlClient`: Postgres (`@effect/sql-pg`), the database the cluster's
 * runners already share.
 *
 * @example
 * ```ts
 * import { PgClient } from "@effect/sql-pg"
 * import { Layer, Redacted } from "effect"
 * import { ClusterStorage } from "tollgate/cluster"
 *
 * const Storage = ClusterStorage.layerSql.pipe(
 *   Layer.provide(PgClient.layer({ url: Redacted.make("postgres://localhost/app") }))
 * )
 * ```
 *
 * @category layers
 * @since 0.3.0
 */
export const layerSql: Layer.Layer<ClusterStorage, StoreUnavailable, SqlClient.SqlClient> = Layer.effect(
  ClusterStorage,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Runners that start together race to make the tables (Postgres can
    // fail one of two concurrent CREATE TABLE IF NOT EXISTS): a few tries.
    yield* Effect.gen(function*() {
      yield* sql`CREATE TABLE IF NOT EXISTS tollgate_cluster_shards (
        limiter TEXT NOT NULL,
        shard INTEGER NOT NULL,
        epoch BIGINT NOT NULL,
        state TEXT NOT NULL,
        owner TEXT NOT NULL,
        handoff TEXT,
        PRIMARY KEY (limiter, shard)
      )`
      yield* sql`CREATE TABLE IF NOT EXISTS tollgate_cluster_keys (
        limiter TEXT NOT NULL,
        key TEXT NOT NULL,
        shard INTEGER NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (limiter, key)
      )`
    }).pipe(
      Effect.retry({ times: 5, schedule: Schedule.spaced("100 millis") }),
      Effect.mapError(unavailable("creating tollgate's cluster tables"))
    )

    // The keys' records first, then the claim in one statement (no
    // transaction held across round trips): the row as it was (the
    // statement's snapshot) beside the row as it is now claimed. The claim
    // comes last so that a failure before it leaves the shard as it was: an
    // opening tried again after a claim that landed would find the shard
    // still owned (by this very claim) and start cold.
    const claim = (name: string, shard: number, owner: string) =>
      Effect.gen(function*() {
        const keys = yield* sql<{ key: string; record: string }>`
          SELECT key, record FROM tollgate_cluster_keys WHERE limiter = ${name} AND shard = ${shard}`
        const rows = yield* sql<{ epoch: string | number; previous: string | null; handoff: string | null }>`
          WITH prev AS (
            SELECT state, handoff FROM tollgate_cluster_shards WHERE limiter = ${name} AND shard = ${shard}
          ), claimed AS (
            INSERT INTO tollgate_cluster_shards (limiter, shard, epoch, state, owner, handoff)
            VALUES (${name}, ${shard}, 1, 'owned', ${owner}, NULL)
            ON CONFLICT (limiter, shard) DO UPDATE SET epoch = tollgate_cluster_shards.epoch + 1,
              state = 'owned', owner = EXCLUDED.owner, handoff = NULL
            RETURNING epoch
          )
          SELECT claimed.epoch AS epoch, prev.state AS previous, prev.handoff AS handoff
          FROM claimed LEFT JOIN prev ON true`
        const row = rows[0]
        const previous: Claim["previous"] = row.previous === null
          ? "none"
          : row.previous === "released"
          ? "released"
          : "owned"
        return {
          epoch: Number(row.epoch),
          previous,
          handoff: previous === "released" && row.handoff !== null ? row.handoff : undefined,
          keys: keys.map((k) => ({ key: k.key, record: k.record }))
        } satisfies Claim
      }).pipe(Effect.mapError(unavailable(`claiming shard ${shard}`)))

    const release = (name: string, shard: number, epoch: number, handoff: string) =>
      sql<{ shard: number }>`UPDATE tollgate_cluster_shards SET state = 'released', handoff = ${handoff}
        WHERE limiter = ${name} AND shard = ${shard} AND epoch = ${epoch} AND state = 'owned'
        RETURNING shard`.pipe(
        Effect.map((rows) => rows.length === 1),
        Effect.mapError(unavailable(`handing shard ${shard} over`))
      )

    const saveKey = (name: string, shard: number, key: string, record: string | undefined) =>
      (record === undefined
        ? sql`DELETE FROM tollgate_cluster_keys WHERE limiter = ${name} AND key = ${key}`
        : sql`INSERT INTO tollgate_cluster_keys (limiter, key, shard, record) VALUES (${name}, ${key}, ${shard}, ${record})
            ON CONFLICT (limiter, key) DO UPDATE SET record = EXCLUDED.record, shard = EXCLUDED.shard`).pipe(
          Effect.asVoid,
          Effect.mapError(unavailable(`writing the record of ${JSON.stringify(key)}`))
        )

    return ClusterStorage.of({ claim, release, saveKey })
  })
)
