/**
 * Where the store-backed bucket actor (src/internal/actor/Remote.ts) once decided
 * differently from the in-process one, each shown by the smallest test, with
 * the in-memory store (so it needs no Redis: the store was not at fault,
 * Remote was). Each now decides as in-process:
 *
 * 1. A `wait` that finds the key empty of capacity is sent as an `Admit`
 *    (taken only if admitted), not a `Take`: a sliding log with
 *    `countBlocked` logs no refused wait, as `Bucket.admitNow` commits only
 *    an admission. The head of a line asks the same way.
 * 2. A `wait` on a concurrency limit with every unit out waits (up to
 *    `maxWait`) for a release, as `onRelease` in `Bucket.enqueueWaiter` does:
 *    a release in this process wakes the head at once, one in another process
 *    is seen when the head asks again (every 100 ms).
 * 3. A store whose `apply` dies (a defect rather than `StoreUnavailable`) is a
 *    store that failed: the fallback answers (`StoreUnavailable` with
 *    `fallback: { mode: "error" }`), instead of leaving the call hanging. (A
 *    defect in the actor's own serving fails its batch and line with
 *    `BucketFailed`; `test/Faults.test.ts` shows it in process.)
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as MemoryStore from "../../src/MemoryStore.ts"
import * as Policy from "../../src/Policy.ts"
import { RateLimiter } from "../../src/RateLimiter.ts"
import * as Store from "../../src/Store.ts"

const limiters = (policy: Policy.Policy) =>
  Effect.gen(function*() {
    const local = yield* RateLimiter.make({ policy })
    const store = yield* MemoryStore.make
    const remote = yield* RateLimiter.make({ policy }).pipe(Effect.provideService(Store.CurrentStore, store))
    return { local, remote } as const
  })

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

// The one unit of a concurrency limit taken, then a caller waiting up to 1 s for it.
const holdThenWait = (limiter: RateLimiter["Service"]) =>
  Effect.gen(function*() {
    assert.isTrue(yield* limiter.acquire("k"))
    const waiter = yield* Effect.exit(limiter.wait("k", { maxWait: "1 second" })).pipe(
      Effect.forkChild({ startImmediately: true })
    )
    yield* settle
    return waiter
  })

describe("store-backed actor: former differences from in-process", () => {
  it.effect("#1 a refused wait logs no attempt on a sliding log with countBlocked", () =>
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
      assert.isTrue(yield* run(remote)) // the refused wait at 500 was not logged
    }))

  it.effect("#2 a wait on a concurrency limit waits for a release", () =>
    Effect.gen(function*() {
      const { local, remote } = yield* limiters(Policy.concurrency({ capacity: 1 }))
      const run = (limiter: RateLimiter["Service"]) =>
        Effect.gen(function*() {
          const waiter = yield* holdThenWait(limiter)
          yield* limiter.release("k")
          yield* settle
          return yield* Fiber.join(waiter)
        })
      assert.isTrue(Exit.isSuccess(yield* run(local)))
      assert.isTrue(Exit.isSuccess(yield* run(remote))) // admitted on the release
    }))

  it.effect("#2b a wait on a concurrency limit with no release gives up at its maxWait, taking nothing", () =>
    Effect.gen(function*() {
      const { local, remote } = yield* limiters(Policy.concurrency({ capacity: 1 }))
      const run = (limiter: RateLimiter["Service"]) =>
        Effect.gen(function*() {
          const waiter = yield* holdThenWait(limiter)
          yield* TestClock.adjust("999 millis")
          assert.isUndefined(waiter.pollUnsafe()) // still waiting
          yield* TestClock.adjust("1 millis")
          const exit = yield* Fiber.join(waiter)
          yield* limiter.release("k")
          // the waiter took nothing: the released unit is there for the next caller
          return { exit, next: yield* limiter.acquire("k") }
        })
      for (const { exit, next } of [yield* run(local), yield* run(remote)]) {
        assert.isTrue(
          Exit.isFailure(exit) &&
            exit.cause.reasons.some((r) => r._tag === "Fail" && r.error._tag === "RateLimitExceeded")
        )
        assert.isTrue(next)
      }
    }))

  it.effect("#3 a store that dies fails the call instead of leaving it hanging", () =>
    Effect.gen(function*() {
      const store: Store.Store = { name: "dying", apply: () => Effect.die(new Error("boom")) }
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } })
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      const call = yield* Effect.exit(limiter.acquire("k")).pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      yield* TestClock.adjust("1 minute")
      // answered by the fallback (local, by default): admitted
      const exit = call.pollUnsafe()
      assert.isTrue(exit !== undefined && Exit.isSuccess(exit) && Exit.isSuccess(exit.value) && exit.value.value)
      // with fallback error, the call fails with StoreUnavailable
      const strict = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } }),
        fallback: { mode: "error" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      const failed = yield* Effect.exit(strict.acquire("k")).pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      yield* TestClock.adjust("1 minute")
      const failure = failed.pollUnsafe()
      assert.isTrue(
        failure !== undefined && Exit.isSuccess(failure) && Exit.isFailure(failure.value) &&
          failure.value.cause.reasons.some((r) => r._tag === "Fail" && r.error._tag === "StoreUnavailable"),
        String(failure)
      )
    }))
})
