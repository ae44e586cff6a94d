import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Latch, Ref } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../src/index.ts"
import { onStore } from "./stores.ts"

const perSecond = (capacity: number, tokens: number) =>
  Policy.tokenBucket({ capacity, refill: { tokens, per: "1 second" } })

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

const variants = [
  ["fastPath: true", (options: RateLimiter.Options) => RateLimiter.make({ fastPath: true, ...options })],
  ["fastPath: false", (options: RateLimiter.Options) => RateLimiter.make({ fastPath: false, ...options })],
  ["on a store", onStore]
] as const

// Reservations, in process and on a store.
for (const [name, make] of variants) {
  describe(`reserve (${name})`, () => {
    it.effect("says when to act, and later reservations stand behind it", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(2, 1) })
        const a = yield* limiter.reserve("k", { cost: 2 })
        assert.strictEqual(Duration.toMillis(a.delay), 0)
        const b = yield* limiter.reserve("k")
        assert.strictEqual(Duration.toMillis(b.delay), 1000)
        const c = yield* limiter.reserve("k", { cost: 2 })
        assert.strictEqual(Duration.toMillis(c.delay), 3000)
        // nobody jumps the line of reservations
        assert.isFalse(yield* limiter.acquire("k"))
      }))

    it.effect("cancel gives the place back exactly and those behind move up", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(2, 1) })
        yield* limiter.reserve("k", { cost: 2 })
        const b = yield* limiter.reserve("k", { cost: 2 })
        assert.strictEqual(Duration.toMillis(b.delay), 2000)
        const waiter = yield* limiter.wait("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        yield* b.cancel
        yield* settle
        // without b, the waiter needs one token: one second
        yield* TestClock.adjust("999 millis")
        assert.isUndefined(waiter.pollUnsafe(), "admitted before its token")
        yield* TestClock.adjust("1 millis")
        const admitted = waiter.pollUnsafe()
        assert.isTrue(admitted !== undefined && Exit.isSuccess(admitted), "admitted at one second")
        yield* TestClock.adjust("1 second")
        assert.isTrue(yield* limiter.acquire("k"))
        assert.isFalse(yield* limiter.acquire("k"))
      }))

    it.effect("past maxWait fails at once", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(2, 1) })
        yield* limiter.reserve("k", { cost: 2 })
        const error = yield* Effect.flip(limiter.reserve("k", { cost: 2, maxWait: "1 second" }))
        assert.strictEqual(error._tag, "RateLimitExceeded")
      }))
  })
}

