import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { MemoryStore, Policy, RateLimiter, Store } from "../src/index.ts"
import * as Block from "../src/internal/algorithm/Block.ts"
import * as Interpreter from "../src/internal/operation/Interpreter.ts"
import * as Op from "../src/internal/operation/Op.ts"

const perSecond = (capacity: number, tokens: number) =>
  Policy.tokenBucket({ capacity, refill: { tokens, per: "1 second" } })

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

// A store that can be taken down: down, it never answers (a hung server).
const switchable = Effect.gen(function*() {
  const inner = yield* MemoryStore.make
  const control = { down: false, calls: 0 }
  const store: Store.Store = {
    name: "switchable",
    apply: (call) =>
      Effect.suspend(() => {
        control.calls++
        return control.down ? Effect.never : inner.apply(call)
      })
  }
  return { store, control } as const
})

describe("store-backed limiter", () => {
  it.effect("coalesces a hot key's batch into one store call and admits exactly the capacity", () =>
    Effect.gen(function*() {
      // A store that answers a turn later, as any store over a network does
      // (one that answers at once never has a call in flight to queue behind).
      const inner = yield* MemoryStore.make
      const store: Store.Store = {
        name: "later",
        apply: (call) => Effect.andThen(Effect.yieldNow, inner.apply(call))
      }
      const limiter = yield* RateLimiter.make({ policy: perSecond(100, 1), mailboxCapacity: 2048 }).pipe(
        Effect.provideService(Store.CurrentStore, store)
      )
      const results = yield* Effect.forEach(Array.from({ length: 1000 }), () => limiter.acquire("hot"), {
        concurrency: "unbounded"
      })
      assert.strictEqual(results.filter(Boolean).length, 100)
      const stats = yield* limiter.stats
      assert.strictEqual(stats.storeOps, 1000)
      assert.isAtMost(stats.storeCalls, 10)
    }))

  it.effect("two limiters on one store share the limit", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const make = RateLimiter.make({ policy: perSecond(10, 1) }).pipe(Effect.provideService(Store.CurrentStore, store))
      const a = yield* make
      const b = yield* make
      const results = yield* Effect.forEach(
        Array.from({ length: 40 }, (_, i) => i),
        (i) => (i % 2 === 0 ? a : b).acquire("shared"),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(results.filter(Boolean).length, 10)
    }))

  it.effect("when the store hangs: the local fallback decides, flagged degraded; the store is used again once back", () =>
    Effect.gen(function*() {
      const { control, store } = yield* switchable
      const limiter = yield* RateLimiter.make({
        policy: perSecond(10, 1),
        fallback: { mode: "local", share: 0.5, timeout: "100 millis", retryAfter: "1 second" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      assert.isTrue(yield* limiter.acquire("k"))
      control.down = true
      const pending = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      assert.isUndefined(pending.pollUnsafe()) // waiting for the store, not hanging forever
      yield* TestClock.adjust("100 millis")
      const degraded = yield* Fiber.join(pending)
      assert.isTrue(degraded.allowed)
      assert.isTrue(degraded.degraded)
      assert.strictEqual(degraded.limit, 5) // half of the limit, decided here
      // within retryAfter: straight to the fallback, no waiting on the store
      const callsBefore = control.calls
      const quick = yield* limiter.consume("k")
      assert.isTrue(quick.degraded)
      assert.strictEqual(control.calls, callsBefore)
      // the store comes back: after retryAfter it is used again
      control.down = false
      yield* TestClock.adjust("1 second")
      const recovered = yield* limiter.consume("k")
      assert.isUndefined(recovered.degraded)
      assert.strictEqual(recovered.limit, 10)
      const stats = yield* limiter.stats
      assert.isAbove(stats.storeFailures, 0)
      assert.isAbove(stats.degraded, 0)
    }))

  it.effect("fallback allow, deny and error", () =>
    Effect.gen(function*() {
      for (const mode of ["allow", "deny", "error"] as const) {
        const { control, store } = yield* switchable
        control.down = true
        const limiter = yield* RateLimiter.make({
          policy: perSecond(1, 1),
          fallback: { mode, timeout: "50 millis" }
        }).pipe(Effect.provideService(Store.CurrentStore, store))
        const call = yield* Effect.exit(limiter.acquire("k")).pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        yield* TestClock.adjust("50 millis")
        const exit = yield* Fiber.join(call)
        if (mode === "error") {
          assert.isTrue(
            Exit.isFailure(exit) &&
              exit.cause.reasons.some((r) => r._tag === "Fail" && r.error._tag === "StoreUnavailable")
          )
        } else {
          assert.deepStrictEqual(exit, Exit.succeed(mode === "allow"))
        }
      }
    }))

  it.effect("waiters wait their turn against the store", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const limiter = yield* RateLimiter.make({ policy: perSecond(1, 1) }).pipe(
        Effect.provideService(Store.CurrentStore, store)
      )
      const order: Array<number> = []
      const fibers = yield* Effect.forEach([0, 1, 2], (i) =>
        limiter.wait("k").pipe(
          Effect.tap(() => Effect.sync(() => order.push(i))),
          Effect.forkChild({ startImmediately: true })
        ))
      yield* settle
      assert.deepStrictEqual(order, [0])
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(order, [0, 1])
      yield* TestClock.adjust("1 second")
      yield* Fiber.joinAll(fibers)
      assert.deepStrictEqual(order, [0, 1, 2])
    }))

  it.effect("the local fallback counts a reconfigured key afresh, under its new policy", () =>
    Effect.gen(function*() {
      // A store that is down from the start: every decision is the fallback's.
      const store: Store.Store = {
        name: "down",
        apply: () => Effect.fail(new Store.StoreUnavailable({ store: "down", reason: "down" }))
      }
      const limiter = yield* RateLimiter.make({ policy: perSecond(5, 1) }).pipe(
        Effect.provideService(Store.CurrentStore, store)
      )
      assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
      assert.isFalse(yield* limiter.acquire("k"))
      yield* limiter.reconfigure("k", Policy.fixedWindow({ limit: 3, window: "1 minute" }))
      // the fixed window's own count, not the token bucket's state read as one
      const d = yield* limiter.consume("k")
      assert.isTrue(d.allowed)
      assert.strictEqual(d.remaining, 2)
      assert.isTrue(d.degraded)
    }))

  it.effect("a bad fallback option names the field", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(RateLimiter.make({ policy: perSecond(1, 1), fallback: { share: 2 } }))
      assert.strictEqual(error.field, "fallback.share")
    }))
})

