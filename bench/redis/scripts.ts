/**
 * The server's time per call of each algorithm's script: what Redis itself
 * spends (`INFO commandstats`, `usec_per_call`), which no noise of the
 * client's machine moves. Three shapes of call, each through `RedisStore`:
 *
 * - `lone`: one caller, one Take of 1 per call, over 10 000 keys (each call
 *   reads and writes a key's state; each sample's keys are new ones);
 * - `lone, kept`: the same over 1 000 keys, each seen a moment before (its
 *   state, and the TTL it was given, still there);
 * - `50 keys`: 50 callers at once on 10 000 keys, so a call carries about 50
 *   keys (per key: the call's time divided by its keys);
 * - `hot`: one key, 100 Takes of 1 per call (what a hot key's actor sends
 *   for a batch of 100 requests; per operation).
 *
 *   node bench/redis/scripts.ts                 every algorithm
 *   node bench/redis/scripts.ts --only=tb,gcra  just those
 *
 * Uses REDIS_URL (default redis://127.0.0.1:6379); resets the server's
 * command statistics.
 */
import { Context, Effect, Layer, Scope } from "effect"
import { createClient } from "redis"
import * as Engine from "../../src/internal/actor/Engine.ts"
import { Kind as OpKind } from "../../src/internal/operation/Op.ts"
import * as Policy from "../../src/Policy.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"
import * as Store from "../../src/Store.ts"
import { median } from "../stats.ts"

const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const only = process.argv.find((a) => a.startsWith("--only="))?.slice(7).split(",")
const SAMPLES = Number(process.env.SAMPLES ?? 5)
const CALLS = Number(process.env.CALLS ?? 2000)

// Generous limits: every call admits (a full decision, state written).
const policies: ReadonlyArray<readonly [id: string, name: string, policy: Policy.Policy]> = [
  ["tb", "token bucket", Policy.tokenBucket({ capacity: 1e9, refill: { tokens: 1e6, per: "1 second" } })],
  [
    "tb-interval",
    "token bucket, interval refill",
    Policy.tokenBucket({ capacity: 1e9, refill: { tokens: 1e6, per: "1 second" }, mode: "interval" })
  ],
  ["gcra", "GCRA", Policy.gcra({ rate: { count: 1e6, per: "1 second" }, maxBurst: 1e6 })],
  ["leaky", "leaky bucket", Policy.leakyBucket({ rate: { tokens: 1e6, per: "1 second" }, burst: 1e6 })],
  ["fixed", "fixed window", Policy.fixedWindow({ limit: 1e9, window: "1 minute" })],
  ["sliding", "sliding window", Policy.slidingWindow({ limit: 1e9, window: "1 minute" })],
  ["log", "sliding log (limit 100)", Policy.slidingLog({ limit: 100, window: "1 millis" })],
  ["concurrency", "concurrency", Policy.concurrency({ capacity: 1e9 })],
  ["smooth", "warm-up / bursty", Policy.smooth({ permits: 1e6, per: "1 second" })],
  [
    "all",
    "composite (token bucket + fixed window)",
    Policy.all(
      Policy.tokenBucket({ capacity: 1e9, refill: { tokens: 1e6, per: "1 second" } }),
      Policy.fixedWindow({ limit: 1e9, window: "1 minute" })
    )
  ]
]

const take = [{ kind: OpKind.Take, cost: 1, queued: 0 }]
const take100 = Array.from({ length: 100 }, () => take[0])

interface Stat {
  readonly calls: number
  readonly usec: number
}

const main = async () => {
  const admin = createClient({ url })
  await admin.connect()
  const stats = async (): Promise<Map<string, Stat>> => {
    const out = new Map<string, Stat>()
    for (const m of (await admin.info("commandstats")).matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g)) {
      out.set(m[1], { calls: Number(m[2]), usec: Number(m[3]) })
    }
    return out
  }
  const scriptCommands = ["evalsha", "eval", "fcall", "fcall_ro", "evalsha_ro"]
  const scope = Scope.makeUnsafe()
  const context = await Effect.runPromise(
    Scope.provide(Layer.build(RedisStore.layer({ url, prefix: "bench:s:" + process.pid + ":" })), scope)
  )
  const store = Engine.engineOf(Context.get(context, Store.CurrentStore))
  const keys = Array.from({ length: 10_000 }, (_, i) => `k${i}`)
  process.stdout.write(`redis ${(await admin.info("server")).match(/redis_version:(\S+)/)?.[1]} · ${url}\n\n`)
  process.stdout.write(
    "| algorithm | lone call, µs | lone call, key kept, µs | 50 keys, µs per key | hot key, µs per op |\n|---|---:|---:|---:|---:|\n"
  )
  for (const [id, name, p] of policies) {
    if (only !== undefined && !only.includes(id)) continue
    const policy = await Effect.runPromise(Policy.validate(p))
    const shapes = [
      { callers: 1, calls: CALLS, keys, ops: take },
      { callers: 1, calls: CALLS, keys: keys.slice(0, 1000), ops: take },
      { callers: 50, calls: CALLS / 50, keys, ops: take },
      { callers: 1, calls: CALLS / 10, keys: ["hot"], ops: take100 }
    ]
    const figures: Array<string> = []
    for (const shape of shapes) {
      const perUnit: Array<number> = []
      let cursor = 0
      const loop = Effect.gen(function*() {
        for (let i = 0; i < shape.calls; i++) {
          yield* store.apply(`${id}:${shape.keys[cursor++ % shape.keys.length]}`, policy, shape.ops)
        }
      })
      const run = () =>
        Effect.runPromise(
          Effect.forEach(Array.from({ length: shape.callers }), () => loop, {
            concurrency: shape.callers,
            discard: true
          })
        )
      await run() // warm up (and create the keys)
      for (let s = 0; s < SAMPLES; s++) {
        await admin.configResetStat()
        await run()
        const after = await stats()
        let calls = 0
        let usec = 0
        for (const c of scriptCommands) {
          const stat = after.get(c)
          if (stat !== undefined) {
            calls += stat.calls
            usec += stat.usec
          }
        }
        // per decision: a call of 50 keys or of 100 ops is that many decisions
        perUnit.push(usec / (shape.callers * shape.calls * shape.ops.length))
      }
      figures.push(median(perUnit).toFixed(1))
    }
    process.stdout.write(`| ${name} | ${figures.join(" | ")} |\n`)
  }
  await Effect.runPromise(Scope.close(scope, Effect.void as never))
  await admin.close()
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`)
    process.exit(1)
  }
)
