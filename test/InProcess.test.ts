import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Layer, Option } from "effect"
import { RateLimiter as EffectRateLimiter } from "effect/persistence"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../src/index.ts"
import { RateLimiterStore } from "../src/persistence/index.ts"

// The in-process backend's own paths (Local.ts): the shortcut that takes in
// place must decide as the operation does; what a key has pending (units
// held, waiters) makes it live; a delete or a reconfigure of a key others wait
// on; transactions of tollgate/persistence.

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

const perSecond = (capacity: number) => Policy.tokenBucket({ capacity, refill: { tokens: 1, per: "1 second" } })

for (const fastPath of [true, false]) {
  const make = (options: RateLimiter.Options) => RateLimiter.make({ fastPath, ...options })

  describe(`in process (fastPath: ${fastPath})`, () => {
    it.effect("a refusal that starts a block starts it, however often the key was decided before", () =>
      Effect.gen(function*() {
        const limiter = yield* make({
          policy: Policy.tokenBucket({
            capacity: 2,
            refill: { tokens: 1, per: "1 second" },
            blockDuration: "5 seconds"
          })
        })
        assert.isTrue(yield* limiter.acquire("k"))
        assert.isTrue(yield* limiter.acquire("k"))
        assert.isFalse(yield* limiter.acquire("k"))
        // the bucket has refilled, the block is not over
        yield* TestClock.adjust("2 seconds")
        assert.isFalse(yield* limiter.acquire("k"))
        yield* TestClock.adjust("3 seconds")
        assert.isTrue(yield* limiter.acquire("k"))
      }))

    it.effect("a dry run lets a refusal through, however often the key was decided before", () =>
      Effect.gen(function*() {
        const limiter = yield* make({
          policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" }, dryRun: true })
        })
        assert.isTrue(yield* limiter.acquire("k"))
        assert.isTrue(yield* limiter.acquire("k"))
        assert.isTrue(yield* limiter.acquire("k"))
        const stats = yield* limiter.stats
        assert.deepStrictEqual([stats.allowed, stats.dryRun], [1, 2])
      }))

    it.effect("acquire never jumps a waiter, even when the units it asks for are there", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(2) })
        assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
        yield* TestClock.adjust("1 second")
        // one unit there; a waiter for two stands in line
        const waiter = yield* Effect.forkChild(limiter.wait("k", { cost: 2 }), { startImmediately: true })
        yield* settle
        assert.isFalse(yield* limiter.acquire("k"))
        yield* TestClock.adjust("1 second")
        yield* Fiber.join(waiter)
      }))

    it.effect("acquire with a window of its own is decided against that window every time", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.fixedWindow({ limit: 1, window: "1 second" }) })
        assert.isTrue(yield* limiter.acquire("k", { duration: "10 seconds" }))
        assert.isFalse(yield* limiter.acquire("k", { duration: "10 seconds" }))
        // past the policy's second, within the call's ten
        yield* TestClock.adjust("2 seconds")
        assert.isFalse(yield* limiter.acquire("k", { duration: "10 seconds" }))
        yield* TestClock.adjust("8 seconds")
        assert.isTrue(yield* limiter.acquire("k", { duration: "10 seconds" }))
      }))

    it.effect("peek with a window of its own answers what consume with it would, and takes nothing", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.fixedWindow({ limit: 2, window: "1 second" }) })
        const ten = { duration: "10 seconds" } as const
        assert.isTrue(yield* limiter.acquire("k", ten))
        // past the policy's second, within the call's ten: one unit left
        yield* TestClock.adjust("2 seconds")
        const before = yield* limiter.peek("k", ten)
        assert.deepStrictEqual([before.allowed, before.remaining], [true, 1])
        const taken = yield* limiter.consume("k", ten)
        assert.deepStrictEqual([taken.allowed, taken.remaining], [true, 0])
        const after = yield* limiter.peek("k", ten)
        const refused = yield* limiter.consume("k", ten)
        for (const d of [after, refused]) {
          assert.deepStrictEqual([d.allowed, Duration.toMillis(d.retryAfter)], [false, 8_000])
        }
        // a policy whose windows are not per call refuses the duration, as consume does
        const other = yield* make({ policy: perSecond(5) })
        for (const call of [other.peek("k", ten), other.consume("k", ten)]) {
          const error = yield* Effect.flip(call)
          assert.strictEqual(error._tag, "InvalidRequest")
          assert.strictEqual(error._tag === "InvalidRequest" && error.field, "duration")
        }
        assert.strictEqual((yield* other.peek("k")).remaining, 5)
      }))

    it.effect("a key whose only activity is units held for a call over several keys is live for get and delete", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(5) })
        assert.isTrue(yield* limiter.acquire("b", { cost: 5 }))
        // "a" < "b": the call holds 2 on a fresh "a", then waits on "b"
        const call = yield* Effect.forkChild(limiter.wait(["a", "b"], { cost: 2 }), { startImmediately: true })
        yield* settle
        assert.isTrue(Option.isSome(yield* limiter.get("a")))
        assert.isTrue(yield* limiter.delete("a"))
        yield* Fiber.interrupt(call)
        // nothing held any more: a fresh key, not live
        assert.isTrue(Option.isNone(yield* limiter.get("a")))
      }))

    it.effect("a delete keeps counting the units a call over several keys holds on the key, and that call's take", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.fixedWindow({ limit: 5, window: "1 minute" }) })
        assert.isTrue(yield* limiter.acquire("b", { cost: 5 }))
        // "a" < "b": the call holds 2 on "a", then waits on "b"
        const call = yield* Effect.forkChild(limiter.wait(["a", "b"], { cost: 2 }), { startImmediately: true })
        yield* settle
        assert.isTrue(yield* limiter.delete("a"))
        // the key's state is gone, the 2 held are not: 3 left
        assert.isFalse(yield* limiter.acquire("a", { cost: 4 }))
        assert.isTrue(yield* limiter.acquire("a", { cost: 3 }))
        // a new minute: "b" admits the call, which takes its 2 from "a" too
        yield* TestClock.adjust("1 minute")
        yield* Fiber.join(call)
        assert.isFalse(yield* limiter.acquire("a", { cost: 4 }))
        assert.isTrue(yield* limiter.acquire("a", { cost: 3 }))
      }))

    it.effect("a key deleted while a call holds units on it is reconfigured from a fresh key's state", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.fixedWindow({ limit: 5, window: "1 minute" }) })
        assert.isTrue(yield* limiter.acquire("b", { cost: 5 }))
        const call = yield* Effect.forkChild(limiter.wait(["a", "b"], { cost: 2 }), { startImmediately: true })
        yield* settle
        assert.isTrue(yield* limiter.delete("a"))
        // no state: a fresh key's 5 carried over as they are (as-is), less the 2 held
        yield* limiter.reconfigure("a", Policy.fixedWindow({ limit: 10, window: "1 minute" }))
        assert.isFalse(yield* limiter.acquire("a", { cost: 4 }))
        assert.isTrue(yield* limiter.acquire("a", { cost: 3 }))
        yield* Fiber.interrupt(call)
      }))

    it.effect("a key with a waiter in line is live for get, even in the instant its state settles", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1) })
        yield* limiter.block("k", "1 second")
        // a get that comes exactly when the block ends (its sleep starts before the line's)
        const get = yield* Effect.forkChild(Effect.andThen(Effect.sleep("1 second"), limiter.get("k")), {
          startImmediately: true
        })
        // a waiter for no units stands in line while the key is blocked
        const waiter = yield* Effect.forkChild(limiter.wait("k", { cost: 0 }), { startImmediately: true })
        yield* settle
        assert.isUndefined(waiter.pollUnsafe())
        yield* TestClock.adjust("1 second")
        // the key's state is settled (full), but someone waits on it
        assert.isTrue(Option.isSome(yield* Fiber.join(get)))
        yield* Fiber.join(waiter)
      }))

    it.effect("a waiter whose caller leaves in the pass that admits it gives its permit back", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.concurrency({ capacity: 1 }) })
        assert.isTrue(yield* limiter.acquire("k"))
        const waiter = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
        yield* settle
        // the release admits the waiter; the releasing fiber, answered first in
        // that pass, interrupts the waiter before its own answer reaches it
        yield* Effect.andThen(limiter.release("k"), Effect.sync(() => waiter.interruptUnsafe()))
        assert.isTrue(Exit.hasInterrupts(yield* Fiber.await(waiter)))
        yield* settle
        // the permit is not lost
        assert.strictEqual((yield* limiter.peek("k")).remaining, 1)
        assert.isTrue(yield* limiter.acquire("k"))
      }))

    it.effect("the permit a leaving waiter gives back goes to the next in line at once", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.concurrency({ capacity: 1 }) })
        assert.isTrue(yield* limiter.acquire("k"))
        const first = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
        yield* settle
        const second = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
        yield* settle
        yield* Effect.andThen(limiter.release("k"), Effect.sync(() => first.interruptUnsafe()))
        yield* settle
        assert.deepStrictEqual(second.pollUnsafe(), Exit.void)
        assert.strictEqual((yield* limiter.peek("k")).remaining, 0)
      }))

    it.effect("a block goes on under a new policy", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(2) })
        assert.isTrue(yield* limiter.acquire("k"))
        yield* limiter.block("k", "10 seconds")
        yield* limiter.reconfigure("k", perSecond(5))
        assert.isFalse(yield* limiter.acquire("k"))
        yield* TestClock.adjust("10 seconds")
        assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
      }))

    it.effect("a key deleted while a waiter is in line goes on under its own policy, from no state", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.fixedWindow({ limit: 2, window: "1 second" }) })
        yield* limiter.reconfigure("k", Policy.fixedWindow({ limit: 10, window: "1 second" }))
        assert.isTrue(yield* limiter.acquire("k", { cost: 10 }))
        const waiter = yield* Effect.forkChild(limiter.wait("k", { cost: 2 }), { startImmediately: true })
        yield* settle
        yield* TestClock.adjust("500 millis")
        assert.isTrue(yield* limiter.delete("k"))
        // the waiter goes at once under the key's own policy, its window opening now
        yield* settle
        assert.isDefined(waiter.pollUnsafe())
        const d = yield* limiter.peek("k")
        assert.strictEqual(d.limit, 2)
        assert.strictEqual(d.remaining, 0)
        assert.strictEqual(Duration.toMillis(d.resetAfter), 1000)
        // what the waiter took stays taken
        assert.isFalse(yield* limiter.acquire("k"))
        yield* TestClock.adjust("1 second")
        assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
      }))
  })
}