describe("Store.encode and Store.decode", () => {
  it("keep every number exactly, those JSON cannot hold included", () => {
    const value = { a: Infinity, b: -Infinity, c: -0, d: 0, e: 0.1 + 0.2, f: [1, -0, Infinity], g: "inf", h: null }
    const back = Store.decode(Store.encode(value)) as typeof value
    assert.strictEqual(back.a, Infinity)
    assert.strictEqual(back.b, -Infinity)
    assert.isTrue(Object.is(back.c, -0))
    assert.isTrue(Object.is(back.d, 0))
    assert.strictEqual(back.e, 0.1 + 0.2)
    assert.isTrue(Object.is(back.f[1], -0))
    assert.strictEqual(back.f[2], Infinity)
    // text that looks like a tag stays text; null stays null
    assert.strictEqual(back.g, "inf")
    assert.isNull(back.h)
    assert.isTrue(Number.isNaN(Store.decode(Store.encode(NaN)) as number))
    // the text itself: plain numbers as JSON numbers
    assert.strictEqual(Store.encode({ x: 1.5 }), "{\"x\":1.5}")
  })

  it("keep a block beside its state", () => {
    const [, blocked] = Interpreter.applyOne(
      Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid,
      undefined,
      0,
      Op.make(Op.Kind.Block, 500)
    )
    assert.instanceOf(blocked, Block.Stored)
    const back = Store.decode(Store.encode(blocked))
    assert.instanceOf(back, Block.Stored)
    assert.deepStrictEqual(back, blocked)
  })
})
