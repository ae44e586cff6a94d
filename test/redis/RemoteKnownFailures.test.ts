/**
 * Where the store-backed bucket actor (src/actor/Remote.ts) does not decide
 * as the in-process one does, each shown by the smallest test, with the
 * in-memory store (so it needs no Redis: the store is not at fault, Remote
 * is). Each is marked `it.effect.fails`: it passes while the bug is there,
 * and fails once it is fixed; then drop the `.fails`.
 *
 * 1. A `wait` that finds the key empty of capacity is sent to the store as a
 *    Take. Since denials keep their state (`MemoryStore.applyOps`), a
 *    sliding log with `countBlocked` logs that refused attempt; in-process,
 *    a wait that is not admitted at once logs nothing (`Bucket.admitNow`
 *    commits only an admission). The store-backed key then stays blocked
 *    longer.
 * 2. A `wait` on a concurrency limit with every unit out: in-process it waits
 *    (up to `maxWait`) for a release (`onRelease` in `Bucket.enqueueWaiter`);
 *    store-backed it fails at once with `RateLimitExceeded` (retryAfter
 *    Infinity), because `Remote.serveWait` compares the store's Infinity with
 *    `maxWait` and has no line that a release wakes.
 * 3. A store whose `apply` dies (a defect rather than `StoreUnavailable`)
 *    leaves the caller hanging for ever: `Remote.call` maps only
 *    `StoreUnavailable` to the fallback, the defect ends the actor fiber, and
 *    `Bucket.close` fails what is in line and in the mailbox but not the
 *    batch that was being served. (`RedisStore` maps every failure to
 *    `StoreUnavailable`, so it never dies this way.)
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as Policy from "../../src/Policy.ts"
import { RateLimiter } from "../../src/RateLimiter.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import * as Store from "../../src/store/Store.ts"

const limiters = (policy: Policy.Policy) =>
  Effect.gen(function*() {
    const local = yield* RateLimiter.make({ policy })
    const store = yield* MemoryStore.make
    const remote = yield* RateLimiter.make({ policy }).pipe(Effect.provideService(Store.CurrentStore, store))
    return { local, remote } as const
  })

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

describe("store-backed actor: known differences from in-process", () => {
  it.effect.fails("#1 a refused wait logs no attempt on a sliding log with countBlocked", () =>
    Effect.gen(function*() {
      const { local, remote } = yield* limiters(Policy.slidingLog({ limit: 1, window: "1 second", countBlocked: true }))
      const run = (limiter: RateLimiter["Service"]) =>
        Effect.gen(function*() {
          yield* TestClock.setTime(0)
          assert.isTrue(yield* limiter.acquire("k")) // logged at 0
          yield* TestClock.setTime(500)
          const refused = yield* Effect.exit(limiter.wait("k", { maxWait: 0 }))
          assert.isTrue(Exit.isFailure(refused))
          yield* TestClock.setTime(1000) // the unit logged at 0 has left the window
          return yield* limiter.acquire("k")
        })
      assert.isTrue(yield* run(local))
      assert.isTrue(yield* run(remote)) // false: the refused wait was logged at 500
    }))

  it.effect.fails("#2 a wait on a concurrency limit waits for a release", () =>
    Effect.gen(function*() {
      const { local, remote } = yield* limiters(Policy.concurrency({ capacity: 1 }))
      const run = (limiter: RateLimiter["Service"]) =>
        Effect.gen(function*() {
          assert.isTrue(yield* limiter.acquire("k"))
          const waiter = yield* Effect.exit(limiter.wait("k", { maxWait: "1 second" })).pipe(
            Effect.forkChild({ startImmediately: true })
          )
          yield* settle
          yield* limiter.release("k")
          yield* settle
          return yield* Fiber.join(waiter)
        })
      assert.isTrue(Exit.isSuccess(yield* run(local)))
      assert.isTrue(Exit.isSuccess(yield* run(remote))) // fails at once: RateLimitExceeded, retryAfter Infinity
    }))

  it.effect.fails("#3 a store that dies fails the call instead of leaving it hanging", () =>
    Effect.gen(function*() {
      const store: Store.Store = { name: "dying", apply: () => Effect.die(new Error("boom")) }
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } })
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      const call = yield* Effect.exit(limiter.acquire("k")).pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      yield* TestClock.adjust("1 minute")
      assert.isDefined(call.pollUnsafe()) // undefined: still running
    }))
})