describe("in process: a caller that leaves before its key's actor serves it", () => {
  it.effect("takes nothing", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ fastPath: false, policy: perSecond(3) })
      // the key's actor is running, waiting for its next batch
      assert.isTrue(yield* limiter.acquire("k"))
      // queued: the actor is woken, but has not served it yet
      const call = yield* Effect.forkChild(limiter.acquire("k", { cost: 2 }), { startImmediately: true })
      call.interruptUnsafe()
      assert.isTrue(Exit.hasInterrupts(yield* Fiber.await(call)))
      yield* settle
      assert.strictEqual((yield* limiter.peek("k")).remaining, 2)
      assert.strictEqual((yield* limiter.stats).allowed, 1)
    }))
})

describe("in process: a delete", () => {
  it.effect("a key reconfigured, then deleted in its actor's batch, is forgotten", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ fastPath: false, policy: perSecond(2) })
      yield* limiter.reconfigure("k", perSecond(5))
      assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
      assert.isTrue(yield* limiter.delete("k"))
      yield* settle
      // its actor ends with it
      assert.deepStrictEqual([(yield* limiter.stats).buckets, (yield* limiter.stats).actors], [0, 0])
      assert.strictEqual((yield* limiter.peek("k")).limit, 2)
    }))

  it.effect("a key deleted, then only read (peek, get) in the same batch, is forgotten", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ fastPath: false, policy: perSecond(2) })
      assert.isTrue(yield* limiter.acquire("k"))
      // queued together for the key's actor: one batch
      const calls = yield* Effect.forkChild(
        Effect.all([limiter.delete("k"), limiter.peek("k"), limiter.get("k")], { concurrency: "unbounded" }),
        { startImmediately: true }
      )
      const [deleted, peeked, got] = yield* Fiber.join(calls)
      assert.isTrue(deleted)
      assert.strictEqual(peeked.remaining, 2)
      assert.isTrue(Option.isNone(got))
      assert.strictEqual((yield* limiter.stats).buckets, 0)
    }))

  it.effect("a key deleted, then used in the same batch, keeps what that use took", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ fastPath: false, policy: perSecond(2) })
      assert.isTrue(yield* limiter.acquire("k"))
      const calls = yield* Effect.forkChild(
        Effect.all([limiter.delete("k"), limiter.acquire("k", { cost: 2 })], { concurrency: "unbounded" }),
        { startImmediately: true }
      )
      assert.deepStrictEqual(yield* Fiber.join(calls), [true, true])
      assert.strictEqual((yield* limiter.stats).buckets, 1)
      assert.isFalse(yield* limiter.acquire("k"))
    }))

  it.effect("a waiter admitted right after a delete keeps what it took (the key is not forgotten)", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: Policy.fixedWindow({ limit: 2, window: "1 second" }) })
      assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
      const waiter = yield* Effect.forkChild(limiter.wait("k", { cost: 2 }), { startImmediately: true })
      yield* settle
      yield* TestClock.adjust("500 millis")
      assert.isTrue(yield* limiter.delete("k"))
      yield* settle
      assert.deepStrictEqual(waiter.pollUnsafe(), Exit.void)
      // the waiter's 2 are the new window's 2
      assert.isFalse(yield* limiter.acquire("k"))
      assert.strictEqual((yield* limiter.stats).buckets, 1)
    }))
})

describe("in process: tollgate/persistence's transactions", () => {
  it.effect("Effect's RateLimiter on tollgate's store counts each consume against its key", () =>
    Effect.gen(function*() {
      const limiter = yield* EffectRateLimiter.RateLimiter
      const options = { key: "k", limit: 2, window: "1 second", onExceeded: "fail" } as const
      assert.strictEqual((yield* limiter.consume(options)).remaining, 1)
      assert.strictEqual((yield* limiter.consume(options)).remaining, 0)
      const exit = yield* Effect.exit(limiter.consume(options))
      assert.isTrue(Exit.isFailure(exit))
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* limiter.consume(options)).remaining, 1)
    }).pipe(
      Effect.scoped,
      Effect.provide(EffectRateLimiter.layer.pipe(Layer.provide(RateLimiterStore.layer())))
    ))
})
