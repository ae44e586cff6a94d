import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../src/index.ts"
import { onStore } from "./stores.ts"

// What a key's policy cannot do is refused with an InvalidRequest that names
// the field, its value and the policy, in process and on a store alike; a
// decision behind a line says when its turn comes, and counts as denied.

const smooth = Policy.smooth({ permits: 1, per: "1 second" })
const log = Policy.slidingLog({ limit: 2, window: "1 second" })
const aligned = Policy.fixedWindow({ limit: 2, window: "1 second", aligned: true })
const bucket = Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } })

const backends = [
  ["in process", RateLimiter.make] as const,
  [
    "on a store",
    onStore
  ] as const
]

for (const [where, make] of backends) {
  describe(`refusals, ${where}`, () => {
    it.effect("release on a policy with no release names the key and the policy", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: smooth })
        const error = yield* Effect.flip(limiter.release("user:1", 1))
        assert.strictEqual(error._tag, "InvalidRequest")
        if (error._tag !== "InvalidRequest") return
        assert.strictEqual(error.field, "key")
        assert.strictEqual(error.value, JSON.stringify("user:1"))
        assert.include(error.reason, "its policy (warm-up)")
        assert.include(error.reason, "no release")
      }))

    it.effect("add over the limit on a policy that cannot hold more names overLimit", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: log })
        const error = yield* Effect.flip(limiter.add("k", 1, { overLimit: true }))
        assert.strictEqual(error._tag, "InvalidRequest")
        if (error._tag !== "InvalidRequest") return
        assert.strictEqual(error.field, "overLimit")
        assert.strictEqual(error.value, "true")
        assert.include(error.reason, "its policy (sliding-log)")
        assert.include(error.reason, "cannot hold more than its limit")
      }))

    it.effect("feedback on a fixed rate names the key", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: bucket })
        const error = yield* Effect.flip(limiter.feedback("api", "ok"))
        assert.strictEqual(error._tag, "InvalidRequest")
        if (error._tag !== "InvalidRequest") return
        assert.strictEqual(error.field, "key")
        assert.strictEqual(error.value, JSON.stringify("api"))
      }))

    it.effect("a window of its own on a policy without one names the duration and the policy", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: aligned })
        const error = yield* Effect.flip(limiter.penalty("k", 1, { duration: "5 seconds" }))
        assert.strictEqual(error._tag, "InvalidRequest")
        if (error._tag !== "InvalidRequest") return
        assert.strictEqual(error.field, "duration")
        assert.strictEqual(error.value, "5000")
        assert.include(error.reason, "fixed-window")
      }))

    it.effect("a take of 2 takes 2", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: bucket })
        const d = yield* limiter.consume("k", { cost: 2 })
        assert.isTrue(d.allowed)
        assert.strictEqual(d.remaining, 0)
        assert.isFalse(yield* limiter.acquire("k"))
      }))

    it.effect("a decision behind a waiter is denied, told when its turn comes, and counted denied", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: bucket })
        yield* limiter.consume("k", { cost: 2 })
        // a waiter for 1 unit stands in line (its turn: 1 s)
        yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
        yield* Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))
        const before = (yield* limiter.stats).denied
        const d = yield* limiter.consume("k", { cost: 1 })
        assert.isFalse(d.allowed)
        assert.strictEqual(d.remaining, 0)
        // behind the waiter's unit: 2 s
        assert.strictEqual(Duration.toMillis(d.retryAfter), 2000)
        assert.strictEqual((yield* limiter.stats).denied, before + 1)
        yield* TestClock.adjust("1 second")
      }))
  })
}
