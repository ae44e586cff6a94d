// A store call is a round trip: what the callers of one key ask while a call
// is out goes to the store together, so the store sees a few calls, not one
// per caller (the bucket's actor lets the callers running now join a batch
// before it sends it).
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { MemoryStore, Policy, RateLimiter, Store } from "../src/index.ts"
import * as Engine from "../src/internal/actor/Engine.ts"

// A MemoryStore that counts its calls and answers after a yield, as a store
// across a network answers later than the call is made.
const counting = Effect.gen(function*() {
  const inner = Engine.engineOf(yield* MemoryStore.make)
  const count = { calls: 0, ops: 0 }
  const store = Engine.pluggable({
    name: "counting",
    apply: (key, policy, ops) =>
      Effect.suspend(() => {
        count.calls++
        count.ops += ops.length
        return Effect.andThen(Effect.yieldNow, inner.apply(key, policy, ops))
      })
  })
  return { store, count } as const
})

describe("coalescing on a store", () => {
  it.effect("callers of one key that arrive in waves while a call is out share a few store calls", () =>
    Effect.gen(function*() {
      const { count, store } = yield* counting
      const policy = Policy.tokenBucket({ capacity: 100, refill: { tokens: 1, per: "1 hour" } })
      const limiter = yield* RateLimiter.make({ policy }).pipe(Effect.provideService(Store.CurrentStore, store))
      for (const waves of [[1, 19], [5, 5, 5, 5], [2, 3, 4, 5, 6]]) {
        count.calls = 0
        count.ops = 0
        const fibers = []
        for (const n of waves) {
          for (let i = 0; i < n; i++) fibers.push(yield* Effect.forkChild(limiter.acquire("k")))
          yield* Effect.yieldNow
        }
        for (const fiber of fibers) assert.isTrue(yield* Fiber.join(fiber))
        // every caller decided once, in at most three round trips whatever the waves
        assert.strictEqual(count.ops, 20, `waves ${waves}`)
        assert.isAtMost(count.calls, 3, `waves ${waves}`)
      }
      assert.strictEqual(yield* limiter.peek("k").pipe(Effect.map((d) => d.remaining)), 40)
    }))
})

describe("a line on a store asks at its turn", () => {
  it.effect("the head of a line is not asked for again at every batch of other callers", () =>
    Effect.gen(function*() {
      const { count, store } = yield* counting
      const policy = Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 hour" } })
      const limiter = yield* RateLimiter.make({ policy }).pipe(Effect.provideService(Store.CurrentStore, store))
      assert.isTrue(yield* limiter.acquire("k"))
      const waiter = yield* Effect.forkChild(limiter.wait("k", { maxWait: "2 hours" }))
      for (let i = 0; i < 5; i++) yield* Effect.yieldNow
      const before = count.ops
      // five callers, one after another: each is one operation at the store, refused behind the waiter
      for (let i = 0; i < 5; i++) assert.isFalse(yield* limiter.acquire("k"))
      assert.strictEqual(count.ops - before, 5)
      assert.isUndefined(waiter.pollUnsafe())
    }))
})
