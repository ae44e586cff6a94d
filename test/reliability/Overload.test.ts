/**
 * Overload: 100,000 concurrent callers on one key, with a small mailbox and a
 * short line of waiters. Memory stays bounded (the mailbox and the line never
 * hold more than their caps, sampled by every caller before and after its
 * call), every caller gets a documented answer (a decision, or `Overloaded`
 * with the reason and capacity that refused it), nothing hangs, and
 * `stats.overloaded` counts exactly the refusals.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../../src/index.ts"
import { size } from "../size.ts"
import { failureOf, isDone, settle } from "./probe.ts"

// 100,000 in CI (test/size.ts); a quarter of that in a developer's run.
const CALLERS = size("TOLLGATE_OVERLOAD_CALLERS", 25_000, 100_000)
const MAILBOX = 64
const WAITERS = 16

type Limiter = RateLimiter["Service"]

// Tracks the largest mailbox and line the callers ever saw.
const peaks = (limiter: Limiter) => {
  const peak = { queued: 0, waiting: 0 }
  const sample = Effect.map(limiter.stats, (s) => {
    if (s.queued > peak.queued) peak.queued = s.queued
    if (s.waiting > peak.waiting) peak.waiting = s.waiting
  })
  return {
    peak,
    sampled: <A, E>(effect: Effect.Effect<A, E>) =>
      sample.pipe(Effect.andThen(Effect.exit(effect)), Effect.tap(() => sample))
  }
}

// Sorts exits into the documented answers; anything else fails the test.
const tally = (exits: ReadonlyArray<Exit.Exit<unknown, unknown>>, key: string) => {
  const counts = { allowed: 0, denied: 0, admitted: 0, mailbox: 0, waiters: 0, exceeded: 0 }
  for (const exit of exits) {
    if (Exit.isSuccess(exit)) {
      if (exit.value === true) counts.allowed++
      else if (exit.value === false) counts.denied++
      else counts.admitted++ // wait: void
      continue
    }
    const error = failureOf(exit)
    if (error?._tag === "Overloaded") {
      assert.strictEqual(error.key, key)
      if (error.reason === "mailbox") {
        assert.strictEqual(error.capacity, MAILBOX)
        counts.mailbox++
      } else if (error.reason === "waiters") {
        assert.strictEqual(error.capacity, WAITERS)
        counts.waiters++
      } else {
        assert.fail(`unexpected Overloaded reason ${error.reason}`)
      }
    } else if (error?._tag === "RateLimitExceeded") {
      counts.exceeded++
    } else {
      assert.fail(`an undocumented answer: ${JSON.stringify(error)}`)
    }
  }
  return counts
}

describe("overload", () => {
  it.effect(
    `${CALLERS} concurrent acquires through a mailbox of ${MAILBOX}: decisions or Overloaded, counted`,
    () =>
      Effect.gen(function*() {
        // capacity above the number of callers: every served call is allowed,
        // so the tokens left show exactly how many were taken
        const capacity = 2 * CALLERS
        const limiter = yield* RateLimiter.make({
          policy: Policy.tokenBucket({ capacity, refill: { tokens: 1, per: "1 hour" } }),
          fastPath: false,
          mailboxCapacity: MAILBOX
        })
        const { peak, sampled } = peaks(limiter)
        const exits = yield* Effect.forEach(
          Array.from({ length: CALLERS }),
          () => sampled(limiter.acquire("hot")),
          { concurrency: "unbounded" }
        )
        const counts = tally(exits, "hot")
        const stats = yield* limiter.stats
        console.log(`overload, acquires: ${JSON.stringify({ counts, peak })}`)
        assert.strictEqual(exits.length, CALLERS)
        assert.strictEqual(counts.allowed + counts.mailbox, CALLERS)
        assert.isAbove(counts.mailbox, 0, "the mailbox did overflow")
        assert.isAbove(counts.allowed, 0)
        assert.isAtMost(peak.queued, MAILBOX)
        assert.isAbove(peak.queued, 0)
        assert.strictEqual(stats.overloaded, counts.mailbox)
        assert.strictEqual(stats.allowed, counts.allowed)
        assert.strictEqual(stats.queued, 0)
        // a refused call took nothing
        assert.strictEqual((yield* limiter.peek("hot")).remaining, capacity - counts.allowed)
      }),
    { timeout: 60_000 }
  )

  for (const fastPath of [true, false]) {
    it.effect(
      `${CALLERS} concurrent waits and acquires, line of ${WAITERS}, mailbox of ${MAILBOX} (fastPath: ${fastPath})`,
      () =>
        Effect.gen(function*() {
          const capacity = 10
          const limiter = yield* RateLimiter.make({
            policy: Policy.tokenBucket({ capacity, refill: { tokens: 10, per: "1 second" } }),
            fastPath,
            mailboxCapacity: MAILBOX,
            maxWaiters: WAITERS
          })
          const { peak, sampled } = peaks(limiter)
          // one caller in ten waits (half of them up to 1 second, half as long
          // as it takes); the others decide now
          const callers = yield* Effect.forEach(
            Array.from({ length: CALLERS }, (_, i) => i),
            (i) =>
              Effect.forkChild(sampled(
                i % 20 === 0
                  ? limiter.wait("hot")
                  : i % 20 === 10
                  ? limiter.wait("hot", { maxWait: "1 second" })
                  : limiter.acquire("hot")
              ))
          )
          yield* settle(50)
          assert.isAtMost(peak.waiting, WAITERS)
          assert.isAtMost(peak.queued, MAILBOX)
          // the waiters in line are admitted at 10 per second
          yield* TestClock.adjust("3 seconds")
          yield* settle(50)
          const hung = callers.filter((fiber) => !isDone(fiber)).length
          assert.strictEqual(hung, 0, `${hung} callers never got an answer`)
          const exits = (yield* Fiber.joinAll(callers)) as ReadonlyArray<Exit.Exit<unknown, unknown>>
          const counts = tally(exits, "hot")
          const stats = yield* limiter.stats
          console.log(`overload, waits (fastPath: ${fastPath}): ${JSON.stringify({ counts, peak })}`)
          const total = counts.allowed + counts.denied + counts.admitted + counts.mailbox + counts.waiters +
            counts.exceeded
          assert.strictEqual(total, CALLERS)
          assert.isAtMost(peak.waiting, WAITERS)
          assert.isAtMost(peak.queued, MAILBOX)
          assert.isAbove(counts.waiters, 0, "the line did overflow")
          assert.isAbove(counts.mailbox, 0, "the mailbox did overflow")
          assert.isAbove(counts.exceeded, 0, "some waits would have been too long")
          assert.strictEqual(stats.overloaded, counts.mailbox + counts.waiters)
          assert.strictEqual(stats.allowed, counts.allowed + counts.admitted)
          assert.strictEqual(stats.waiting, 0)
          assert.strictEqual(stats.queued, 0)
          // 10 at once, then 10 per second for 3 seconds: no more admitted than that
          assert.isAtMost(stats.allowed, capacity + 30)
          assert.isAtLeast(counts.admitted, 1)
        }),
      { timeout: 60_000 }
    )
  }
})