for (const fastPath of [true, false]) {
  const make = (options: RateLimiter.Options) => RateLimiter.make({ fastPath, ...options })
  describe(`fastPath: ${fastPath}`, () => {
    describe("limit", () => {
      it.effect("runs the effect once admitted, in arrival order", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(1, 1) })
          const log = yield* Ref.make<Array<number>>([])
          const run = (i: number) => limiter.limit("k")(Ref.update(log, (l) => [...l, i]))
          const fibers = yield* Effect.forEach([0, 1, 2], (i) =>
            run(i).pipe(Effect.forkChild({ startImmediately: true })))
          yield* settle
          assert.deepStrictEqual(yield* Ref.get(log), [0])
          yield* TestClock.adjust("2 seconds")
          yield* Fiber.joinAll(fibers)
          assert.deepStrictEqual(yield* Ref.get(log), [0, 1, 2])
        }))
    })

    describe("release and withPermit", () => {
      it.effect("release gives tokens back, never above capacity", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(5, 1) })
          assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
          yield* limiter.release("k", 2)
          assert.strictEqual((yield* limiter.peek("k")).remaining, 2)
          yield* limiter.release("k", 100)
          assert.strictEqual((yield* limiter.peek("k")).remaining, 5)
          const error = yield* Effect.flip(limiter.release("k", -1))
          assert.strictEqual(error._tag === "InvalidRequest" && error.field, "amount")
        }))

      it.effect("release on a key never used counts from its initial tokens, as on a key already used", () =>
        Effect.gen(function*() {
          const empty = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 hour" }, initialTokens: 0 })
          const limiter = yield* make({ policy: empty })
          // a fresh key starts empty: a release of 10 fills it
          yield* limiter.release("fresh", 10)
          assert.strictEqual((yield* limiter.peek("fresh")).remaining, 10)
          assert.isTrue(yield* limiter.acquire("fresh", { cost: 10 }))
          // the same release after a denied acquire (the key's bucket started by it)
          assert.isFalse(yield* limiter.acquire("used"))
          yield* limiter.release("used", 10)
          assert.strictEqual((yield* limiter.peek("used")).remaining, 10)
          // a key that starts full has nothing to take back: no bucket is started for it
          const full = yield* make({ policy: perSecond(5, 1) })
          yield* full.release("new", 3)
          assert.strictEqual((yield* full.peek("new")).remaining, 5)
          assert.strictEqual((yield* full.stats).buckets, 0)
        }))

      it.effect("withPermit holds units while the effect runs and returns them on success, failure and interruption", () =>
        Effect.gen(function*() {
          // a slow refill: units come back through release
          const limiter = yield* make({
            policy: Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 day" } })
          })
          const guarded = limiter.withPermit("k")
          assert.strictEqual(yield* guarded(Effect.succeed(1)), 1)
          assert.strictEqual((yield* limiter.peek("k")).remaining, 2)
          const failed = yield* Effect.exit(guarded(Effect.fail("boom")))
          assert.isTrue(Exit.isFailure(failed))
          assert.strictEqual((yield* limiter.peek("k")).remaining, 2)
          const sleeper = yield* guarded(Effect.never).pipe(Effect.forkChild({ startImmediately: true }))
          yield* settle
          assert.strictEqual((yield* limiter.peek("k")).remaining, 1)
          yield* Fiber.interrupt(sleeper)
          assert.strictEqual((yield* limiter.peek("k")).remaining, 2)
        }))

      it.effect("withPermit waits in line when the permits are out", () =>
        Effect.gen(function*() {
          const limiter = yield* make({
            policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 day" } })
          })
          const gate = yield* Latch.make()
          const first = yield* limiter.withPermit("k")(gate.await).pipe(Effect.forkChild({ startImmediately: true }))
          yield* settle
          const second = yield* limiter.withPermit("k")(Effect.succeed("second")).pipe(
            Effect.forkChild({ startImmediately: true })
          )
          yield* settle
          assert.isUndefined(second.pollUnsafe())
          yield* gate.open
          yield* Fiber.join(first)
          assert.strictEqual(yield* Fiber.join(second), "second")
          assert.strictEqual((yield* limiter.peek("k")).remaining, 1)
        }))
    })

    describe("reconfigure", () => {
      it.effect("carries tokens over as-is, proportionally, or resets", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(10, 1) })
          for (const key of ["a", "p", "r"]) assert.isTrue(yield* limiter.acquire(key, { cost: 6 }))
          yield* limiter.reconfigure("a", perSecond(100, 10), { carry: "as-is" })
          yield* limiter.reconfigure("p", perSecond(100, 10), { carry: "proportional" })
          yield* limiter.reconfigure("r", perSecond(100, 10), { carry: "reset" })
          assert.strictEqual((yield* limiter.peek("a")).remaining, 4)
          assert.strictEqual((yield* limiter.peek("p")).remaining, 40)
          assert.strictEqual((yield* limiter.peek("r")).remaining, 100)
          assert.strictEqual((yield* limiter.peek("a")).limit, 100)
          // the new rate applies from now on
          yield* TestClock.adjust("1 second")
          assert.strictEqual((yield* limiter.peek("a")).remaining, 14)
        }))

      it.effect("other algorithms carry the units available (as-is, proportional), and held permits stay out", () =>
        Effect.gen(function*() {
          const window = (limit: number) => Policy.fixedWindow({ limit, window: "1 minute" })
          const limiter = yield* make({ policy: window(10) })
          for (const key of ["a", "p", "r"]) assert.isTrue(yield* limiter.acquire(key, { cost: 6 }))
          yield* limiter.reconfigure("a", window(100), { carry: "as-is" })
          yield* limiter.reconfigure("p", window(100), { carry: "proportional" })
          yield* limiter.reconfigure("r", window(100), { carry: "reset" })
          assert.strictEqual((yield* limiter.peek("a")).remaining, 4)
          assert.strictEqual((yield* limiter.peek("p")).remaining, 40)
          assert.strictEqual((yield* limiter.peek("r")).remaining, 100)
          // a concurrency limit: two permits out stay out under the new capacity
          const permits = yield* make({ policy: Policy.concurrency({ capacity: 3 }) })
          assert.isTrue(yield* permits.acquire("k", { cost: 2 }))
          yield* permits.reconfigure("k", Policy.concurrency({ capacity: 5 }))
          assert.strictEqual((yield* permits.peek("k")).remaining, 3)
          yield* permits.release("k", 2)
          assert.strictEqual((yield* permits.peek("k")).remaining, 5)
        }))

      it.effect("as-is never keeps more than the new capacity", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(10, 1) })
          yield* limiter.acquire("k")
          yield* limiter.reconfigure("k", perSecond(3, 1))
          assert.strictEqual((yield* limiter.peek("k")).remaining, 3)
        }))

      it.effect("as-is never keeps more than the new limit, on other algorithms either", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: Policy.fixedWindow({ limit: 10, window: "1 minute" }) })
          assert.isTrue(yield* limiter.acquire("k"))
          yield* limiter.reconfigure("k", Policy.fixedWindow({ limit: 3, window: "1 minute" }), { carry: "as-is" })
          assert.strictEqual((yield* limiter.peek("k")).remaining, 3)
          assert.isTrue(yield* limiter.acquire("k", { cost: 3 }))
          assert.isFalse(yield* limiter.acquire("k"))
        }))

      it.effect("units out under a concurrency limit count as in use only between concurrency limits", () =>
        Effect.gen(function*() {
          const window = (limit: number) => Policy.fixedWindow({ limit, window: "1 minute" })
          const permits = (capacity: number) => Policy.concurrency({ capacity })
          const limiter = yield* make({ policy: (key) => key.startsWith("w") ? window(10) : permits(4) })
          // a window with 4 of 10 left, as-is: 4 permits of 5 (not 5 - (10 - 4))
          assert.isTrue(yield* limiter.acquire("w", { cost: 6 }))
          yield* limiter.reconfigure("w", permits(5), { carry: "as-is" })
          assert.strictEqual((yield* limiter.peek("w")).remaining, 4)
          // 2 of 4 permits out, as-is to a window of 10: the 2 left (not 10 - 2)
          assert.isTrue(yield* limiter.acquire("c", { cost: 2 }))
          yield* limiter.reconfigure("c", window(10), { carry: "as-is" })
          assert.strictEqual((yield* limiter.peek("c")).remaining, 2)
          // 2 of 4 out, proportionally to 8 permits: half of them, 4 (not 8 - 2)
          assert.isTrue(yield* limiter.acquire("p", { cost: 2 }))
          yield* limiter.reconfigure("p", permits(8), { carry: "proportional" })
          assert.strictEqual((yield* limiter.peek("p")).remaining, 4)
        }))

      it.effect("waiters in line are re-timed against the new rate", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(2, 1) })
          assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
          const waiter = yield* limiter.wait("k", { cost: 2 }).pipe(Effect.forkChild({ startImmediately: true }))
          yield* settle
          // at 1 token per second it would take 2 seconds; at 10 per second, 200 ms
          yield* limiter.reconfigure("k", perSecond(2, 10))
          yield* settle
          yield* TestClock.adjust("199 millis")
          assert.isUndefined(waiter.pollUnsafe(), "admitted before its turn at the new rate")
          yield* TestClock.adjust("1 millis")
          const admitted = waiter.pollUnsafe()
          assert.isTrue(admitted !== undefined && Exit.isSuccess(admitted), "admitted at 200 ms")
        }))

      it.effect("a waiter that can never be admitted under the new policy is told at once", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(5, 1) })
          assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
          const waiter = yield* Effect.flip(limiter.wait("k", { cost: 4 })).pipe(
            Effect.forkChild({ startImmediately: true })
          )
          yield* settle
          yield* limiter.reconfigure("k", perSecond(2, 1))
          const error = yield* Fiber.join(waiter)
          assert.strictEqual(error._tag === "InvalidRequest" && error.field, "cost")
          assert.strictEqual(error.message, "invalid request: cost = 4: exceeds the new limit 2: it can never succeed")
        }))

      it.effect("a reconfigured key keeps its policy across a reap, and bad policies are refused", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(5, 1), idleTimeout: "1 second" })
          yield* limiter.reconfigure("k", perSecond(50, 1))
          // the key used under its new policy: a bucket, then reaped once settled and idle
          assert.isTrue(yield* limiter.acquire("k", { cost: 20 }))
          yield* TestClock.adjust("1 minute")
          const stats = yield* limiter.stats
          assert.strictEqual(stats.reaped, 1, "the key's bucket was reaped")
          assert.strictEqual((yield* limiter.peek("k")).limit, 50)
          const error = yield* Effect.flip(
            limiter.reconfigure("k", Policy.tokenBucket({ capacity: 0, refill: { tokens: 1, per: "1 second" } }))
          )
          assert.strictEqual(error._tag === "InvalidPolicy" && error.field, "capacity")
        }))
    })
  })
}
