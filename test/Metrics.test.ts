/**
 * Metrics: every count of a limiter is published in Effect's metric registry
 * under `limiter=<name>`, read when the registry is read (an exporter sees
 * what `stats` says at that instant), counters as monotonic sums, and only
 * while the limiter's scope is open.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Metric, Scope } from "effect"
import { TestClock } from "effect/testing"
import { MemoryStore, Policy, RateLimiter, Store } from "../src/index.ts"

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

// Every metric of the limiter named `limiter`, as an exporter reads them:
// "id{attribute=value,...}" -> its state.
const metricsOf = (limiter: string) =>
  Effect.map(Metric.snapshot, (all) => {
    const found: Record<string, unknown> = {}
    for (const s of all) {
      if (s.attributes?.limiter !== limiter) continue
      const rest = Object.entries(s.attributes).filter(([k]) => k !== "limiter").map(([k, v]) => `${k}=${v}`)
      found[`${s.id}{${rest.join(",")}}`] = s.state
    }
    return found
  })

const counter = (count: number) => ({ count, incremental: true })
const gauge = (value: number) => ({ value })

describe("metrics", () => {
  it.effect("each count is published under the limiter's name, as stats says it at that instant", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const limiter = yield* RateLimiter.make({
        name: "metered",
        fastPath: false,
        maxBuckets: 3,
        idleTimeout: "10 seconds",
        policy: (key) =>
          Policy.tokenBucket({
            capacity: 2,
            refill: { tokens: 1, per: "1 second" },
            ...(key === "dry" ? { dryRun: true } : {})
          })
      }).pipe(Scope.provide(scope))
      // 3 allowed, 2 denied ("a" out; the dry run's refusal, let through but counted)
      assert.isTrue(yield* limiter.acquire("a", { cost: 2 }))
      assert.isFalse(yield* limiter.acquire("a"))
      assert.isTrue(yield* limiter.acquire("dry", { cost: 2 }))
      assert.isTrue(yield* limiter.acquire("dry"))
      assert.isTrue(yield* limiter.acquire("b"))
      // a waiter on "a", and a fourth key refused (three buckets, none full again)
      const waiter = yield* Effect.forkChild(limiter.wait("a"))
      yield* settle
      assert.strictEqual((yield* Effect.flip(limiter.acquire("c")))._tag, "Overloaded")
      const stats = yield* limiter.stats
      assert.deepInclude(stats, { allowed: 3, denied: 2, dryRun: 1, overloaded: 1, started: 3, waiting: 1 })
      assert.deepStrictEqual(yield* metricsOf("metered"), {
        "tollgate_decisions_total{outcome=allowed}": counter(stats.allowed),
        "tollgate_decisions_total{outcome=denied}": counter(stats.denied),
        "tollgate_dry_run_total{}": counter(stats.dryRun),
        "tollgate_overloaded_total{}": counter(stats.overloaded),
        "tollgate_bucket_events_total{event=started}": counter(stats.started),
        "tollgate_bucket_events_total{event=reaped}": counter(0),
        "tollgate_buckets{}": gauge(stats.buckets),
        "tollgate_actors{}": gauge(stats.actors),
        "tollgate_mailbox_depth{}": gauge(stats.queued),
        "tollgate_waiting{}": gauge(1)
      })
      // the waiter admitted, every key idle past idleTimeout: reaped, and the registry says so when read
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(waiter)
      yield* TestClock.adjust("20 seconds")
      yield* settle
      const later = yield* limiter.stats
      assert.strictEqual(later.reaped, 3)
      assert.deepInclude(yield* metricsOf("metered"), {
        "tollgate_decisions_total{outcome=allowed}": counter(4),
        "tollgate_bucket_events_total{event=reaped}": counter(3),
        "tollgate_buckets{}": gauge(0),
        "tollgate_actors{}": gauge(later.actors),
        "tollgate_waiting{}": gauge(0)
      })
      // the scope closed: the limiter's metrics leave the registry
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(yield* metricsOf("metered"), {})
    }))

  it.effect("a limiter on a store also publishes the store's calls, its failures and the fallback's decisions", () =>
    Effect.gen(function*() {
      const inner = yield* MemoryStore.make
      const control = { down: false }
      const store: Store.Store = {
        name: "flaky",
        apply: (call) =>
          Effect.suspend(() =>
            control.down
              ? Effect.fail(new Store.StoreUnavailable({ store: "flaky", reason: "down" }))
              : inner.apply(call)
          )
      }
      const limiter = yield* RateLimiter.make({
        name: "stored",
        policy: Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } }),
        fallback: { mode: "local", share: 0.5, timeout: "100 millis", retryAfter: "1 second" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      assert.isTrue(yield* limiter.acquire("k"))
      assert.isTrue(yield* limiter.acquire("k"))
      control.down = true
      assert.isTrue((yield* limiter.consume("k")).degraded === true)
      assert.isTrue((yield* limiter.consume("k")).degraded === true)
      const stats = yield* limiter.stats
      assert.isAbove(stats.storeCalls, 0)
      assert.strictEqual(stats.storeFailures, 1)
      assert.strictEqual(stats.degraded, 2)
      assert.deepInclude(yield* metricsOf("stored"), {
        "tollgate_store_calls_total{}": counter(stats.storeCalls),
        "tollgate_store_failures_total{}": counter(1),
        "tollgate_degraded_total{}": counter(2)
      })
    }))

  it.effect("a limiter in process publishes no store metrics", () =>
    Effect.gen(function*() {
      yield* RateLimiter.make({
        name: "local",
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } })
      })
      const names = Object.keys(yield* metricsOf("local"))
      assert.isNotEmpty(names)
      for (const name of names) assert.notMatch(name, /store|degraded/)
    }))
})
