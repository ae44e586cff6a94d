// @effect-diagnostics globalDate:off
/**
 * What the calls of docs/sharing.md cost next to a plain one, in one Effect
 * loop on one process: acquire on one key against acquire over two and
 * three keys (all or nothing), in process (fast path on and off) and on
 * the in-memory store; a wait admitted at once, plain and carrying a
 * priority and a tenant; a feedback on an adaptive key; and the
 * RateLimiterStore of tollgate/persistence against Effect's memory store
 * under Effect's RateLimiter. Medians of five rounds. Run with
 * `npm run bench:sharing`.
 */
import { Effect, Layer } from "effect"
import { RateLimiter as EffectRateLimiter } from "effect/persistence"
import { MemoryStore, Policy, RateLimiter, Store } from "../src/index.ts"
import { RateLimiterStore } from "../src/persistence/index.ts"

const N = 100_000
const plenty = Policy.tokenBucket({ capacity: 1e12, refill: { tokens: 1, per: "1 second" } })
const adaptive = Policy.adaptive({ capacity: 1e9, rate: { tokens: 1e6, per: "1 second" }, floor: 1, ceiling: 1e8 })

const time = async (label: string, loop: (n: number) => Effect.Effect<unknown, unknown, never>) => {
  const samples: Array<number> = []
  await Effect.runPromise(loop(N / 10)) // warm-up
  for (let round = 0; round < 5; round++) {
    const t0 = performance.now()
    await Effect.runPromise(loop(N))
    samples.push(performance.now() - t0)
  }
  samples.sort((a, b) => a - b)
  const perSecond = N / samples[2] * 1000
  console.log(`  ${label.padEnd(58)} ${Math.round(perSecond).toLocaleString("en").padStart(12)} calls/s`)
}

const withLimiter = (
  options: RateLimiter.Options,
  store: boolean,
  body: (limiter: RateLimiter["Service"], n: number) => Effect.Effect<unknown, unknown>
) =>
(n: number) =>
  Effect.scoped(Effect.gen(function*() {
    const limiter = yield* (store
      ? Effect.flatMap(MemoryStore.make, (s) =>
        RateLimiter.make(options).pipe(Effect.provideService(Store.CurrentStore, s)))
      : RateLimiter.make(options))
    return yield* body(limiter, n)
  }))

const repeat = (n: number, f: () => Effect.Effect<unknown, unknown>) =>
  Effect.gen(function*() {
    for (let i = 0; i < n; i++) yield* f()
  })

for (
  const [name, fastPath, store] of [["in process, fast path", true, false], ["in process, actors only", false, false], [
    "on the in-memory store",
    true,
    true
  ]] as const
) {
  console.log(`== acquire, ${name}`)
  const options = { policy: plenty, fastPath }
  await time("1 key", withLimiter(options, store, (l, n) => repeat(n, () => l.acquire("a"))))
  await time("2 keys, all or nothing", withLimiter(options, store, (l, n) => repeat(n, () => l.acquire(["a", "b"]))))
  await time(
    "3 keys, all or nothing",
    withLimiter(options, store, (l, n) => repeat(n, () => l.acquire(["a", "b", "c"])))
  )
}

console.log("== wait admitted at once (nobody waiting), in process")
await time("plain", withLimiter({ policy: plenty }, false, (l, n) => repeat(n, () => l.wait("a"))))
await time(
  "priority + tenant + weight",
  withLimiter(
    { policy: plenty },
    false,
    (l, n) => repeat(n, () => l.wait("a", { priority: 1, tenant: "t", weight: 2 }))
  )
)

console.log("== adaptive key, in process")
await time("acquire", withLimiter({ policy: adaptive }, false, (l, n) => repeat(n, () => l.acquire("a"))))
await time("feedback ok", withLimiter({ policy: adaptive }, false, (l, n) => repeat(n, () => l.feedback("a", "ok"))))

console.log("== Effect's RateLimiter.consume (token-bucket, 1 key)")
const consume = (store: Layer.Layer<EffectRateLimiter.RateLimiterStore, unknown>) => (n: number) =>
  Effect.gen(function*() {
    const limiter = yield* EffectRateLimiter.RateLimiter
    const options = { key: "a", limit: 1e9, window: "1 second", algorithm: "token-bucket" } as const
    yield* repeat(n, () => limiter.consume(options))
  }).pipe(Effect.provide(EffectRateLimiter.layer.pipe(Layer.provide(store))))
await time("on layerStoreMemory", consume(EffectRateLimiter.layerStoreMemory))
await time("on tollgate/persistence RateLimiterStore", consume(RateLimiterStore.layer()))
