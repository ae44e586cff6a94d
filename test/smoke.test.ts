import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../src/index.ts"

describe("smoke", () => {
  it.effect("basic", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } })
      })
      assert.isTrue(yield* limiter.acquire("k"))
      assert.isTrue(yield* limiter.acquire("k"))
      assert.isFalse(yield* limiter.acquire("k"))
      const d = yield* limiter.consume("k")
      console.log(d)
      yield* TestClock.adjust("1 second")
      assert.isTrue(yield* limiter.acquire("k"))
      const f = yield* limiter.wait("k").pipe(Effect.forkChild)
      yield* TestClock.adjust("500 millis")
      assert.isUndefined(f.pollUnsafe())
      yield* TestClock.adjust("500 millis")
      yield* Fiber.join(f)
      const results = yield* Effect.forEach(Array.from({ length: 1000 }, (_, i) => i), () => limiter.acquire("x"), { concurrency: "unbounded" })
      assert.strictEqual(results.filter(Boolean).length, 2)
      console.log(yield* limiter.stats)
      yield* Effect.yieldNow
      console.log(yield* limiter.stats)
    }))
})
