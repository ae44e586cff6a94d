/**
 * Bugs in src/ found by the reliability tests, each shown by the smallest
 * test that shows it (KNOWN-FAILURES.md, next to this file, describes them).
 * An open one is marked `it.effect.fails`: it passes while the bug is there,
 * and fails once the bug is fixed; then drop the `.fails` and the entry. The
 * fixed ones stay here as plain `it.effect`, as regression tests.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../../src/index.ts"
import { failureOf } from "./probe.ts"

const perSecond = (capacity: number, tokens: number) =>
  Policy.tokenBucket({ capacity, refill: { tokens, per: "1 second" } })

for (const fastPath of [true, false]) {
  describe(`known failures (fastPath: ${fastPath})`, () => {
    it.effect("#1a reconfigure as-is to the same policy changes nothing: a full refill is on time", () =>
      Effect.gen(function*() {
        const policy = Policy.tokenBucket({ capacity: 10, refill: { tokens: 7, per: "3 seconds" } })
        const limiter = yield* RateLimiter.make({ fastPath, policy })
        assert.isTrue(yield* limiter.acquire("k", { cost: 7 })) // 3 tokens left
        yield* TestClock.adjust(2573) // 3 + 7 * 2573 / 3000 = 9.0036... tokens
        yield* limiter.reconfigure("k", policy, { carry: "as-is" })
        yield* TestClock.adjust(427) // t = 3000 ms: exactly 3 + 7 = 10 tokens
        assert.isTrue(yield* limiter.acquire("k", { cost: 10 })) // denied: 9.99999999999999... tokens
      }))

    it.effect("#1b reconfigure as-is to the same policy changes nothing: retryAfter is exact", () =>
      Effect.gen(function*() {
        const policy = perSecond(5, 1)
        const limiter = yield* RateLimiter.make({ fastPath, policy })
        assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
        yield* TestClock.adjust(1001) // 1.001 tokens
        const before = yield* limiter.consume("k", { cost: 2 })
        assert.strictEqual(Duration.toMillis(before.retryAfter), 999)
        yield* limiter.reconfigure("k", policy, { carry: "as-is" })
        const after = yield* limiter.consume("k", { cost: 2 })
        assert.strictEqual(Duration.toMillis(after.retryAfter), 999) // 1000
      }))

    it.effect("#2 a reap followed by a backward clock step mints no tokens", () =>
      Effect.gen(function*() {
        // capacity 5, 1 per second: over 8 s of clock it may admit at most 5 + 8 = 13
        const limiter = yield* RateLimiter.make({ fastPath, policy: perSecond(5, 1), idleTimeout: "2 seconds" })
        let admitted = 0
        const take = Effect.gen(function*() {
          for (let i = 0; i < 5; i++) if (yield* limiter.acquire("k")) admitted++
        })
        yield* take // t = 0: 5 admitted
        yield* TestClock.adjust("7 seconds") // full again at 5 s, idle: reaped by the sweep at 7 s
        assert.strictEqual((yield* limiter.stats).reaped, 1)
        yield* TestClock.setTime(3000) // the clock steps back 4 s: the limiter's time stands at 7 s
        yield* take // 5 admitted: the new bucket starts full at 7 s, as a kept one would be
        yield* TestClock.setTime(8000)
        yield* take // 1 admitted: one second of refill since 7 s (the bug: 5, refilled from 3 s)
        assert.strictEqual(admitted, 5 + 5 + 1)
      }))

    it.effect("#3 a NaN maxWait fails with InvalidRequest naming maxWait", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ fastPath, policy: perSecond(5, 1) })
        assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
        const error = yield* Effect.flip(limiter.wait("k", { maxWait: NaN }))
        assert.strictEqual(error._tag, "InvalidRequest") // RateLimitExceeded: NaN was read as 0
        assert.strictEqual(error._tag === "InvalidRequest" && error.field, "maxWait")
      }))
  })
}

describe("known failures: options", () => {
  it.effect("#4a a fastPath that is not a boolean fails with InvalidPolicy naming fastPath", () =>
    Effect.gen(function*() {
      // "false" read from an environment variable turns the fast path on
      const exit = yield* Effect.exit(RateLimiter.make({ policy: perSecond(5, 1), fastPath: "false" as any }))
      assert.strictEqual(failureOf(exit)?._tag, "InvalidPolicy")
      assert.strictEqual(failureOf(exit)?.field, "fastPath")
    }))

  it.effect("#4b a name that is not a string fails with InvalidPolicy naming name", () =>
    Effect.gen(function*() {
      // the metrics' limiter label becomes "[object Object]"
      const exit = yield* Effect.exit(RateLimiter.make({ policy: perSecond(5, 1), name: {} as any }))
      assert.strictEqual(failureOf(exit)?._tag, "InvalidPolicy")
      assert.strictEqual(failureOf(exit)?.field, "name")
    }))

  it.effect("#5 missing options fail with a typed InvalidPolicy, not a defect", () =>
    Effect.gen(function*() {
      for (const options of [undefined, null]) {
        const exit = yield* Effect.exit(RateLimiter.make(options as any)) // dies with a TypeError
        assert.isTrue(Exit.isFailure(exit))
        assert.strictEqual(failureOf(exit)?._tag, "InvalidPolicy")
      }
    }))
})

describe("known failures: policies", () => {
  it.effect("#6 Policy.concurrency with replenish: null is an Invalid policy naming replenish, not a throw", () =>
    Effect.gen(function*() {
      const policy = yield* Effect.try(() => Policy.concurrency({ capacity: 5, replenish: null as any })) // threw a TypeError
      assert.strictEqual(policy._tag, "Invalid")
      assert.strictEqual(policy._tag === "Invalid" && policy.error.field, "replenish")
    }))
})
