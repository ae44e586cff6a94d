/**
 * Reaping keeps up with a stream of keys (the flood itself is in
 * test/Faults.test.ts, with maxBuckets): many keys, a short idleTimeout.
 * While keys keep arriving, live buckets stay within what arrived in the last
 * 1.5 idle timeouts (plus the time to refill); once they stop, live buckets
 * and running actors fall back to 0, and every bucket started was reaped.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../../src/index.ts"
import { size } from "../size.ts"
import { settle } from "./probe.ts"

const IDLE = 100 // ms
const PER_MS = 20 // new keys per virtual millisecond

// refills fully in 2 ms: a bucket is settled almost at once
const policy = Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 millis" } })

for (const fastPath of [true, false]) {
  // a quarter of these in a developer's run (test/size.ts)
  const keys = size("TOLLGATE_REAPING_KEYS", 25_000, 100_000) * (fastPath ? 1 : 0.3)
  describe(`reaping keeps up (fastPath: ${fastPath})`, () => {
    it.effect(
      `${keys} keys, ${PER_MS} new ones per ms, idleTimeout ${IDLE} ms: live buckets stay bounded`,
      () =>
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.make({ fastPath, policy, idleTimeout: IDLE })
          // a bucket lives at most 1.5 x IDLE after its last use, plus 2 ms to refill
          const bound = PER_MS * (1.5 * IDLE + 2 + 1)
          let peak = 0
          let actorsPeak = 0
          for (let i = 0; i < keys; i++) {
            if (i % PER_MS === 0) {
              yield* TestClock.adjust(1)
              const stats = yield* limiter.stats
              peak = Math.max(peak, stats.buckets)
              actorsPeak = Math.max(actorsPeak, stats.actors)
            }
            // each key used twice (allowed, then denied), then never again
            assert.isTrue(yield* limiter.acquire(`user:${i}`, { cost: 2 }))
            assert.isFalse(yield* limiter.acquire(`user:${i}`))
          }
          const during = yield* limiter.stats
          console.log(`reaping (fastPath: ${fastPath}): ${JSON.stringify({ keys, peak, bound, actorsPeak })}`)
          assert.isAtMost(peak, bound, `peak live buckets ${peak} above ${bound}`)
          assert.isAbove(during.reaped, keys / 2, "the sweep reaped as keys arrived")
          // the stream stops: after 1.5 x IDLE every bucket is gone
          yield* TestClock.adjust(1.5 * IDLE + 2)
          yield* settle()
          const after = yield* limiter.stats
          assert.strictEqual(after.buckets, 0)
          assert.strictEqual(after.actors, 0)
          assert.strictEqual(after.started, keys)
          assert.strictEqual(after.reaped, keys)
          assert.strictEqual(after.allowed, keys)
          assert.strictEqual(after.denied, keys)
          if (fastPath) assert.strictEqual(actorsPeak, 0, "uncontended keys never start an actor")
        }),
      { timeout: 60_000 }
    )

    it.effect("a bucket that has not refilled outlives its idle timeout; then goes", () =>
      Effect.gen(function*() {
        const slow = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } })
        const limiter = yield* RateLimiter.make({ fastPath, policy: slow, idleTimeout: IDLE })
        for (let i = 0; i < 1000; i++) assert.isTrue(yield* limiter.acquire(`k${i}`, { cost: 1 + (i % 10) }))
        // key i refills in (1 + i % 10) seconds
        for (let s = 1; s <= 10; s++) {
          yield* TestClock.adjust(1000)
          yield* settle()
          // the keys that have refilled by now are gone (the sweep runs every
          // IDLE / 2); the others stay, however long they have idled
          assert.strictEqual((yield* limiter.stats).buckets, 1000 - 100 * s, `after ${s} s`)
        }
        assert.strictEqual((yield* limiter.stats).buckets, 0)
      }))
  })
}
