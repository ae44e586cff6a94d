import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../src/index.ts"
import { onStore } from "./stores.ts"

// Lets forked fibers and bucket actors run until they park.
const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

// 1 token a second to start with, between 1 and 10; +1 per "ok", halved on "throttled".
const policy = Policy.adaptive({
  capacity: 1,
  rate: { tokens: 1, per: "1 second" },
  floor: 1,
  ceiling: 10,
  increase: 1,
  latency: "200 millis"
})

// A waiter that reports when it was admitted.
const admittedAt = (limiter: RateLimiter["Service"], key: string) =>
  Effect.forkChild(Effect.andThen(limiter.wait(key), Clock.currentTimeMillis))

for (const store of [false, true]) {
  const make = (options: RateLimiter.Options) => store ? onStore(options) : RateLimiter.make(options)
  const on = store ? " (on a store)" : ""

  describe(`adaptive rates${on}`, () => {
    it.effect("an ok raises the rate in-band: a waiter in line is re-timed earlier", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy })
        assert.isTrue(yield* limiter.acquire("api"))
        const waiter = yield* admittedAt(limiter, "api")
        yield* settle
        // at 1 a second the waiter's token is due at 1000; 3 oks make it 4 a second
        yield* TestClock.adjust("100 millis")
        for (let i = 0; i < 3; i++) yield* limiter.feedback("api", "ok")
        yield* settle
        yield* TestClock.adjust("1 second")
        yield* settle
        const at = yield* Fiber.join(waiter)
        // 0.1 token by 100 ms, then 0.9 at 4 a second: 225 ms more
        assert.strictEqual(at, 325)
      }))

    it.effect("a throttled with Retry-After holds every waiter until then, then admits at the cut rate", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy })
        for (let i = 0; i < 3; i++) yield* limiter.feedback("api", "ok") // 4 a second
        assert.isTrue(yield* limiter.acquire("api"))
        const first = yield* admittedAt(limiter, "api")
        yield* settle
        yield* limiter.feedback("api", "throttled", { retryAfter: "5 seconds" }) // 2 a second, nothing before 5 s
        yield* settle
        const second = yield* admittedAt(limiter, "api")
        yield* settle
        yield* TestClock.adjust("4999 millis")
        yield* settle
        assert.isUndefined(first.pollUnsafe())
        yield* TestClock.adjust("10 seconds")
        assert.strictEqual(yield* Fiber.join(first), 5000)
        assert.strictEqual(yield* Fiber.join(second), 5500)
      }))

    it.effect("a latency above the target cuts, at or below it raises", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy })
        for (let i = 0; i < 7; i++) yield* limiter.feedback("api", { latency: "150 millis" }) // 8 a second
        assert.isTrue(yield* limiter.acquire("api"))
        yield* TestClock.adjust("125 millis")
        assert.isTrue(yield* limiter.acquire("api"))
        yield* limiter.feedback("api", { latency: 900 }) // 4 a second
        yield* TestClock.adjust("249 millis")
        assert.isFalse(yield* limiter.acquire("api"))
        yield* TestClock.adjust("1 millis")
        assert.isTrue(yield* limiter.acquire("api"))
      }))

    it.effect("each key adapts on its own", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy })
        for (let i = 0; i < 9; i++) yield* limiter.feedback("a", "ok")
        assert.isTrue(yield* limiter.acquire("a"))
        assert.isTrue(yield* limiter.acquire("b"))
        yield* TestClock.adjust("100 millis")
        assert.isTrue(yield* limiter.acquire("a"))
        assert.isFalse(yield* limiter.acquire("b"))
      }))

    it.effect("feedback for a fixed-rate key, or a bad signal, fails naming the field", () =>
      Effect.gen(function*() {
        const limiter = yield* make({
          policy: (key) =>
            key === "fixed" ? Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } }) : policy
        })
        const fixed = yield* Effect.flip(limiter.feedback("fixed", "ok"))
        assert.strictEqual(fixed._tag, "InvalidRequest")
        assert.include(fixed.message, "fixed rate")
        const bad = yield* Effect.flip(limiter.feedback("api", "slow" as never))
        assert.deepStrictEqual([bad._tag, bad._tag === "InvalidRequest" && bad.field], ["InvalidRequest", "signal"])
        const late = yield* Effect.flip(limiter.feedback("api", "throttled", { retryAfter: "never" as never }))
        assert.deepStrictEqual([late._tag, late._tag === "InvalidRequest" && late.field], [
          "InvalidRequest",
          "retryAfter"
        ])
      }))
  })
}

describe("Policy.adaptive", () => {
  it.effect("bad options name the field", () =>
    Effect.gen(function*() {
      const base = { capacity: 1, rate: { tokens: 5, per: "1 second" }, floor: 1, ceiling: 10 } as const
      for (
        const [options, field] of [
          [{ ...base, floor: 20 }, "ceiling"],
          [{ ...base, rate: { tokens: 50, per: "1 second" } }, "rate.tokens"],
          [{ ...base, decrease: 1 }, "decrease"],
          [{ ...base, capacity: NaN }, "capacity"]
        ] as const
      ) {
        const e = yield* Effect.flip(Policy.validate(Policy.adaptive(options)))
        assert.strictEqual(e.field, field)
      }
    }))
})
