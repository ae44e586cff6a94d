import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { MemoryStore, Policy, RateLimiter, Store } from "../src/index.ts"
import * as Engine from "../src/internal/actor/Engine.ts"
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

// A store of tollgate's own (as `RedisStore` is: its engine behind the public
// `apply` and `applyAll`), over a MemoryStore; `several: false` leaves out
// `applyAll`.
const ownStore = (options: {
  readonly several: boolean
  readonly checkKeys?: (keys: ReadonlyArray<string>) => string | undefined
}) =>
  Effect.map(MemoryStore.make, (memory) => {
    const inner = Engine.engineOf(memory)
    return Engine.pluggable({
      name: "own",
      apply: inner.apply,
      applyAll: options.several ? inner.applyAll : undefined,
      checkKeys: options.checkKeys
    })
  })

// A store as a user writes one around another (to count or trace its
// calls): through the inner store's public `apply` and `applyAll` only.
const wrap = (inner: Store.Store): Store.Store => ({
  name: "wrapped",
  apply: (call) => inner.apply(call),
  applyAll: inner.applyAll
})

const onStore = (store: Store.Store) => (options: RateLimiter.Options) =>
  RateLimiter.make(options).pipe(Effect.provideService(Store.CurrentStore, store))

describe("stores of every kind behind the store seam", () => {
  it.effect("a store without applyAll refuses a call over several keys, naming the field", () =>
    Effect.gen(function*() {
      const values = new Map<string, unknown>()
      const store: Store.Store = {
        name: "map",
        apply: (call) =>
          Effect.sync(() => {
            const ran = Store.run(call, values.get(call.key), 0)
            values.set(call.key, ran.stored)
            return ran.answer
          })
      }
      const limiter = yield* onStore(store)({ policy: perSecond(2, 1) })
      assert.isTrue(yield* limiter.acquire("a"))
      const error = yield* Effect.flip(limiter.acquire(["a", "b"]))
      assert.strictEqual(error._tag, "InvalidRequest")
      assert.include(error.message, "keys")
      assert.include(error.message, "the map store cannot take from several keys at once")
    }))

  it.effect("a store of tollgate's own is called through its own engine (its key check holds)", () =>
    Effect.gen(function*() {
      const store = yield* ownStore({
        several: true,
        checkKeys: (keys) => keys.includes("x") ? "x must be taken alone" : undefined
      })
      const limiter = yield* onStore(store)({ policy: perSecond(2, 1) })
      assert.isTrue(yield* limiter.acquire(["a", "b"]))
      const error = yield* Effect.flip(limiter.acquire(["a", "x"]))
      assert.strictEqual(error._tag, "InvalidRequest")
      assert.include(error.message, "x must be taken alone")
    }))

  it.effect("a store wrapping one of tollgate's own through its public calls shares its limits, all or nothing", () =>
    Effect.gen(function*() {
      const own = yield* ownStore({ several: true })
      const direct = yield* onStore(own)({ policy: perSecond(2, 1) })
      const wrapped = yield* onStore(wrap(own))({ policy: perSecond(2, 1) })
      // one key: the two limiters share its two tokens
      assert.isTrue(yield* direct.acquire("k"))
      assert.isTrue(yield* wrapped.acquire("k"))
      assert.isFalse(yield* direct.acquire("k"))
      assert.isFalse(yield* wrapped.acquire("k"))
      // several keys, through the wrapper: taken from both, or from neither
      const taken = yield* wrapped.consume(["a", "b"])
      assert.isTrue(taken.allowed)
      assert.deepStrictEqual(taken.keys?.map((k) => [k.key, k.decision.remaining]), [["a", 1], ["b", 1]])
      assert.isTrue(yield* direct.acquire("b"))
      const refused = yield* wrapped.consume(["a", "b"])
      assert.isFalse(refused.allowed)
      assert.strictEqual((yield* direct.peek("a")).remaining, 1)
    }))

  it.effect("a store wrapping one of tollgate's own that cannot take several keys refuses them as it does", () =>
    Effect.gen(function*() {
      const own = yield* ownStore({ several: false })
      const limiter = yield* onStore(wrap(own))({ policy: perSecond(2, 1) })
      assert.isTrue(yield* limiter.acquire("a"))
      const error = yield* Effect.flip(limiter.acquire(["a", "b"]))
      assert.strictEqual(error._tag, "InvalidRequest")
      assert.include(error.message, "the wrapped store cannot take from several keys at once")
      assert.strictEqual((yield* limiter.peek("a")).remaining, 1)
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
