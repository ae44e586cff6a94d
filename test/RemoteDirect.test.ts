/**
 * The caller-side path of a store-backed key (`Remote.direct`): an idle key
 * is decided by a store call made on the caller's fiber; while that call is
 * out, the key's other requests queue and go together afterwards, in order.
 * Fallback, metrics and interruption behave as on the actor's path. Each
 * case runs twice: on a store with `apply` only, and on one that also
 * offers the callback form (`applyUnsafe`, as `RedisStore` does), which that
 * path then calls instead.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { MemoryStore, Policy, RateLimiter, Store } from "../src/index.ts"
import * as Engine from "../src/internal/actor/Engine.ts"
import * as Request from "../src/internal/actor/Request.ts"
import * as Supervisor from "../src/internal/supervisor/Supervisor.ts"

const perHour = (capacity: number) => Policy.tokenBucket({ capacity, refill: { tokens: 1, per: "1 hour" } })

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

// A MemoryStore whose calls wait for `gate` while it is set (or die), and
// record how many operations each carried; in the callback form it also
// offers `applyUnsafe` (its timeout its own, its call withdrawn by the
// function it returns).
const gatedStore = (form: "effect" | "callback") =>
  Effect.gen(function*() {
    const inner = Engine.engineOf(yield* MemoryStore.make)
    const control = {
      gate: undefined as Deferred.Deferred<void> | undefined,
      die: false,
      // the store answers with no replies (a store's bug)
      empty: false,
      // false: a call once made cannot be withdrawn (its request is sent)
      withdraw: true,
      calls: [] as Array<number>
    }
    const apply: Engine.Engine["apply"] = (key, policy, ops) =>
      Effect.suspend(() => {
        control.calls.push(ops.length)
        if (control.die) return Effect.die(new Error("boom"))
        const gate = control.gate
        const applied = control.empty ? Effect.succeed([]) : inner.apply(key, policy, ops)
        return gate === undefined ? applied : Effect.andThen(Deferred.await(gate), applied)
      })
    if (form === "effect") return { store: Engine.pluggable({ name: "gated", apply }), control } as const
    const runFork = Effect.runForkWith(yield* Effect.context<never>())
    const store: Store.Store = Engine.pluggable({
      name: "gated",
      apply,
      timesOut: true,
      applyUnsafe: (key, policy, ops, timeout, done) => {
        const fiber = runFork(Effect.timeoutOrElse(apply(key, policy, ops), {
          duration: Duration.millis(timeout),
          orElse: () => Effect.fail(new Store.StoreUnavailable({ store: "gated", reason: "timed out" }))
        }))
        fiber.addObserver((exit) => {
          // withdrawn: never answered
          if (!Exit.hasInterrupts(exit)) done(exit)
        })
        return control.withdraw ? () => fiber.interruptUnsafe() : undefined
      }
    })
    return { store, control } as const
  })

// A limiter on `gated` (store timeout 100 ms, at t = 10 s) whose key "k"
// has a caller-side call that was made and never run (its caller
// interrupted before it started).
const withNeverRun = (gated: ReturnType<typeof gatedStore>) =>
  Effect.gen(function*() {
    const { control, store } = yield* gated
    yield* TestClock.setTime(10_000)
    let supervisor: Supervisor.Supervisor | undefined
    const limiter = yield* RateLimiter.make({
      policy: perHour(5),
      fallback: { mode: "local", timeout: "100 millis" }
    }).pipe(
      Effect.provideService(Store.CurrentStore, store),
      Effect.provideService(Supervisor.OnMake, (s) => {
        supervisor = s
      })
    )
    const neverRun = supervisor!.submitUnsafe("k", Request.Kind.Consume, 1, 0)
    assert.isTrue(Effect.isEffect(neverRun))
    return { control, limiter } as const
  })

for (const form of ["effect", "callback"] as const) {
  const gated = gatedStore(form)
  describe(`store-backed limiter: the caller-side path (${form === "effect" ? "apply" : "applyUnsafe"})`, () => {
    it.effect("an idle key is decided by the caller's own store call; no actor starts", () =>
      Effect.gen(function*() {
        const { control, store } = yield* gated
        const limiter = yield* RateLimiter.make({ policy: perHour(2) }).pipe(
          Effect.provideService(Store.CurrentStore, store)
        )
        for (let i = 0; i < 50; i++) assert.isTrue(yield* limiter.acquire(`k${i}`))
        // a call out: on the actor's path an actor would be running, waiting for it
        control.gate = yield* Deferred.make<void>()
        const call = yield* limiter.acquire("k0").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        assert.strictEqual((yield* limiter.stats).actors, 0)
        yield* Deferred.succeed(control.gate, undefined)
        assert.isTrue(yield* Fiber.join(call))
        const stats = yield* limiter.stats
        assert.strictEqual(stats.storeCalls, 51)
        assert.strictEqual(stats.started, 50)
        assert.strictEqual(stats.allowed, 51)
      }))

    it.effect("while the key's call is out, later requests queue and go in one call after it, in order", () =>
      Effect.gen(function*() {
        const { control, store } = yield* gated
        const limiter = yield* RateLimiter.make({ policy: perHour(5) }).pipe(
          Effect.provideService(Store.CurrentStore, store)
        )
        control.gate = yield* Deferred.make<void>()
        const first = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        const rest = yield* Effect.forEach(
          Array.from({ length: 9 }),
          () => limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        )
        yield* settle
        assert.strictEqual(control.calls.length, 1) // only the first is out; the others wait behind it
        yield* Deferred.succeed(control.gate, undefined)
        const decisions = [yield* Fiber.join(first), ...(yield* Fiber.joinAll(rest))]
        // in call order: 4, 3, 2, 1, 0 remaining, then denied
        assert.deepStrictEqual(decisions.map((d) => d.allowed), [
          true,
          true,
          true,
          true,
          true,
          false,
          false,
          false,
          false,
          false
        ])
        assert.deepStrictEqual(decisions.slice(0, 5).map((d) => d.remaining), [4, 3, 2, 1, 0])
        assert.deepStrictEqual(control.calls, [1, 9])
        const stats = yield* limiter.stats
        assert.strictEqual(stats.storeCalls, 2)
        assert.strictEqual(stats.storeOps, 10)
      }))

    it.effect("a hung store on that path: the timeout, the fallback, the degraded flag, recovery", () =>
      Effect.gen(function*() {
        const { control, store } = yield* gated
        const limiter = yield* RateLimiter.make({
          policy: perHour(10),
          fallback: { mode: "local", share: 0.5, timeout: "100 millis", retryAfter: "1 second" }
        }).pipe(Effect.provideService(Store.CurrentStore, store))
        control.gate = yield* Deferred.make<void>() // never opened: hung
        const call = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        assert.isUndefined(call.pollUnsafe())
        yield* TestClock.adjust("100 millis")
        const degraded = yield* Fiber.join(call)
        assert.isTrue(degraded.allowed && degraded.degraded === true && degraded.limit === 5)
        const stats = yield* limiter.stats
        assert.strictEqual(stats.storeFailures, 1)
        assert.strictEqual(stats.degraded, 1)
        control.gate = undefined
        yield* TestClock.adjust("1 second")
        const recovered = yield* limiter.consume("k")
        assert.isUndefined(recovered.degraded)
        assert.strictEqual(recovered.limit, 10)
      }))

    it.effect("the local fallback's state is dropped once the store answers again: the next outage starts fresh", () =>
      Effect.gen(function*() {
        const { control, store } = yield* gated
        const limiter = yield* RateLimiter.make({
          policy: perHour(4),
          fallback: { mode: "local", share: 0.5, retryAfter: "1 second" }
        }).pipe(Effect.provideService(Store.CurrentStore, store))
        control.die = true
        const outage = [yield* limiter.consume("k"), yield* limiter.consume("k"), yield* limiter.consume("k")]
        assert.deepStrictEqual(outage.map((d) => [d.allowed, d.degraded, d.limit]), [
          [true, true, 2],
          [true, true, 2],
          [false, true, 2]
        ])
        control.die = false
        yield* TestClock.adjust("1 second")
        const back = yield* limiter.consume("k")
        assert.isTrue(back.allowed && back.degraded === undefined && back.limit === 4)
        // the second outage: the local share is whole again (half a token an hour
        // has not refilled the first outage's two)
        control.die = true
        const again = yield* limiter.consume("k")
        assert.isTrue(again.allowed && again.degraded === true && again.remaining === 1)
      }))

    it.effect("a store that dies on that path: each fallback mode answers, nobody hangs", () =>
      Effect.gen(function*() {
        for (const mode of ["local", "allow", "deny", "error"] as const) {
          const { control, store } = yield* gated
          control.die = true
          const limiter = yield* RateLimiter.make({ policy: perHour(3), fallback: { mode } }).pipe(
            Effect.provideService(Store.CurrentStore, store)
          )
          const exit = yield* Effect.exit(limiter.acquire("k"))
          if (mode === "error") {
            assert.isTrue(
              Exit.isFailure(exit) &&
                exit.cause.reasons.some((r) => r._tag === "Fail" && r.error._tag === "StoreUnavailable")
            )
          } else {
            assert.deepStrictEqual(exit, Exit.succeed(mode !== "deny"))
          }
          assert.strictEqual((yield* limiter.stats).storeFailures, 1)
        }
      }))

    it.effect("an interrupted caller frees the key: what queued behind it goes on, and the key keeps working", () =>
      Effect.gen(function*() {
        const { control, store } = yield* gated
        const limiter = yield* RateLimiter.make({ policy: perHour(5) }).pipe(
          Effect.provideService(Store.CurrentStore, store)
        )
        control.gate = yield* Deferred.make<void>()
        const first = yield* limiter.acquire("k").pipe(Effect.forkChild({ startImmediately: true }))
        const second = yield* limiter.acquire("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        yield* Fiber.interrupt(first)
        // the interrupted call no longer holds the key: the queued one goes out
        yield* settle
        assert.strictEqual(control.calls.length, 2)
        yield* Deferred.succeed(control.gate, undefined)
        assert.isTrue(yield* Fiber.join(second))
        control.gate = undefined
        yield* settle
        assert.isTrue(yield* limiter.acquire("k"))
        // the gated store had not applied the interrupted call: 2 of 5 taken
        const peek = yield* limiter.peek("k")
        assert.strictEqual(peek.remaining, 3)
      }))

    it.effect("while the store is skipped after a failure, that path answers from the fallback without calling it", () =>
      Effect.gen(function*() {
        const { control, store } = yield* gated
        const limiter = yield* RateLimiter.make({
          policy: perHour(4),
          fallback: { mode: "local", share: 0.5, retryAfter: "1 second" }
        }).pipe(Effect.provideService(Store.CurrentStore, store))
        control.die = true
        assert.isTrue((yield* limiter.consume("k")).degraded)
        // the store is well again, but skipped until its second is up
        control.die = false
        yield* TestClock.adjust("999 millis")
        const skipped = yield* limiter.consume("k")
        assert.isTrue(skipped.allowed && skipped.degraded === true && skipped.limit === 2)
        assert.deepStrictEqual(control.calls, [1])
        assert.strictEqual((yield* limiter.stats).storeCalls, 1)
        yield* TestClock.adjust("1 millis")
        assert.isUndefined((yield* limiter.consume("k")).degraded)
        assert.deepStrictEqual(control.calls, [1, 1])
      }))

    it.effect("requests that come while the key's call is out wait for it up to its timeout, not less", () =>
      Effect.gen(function*() {
        const { control, store } = yield* gated
        const limiter = yield* RateLimiter.make({
          policy: perHour(5),
          fallback: { mode: "local", timeout: "1 second" }
        }).pipe(Effect.provideService(Store.CurrentStore, store))
        control.gate = yield* Deferred.make<void>()
        const first = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        const second = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        yield* TestClock.adjust("999 millis")
        yield* settle
        // the first is still out: the second has not overtaken it
        assert.deepStrictEqual(control.calls, [1])
        yield* Deferred.succeed(control.gate, undefined)
        assert.strictEqual((yield* Fiber.join(first)).remaining, 4)
        assert.strictEqual((yield* Fiber.join(second)).remaining, 3)
        assert.deepStrictEqual(control.calls, [1, 1])
      }))

    it.effect("while the key's actor has a batch out, a new request queues behind it rather than call on its own", () =>
      Effect.gen(function*() {
        const { control, store } = yield* gated
        const limiter = yield* RateLimiter.make({ policy: perHour(5) }).pipe(
          Effect.provideService(Store.CurrentStore, store)
        )
        const firstGate = yield* Deferred.make<void>()
        control.gate = firstGate
        const first = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        const second = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        // the first comes back; the actor sends the second, which stays out
        control.gate = yield* Deferred.make<void>()
        yield* Deferred.succeed(firstGate, undefined)
        yield* settle
        assert.deepStrictEqual(control.calls, [1, 1])
        const third = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        assert.deepStrictEqual(control.calls, [1, 1])
        yield* Deferred.succeed(control.gate, undefined)
        const decisions = [yield* Fiber.join(first), yield* Fiber.join(second), yield* Fiber.join(third)]
        assert.deepStrictEqual(decisions.map((d) => d.remaining), [4, 3, 2])
        assert.deepStrictEqual(control.calls, [1, 1, 1])
      }))

    it.effect("a key counts as active from its last call's start and from its answer (the sweep spares it)", () =>
      Effect.gen(function*() {
        const { control, store } = yield* gated
        const limiter = yield* RateLimiter.make({
          policy: perHour(5),
          idleTimeout: "1 second",
          fallback: { mode: "local", timeout: "5 seconds" }
        }).pipe(Effect.provideService(Store.CurrentStore, store))
        assert.isTrue(yield* limiter.acquire("k"))
        // a call that takes 600 ms: active until 1.6 s
        control.gate = yield* Deferred.make<void>()
        const slow = yield* limiter.acquire("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        yield* TestClock.adjust("600 millis")
        yield* Deferred.succeed(control.gate, undefined)
        assert.isTrue(yield* Fiber.join(slow))
        control.gate = undefined
        yield* TestClock.adjust("900 millis")
        assert.deepStrictEqual([(yield* limiter.stats).buckets, (yield* limiter.stats).reaped], [1, 0])
        // a call whose caller leaves while it is out, at 1.5 s: active until 2.5 s
        control.gate = yield* Deferred.make<void>()
        const left = yield* limiter.acquire("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        yield* Fiber.interrupt(left)
        control.gate = undefined
        yield* TestClock.adjust("900 millis")
        assert.deepStrictEqual([(yield* limiter.stats).buckets, (yield* limiter.stats).reaped], [1, 0])
        yield* TestClock.adjust("600 millis")
        assert.deepStrictEqual([(yield* limiter.stats).buckets, (yield* limiter.stats).reaped], [0, 1])
      }))

    it.effect("a request queued behind the key's call whose caller leaves before it is sent takes nothing", () =>
      Effect.gen(function*() {
        const { control, store } = yield* gated
        const limiter = yield* RateLimiter.make({ policy: perHour(5) }).pipe(
          Effect.provideService(Store.CurrentStore, store)
        )
        control.gate = yield* Deferred.make<void>()
        const first = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        const second = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        yield* Fiber.interrupt(second)
        yield* Deferred.succeed(control.gate, undefined)
        control.gate = undefined
        assert.strictEqual((yield* Fiber.join(first)).remaining, 4)
        yield* settle
        assert.strictEqual((yield* limiter.peek("k")).remaining, 4)
      }))

    it.effect("a key whose call is out is not swept, so the key's next call cannot overtake it", () =>
      Effect.gen(function*() {
        const { control, store } = yield* gated
        const limiter = yield* RateLimiter.make({
          policy: perHour(5),
          idleTimeout: "1 second",
          fallback: { mode: "local", timeout: "5 seconds" }
        }).pipe(Effect.provideService(Store.CurrentStore, store))
        control.gate = yield* Deferred.make<void>()
        const first = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        yield* TestClock.adjust("1 second")
        assert.strictEqual((yield* limiter.stats).buckets, 1)
        const second = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        assert.deepStrictEqual(control.calls, [1])
        yield* Deferred.succeed(control.gate, undefined)
        assert.deepStrictEqual([(yield* Fiber.join(first)).remaining, (yield* Fiber.join(second)).remaining], [4, 3])
      }))

    it.effect("a caller-side call never run holds the key's actor back twice the store timeout, then frees the key", () =>
      Effect.gen(function*() {
        const { control, limiter } = yield* withNeverRun(gated)
        const next = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        yield* TestClock.adjust("199 millis")
        assert.isUndefined(next.pollUnsafe())
        yield* TestClock.adjust("1 millis")
        assert.strictEqual((yield* Fiber.join(next)).remaining, 4)
        assert.deepStrictEqual(control.calls, [1])
        // the key is free again: decided on the caller's fiber, no actor
        control.gate = yield* Deferred.make<void>()
        const again = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        assert.strictEqual((yield* limiter.stats).actors, 0)
        yield* Deferred.succeed(control.gate, undefined)
        assert.strictEqual((yield* Fiber.join(again)).remaining, 3)
      }))

    it.effect("a caller-side call found never run once twice its timeout is over frees the key at once", () =>
      Effect.gen(function*() {
        const { control, limiter } = yield* withNeverRun(gated)
        yield* TestClock.adjust("200 millis")
        // the key still looks busy: this one goes to the actor, which goes at once
        assert.strictEqual((yield* limiter.consume("k")).remaining, 4)
        yield* settle
        control.gate = yield* Deferred.make<void>()
        const again = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
        yield* settle
        assert.strictEqual((yield* limiter.stats).actors, 0)
        yield* Deferred.succeed(control.gate, undefined)
        assert.strictEqual((yield* Fiber.join(again)).remaining, 3)
      }))
  })
}

describe("store-backed limiter: the caller-side path's callback form", () => {
  it.effect("a caller that leaves once its call is sent (it cannot be withdrawn) frees the key, and the store applies it", () =>
    Effect.gen(function*() {
      const { control, store } = yield* gatedStore("callback")
      const limiter = yield* RateLimiter.make({ policy: perHour(5) }).pipe(
        Effect.provideService(Store.CurrentStore, store)
      )
      control.withdraw = false
      control.gate = yield* Deferred.make<void>()
      const first = yield* limiter.acquire("k").pipe(Effect.forkChild({ startImmediately: true }))
      const second = yield* limiter.acquire("k").pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      yield* Fiber.interrupt(first)
      const left = yield* Fiber.await(first)
      assert.isTrue(Exit.hasInterrupts(left))
      assert.isFalse(left._tag === "Failure" && left.cause.reasons.some((r) => r._tag === "Die"))
      // the key is free: the queued one goes out while the first is still out
      yield* settle
      assert.deepStrictEqual(control.calls, [1, 1])
      yield* Deferred.succeed(control.gate, undefined)
      assert.isTrue(yield* Fiber.join(second))
      // both taken: the first's answer was lost, not its units
      control.gate = undefined
      assert.strictEqual((yield* limiter.peek("k")).remaining, 3)
    }))

  it.effect("a store's answer that cannot be read reaches the caller as a defect, and the key goes on", () =>
    Effect.gen(function*() {
      const { control, store } = yield* gatedStore("callback")
      const limiter = yield* RateLimiter.make({ policy: perHour(5) }).pipe(
        Effect.provideService(Store.CurrentStore, store)
      )
      control.empty = true
      const exit = yield* Effect.exit(limiter.consume("k"))
      assert.isTrue(exit._tag === "Failure" && exit.cause.reasons.some((r) => r._tag === "Die"), String(exit))
      control.empty = false
      assert.strictEqual((yield* limiter.consume("k")).remaining, 4)
    }))
})

describe("store-backed limiter: a store that enforces its own timeout, without the callback form", () => {
  // A MemoryStore that gives up on a call after the timeout it is given (a
  // minute when given none), saying so in its own words.
  const ownTimeout = Effect.gen(function*() {
    const inner = Engine.engineOf(yield* MemoryStore.make)
    const control = { hung: false }
    const store = Engine.pluggable({
      name: "own",
      timesOut: true,
      apply: (key, policy, ops, timeoutMillis) =>
        Effect.timeoutOrElse(Effect.suspend(() => control.hung ? Effect.never : inner.apply(key, policy, ops)), {
          duration: Duration.millis(timeoutMillis ?? 60_000),
          orElse: () =>
            Effect.fail(new Store.StoreUnavailable({ store: "own", reason: `gave up after ${timeoutMillis} ms` }))
        }),
      applyAll: (entries, timeoutMillis) =>
        Effect.timeoutOrElse(Effect.suspend(() => control.hung ? Effect.never : inner.applyAll!(entries)), {
          duration: Duration.millis(timeoutMillis ?? 60_000),
          orElse: () =>
            Effect.fail(new Store.StoreUnavailable({ store: "own", reason: `gave up after ${timeoutMillis} ms` }))
        })
    })
    return { store, control } as const
  })

  it.effect("is called through apply on both paths and applyAll, given the limiter's timeout; its own error is told", () =>
    Effect.gen(function*() {
      const { control, store } = yield* ownTimeout
      const limiter = yield* RateLimiter.make({
        policy: perHour(5),
        fallback: { mode: "error", timeout: "100 millis", retryAfter: "1 millis" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      assert.strictEqual((yield* limiter.consume("k")).remaining, 4)
      yield* limiter.wait("k")
      assert.strictEqual((yield* limiter.peek("k")).remaining, 3)
      assert.isTrue(yield* limiter.acquire(["a", "b"]))
      control.hung = true
      for (const call of [limiter.consume("k"), limiter.wait("k"), limiter.acquire(["a", "b"])]) {
        yield* TestClock.adjust("1 millis")
        const fiber = yield* Effect.forkChild(Effect.flip(call), { startImmediately: true })
        yield* settle
        yield* TestClock.adjust("100 millis")
        const error = yield* Fiber.join(fiber)
        assert.deepStrictEqual(
          error._tag === "StoreUnavailable" ? [error.store, error.reason] : [],
          ["own", "gave up after 100 ms"]
        )
      }
    }))
})

describe("store-backed limiter: a store that answers past its own timeout", () => {
  it.effect("its late answer to a call given up on does not free the key while a later call is out", () =>
    Effect.gen(function*() {
      const inner = Engine.engineOf(yield* MemoryStore.make)
      const runFork = Effect.runForkWith(yield* Effect.context<never>())
      // every caller-side call waits for its own gate, and is never timed out
      const gates: Array<Deferred.Deferred<void>> = []
      const store: Store.Store = Engine.pluggable({
        name: "late",
        apply: inner.apply,
        timesOut: true,
        applyUnsafe: (key, policy, ops, _timeout, done) => {
          const gate = Deferred.makeUnsafe<void>()
          gates.push(gate)
          runFork(Effect.andThen(Deferred.await(gate), inner.apply(key, policy, ops))).addObserver(done)
          return undefined
        }
      })
      const limiter = yield* RateLimiter.make({
        policy: perHour(5),
        fallback: { mode: "local", timeout: "1 second" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      const first = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      // a waiter goes to the key's actor, which waits for the first call up to twice the timeout, then gives up on it
      const waiter = yield* limiter.wait("k").pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      yield* TestClock.adjust("2 seconds")
      yield* settle
      yield* Fiber.join(waiter)
      // the actor is done: a later call goes out from its caller
      const second = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      assert.strictEqual(gates.length, 2)
      // the first call's late answer comes while the second is out
      yield* Deferred.succeed(gates[0], undefined)
      yield* settle
      // a third queues behind the second, as behind any call out
      const third = yield* limiter.consume("k").pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      assert.strictEqual(gates.length, 2)
      yield* Deferred.succeed(gates[1], undefined)
      const decisions = [yield* Fiber.join(first), yield* Fiber.join(second), yield* Fiber.join(third)]
      assert.deepStrictEqual(decisions.map((d) => d.allowed), [true, true, true])
      assert.strictEqual(yield* limiter.peek("k").pipe(Effect.map((d) => d.remaining)), 1)
    }))
})

describe("store-backed limiter: a store call that the store itself interrupts", () => {
  for (const fastPath of [true, false]) {
    it.effect(`is a store failure: the fallback answers, on one key and on several (fastPath: ${fastPath})`, () =>
      Effect.gen(function*() {
        // the store's own fiber is interrupted (its connection's scope closed, say): the caller was not
        const store: Store.Store = {
          name: "interrupting",
          apply: () => Effect.interrupt,
          applyAll: () => Effect.interrupt
        }
        const limiter = yield* RateLimiter.make({
          policy: perHour(5),
          fastPath,
          fallback: { mode: "local", share: 1 }
        }).pipe(Effect.provideService(Store.CurrentStore, store))
        const one = yield* Effect.exit(limiter.consume("k"))
        assert.isTrue(Exit.isSuccess(one) && one.value.allowed && one.value.degraded === true, String(one))
        const several = yield* Effect.exit(limiter.consume(["a", "b"]))
        assert.isTrue(
          Exit.isSuccess(several) && several.value.allowed && several.value.degraded === true,
          String(several)
        )
        // a waiter too, on the key's actor
        const waited = yield* Effect.exit(limiter.wait("w", { cost: 2 }))
        assert.isTrue(Exit.isSuccess(waited), String(waited))
        assert.isAtLeast((yield* limiter.stats).storeFailures, 1)
        // with fallback "error", the failure says what happened
        const strict = yield* RateLimiter.make({ policy: perHour(5), fastPath, fallback: { mode: "error" } }).pipe(
          Effect.provideService(Store.CurrentStore, store)
        )
        for (const call of [strict.consume("k"), strict.consume(["a", "b"])]) {
          const error = yield* Effect.flip(call)
          assert.isTrue(error instanceof Store.StoreUnavailable, String(error))
          assert.strictEqual((error as Store.StoreUnavailable).reason, "its call was interrupted")
          // (the store is skipped for a second after a failure)
          yield* TestClock.adjust("1 second")
        }
      }))
  }
})
