// A store call is a round trip: what the callers of one key ask while a call
// is out goes to the store together, so the store sees a few calls, not one
// per caller (the bucket's actor lets the callers running now join a batch
// before it sends it).
import { assert, describe, it } from "@effect/vitest"
import { Deferred, type Duration, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
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

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))
const perSecond = Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } })
const succeeded = <A, E>(fiber: Fiber.Fiber<A, E>): boolean => {
  const exit = fiber.pollUnsafe()
  return exit !== undefined && Exit.isSuccess(exit)
}

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

// A MemoryStore whose calls wait for `gate` while it is set, and a second
// limiter on the same memory: another process sharing the store.
const gated = (policy: Policy.Policy) =>
  Effect.gen(function*() {
    const memory = yield* MemoryStore.make
    const inner = Engine.engineOf(memory)
    const control = { gate: undefined as Deferred.Deferred<void> | undefined }
    const store = Engine.pluggable({
      name: "gated",
      apply: (key, policy, ops) =>
        Effect.suspend(() =>
          control.gate === undefined
            ? inner.apply(key, policy, ops)
            : Effect.andThen(Deferred.await(control.gate), inner.apply(key, policy, ops))
        )
    })
    const fallback = { mode: "deny", timeout: "1 hour" } as const
    const limiter = yield* RateLimiter.make({ policy, fallback }).pipe(Effect.provideService(Store.CurrentStore, store))
    const other = yield* RateLimiter.make({ policy }).pipe(Effect.provideService(Store.CurrentStore, memory))
    return { control, limiter, other } as const
  })

// The store holds its calls from `after` on, for `held` more: what the line
// asks at its turn waits. The gate it waits behind is returned, to open.
const heldWhile = (
  control: { gate: Deferred.Deferred<void> | undefined },
  after: Duration.Input,
  held: Duration.Input
) =>
  Effect.gen(function*() {
    const gate = control.gate = yield* Deferred.make<void>()
    yield* TestClock.adjust(after)
    yield* settle
    yield* TestClock.adjust(held)
    control.gate = undefined
    return gate
  })

describe("a line on a store: waiters whose deadline passed while the store was asked", () => {
  it.effect("one that left is not counted denied", () =>
    Effect.gen(function*() {
      const { control, limiter, other } = yield* gated(perSecond)
      assert.isTrue(yield* limiter.acquire("k"))
      const head = yield* Effect.forkChild(limiter.wait("k", { maxWait: "10 seconds" }))
      yield* settle
      const second = yield* Effect.forkChild(limiter.wait("k", { maxWait: "2 seconds" }))
      yield* settle
      // the head's turn at 1 s: it asks the store, which answers at 2.5 s;
      // meanwhile the second waiter's deadline passes and its caller leaves,
      // and the other process takes the token the head asked for
      const opened = yield* heldWhile(control, "1 second", "1500 millis")
      yield* Fiber.interrupt(second)
      assert.isTrue(yield* other.acquire("k"))
      const before = (yield* limiter.stats).denied
      yield* Deferred.succeed(opened, undefined)
      yield* settle
      // the head was refused and waits on; the waiter that left took nothing and was not denied
      assert.isUndefined(head.pollUnsafe())
      assert.strictEqual((yield* limiter.stats).denied, before)
      // its turn comes with the next token
      yield* TestClock.adjust("1 second")
      yield* settle
      assert.isTrue(succeeded(head))
    }))

  it.effect("one whose deadline passed while the head ahead of it was asked is given up, not admitted late", () =>
    Effect.gen(function*() {
      const { control, limiter } = yield* gated(
        Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } })
      )
      assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
      const first = yield* Effect.forkChild(limiter.wait("k", { maxWait: "10 seconds" }))
      yield* settle
      const second = yield* Effect.forkChild(limiter.wait("k", { maxWait: "2 seconds" }))
      yield* settle
      // the head's turn at 1 s: the store answers only at 2.5 s, when both tokens are there
      const opened = yield* heldWhile(control, "1 second", "1500 millis")
      yield* Deferred.succeed(opened, undefined)
      yield* settle
      assert.isTrue(succeeded(first))
      // the second's deadline (2 s) passed: it is refused, though a token is there now
      const error = yield* Effect.flip(Fiber.join(second))
      assert.strictEqual(error._tag, "RateLimitExceeded")
      assert.isTrue(yield* limiter.acquire("k"))
    }))

  it.effect("a head refused at its deadline leaves at once: a smaller request behind it is decided on its own", () =>
    Effect.gen(function*() {
      const { control, limiter, other } = yield* gated(
        Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } })
      )
      assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
      // two tokens by 2 s: the head's turn and its deadline
      const head = yield* Effect.forkChild(limiter.wait("k", { cost: 2, maxWait: "2 seconds" }))
      yield* settle
      // another process takes one of them
      yield* TestClock.adjust("1 second")
      assert.isTrue(yield* other.acquire("k"))
      // the head asks at 2 s; while the store answers, a request for one token comes
      control.gate = yield* Deferred.make<void>()
      yield* TestClock.adjust("1 second")
      yield* settle
      const one = yield* Effect.forkChild(limiter.acquire("k"))
      yield* settle
      const opened = control.gate
      control.gate = undefined
      yield* Deferred.succeed(opened, undefined)
      yield* settle
      // the head is refused (one token) at its deadline, and the request for one is not held behind it
      const error = yield* Effect.flip(Fiber.join(head))
      assert.strictEqual(error._tag, "RateLimitExceeded")
      assert.isTrue(yield* Fiber.join(one))
    }))

  it.effect("one whose deadline is exactly now is still asked for (maxWait is inclusive)", () =>
    Effect.gen(function*() {
      const { control, limiter } = yield* gated(perSecond)
      assert.isTrue(yield* limiter.acquire("k"))
      const first = yield* Effect.forkChild(limiter.wait("k", { maxWait: "1 second" }))
      yield* settle
      const second = yield* Effect.forkChild(limiter.wait("k", { maxWait: "2 seconds" }))
      yield* settle
      // the head leaves; the line next runs when a peek's store call, held
      // from before the head's deadline, comes back exactly at the second's
      yield* TestClock.adjust("500 millis")
      yield* Fiber.interrupt(first)
      yield* settle // the second, now the head, asks and is told 500 ms
      control.gate = yield* Deferred.make<void>()
      const peek = yield* Effect.forkChild(limiter.peek("k"))
      yield* settle
      yield* TestClock.adjust("1500 millis")
      const opened = control.gate
      control.gate = undefined
      yield* Deferred.succeed(opened, undefined)
      yield* Fiber.join(peek)
      yield* settle
      assert.isTrue(succeeded(second))
      assert.strictEqual((yield* limiter.stats).denied, 0)
    }))
})
