/**
 * @effect-diagnostics globalDate:off globalTimers:off
 *
 * One runner of bench:cluster: the bench limiter's partitions
 * (`ClusterLimiter`, a generous token bucket, so every call is a full
 * decision that admits), and, with ENTITY_PER_KEY=1 (and node --expose-gc),
 * beside it the design tollgate did not choose: an entity per key
 * (`KeyBucket`, a token bucket in each entity's handler). Says "ready" once
 * built; on "mem" (stdin) collects garbage and prints its heap and what it
 * holds, as JSON.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Duration, Effect, Layer } from "effect"
import { Entity, Sharding } from "effect/cluster"
import * as readline from "node:readline"
import { ClusterLimiter, ClusterRunner } from "../../src/cluster/index.ts"
import { Code } from "../../src/cluster/internal/protocol.ts"
import { RateLimiter } from "../../src/RateLimiter.ts"
import { benchOptions, Floor, KeyBucket, sharding } from "./shared.ts"

const url = process.env.TOLLGATE_PG_URL
const port = Number(process.env.PORT)
if (url === undefined || !(port > 0)) throw new Error("TOLLGATE_PG_URL and PORT must be set")

let entities = 0
const KeyBucketLive = KeyBucket.toLayer(
  Effect.gen(function*() {
    entities++
    yield* Effect.addFinalizer(() => Effect.sync(() => entities--))
    // a token bucket of 1e9, refilled at 1e9 per second
    let tokens = 1e9
    let at = performance.now()
    return {
      Take: () =>
        Effect.sync(() => {
          const now = performance.now()
          tokens = Math.min(1e9, tokens + (now - at) * 1e6)
          at = now
          if (tokens < 1) return false
          tokens -= 1
          return true
        })
    }
  }),
  { maxIdleTime: "1 hour", concurrency: 1 }
)

// Registered as the partitions are (no bound on concurrency or the mailbox,
// never idle, no span per message); each reply says which runner answered,
// so the caller can aim a lane at each runner.
const FloorLive = Layer.effectDiscard(Effect.gen(function*() {
  const sharding = yield* Sharding.Sharding
  yield* sharding.registerEntity(
    Floor,
    Effect.gen(function*() {
      const runner = yield* Entity.CurrentRunnerAddress
      const owner = `${runner.host}:${runner.port}`
      return Floor.of({
        Batch: ({ payload }) => Effect.sync(() => ({ c: payload.k.map(() => Code.True), x: [], owner, v: payload.v }))
      })
    }),
    { concurrency: "unbounded", maxIdleTime: Duration.infinity, mailboxCapacity: "unbounded" }
  ).pipe(Effect.withTracerEnabled(false))
}))

const Report = Layer.effectDiscard(Effect.gen(function*() {
  const limiter = yield* RateLimiter
  const context = yield* Effect.context<never>()
  const lines = readline.createInterface({ input: process.stdin })
  lines.on("line", (line) => {
    if (line.trim() !== "mem") return
    Effect.runPromiseWith(context)(limiter.stats).then((stats) => {
      const gc = (globalThis as { gc?: () => void }).gc
      for (let i = 0; i < 3; i++) gc?.()
      process.stdout.write(
        JSON.stringify({ heap: process.memoryUsage().heapUsed, buckets: stats.buckets, entities }) + "\n"
      )
    })
  })
  process.stdout.write("ready\n")
}))

Report.pipe(
  Layer.provide(ClusterLimiter.layer(benchOptions)),
  // (registered only for the design comparison: it weighs on the runner)
  Layer.provide(process.env.ENTITY_PER_KEY === "1" ? KeyBucketLive : Layer.empty),
  Layer.provide(FloorLive),
  Layer.provide(ClusterRunner.layerPostgres({ url, runner: { host: "127.0.0.1", port }, sharding })),
  Layer.launch,
  NodeRuntime.runMain
)
