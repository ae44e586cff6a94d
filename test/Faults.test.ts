import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { BucketFailed, Policy, RateLimiter } from "../src/index.ts"
import { bind } from "../src/internal/algorithm/Algorithm.ts"
import { size } from "./size.ts"

const perSecond = (capacity: number, tokens: number) =>
  Policy.tokenBucket({ capacity, refill: { tokens, per: "1 second" } })

// A token bucket whose step throws for cost 3 from t = 1 s on: a stand-in
// for an algorithm bug.
const faulty = (() => {
  const base = perSecond(5, 1) as Policy.TokenBucket
  const algorithm: Policy.TokenBucket["algorithm"] = {
    ...base.algorithm,
    takeInPlace: undefined,
    step: (c, s, now, cost) => {
      if (cost === 3 && now >= 1000) throw new Error("step exploded")
      return base.algorithm.step(c, s, now, cost)
    }
  }
  return { ...base, algorithm, rule: bind(algorithm, base.config) } as Policy.Policy
})()

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

for (const fastPath of [true, false]) {
  describe(`fastPath: ${fastPath}`, () => {
    it.effect("a defect in one bucket fails only that key's calls, which then start afresh", () =>
      Effect.gen(function*() {
        const slow = Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 minute" } })
        const limiter = yield* RateLimiter.make({ fastPath, policy: (key) => key === "bad" ? faulty : slow })
        assert.isTrue(yield* limiter.acquire("good", { cost: 2 }))
        assert.isTrue(yield* limiter.acquire("bad", { cost: 3 }))
        assert.isTrue(yield* limiter.acquire("bad", { cost: 2 }))
        // two waiters; admitting the first hits the defect
        const first = yield* Effect.exit(limiter.wait("bad", { cost: 3 })).pipe(
          Effect.forkChild({ startImmediately: true })
        )
        const second = yield* Effect.exit(limiter.wait("bad", { cost: 1 })).pipe(
          Effect.forkChild({ startImmediately: true })
        )
        yield* settle
        yield* TestClock.adjust("3 seconds")
        for (const exit of [yield* Fiber.join(first), yield* Fiber.join(second)]) {
          assert.isTrue(
            Exit.isFailure(exit) && exit.cause.reasons.some((r) => r._tag === "Fail" && r.error._tag === "BucketFailed")
          )
          // the error names the key and the defect
          const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
          assert.instanceOf(error, BucketFailed)
          assert.deepStrictEqual([error.key, error.defect], ["bad", "Error: step exploded"])
        }
        // the bad key restarted cleanly: a fresh, full bucket, nobody waiting
        assert.strictEqual((yield* limiter.peek("bad")).remaining, 5)
        assert.strictEqual((yield* limiter.stats).waiting, 0)
        // a decide-now call that hits the defect fails alone
        const error = yield* Effect.flip(limiter.acquire("bad", { cost: 3 }))
        assert.strictEqual(error._tag, "BucketFailed")
        assert.isTrue(yield* limiter.acquire("bad", { cost: 2 }))
        // other keys never noticed
        assert.strictEqual((yield* limiter.peek("good")).remaining, 3)
      }))

    it.effect("a policy function that throws for one key fails only that key", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({
          fastPath,
          policy: (key) => {
            if (key === "boom") throw new Error("no policy")
            return perSecond(1, 1)
          }
        })
        const error = yield* Effect.flip(limiter.acquire("boom"))
        assert.strictEqual(error._tag, "InvalidPolicy")
        assert.isTrue(yield* limiter.acquire("fine"))
        assert.strictEqual((yield* limiter.stats).buckets, 1)
      }))

    describe("maxBuckets: a flood of new keys", () => {
      it.effect("at the cap, new keys are refused while no bucket is safe to forget", () =>
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.make({ fastPath, policy: perSecond(2, 1), maxBuckets: 100 })
          for (let i = 0; i < 100; i++) assert.isTrue(yield* limiter.acquire(`k${i}`))
          const error = yield* Effect.flip(limiter.acquire("newcomer"))
          assert.strictEqual(error._tag === "Overloaded" && error.reason, "buckets")
          assert.strictEqual((yield* limiter.stats).buckets, 100)
          // existing keys keep their state: none was forgotten early
          assert.isTrue(yield* limiter.acquire("k0"))
          assert.isFalse(yield* limiter.acquire("k0"))
        }))

      it.effect("at the cap, a new key takes the place of a settled bucket", () =>
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.make({ fastPath, policy: perSecond(2, 1), maxBuckets: 100 })
          for (let i = 0; i < 100; i++) assert.isTrue(yield* limiter.acquire(`k${i}`))
          yield* TestClock.adjust("1 second") // every bucket full again
          assert.isTrue(yield* limiter.acquire("newcomer"))
          const stats = yield* limiter.stats
          assert.strictEqual(stats.buckets, 100)
          assert.strictEqual(stats.reaped, 1)
        }))

      // A million keys on the default (fast) path; the all-actor path starts a
      // fiber per new key, so it floods with a tenth as many. A quarter of
      // that in a developer's run (test/size.ts).
      const flood = size("TOLLGATE_FLOOD_KEYS", 250_000, 1_000_000) / (fastPath ? 1 : 10)
      it.effect(`${flood} distinct keys in a burst never hold more than maxBuckets`, () =>
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.make({
            fastPath,
            policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 millis" } }),
            maxBuckets: 10_000
          })
          let allowed = 0
          let refused = 0
          let peak = 0
          for (let i = 0; i < flood; i++) {
            if (i % 1000 === 0) yield* TestClock.adjust(1) // the flood arrives over a virtual second
            const exit = yield* Effect.exit(limiter.acquire(`flood:${i}`))
            if (Exit.isSuccess(exit)) allowed++
            else refused++
            if (i % 10_000 === 0) peak = Math.max(peak, (yield* limiter.stats).buckets)
          }
          const stats = yield* limiter.stats
          assert.isAtMost(Math.max(peak, stats.buckets), 10_000)
          assert.strictEqual(allowed + refused, flood)
          assert.isAbove(allowed, 0)
        }), { timeout: 120_000 })
    })
  })
}
