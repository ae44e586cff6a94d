// @effect-diagnostics globalDate:off
/**
 * Floods of keys, timed: what one more key costs as the number of keys that
 * came before it grows. Run with `node --expose-gc bench/flood.ts`.
 *
 * - eviction: maxBuckets 100 000, a token bucket of 100 refilling 10/s,
 *   batches of 50 000 new keys at the cap (each takes the place of a settled
 *   bucket); the limiter's clock moves a second between batches, so every
 *   bucket of an earlier batch is settled. Cost per new key per batch.
 * - sweep: 1 000 000 live, idle, settled buckets (500 000 with `fastPath:
 *   false`, each with its actor's fiber parked); one sweep reaps them all,
 *   while a fiber that only yields records the longest time it waited for its
 *   turn (the longest pause the sweep imposes on everything else).
 * - reconfigured keys: 200 000 distinct keys reconfigured with maxBuckets
 *   100 000, then every bucket reaped: the heap kept, and the calls refused.
 */
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { PerformanceObserver } from "node:perf_hooks"

import { Policy, RateLimiter } from "../src/index.ts"

const gc = (globalThis as { gc?: () => void }).gc

const policy = Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })

const eviction = Effect.gen(function*() {
  const cap = 100_000
  const batch = 50_000
  const limiter = yield* RateLimiter.make({ policy, maxBuckets: cap, idleTimeout: "1 day" })
  let next = 0
  const run = Effect.fnUntraced(function*(n: number) {
    for (let i = 0; i < n; i++) {
      if (!(yield* limiter.acquire(`flood:${next++}`))) throw new Error("a new key was denied")
    }
  })
  yield* run(cap)
  const costs: Array<string> = []
  for (let b = 0; b < 8; b++) {
    yield* TestClock.adjust("1 second")
    const t0 = performance.now()
    yield* run(batch)
    costs.push(((performance.now() - t0) * 1000 / batch).toFixed(2))
  }
  const stats = yield* limiter.stats
  console.log(
    `eviction at the cap (${cap.toLocaleString("en")}), µs per new key, batches of ${batch}: ${costs.join(", ")}`
  )
  console.log(`  live ${stats.buckets}, reaped ${stats.reaped}`)
}).pipe(Effect.scoped, Effect.provide(TestClock.layer()))

const sweep = (keys: number, fastPath: boolean) =>
  Effect.gen(function*() {
    const limiter = yield* RateLimiter.make({ policy, idleTimeout: "1 minute", fastPath })
    // used at 1 ms, so the sweeps at multiples of 30 s find them idle only from 60 001 ms on
    yield* TestClock.adjust("1 millis")
    for (let i = 0; i < keys; i++) yield* limiter.acquire(`sweep:${i}`)
    yield* TestClock.adjust("60 seconds") // idle, settled, but not swept yet (next sweep at 90 s)
    let longest = 0
    const gaps: Array<number> = []
    // each gap's span, to take out of it the garbage collector's pauses (V8's,
    // not the sweep's: a major GC over a million live objects)
    const spans: Array<readonly [number, number]> = []
    const collections: Array<readonly [number, number]> = []
    const observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) collections.push([e.startTime, e.startTime + e.duration])
    })
    observer.observe({ entryTypes: ["gc"] })
    let last = performance.now()
    let running = true
    const watcher = yield* Effect.forkChild(Effect.gen(function*() {
      while (running) {
        yield* Effect.yieldNow
        const now = performance.now()
        if (now - last > longest) longest = now - last
        gaps.push(now - last)
        spans.push([last, now])
        last = now
      }
    }))
    const t0 = performance.now()
    yield* TestClock.adjust("30 seconds") // the sweep at 90 s reaps all of them
    while ((yield* limiter.stats).buckets > 0) yield* Effect.yieldNow
    const total = performance.now() - t0
    running = false
    yield* Fiber.join(watcher)
    for (const e of observer.takeRecords()) collections.push([e.startTime, e.startTime + e.duration])
    observer.disconnect()
    const outsideGc = spans.map(([from, to]) => {
      let gcTime = 0
      for (const [a, b] of collections) gcTime += Math.max(0, Math.min(b, to) - Math.max(a, from))
      return to - from - gcTime
    })
    const longestOutsideGc = Math.max(...outsideGc)
    gaps.sort((a, b) => a - b)
    const at = (q: number) => gaps[Math.min(gaps.length - 1, Math.floor(q * gaps.length))].toFixed(1)
    console.log(
      `sweep of ${keys.toLocaleString("en")} live buckets (fastPath: ${fastPath}): ${
        total.toFixed(0)
      } ms in all; pauses: median ${at(0.5)} ms, ` +
        `p90 ${at(0.9)} ms, longest ${longest.toFixed(1)} ms (${gaps.length} turns); ` +
        `longest without the garbage collector's pauses in it ${longestOutsideGc.toFixed(1)} ms`
    )
  }).pipe(Effect.scoped, Effect.provide(TestClock.layer()))

const overrides = Effect.gen(function*() {
  const cap = 100_000
  const keys = 200_000
  const other = Policy.tokenBucket({ capacity: 5, refill: { tokens: 5, per: "1 second" } })
  const limiter = yield* RateLimiter.make({ policy, maxBuckets: cap, idleTimeout: "1 second" })
  gc?.()
  const before = process.memoryUsage().heapUsed
  let refused = 0
  for (let i = 0; i < keys; i++) {
    const exit = yield* Effect.exit(limiter.reconfigure(`re:${i}`, other))
    if (exit._tag === "Failure") refused++
  }
  yield* TestClock.adjust("1 minute")
  gc?.()
  const after = process.memoryUsage().heapUsed
  const stats = yield* limiter.stats
  console.log(
    `${keys.toLocaleString("en")} keys reconfigured (maxBuckets ${cap.toLocaleString("en")}), every bucket reaped: ` +
      `heap +${((after - before) / 1e6).toFixed(1)} MB, ${refused.toLocaleString("en")} refused, live ${stats.buckets}`
  )
}).pipe(Effect.scoped, Effect.provide(TestClock.layer()))

// `node --expose-gc bench/flood.ts [eviction] [sweep] [overrides]`: all three by default.
const only = process.argv.slice(2)
const wanted = (name: string) => only.length === 0 || only.includes(name)
console.log("floods")
if (wanted("eviction")) await Effect.runPromise(eviction)
if (wanted("sweep")) {
  await Effect.runPromise(sweep(1_000_000, true))
  await Effect.runPromise(sweep(500_000, false))
}
if (wanted("overrides")) await Effect.runPromise(overrides)
