/**
 * What the in-process cluster tests share: a cluster of one in this process
 * (Effect Cluster's sharding on in-memory runner storage), and two limiters
 * on it: the `host`, whose runner owns every shard (its calls go straight to
 * the partitions), and a `caller` on the same sharding, which hosts nothing
 * (the entity is registered once), so its every call goes as a message to
 * the host's partitions, as a call from another runner would.
 */
import { Duration, Effect, Exit, Layer, Option, Scope } from "effect"
import { MessageStorage, RunnerHealth, Runners, RunnerStorage, Sharding, ShardingConfig } from "effect/cluster"
import { ClusterLimiter, ClusterRunner, ClusterStorage } from "../../src/cluster/index.ts"
import type { Decision, RateLimiter } from "../../src/index.ts"

/** Lets the sharding's own fibers run until they park (its first assignment). */
export const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 50 }))

/** Effect Cluster's sharding for one process, in memory. */
export const shardingLayer = Sharding.layer.pipe(
  Layer.provide(Runners.layerNoop),
  Layer.provide(MessageStorage.layerNoop),
  Layer.provide([RunnerStorage.layerMemory, RunnerHealth.layerNoop]),
  Layer.provide(ShardingConfig.layer({ ...ClusterRunner.defaults, shardsPerGroup: 30 }))
)

/**
 * A runner of the cluster of one in its own scope (closing it is the
 * runner's graceful stop), on `storage`: a host and a caller limiter.
 */
export const runner = (
  options: ClusterLimiter.Options,
  storage: ClusterStorage.ClusterStorage["Service"],
  scope: Scope.Scope
) =>
  Effect.gen(function*() {
    const context = yield* Layer.buildWithScope(shardingLayer, scope)
    yield* settle
    const make = ClusterLimiter.make(options).pipe(
      Effect.provideContext(context),
      Effect.provideService(ClusterStorage.ClusterStorage, storage),
      Scope.provide(scope)
    )
    const host = yield* make
    const caller = yield* make
    return { host, caller }
  })

/** A memory storage of its own. */
export const memoryStorage = Effect.provide(
  ClusterStorage.ClusterStorage.use(Effect.succeed),
  ClusterStorage.layerMemory
)

const ms = (d: Duration.Duration) => Duration.toMillis(d)
const plainDecision = (d: Decision.Decision): unknown => ({
  allowed: d.allowed,
  remaining: d.remaining,
  retryAfter: ms(d.retryAfter),
  resetAfter: ms(d.resetAfter),
  limit: d.limit,
  ...(d.delay === undefined ? {} : { delay: ms(d.delay) }),
  ...(d.dryRun === undefined ? {} : { dryRun: d.dryRun }),
  ...(d.degraded === undefined ? {} : { degraded: d.degraded }),
  ...(d.keys === undefined ? {} : { keys: d.keys.map((k) => ({ key: k.key, d: plainDecision(k.decision) })) }),
  ...("taken" in d ? { taken: (d as { readonly taken: number }).taken } : {})
})

/** An outcome as plain data, for comparing transcripts. */
export const plain = (exit: Exit.Exit<unknown, unknown>): unknown => {
  if (Exit.isFailure(exit)) {
    const reason = exit.cause.reasons[0]
    if (reason?._tag !== "Fail") return { defect: String(reason) }
    const e = reason.error as { readonly _tag: string } & Record<string, unknown>
    const { _tag, ...fields } = e
    return {
      error: _tag,
      ...Object.fromEntries(
        Object.entries(fields).filter(([k]) => k !== "stack").map((
          [k, v]
        ) => [k, Duration.isDuration(v) ? ms(v) : v])
      )
    }
  }
  const value = exit.value
  if (Option.isOption(value)) {
    return Option.isSome(value)
      ? { some: plainDecision(value.value as Decision.Decision) }
      : "none"
  }
  if (typeof value === "object" && value !== null && "allowed" in value) {
    return plainDecision(value as Decision.Decision)
  }
  return value === undefined ? "void" : value
}

export type Limiter = RateLimiter["Service"]
