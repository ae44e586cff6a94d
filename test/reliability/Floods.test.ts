/**
 * Floods of keys: what one more key costs must not grow with how many came
 * before it. Each test counts work (walks of the key table started from its
 * front, buckets looked at, buckets reaped between two yields), never time.
 *
 * - Eviction at `maxBuckets`: a new key takes the place of a settled bucket.
 *   A walk of a `Map` from its front passes every slot its deletions left
 *   there, so starting one per new key makes each new key dearer than the
 *   last; and a `Map` iterator kept between evictions pins every table the
 *   `Map` grew or shrank out of (a flood kept its memory after every bucket
 *   was reaped). A cursor goes round the buckets' activity slots instead, and
 *   the `Map` is never walked.
 * - Reconfigured keys keep their policy across reaps: at most `maxBuckets`
 *   of them, whatever the number of distinct keys reconfigured.
 * - The sweep does a bounded slice of work between two yields, so other
 *   fibers (and the event loop) run while it goes round a large table; a
 *   slice is bounded by what it sets off (a reap, an actor's fiber ended),
 *   not only by the buckets it looks at.
 * - A flood past the cap, then every bucket reaped: the heap is back where
 *   the same flood without a cap leaves it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { Policy, RateLimiter } from "../../src/index.ts"
import * as Request from "../../src/internal/actor/Request.ts"
import * as Supervisor from "../../src/internal/supervisor/Supervisor.ts"

// The heap after two full collections (gc exposed here, not by a flag of the run).
let gc: (() => void) | undefined
const heap = (): number => {
  if (gc === undefined) {
    v8.setFlagsFromString("--expose-gc")
    gc = vm.runInNewContext("gc") as () => void
  }
  gc()
  gc()
  return process.memoryUsage().heapUsed
}

// Bursts of 100, 10 per second: a bucket that took one token is settled
// (full again) 100 ms later.
const policy = Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } }) as Policy.Valid

// Counts, on one Map only, the walks started (entries/values/keys/iterator)
// and the steps they take.
const countWalks = () => {
  const proto = Map.prototype as unknown as Record<string | symbol, (...args: Array<unknown>) => unknown>
  const names = ["entries", "values", "keys", Symbol.iterator] as const
  const originals = names.map((name) => proto[name])
  const originalSet = Map.prototype.set
  const counts = { table: undefined as Map<unknown, unknown> | undefined, walks: 0, steps: 0 }
  // The limiter's table is the map a bucket for "flood-0" is put in.
  Map.prototype.set = function(this: Map<unknown, unknown>, key: unknown, value: unknown) {
    if (key === "flood-0" && typeof value === "object" && counts.table === undefined) counts.table = this
    return originalSet.call(this, key, value)
  }
  names.forEach((name, i) => {
    proto[name] = function(this: Map<unknown, unknown>, ...args: Array<unknown>) {
      const iterator = originals[i].apply(this, args) as Iterator<unknown>
      if (this !== counts.table) return iterator
      counts.walks++
      const next = iterator.next.bind(iterator)
      return Object.assign(iterator, {
        next: () => {
          counts.steps++
          return next()
        }
      })
    }
  })
  const restore = () => {
    Map.prototype.set = originalSet
    names.forEach((name, i) => {
      proto[name] = originals[i]
    })
  }
  return { counts, restore }
}

describe("floods of keys", () => {
  it.effect("at maxBuckets, the work per new key does not grow with the number of evictions", () =>
    Effect.gen(function*() {
      const { counts, restore } = countWalks()
      yield* Effect.addFinalizer(() => Effect.sync(restore))
      const cap = 1000
      const supervisor = yield* Supervisor.make({
        policyFor: () => policy,
        limits: { mailboxCapacity: 16, maxWaiters: 16 },
        idleTimeoutMillis: 3_600_000, // no sweep during the test: only eviction makes room
        maxBuckets: cap
      })
      // counts the slots the eviction cursor looks at
      const owners = supervisor.limiter.activity.owners
      let looks = 0
      Object.defineProperty(supervisor.limiter.activity, "owners", {
        value: new Proxy(owners, {
          get: (target, property, receiver) => {
            if (typeof property === "string" && /^[0-9]+$/.test(property)) looks++
            return Reflect.get(target, property, receiver)
          }
        })
      })
      let next = 0
      const newKeys = (n: number) =>
        Effect.gen(function*() {
          for (let i = 0; i < n; i++) {
            // every new key is admitted: a settled bucket always makes room
            assert.isTrue(yield* supervisor.submit(`flood-${next++}`, Request.Kind.Acquire, 1, 0))
            // 100 new keys per second: every bucket is settled a second after its use
            if (next % 10 === 0) yield* TestClock.adjust("100 millis")
          }
        })
      yield* newKeys(cap)
      assert.isDefined(counts.table)
      yield* TestClock.adjust("1 second")
      // batches of new keys at the cap, each one evicting a bucket
      const batches: Array<{ walks: number; looks: number }> = []
      for (let batch = 0; batch < 8; batch++) {
        const before = { walks: counts.walks, looks }
        yield* newKeys(cap)
        batches.push({ walks: counts.walks - before.walks, looks: looks - before.looks })
      }
      const stats = yield* supervisor.stats
      assert.strictEqual(stats.buckets, cap)
      assert.strictEqual(stats.reaped, 8 * cap)
      for (const [i, b] of batches.entries()) {
        // the Map of keys is never walked (a kept iterator pins its old tables)
        assert.strictEqual(b.walks, 0, `batch ${i}: walks of the key table`)
        // the cursor looks at a few buckets per new key
        assert.isAtLeast(b.looks, cap, `batch ${i}: buckets looked at`)
        assert.isAtMost(b.looks, 3 * cap, `batch ${i}: buckets looked at`)
      }
      // nothing grows from batch to batch
      assert.isAtMost(batches[7].looks, batches[0].looks + cap / 10)
    }))

  it.effect("reconfigured keys are bounded by maxBuckets, across reaps", () =>
    Effect.gen(function*() {
      const other = Policy.tokenBucket({ capacity: 5, refill: { tokens: 5, per: "1 second" } })
      const limiter = yield* RateLimiter.make({ policy, maxBuckets: 100, idleTimeout: "1 second" })
      for (let i = 0; i < 100; i++) yield* limiter.reconfigure(`key-${i}`, other)
      // one more distinct key would be the 101st policy of its own
      const error = yield* Effect.flip(limiter.reconfigure("key-100", other))
      assert.strictEqual(error._tag, "Overloaded")
      assert.strictEqual(error._tag === "Overloaded" && error.reason, "buckets")
      // a key already reconfigured can be reconfigured again
      yield* limiter.reconfigure("key-7", Policy.tokenBucket({ capacity: 7, refill: { tokens: 7, per: "1 second" } }))
      // a key reconfigured back to its own policy gives its place up
      yield* limiter.reconfigure("key-3", policy)
      yield* limiter.reconfigure("key-100", other)
      assert.strictEqual((yield* limiter.peek("key-100")).limit, 5)
      assert.strictEqual((yield* limiter.peek("key-3")).limit, 100)
      // some of them used: buckets, under their own policies
      for (let i = 0; i < 100; i += 10) assert.isTrue(yield* limiter.acquire(`key-${i}`))
      assert.strictEqual((yield* limiter.stats).buckets, 10)
      // every bucket reaped: the overrides stay, and stay bounded
      yield* TestClock.adjust("1 minute")
      const stats = yield* limiter.stats
      assert.strictEqual(stats.reaped, 10)
      assert.strictEqual(stats.buckets, 0)
      assert.strictEqual(stats.overrides, 100)
      assert.strictEqual((yield* limiter.peek("key-42")).limit, 5)
    }))

  // What one slice of the sweep may do (Supervisor.ts): looking costs 1, a
  // reap 10. An idle bucket has no fiber to end, also without the fast path.
  for (const fastPath of [true, false]) {
    it.effect(`the sweep does a bounded slice of work between two yields (fastPath: ${fastPath})`, () =>
      Effect.gen(function*() {
        const keys = 600
        const slice = 500
        const supervisor = yield* Supervisor.make({
          policyFor: () => policy,
          limits: { mailboxCapacity: 16, maxWaiters: 16 },
          idleTimeoutMillis: 1000,
          sweepSlice: slice,
          fastPath
        })
        // used at 1 ms: the sweeps at 500 and 1000 ms find nothing idle, one
        // started at 1001 ms finds every bucket idle
        yield* TestClock.adjust("1 millis")
        for (let i = 0; i < keys; i++) yield* supervisor.submit(`flood-${i}`, Request.Kind.Acquire, 1, 0)
        yield* TestClock.adjust("1000 millis")
        const before = yield* supervisor.stats
        assert.strictEqual(before.reaped, 0)
        // without the fast path every bucket had an actor; each hibernated once it had answered
        assert.strictEqual(before.actors, 0)
        const sweeping = yield* Effect.forkChild(supervisor.sweep)
        const seen: Array<number> = []
        for (let step = 0; step < 10 * keys; step++) {
          const { reaped } = yield* supervisor.stats
          if (seen.length === 0 || reaped !== seen[seen.length - 1]) seen.push(reaped)
          if (reaped === keys) break
          yield* Effect.yieldNow
        }
        assert.strictEqual(yield* Fiber.join(sweeping), keys)
        assert.strictEqual(seen[seen.length - 1], keys, "every bucket is reaped")
        const steps = seen.slice(1).map((reaped, i) => reaped - seen[i])
        const most = Math.max(seen[0], ...steps)
        const perReap = 11 // the look and the reap
        assert.isAtMost(most, Math.ceil(slice / perReap), `reaped between two yields: ${seen.join(", ")}`)
        assert.isAtLeast(most, Math.floor(slice / perReap), `reaped between two yields: ${seen.join(", ")}`)
        assert.strictEqual((yield* supervisor.stats).actors, 0)
      }))
  }

  it.live(
    "a flood past the cap, every bucket reaped: the heap is back where the flood without a cap leaves it",
    () =>
      Effect.gen(function*() {
        const keys = 200_000
        const flood = (maxBuckets: number | undefined) =>
          Effect.gen(function*() {
            const before = heap()
            const limiter = yield* RateLimiter.make({
              policy,
              idleTimeout: "1 minute",
              ...(maxBuckets === undefined ? {} : { maxBuckets })
            })
            for (let i = 0; i < keys; i++) {
              assert.isTrue(yield* limiter.acquire(`flood:${i}`))
              // every bucket is settled a second after its use: room at the cap
              if (i % 10_000 === 9_999) yield* TestClock.adjust("1 second")
            }
            yield* TestClock.adjust("2 minutes")
            while ((yield* limiter.stats).buckets > 0) yield* TestClock.adjust("1 minute")
            if (maxBuckets !== undefined) assert.isAbove((yield* limiter.stats).reaped, keys - maxBuckets)
            return heap() - before
          }).pipe(Effect.scoped, Effect.provide(TestClock.layer()))
        const uncapped = yield* flood(undefined)
        const capped = yield* flood(keys / 10)
        const again = yield* flood(undefined)
        const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`
        // within 10 % of the run without a cap (and 1 MB for the collector's noise)
        assert.isAtMost(
          capped,
          1.1 * Math.max(uncapped, again) + 1e6,
          `kept after the flood: ${mb(capped)} at the cap, ${mb(uncapped)} and ${mb(again)} without`
        )
      }),
    120_000
  )
})

describe("setRate keeps nothing for ever", () => {
  const smooth = Policy.tokenBucket({ capacity: 10, refill: { tokens: 10, per: "1 second" } })

  it.effect("a key set back to its rate, or deleted, gives its place up; deleting it brings back the limiter's policy", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: smooth })
      yield* limiter.setRate("a", 2)
      yield* limiter.setRate("b", 2)
      yield* limiter.setRate("c", 5)
      assert.strictEqual((yield* limiter.stats).overrides, 3)
      // back to the policy's own rate: the key holds the limiter's policy again
      yield* limiter.setRate("a", 5)
      yield* limiter.setRate("a", 10)
      assert.strictEqual((yield* limiter.stats).overrides, 2)
      // deleted: forgotten, rate and all
      assert.isTrue(yield* limiter.consume("b", { cost: 10 }).pipe(Effect.map((d) => d.allowed)))
      yield* limiter.delete("b")
      assert.strictEqual((yield* limiter.stats).overrides, 1)
      yield* limiter.consume("b", { cost: 10 })
      yield* TestClock.adjust("500 millis")
      // refilled at the limiter's 10 per second, not at 2
      assert.strictEqual((yield* limiter.peek("b")).remaining, 5)
      // a reconfigured key is forgotten by delete too
      yield* limiter.reconfigure("d", Policy.fixedWindow({ limit: 3, window: "1 minute" }))
      assert.strictEqual((yield* limiter.peek("d")).limit, 3)
      yield* limiter.delete("d")
      assert.strictEqual((yield* limiter.peek("d")).limit, 10)
      assert.strictEqual((yield* limiter.stats).overrides, 1)
    }))

  it.live("200,000 keys set to a rate and then deleted: the heap is back within 10 %", () =>
    Effect.gen(function*() {
      const keys = 200_000
      const limiter = yield* RateLimiter.make({ policy: smooth, idleTimeout: "1 minute" })
      const before = heap()
      for (let i = 0; i < keys; i++) yield* limiter.acquire(`k:${i}`)
      const started = heap()
      for (let i = 0; i < keys; i++) yield* limiter.setRate(`k:${i}`, 1 + (i % 3))
      const set = heap()
      assert.strictEqual((yield* limiter.stats).overrides, keys)
      for (let i = 0; i < keys; i++) yield* limiter.delete(`k:${i}`)
      const after = heap()
      assert.strictEqual((yield* limiter.stats).overrides, 0)
      assert.strictEqual((yield* limiter.stats).buckets, 0)
      const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`
      const figures = `heap ${mb(before)} before, ${mb(started)} with the keys, ${mb(set)} set, ${mb(after)} deleted`
      // three rates, three policies: a key's rate costs it about a Map entry
      assert.isBelow((set - started) / keys, 200, `per key set to a rate: ${(set - started) / keys} B; ${figures}`)
      // every key deleted: back within 10 % of where the heap was before them
      assert.isAtMost(after, before * 1.1, figures)
    }).pipe(Effect.scoped, Effect.provide(TestClock.layer())), 120_000)
})
