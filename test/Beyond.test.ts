/**
 * The operations beyond a plain decision (docs/algorithms.md, "Beyond the
 * limit"), through the limiter's API: in-process (the caller-side fast path
 * on and off) and on a shared store (MemoryStore; test/redis/Beyond.test.ts
 * runs the same on a real Redis).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import { TestClock } from "effect/testing"
import { MemoryStore, Policy, RateLimiter, Store } from "../src/index.ts"
import { beyond } from "./beyond.ts"

const modes: ReadonlyArray<
  [string, (options: RateLimiter.Options) => Effect.Effect<RateLimiter["Service"], unknown, any>]
> = [
  ["in-process, fast path", (options) => RateLimiter.make({ fastPath: true, ...options })],
  ["in-process, actor only", (options) => RateLimiter.make({ fastPath: false, ...options })],
  [
    "MemoryStore",
    (options) =>
      Effect.flatMap(
        MemoryStore.make,
        (store) => RateLimiter.make(options).pipe(Effect.provideService(Store.CurrentStore, store))
      )
  ]
]

for (const [name, make] of modes) {
  describe(`beyond the limit: ${name}`, () => {
    beyond(it, make, { store: name === "MemoryStore" })
  })
}

describe("beyond the limit: in-process only", () => {
  it.effect("setRate on a drained token bucket refills at the new rate from now (x/time/rate SetLimit)", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } })
      })
      assert.isTrue(yield* limiter.acquire("k", { cost: 10 }))
      yield* limiter.setRate("k", 10)
      yield* TestClock.adjust("500 millis")
      assert.strictEqual((yield* limiter.peek("k")).remaining, 5)
      const windowed = yield* RateLimiter.make({ policy: Policy.fixedWindow({ limit: 1, window: "1 second" }) })
      const error = yield* Effect.flip(windowed.setRate("w", 5))
      assert.strictEqual(error._tag === "InvalidRequest" && error.field, "rate")
    }))

  it.effect("get answers none for a settled key, as for one never seen", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } })
      })
      assert.isTrue(yield* limiter.acquire("k"))
      assert.isTrue(Option.isSome(yield* limiter.get("k")))
      yield* TestClock.adjust("1 second")
      assert.isTrue(Option.isNone(yield* limiter.get("k")))
      assert.strictEqual(Duration.toMillis((yield* limiter.peek("k")).resetAfter), 0)
    }))
})
