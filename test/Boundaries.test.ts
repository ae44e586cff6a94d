/**
 * Boundaries that mutation testing found unguarded (docs/reliability.md,
 * "Mutation testing"): each test here failed against one changed comparison
 * or one skipped rule in the core, and passes on the code as it is. They go
 * through the public API only (the limiter, its stats, a Store, the
 * headers), so they hold whatever the internals become.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { RateLimitHeaders } from "../src/http/index.ts"
import { MemoryStore, Policy, RateLimiter, Store } from "../src/index.ts"

// Lets forked fibers and bucket actors run until they park.
const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

const perSecond = (capacity: number, tokens: number) =>
  Policy.tokenBucket({ capacity, refill: { tokens, per: "1 second" } })

const millis = (d: Duration.Duration) => Duration.toMillis(d)

// The limiter in process (fast path on and off) and on a store, where a test
// means all three.
const makers: ReadonlyArray<
  readonly [string, (options: RateLimiter.Options) => Effect.Effect<RateLimiter["Service"], unknown, any>]
> = [
  ["fast path", (options) => RateLimiter.make({ fastPath: true, ...options })],
  ["actor only", (options) => RateLimiter.make({ fastPath: false, ...options })],
  [
    "MemoryStore",
    (options) =>
      Effect.flatMap(
        MemoryStore.make,
        (store) => RateLimiter.make(options).pipe(Effect.provideService(Store.CurrentStore, store))
      )
  ]
]

// A store that is down and says so at once (a refused connection).
const down: Store.Store = {
  name: "down",
  apply: () => Effect.fail(new Store.StoreUnavailable({ store: "down", reason: "connection refused" })),
  applyAll: () => Effect.fail(new Store.StoreUnavailable({ store: "down", reason: "connection refused" }))
}

describe("a waiter's maxWait is inclusive", () => {
  for (const [name, make] of makers) {
    it.effect(`a turn exactly maxWait away is waited for, a millisecond more is refused (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        // the next token is 1000 ms away
        const late = yield* Effect.exit(limiter.wait("k", { maxWait: "999 millis" }))
        assert.isTrue(Exit.isFailure(late) && late.cause.reasons.some((r) => r._tag === "Fail"))
        const exact = yield* Effect.forkChild(
          Effect.andThen(limiter.wait("k", { maxWait: "1 second" }), Clock.currentTimeMillis)
        )
        yield* settle
        assert.isUndefined(exact.pollUnsafe())
        yield* TestClock.adjust("1 second")
        assert.strictEqual(yield* Fiber.join(exact), 1000)
      }))
  }
})

describe("tenants with equal stamps keep their order of arrival", () => {
  for (const [name, make] of makers.slice(0, 2)) {
    it.effect(`three tenants new to the line are served as they came (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        const log: Array<string> = []
        // Each tenant is new, so each is stamped with the line's current
        // virtual time: the stamps tie, and arrival decides.
        for (const tenant of ["a", "b", "c"]) {
          yield* Effect.forkChild(
            Effect.andThen(limiter.wait("k", { tenant }), Effect.sync(() => log.push(tenant)))
          )
          yield* settle
        }
        for (let i = 0; i < 3; i++) {
          yield* TestClock.adjust("1 second")
          yield* settle
        }
        assert.deepStrictEqual(log, ["a", "b", "c"])
      }))
  }
})

describe("reaping waits exactly idleTimeout", () => {
  for (const [name, make] of makers.slice(0, 2)) {
    it.effect(`a full bucket is kept until idleTimeout has passed, and reaped at that moment (${name})`, () =>
      Effect.gen(function*() {
        // Full again 1 s after its last use, idle after 4 s; the sweep runs every 2 s.
        const limiter = yield* make({ policy: perSecond(2, 2), idleTimeout: "4 seconds" })
        assert.isTrue(yield* limiter.acquire("k"))
        assert.strictEqual((yield* limiter.stats).buckets, 1)
        // t = 2 s: the sweep finds it full (safe to forget) but used 2 s ago: kept
        yield* TestClock.adjust("2 seconds")
        yield* settle
        assert.strictEqual((yield* limiter.stats).buckets, 1)
        assert.strictEqual((yield* limiter.stats).reaped, 0)
        // t = 4 s: idle for exactly idleTimeout: reaped by this sweep, not the next
        yield* TestClock.adjust("2 seconds")
        yield* settle
        const stats = yield* limiter.stats
        assert.strictEqual(stats.buckets, 0)
        assert.strictEqual(stats.reaped, 1)
      }))
  }
})

describe("maxBuckets bounds calls over several keys too", () => {
  for (const [name, make] of makers.slice(0, 2)) {
    it.effect(`a call over new keys with the table full of busy buckets is Overloaded (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(5, 1), maxBuckets: 2 })
        // two buckets that are not full: neither may be forgotten to make room
        assert.isTrue(yield* limiter.acquire("a"))
        assert.isTrue(yield* limiter.acquire("b"))
        const error = yield* Effect.flip(limiter.acquire(["c", "d"]))
        assert.strictEqual(error._tag, "Overloaded")
        assert.strictEqual(error._tag === "Overloaded" && error.reason, "buckets")
        assert.strictEqual((yield* limiter.stats).buckets, 2)
        // once one of them is full again, it makes room
        yield* TestClock.adjust("1 second")
        assert.isTrue(yield* limiter.acquire(["a", "c"]))
      }))
  }
})

describe("fallback deny with the store down", () => {
  it.effect("a denial carries the configured retryAfter and nothing remaining", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: perSecond(10, 1),
        fallback: { mode: "deny", retryAfter: "3 seconds" }
      }).pipe(Effect.provideService(Store.CurrentStore, down))
      const d = yield* limiter.consume("k")
      assert.isFalse(d.allowed)
      assert.isTrue(d.degraded)
      assert.strictEqual(d.remaining, 0)
      assert.strictEqual(millis(d.retryAfter), 3000)
      assert.strictEqual(d.limit, 10)
      // and within that time the store is not asked again: still denied, same answer
      const again = yield* limiter.consume("k")
      assert.isFalse(again.allowed)
      assert.isAbove(millis(again.retryAfter), 0)
    }))

  it.effect("a call over several keys is denied, each key's figures with the configured retryAfter", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: perSecond(10, 1),
        fallback: { mode: "deny", retryAfter: "2 seconds" }
      }).pipe(Effect.provideService(Store.CurrentStore, down))
      assert.isFalse(yield* limiter.acquire(["a", "b"]))
      const d = yield* limiter.consume(["a", "b"])
      assert.isFalse(d.allowed)
      assert.strictEqual(millis(d.retryAfter), 2000)
      assert.strictEqual(d.remaining, 0)
      const stats = yield* limiter.stats
      assert.strictEqual(stats.allowed, 0)
      assert.isAtLeast(stats.denied, 2)
    }))

  it.effect("fallback allow over several keys admits, with the full limit remaining", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: perSecond(10, 1),
        fallback: { mode: "allow" }
      }).pipe(Effect.provideService(Store.CurrentStore, down))
      const d = yield* limiter.consume(["a", "b"])
      assert.isTrue(d.allowed)
      assert.strictEqual(d.remaining, 10)
      assert.strictEqual(millis(d.retryAfter), 0)
    }))
})

describe("Retry-After", () => {
  it("is never 0, so a client never retries at once: a denial due now says 1", () => {
    const quota = { name: "api", limit: 10, windowSeconds: 10 }
    const denied = (retryAfter: Duration.Duration) =>
      RateLimitHeaders.make(quota, {
        allowed: false,
        remaining: 0,
        limit: 10,
        retryAfter,
        resetAfter: Duration.seconds(10)
      })["retry-after"]
    assert.strictEqual(denied(Duration.zero), "1")
    assert.strictEqual(denied(Duration.millis(1)), "1")
    assert.strictEqual(denied(Duration.millis(1000)), "1")
    assert.strictEqual(denied(Duration.millis(1001)), "2")
    assert.strictEqual(RateLimitHeaders.retryAfterValue(Duration.zero), "1")
    assert.strictEqual(RateLimitHeaders.retryAfterValue(Duration.millis(-5)), "1")
  })
})

describe("setRate on a smooth policy carries its stored permits (Guava's setRate)", () => {
  for (const [name, make] of makers) {
    it.effect(`stored permits scale with the rate: 4 stored at 4/s are 12 at 12/s (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.smooth({ permits: 4, per: "1 second" }) })
        assert.isTrue(yield* limiter.acquire("k"))
        // idle long enough to store a full second's worth: 4 permits
        yield* TestClock.adjust("10 seconds")
        // 4 stored, and the next permit is free: 5 may go now
        assert.strictEqual((yield* limiter.peek("k")).remaining, 5)
        yield* limiter.setRate("k", 12)
        // Guava: storedPermits * newMax / oldMax = 4 * 12 / 4 = 12, and the free one
        assert.strictEqual((yield* limiter.peek("k")).remaining, 13)
        const d = yield* limiter.consume("k")
        assert.isTrue(d.allowed)
        assert.strictEqual(d.remaining, 12)
      }))
  }
})
