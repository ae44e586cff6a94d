import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Deferred, Duration, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import type { Decision } from "../src/index.ts"
import { MemoryStore, Overloaded, Policy, RateLimiter, Store } from "../src/index.ts"
import { bind } from "../src/internal/algorithm/Algorithm.ts"
import * as AllOrNothing from "../src/internal/coordinator/AllOrNothing.ts"

// Lets forked fibers and bucket actors run until they park.
const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

// user:* 5 per key, org:* 10, global 20; refills 1 per second each.
const tiers = (key: string) =>
  Policy.tokenBucket({
    capacity: key.startsWith("user:") ? 5 : key.startsWith("org:") ? 10 : 20,
    refill: { tokens: 1, per: "1 second" }
  })

const remaining = (limiter: RateLimiter["Service"], key: string) =>
  Effect.map(limiter.peek(key, { cost: 1 }), (d) => d.remaining)

// Every behaviour in process (fast path on and off) and on a shared store.
const variants = [
  { name: "in process, fast path", fastPath: true, store: false },
  { name: "in process, actors only", fastPath: false, store: false },
  { name: "on a store", fastPath: true, store: true }
] as const

// A limiter of the variant.
const makeFor = (variant: typeof variants[number]) => (options: RateLimiter.Options) =>
  variant.store
    ? Effect.flatMap(
      MemoryStore.make,
      (store) =>
        RateLimiter.make({ fastPath: variant.fastPath, ...options }).pipe(
          Effect.provideService(Store.CurrentStore, store)
        )
    )
    : RateLimiter.make({ fastPath: variant.fastPath, ...options })

for (const variant of variants) {
  const make = makeFor(variant)

  describe(`acquire over several keys (${variant.name})`, () => {
    it.effect("takes from every key or from none", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: tiers })
        const keys = ["user:1", "org:a", "global"]
        for (let i = 0; i < 5; i++) assert.isTrue(yield* limiter.acquire(keys))
        // the user is out: the call is denied, and neither the org nor the global key pays for it
        assert.isFalse(yield* limiter.acquire(keys))
        assert.strictEqual(yield* remaining(limiter, "user:1"), 0)
        assert.strictEqual(yield* remaining(limiter, "org:a"), 5)
        assert.strictEqual(yield* remaining(limiter, "global"), 15)
        // another user of the same org still goes through
        assert.isTrue(yield* limiter.acquire(["user:2", "org:a", "global"], { cost: 5 }))
        assert.strictEqual(yield* remaining(limiter, "org:a"), 0)
        assert.isFalse(yield* limiter.acquire(["user:3", "org:a", "global"]))
        assert.strictEqual(yield* remaining(limiter, "user:3"), 5)
        assert.strictEqual(yield* remaining(limiter, "global"), 10)
      }))

    it.effect("consume reports the most restrictive key, and each key's figures in the order given", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: tiers })
        const d = yield* limiter.consume(["global", "user:1", "org:a"], { cost: 2 })
        assert.isTrue(d.allowed)
        assert.strictEqual(d.remaining, 3)
        assert.strictEqual(d.limit, 5)
        assert.notProperty(d, "degraded", "decided by the keys' own state")
        assert.deepStrictEqual(d.keys?.map((k) => [k.key, k.decision.remaining]), [
          ["global", 18],
          ["user:1", 3],
          ["org:a", 8]
        ])
        const denied = yield* limiter.consume(["global", "user:1", "org:a"], { cost: 4 })
        assert.isFalse(denied.allowed)
        assert.strictEqual(Duration.toMillis(denied.retryAfter), 1000)
        assert.strictEqual(denied.limit, 5)
        assert.deepStrictEqual(denied.keys?.map((k) => k.decision.allowed), [true, false, true])
        // nothing was taken: each key reports what it has now (the keys that would admit as a peek sees them)
        assert.strictEqual(denied.remaining, 3)
        assert.deepStrictEqual(
          denied.keys?.map((k) => [k.key, k.decision.remaining, Duration.toMillis(k.decision.resetAfter)]),
          [["global", 18, 2000], ["user:1", 3, 2000], ["org:a", 8, 2000]]
        )
        yield* TestClock.adjust("1 second")
        assert.isTrue(yield* limiter.acquire(["global", "user:1", "org:a"], { cost: 4 }))
      }))

    it.effect("consume: a tie goes to the earlier key named (its limit is the call's)", () =>
      Effect.gen(function*() {
        const limiter = yield* make({
          policy: (key) => Policy.tokenBucket({ capacity: key === "a" ? 5 : 7, refill: { tokens: 1, per: "1 second" } })
        })
        assert.isTrue(yield* limiter.acquire("b", { cost: 2 }))
        // both have 5 left: admitted, each with 4 remaining
        const ab = yield* limiter.consume(["a", "b"])
        assert.deepStrictEqual([ab.allowed, ab.remaining, ab.limit], [true, 4, 5])
        const ba = yield* limiter.consume(["b", "a"])
        assert.deepStrictEqual([ba.allowed, ba.remaining, ba.limit], [true, 3, 7])
        // full again after the longest of the keys' resetAfter (b's 4 s, named first)
        assert.strictEqual(Duration.toMillis(ba.resetAfter), 4000)
        // both short by 2 units: denied, each to retry in 2 s
        const deniedAb = yield* limiter.consume(["a", "b"], { cost: 5 })
        assert.deepStrictEqual([deniedAb.allowed, Duration.toMillis(deniedAb.retryAfter), deniedAb.limit], [
          false,
          2000,
          5
        ])
        const deniedBa = yield* limiter.consume(["b", "a"], { cost: 5 })
        assert.deepStrictEqual([deniedBa.allowed, Duration.toMillis(deniedBa.retryAfter), deniedBa.limit], [
          false,
          2000,
          7
        ])
      }))

    it.effect("stats: an admitted call counts once per key it took from, a refused one once", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: tiers })
        assert.isTrue(yield* limiter.acquire(["user:1", "org:a", "global"], { cost: 5 }))
        assert.isFalse(yield* limiter.acquire(["user:1", "org:a", "global"]))
        // the figures of a refused consume are read without counting a decision
        assert.isFalse((yield* limiter.consume(["user:1", "org:a"])).allowed)
        const stats = yield* limiter.stats
        assert.deepStrictEqual([stats.allowed, stats.denied], [3, 2])
      }))

    it.effect("a key whose policy cannot be made fails the call with InvalidPolicy; the others pay and hold nothing", () =>
      Effect.gen(function*() {
        const limiter = yield* make({
          policy: (key) => {
            if (key === "x:boom") throw new Error("no policy")
            return tiers(key)
          }
        })
        // "x:boom" comes last: the call holds on every other key first
        const keys = ["user:1", "org:a", "x:boom", "global"]
        assert.strictEqual((yield* Effect.flip(limiter.acquire(keys, { cost: 5 })))._tag, "InvalidPolicy")
        assert.strictEqual((yield* Effect.flip(limiter.consume(keys, { cost: 5 })))._tag, "InvalidPolicy")
        assert.strictEqual((yield* Effect.flip(limiter.wait(keys, { cost: 5 })))._tag, "InvalidPolicy")
        assert.isTrue(yield* limiter.acquire(["user:1", "org:a", "global"], { cost: 5 }))
        assert.strictEqual(yield* remaining(limiter, "org:a"), 5)
        assert.isTrue(yield* limiter.acquire(["org:a", "global"], { cost: 5 }))
      }))

    it.effect("bad input names the field", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: tiers })
        const twice = yield* Effect.flip(limiter.acquire(["user:1", "user:1"]))
        assert.strictEqual(twice._tag, "InvalidRequest")
        assert.strictEqual((twice as { field: string }).field, "keys[1]")
        const none = yield* Effect.flip(limiter.acquire([]))
        assert.strictEqual((none as { field: string }).field, "keys")
        const empty = yield* Effect.flip(limiter.consume(["user:1", ""]))
        assert.strictEqual((empty as { field: string }).field, "keys[1]")
        const big = yield* Effect.flip(limiter.acquire(["user:1", "global"], { cost: 6 }))
        assert.strictEqual((big as { field: string }).field, "cost")
      }))

    it.effect("wait over several keys: waits until every key admits, then takes from all at once", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: tiers })
        assert.isTrue(yield* limiter.acquire("user:1", { cost: 5 }))
        const fiber = yield* Effect.forkChild(limiter.wait(["user:1", "org:a"], { cost: 2 }))
        yield* settle
        yield* TestClock.adjust("1999 millis")
        yield* settle
        assert.isUndefined(fiber.pollUnsafe())
        // the org key is not taken from while the call waits for the user key: in process its 2 units are
        // held for the call (not there for others, given back if it leaves); a store holds nothing
        assert.strictEqual(yield* remaining(limiter, "org:a"), variant.store ? 10 : 8)
        yield* TestClock.adjust("1 millis")
        yield* settle
        yield* Fiber.join(fiber)
        assert.strictEqual(yield* remaining(limiter, "user:1"), 0)
        assert.strictEqual(yield* remaining(limiter, "org:a"), 8)
      }))

    it.effect("a shaper's delay: consume reports the longest key's, acquire answers only once it has passed", () =>
      Effect.gen(function*() {
        // no nodelay: a request past the first one's level waits its turn to pass
        const limiter = yield* make({ policy: Policy.leakyBucket({ rate: { tokens: 1, per: "1 second" }, burst: 3 }) })
        assert.isTrue(yield* limiter.acquire(["x", "y"], { cost: 2 }))
        const d = yield* limiter.consume(["w", "x"])
        assert.isTrue(d.allowed)
        assert.strictEqual(Duration.toMillis(d.delay ?? Duration.zero), 2000)
        assert.deepStrictEqual(
          d.keys?.map((k) => k.decision.delay === undefined ? 0 : Duration.toMillis(k.decision.delay)),
          [
            0,
            2000
          ]
        )
        const acquired = yield* Effect.forkChild(limiter.acquire(["v", "x"]))
        yield* settle
        yield* TestClock.adjust("2999 millis")
        yield* settle
        assert.isUndefined(acquired.pollUnsafe(), "answered before x's delay passed")
        yield* TestClock.adjust("1 millis")
        yield* settle
        assert.isTrue(yield* Fiber.join(acquired))
        // and so does wait: admitted at once (at 3 s), it proceeds after x's delay then, 1 s
        const waited = yield* Effect.forkChild(
          Effect.andThen(limiter.wait(["u", "x"], { cost: 3 }), Clock.currentTimeMillis)
        )
        for (let t = 0; t < 80; t++) {
          yield* settle
          yield* TestClock.adjust("100 millis")
        }
        assert.strictEqual(yield* Fiber.join(waited), 4000)
      }))

    it.effect("wait over several keys: the error names the key that would keep it waiting too long", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: tiers })
        assert.isTrue(yield* limiter.acquire("org:a", { cost: 10 }))
        // the org key comes after the global one and before the user's (keys are taken in sorted order)
        const e = yield* Effect.flip(limiter.wait(["user:1", "org:a", "global"], { cost: 3, maxWait: "2 seconds" }))
        assert.strictEqual(e._tag, "RateLimitExceeded")
        if (e._tag === "RateLimitExceeded") {
          assert.strictEqual(e.key, "org:a")
          assert.strictEqual(Duration.toMillis(e.retryAfter), 3000)
        }
        assert.strictEqual(yield* remaining(limiter, "global"), 20)
      }))

    it.effect("wait over several keys: maxWait counts from the call's start, across the keys it waits for in turn", () =>
      Effect.gen(function*() {
        // "fast" refills 1 per second, "slow" 1 per 2 seconds; both empty
        const limiter = yield* make({
          policy: (key) =>
            Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: key === "slow" ? "2 seconds" : "1 second" } })
        })
        // the call starts a minute on: maxWait counts from then, not from the clock's origin
        yield* TestClock.adjust("1 minute")
        assert.isTrue(yield* limiter.acquire(["fast", "slow"]))
        const late = yield* Effect.forkChild(Effect.exit(limiter.wait(["slow", "fast"], { maxWait: "1999 millis" })))
        const onTime = yield* Effect.forkChild(
          Effect.andThen(limiter.wait(["fast", "slow"], { maxWait: "2 seconds", cost: 1 }), Clock.currentTimeMillis)
        )
        yield* settle
        for (let t = 0; t < 40; t++) {
          yield* TestClock.adjust("100 millis")
          yield* settle
        }
        const exit = yield* Fiber.join(late)
        assert.isTrue(Exit.isFailure(exit), "admitted past its maxWait")
        assert.strictEqual(yield* Fiber.join(onTime), 62_000)
      }))

    it.effect("wait over several keys fails at once past maxWait, taking nothing", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: tiers })
        assert.isTrue(yield* limiter.acquire("org:a", { cost: 10 }))
        const e = yield* Effect.flip(limiter.wait(["user:1", "org:a"], { cost: 3, maxWait: "2 seconds" }))
        assert.strictEqual(e._tag, "RateLimitExceeded")
        assert.strictEqual(yield* remaining(limiter, "user:1"), 5)
      }))

    it.effect("at the cap, a key of the call is not forgotten to make room for another key of the same call", () =>
      Effect.gen(function*() {
        const policy = Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } })
        const limiter = yield* make({ policy, maxBuckets: 2 })
        // "a" is full again (safe to forget), "busy" is not
        assert.isTrue(yield* limiter.acquire("a"))
        assert.isTrue(yield* limiter.acquire("busy"))
        yield* TestClock.adjust("1 second")
        assert.isTrue(yield* limiter.acquire("busy"))
        // the call needs a bucket for "a" and one for "b": three at once, one over the cap
        const exit = yield* Effect.exit(limiter.acquire(["a", "b"]))
        if (variant.store) {
          // the keys' state is in the store: the buckets are handles, and "a"'s loses nothing
          assert.deepStrictEqual(exit, Exit.succeed(true))
          assert.strictEqual(yield* remaining(limiter, "a"), 0)
          assert.isFalse(yield* limiter.acquire("a"))
        } else {
          // in process "a"'s bucket is its state: with "busy" taken the call cannot have both
          assert.isTrue(Exit.isFailure(exit) && Cause.squash(exit.cause) instanceof Overloaded)
          assert.strictEqual(yield* remaining(limiter, "a"), 1)
        }
      }))
  })
}

describe("acquire over several keys, in process: holds", () => {
  it.effect("units held for a call waiting on another key count against the key, and come back on interruption", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: tiers })
      assert.isTrue(yield* limiter.acquire("user:1", { cost: 5 }))
      // "org:a" < "user:1": the call holds 4 on the org, then waits on the user
      const fiber = yield* Effect.forkChild(limiter.wait(["user:1", "org:a"], { cost: 4 }))
      yield* settle
      assert.isUndefined(fiber.pollUnsafe())
      const d = yield* limiter.consume("org:a", { cost: 7 })
      assert.isFalse(d.allowed)
      assert.strictEqual(d.remaining, 6)
      assert.isTrue(yield* limiter.acquire("org:a", { cost: 6 }))
      // interrupted: its hold on the org is given back, nothing was taken
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(yield* remaining(limiter, "org:a"), 4)
      assert.isTrue(yield* limiter.acquire("org:a", { cost: 4 }))
      yield* settle
      const stats = yield* limiter.stats
      assert.strictEqual(stats.waiting, 0)
    }))

  it.effect("consume: a key taken from under its hold (force) denies the call at the commit, and nothing is taken", () =>
    Effect.gen(function*() {
      // actors only: each hold is a message to its key's actor, so a force can come between two
      const limiter = yield* RateLimiter.make({
        fastPath: false,
        policy: Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 hour" } })
      })
      assert.isTrue(yield* limiter.acquire(["a", "b"]))
      const call = yield* Effect.forkChild(limiter.consume(["a", "b"], { cost: 3 }), { startImmediately: true })
      // after the hold on "a" (4 left, 3 held): 3 more, over the limit
      assert.isTrue((yield* limiter.force("a", { cost: 3 })).allowed)
      const d = yield* Fiber.join(call)
      assert.isFalse(d.allowed)
      assert.deepStrictEqual(d.keys?.map((k) => [k.key, k.decision.allowed, k.decision.remaining]), [
        ["a", false, 1],
        ["b", true, 4]
      ])
      assert.strictEqual((yield* limiter.peek("a")).remaining, 1)
      assert.strictEqual((yield* limiter.peek("b")).remaining, 4)
      assert.isTrue(yield* limiter.acquire(["a", "b"]))
    }))

  it.effect("a key taken from under its hold (force) is waited for again, within maxWait, and taken from once", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } })
      })
      assert.isTrue(yield* limiter.acquire("b", { cost: 5 }))
      // holds 3 on "a", then waits 3 s for "b"
      const fiber = yield* Effect.forkChild(
        Effect.andThen(limiter.wait(["a", "b"], { cost: 3, maxWait: "10 seconds" }), Clock.currentTimeMillis)
      )
      yield* settle
      yield* TestClock.adjust("1 second")
      yield* settle
      // over the limit, past the hold: "a" has 0 at 1 s, 2 at 3 s when "b" has 3
      assert.isTrue((yield* limiter.force("a", { cost: 5 })).allowed)
      for (let t = 0; t < 60; t++) {
        yield* TestClock.adjust("100 millis")
        yield* settle
      }
      // the commit at 3 s found "a" short; it held "a" again at 4 s, then "b"
      assert.strictEqual(yield* Fiber.join(fiber), 4000)
      // taken once from each, at 4 s; nothing still held (7 s now)
      assert.strictEqual((yield* limiter.peek("a")).remaining, 3)
      assert.strictEqual((yield* limiter.peek("b")).remaining, 4)
      assert.isTrue(yield* limiter.acquire("a", { cost: 3 }))
      assert.strictEqual((yield* limiter.stats).waiting, 0)
    }))

  it.effect("a call over several keys counts the units another call holds, on the fast path too", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: tiers })
      assert.isTrue(yield* limiter.acquire("user:1", { cost: 5 }))
      // holds 4 on the org, waits on the user
      const fiber = yield* Effect.forkChild(limiter.wait(["user:1", "org:a"], { cost: 4 }))
      yield* settle
      assert.isFalse(yield* limiter.acquire(["org:a", "global"], { cost: 7 }))
      const d = yield* limiter.consume(["org:a", "global"], { cost: 7 })
      assert.isFalse(d.allowed)
      assert.strictEqual(yield* remaining(limiter, "global"), 20)
      assert.isTrue(yield* limiter.acquire(["org:a", "global"], { cost: 6 }))
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("a call over several keys does not pass a waiter in a key's line, even when every key is busy", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: tiers })
      assert.isTrue(yield* limiter.acquire("user:1", { cost: 5 }))
      // holds 4 on the org, waits in the user's line for 4 units (at 4 s)
      const fiber = yield* Effect.forkChild(limiter.wait(["user:1", "org:a"], { cost: 4 }))
      yield* settle
      yield* TestClock.adjust("2 seconds")
      yield* settle
      // the user has 2 units, the org 6 free: a call for 1 of each would fit, but the waiter is ahead
      assert.isFalse(yield* limiter.acquire(["org:a", "user:1"]))
      assert.isFalse((yield* limiter.consume(["org:a", "user:1"])).allowed)
      yield* TestClock.adjust("2 seconds")
      yield* settle
      yield* Fiber.join(fiber)
      assert.strictEqual(yield* remaining(limiter, "user:1"), 0)
      assert.strictEqual(yield* remaining(limiter, "org:a"), 6)
    }))

  it.effect("consume over several keys that commits beside another call's hold reports each key's remaining net of it", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: tiers })
      assert.isTrue(yield* limiter.acquire("user:1", { cost: 5 }))
      // holds 4 on the org (10), waits on the user: the org is not quiet, so the next call holds and commits
      const fiber = yield* Effect.forkChild(limiter.wait(["user:1", "org:a"], { cost: 4 }))
      yield* settle
      const d = yield* limiter.consume(["org:a", "global"], { cost: 3 })
      assert.isTrue(d.allowed)
      // the org: 10 - 3 taken - 4 held; global: 20 - 3
      assert.deepStrictEqual(d.keys?.map((k) => [k.key, k.decision.remaining]), [["org:a", 3], ["global", 17]])
      assert.strictEqual(d.remaining, 3)
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("wait over several keys does not take a key's units ahead of a waiter in its line, though they fit", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ fastPath: false, policy: tiers })
      assert.isTrue(yield* limiter.acquire("org:a", { cost: 8 }))
      // 2 there: a waiter for 5 stands in line (at 3 s)
      const waiter = yield* Effect.forkChild(limiter.wait("org:a", { cost: 5 }), { startImmediately: true })
      yield* settle
      // a call for 1 unit of the org: it fits, but waits behind the waiter
      const call = yield* Effect.forkChild(limiter.wait(["org:a", "user:1"]), { startImmediately: true })
      yield* settle
      assert.isUndefined(call.pollUnsafe())
      yield* TestClock.adjust("3 seconds")
      yield* settle
      assert.deepStrictEqual(waiter.pollUnsafe(), Exit.void)
      yield* TestClock.adjust("1 second")
      yield* settle
      assert.deepStrictEqual(call.pollUnsafe(), Exit.void)
    }))

  it.effect("a take of one unit counts the units held too, as a take of several does", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: tiers })
      assert.isTrue(yield* limiter.acquire("user:1", { cost: 5 }))
      // the call holds 4 of the org's 10 while it waits on the user
      const fiber = yield* Effect.forkChild(limiter.wait(["user:1", "org:a"], { cost: 4 }))
      yield* settle
      assert.isTrue(yield* limiter.acquire("org:a", { cost: 5 }))
      // 5 taken, 4 held: one unit is left, and one take of one gets it
      assert.isTrue(yield* limiter.acquire("org:a"))
      assert.isFalse(yield* limiter.acquire("org:a"))
      const d = yield* limiter.consume("org:a")
      assert.isFalse(d.allowed)
      assert.strictEqual(d.remaining, 0)
      // the held units come first: one unit is free again after 1 s
      assert.strictEqual(Duration.toMillis(d.retryAfter), 1000)
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("a peek counts the units held as consume does, in what it allows and in what remains", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: tiers })
      assert.isTrue(yield* limiter.acquire("user:1", { cost: 5 }))
      // the call holds 4 of the org's 10 while it waits on the user
      const fiber = yield* Effect.forkChild(limiter.wait(["user:1", "org:a"], { cost: 4 }))
      yield* settle
      const peeked = yield* limiter.peek("org:a", { cost: 6 })
      assert.deepStrictEqual([peeked.allowed, peeked.remaining], [true, 6])
      assert.isFalse((yield* limiter.peek("org:a", { cost: 7 })).allowed)
      const consumed = yield* limiter.consume("org:a", { cost: 6 })
      assert.deepStrictEqual([consumed.allowed, consumed.remaining], [true, 0])
      assert.strictEqual((yield* limiter.peek("org:a")).remaining, 0)
      yield* Fiber.interrupt(fiber)
      assert.strictEqual((yield* limiter.peek("org:a")).remaining, 4)
    }))

  it.effect("a decision behind waiters is told its turn behind the waiters and the units held", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: tiers })
      assert.isTrue(yield* limiter.acquire("user:1", { cost: 5 }))
      const fiber = yield* Effect.forkChild(limiter.wait(["user:1", "org:a"], { cost: 4 }))
      yield* settle
      assert.isTrue(yield* limiter.acquire("org:a", { cost: 6 }))
      // 4 tokens are left, all held: a waiter of 2 stands in line
      const waiter = yield* Effect.forkChild(limiter.wait("org:a", { cost: 2 }))
      yield* settle
      assert.isUndefined(waiter.pollUnsafe())
      // behind 2 in line and 4 held, with 4 there: one more unit in 3 s
      const d = yield* limiter.consume("org:a")
      assert.isFalse(d.allowed)
      assert.strictEqual(d.remaining, 0)
      assert.strictEqual(Duration.toMillis(d.retryAfter), 3000)
      const upTo = yield* limiter.consumeUpTo("org:a", { cost: 3 })
      assert.strictEqual(upTo.taken, 0)
      assert.isFalse(upTo.allowed)
      assert.strictEqual(Duration.toMillis(upTo.retryAfter), 3000)
      yield* Fiber.interrupt(waiter)
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("a partial take leaves the units held alone", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: tiers })
      assert.isTrue(yield* limiter.acquire("user:1", { cost: 5 }))
      const fiber = yield* Effect.forkChild(limiter.wait(["user:1", "org:a"], { cost: 4 }))
      yield* settle
      // 10 there, 4 held: a take of up to 10 takes 6, as a take of 7 is refused
      assert.isFalse((yield* limiter.consume("org:a", { cost: 7 })).allowed)
      const d = yield* limiter.consumeUpTo("org:a", { cost: 10 })
      assert.strictEqual(d.taken, 6)
      assert.isTrue(d.allowed)
      assert.strictEqual(d.remaining, 0)
      const none = yield* limiter.consumeUpTo("org:a", { cost: 10 })
      assert.strictEqual(none.taken, 0)
      assert.strictEqual(Duration.toMillis(none.retryAfter), 1000)
      // the call gets its 4 when the user has 4 again: nothing was taken from under its hold
      yield* TestClock.adjust("4 seconds")
      yield* settle
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(fiber)))
      // 4 left beside the hold, 4 refilled, 4 taken by the call
      assert.strictEqual(yield* remaining(limiter, "org:a"), 4)
    }))

  it.effect("calls over the same keys named in opposite orders never deadlock, and each key keeps its limit", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "100 millis" } })
      })
      const fibers = yield* Effect.forEach(Array.from({ length: 40 }, (_, i) => i), (i) =>
        Effect.forkChild(
          limiter.wait(i % 2 === 0 ? ["a", "b", "c"] : ["c", "b", "a"], { cost: 1 + (i % 2) })
        ))
      for (let t = 0; t < 100; t++) {
        yield* TestClock.adjust("100 millis")
        yield* settle
      }
      for (const fiber of fibers) assert.isTrue(Exit.isSuccess(yield* Fiber.await(fiber)))
      const stats = yield* limiter.stats
      assert.strictEqual(stats.waiting, 0)
    }))

  it.effect("FIFO on each key: a waiter over several keys keeps its place in each key's line", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } })
      })
      assert.isTrue(yield* limiter.acquire("a"))
      const order: Array<string> = []
      const first = yield* Effect.forkChild(
        Effect.andThen(limiter.wait(["a", "b"]), Effect.sync(() => order.push("ab")))
      )
      yield* settle
      const second = yield* Effect.forkChild(Effect.andThen(limiter.wait("a"), Effect.sync(() => order.push("a"))))
      yield* settle
      yield* TestClock.adjust("1 second")
      yield* settle
      yield* TestClock.adjust("1 second")
      yield* settle
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      assert.deepStrictEqual(order, ["ab", "a"])
    }))
})

// The property: under random concurrent calls over several keys (and single
// keys) no key ever gives more than its limit, and no partial take survives:
// each key's units are exactly those of the calls admitted that name it.
type Call = {
  readonly keys: ReadonlyArray<number>
  readonly cost: number
  readonly mode: "acquire" | "consume" | "wait"
}
const call: fc.Arbitrary<Call> = fc.record({
  keys: fc.uniqueArray(fc.integer({ min: 0, max: 4 }), { minLength: 1, maxLength: 4 }),
  cost: fc.integer({ min: 1, max: 3 }),
  mode: fc.constantFrom("acquire" as const, "consume" as const, "wait" as const)
})

describe("acquire over several keys: a key's last activity", () => {
  // refills 1 per second: a key 1 below its capacity is settled (full) a second later
  const policy = Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } })

  it.effect("a call decided at once counts as each key's last activity: reaped idleTimeout after it, not before", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy, idleTimeout: "10 seconds" })
      assert.isTrue(yield* limiter.acquire(["a", "b"]))
      yield* TestClock.adjust("4 seconds")
      assert.isTrue(yield* limiter.acquire(["a", "b"]))
      // the sweeps at 5 s and 10 s find both keys idle for 1 s and 6 s
      yield* TestClock.adjust("6 seconds")
      yield* settle
      assert.strictEqual((yield* limiter.stats).reaped, 0)
      // at 15 s, idle for 11 s
      yield* TestClock.adjust("5 seconds")
      yield* settle
      assert.strictEqual((yield* limiter.stats).reaped, 2)
    }))

  it.effect("a call that held a key and commits later counts the commit as the key's last activity", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy, idleTimeout: "10 seconds" })
      assert.isTrue(yield* limiter.acquire("b", { cost: 5 }))
      // holds 1 on "a" at 0 s, waits on "b" for its unit at 1 s, then takes from both
      const call = yield* Effect.forkChild(limiter.wait(["a", "b"]), { startImmediately: true })
      yield* settle
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(call)
      // the sweep at 10 s finds "a" idle for 9 s ("b": 9 s too)
      yield* TestClock.adjust("9 seconds")
      yield* settle
      assert.strictEqual((yield* limiter.stats).reaped, 0)
      yield* TestClock.adjust("5 seconds")
      yield* settle
      assert.strictEqual((yield* limiter.stats).reaped, 2)
    }))
})

// "a" stores a permit a second, up to 10, from nothing; every other key
// refills 1 a minute.
const storingAndSlow = (fastPath: boolean) =>
  RateLimiter.make({
    fastPath,
    policy: (key) =>
      key === "a"
        ? Policy.smooth({ permits: 1, per: "1 second", maxBurst: "10 seconds", initialPermits: 0 })
        : Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 minute" } })
  })

describe("acquire over several keys: a fresh key held while the call waits", () => {
  for (const fastPath of [true, false]) {
    it.effect(`starts when it is held, not when the call takes from it (fastPath: ${fastPath})`, () =>
      Effect.gen(function*() {
        const limiter = yield* storingAndSlow(fastPath)
        assert.isTrue(yield* limiter.acquire("slow"))
        // holds 1 on a fresh "a" now, takes it a minute later, once "slow" has refilled
        const call = yield* Effect.forkChild(limiter.wait(["a", "slow"]), { startImmediately: true })
        yield* settle
        yield* TestClock.adjust("1 minute")
        yield* Fiber.join(call)
        // "a" stored its 10 over that minute, and the call took one of them
        assert.strictEqual((yield* limiter.peek("a")).remaining, 10)
      }))
  }
})

describe("acquire over several keys: a call another key refuses", () => {
  for (const fastPath of [true, false]) {
    it.effect(`leaves a fresh key as it found it (fastPath: ${fastPath})`, () =>
      Effect.gen(function*() {
        const limiter = yield* storingAndSlow(fastPath)
        assert.isTrue(yield* limiter.acquire("b"))
        assert.isFalse(yield* limiter.acquire(["a", "b"]))
        // "a" did not start with the refused call: 5 s later it is still a new key (one permit, paid later)
        yield* TestClock.adjust("5 seconds")
        assert.strictEqual((yield* limiter.peek("a")).remaining, 1)
      }))
  }
})

describe("acquire over several keys: the property", () => {
  for (const variant of variants) {
    it.effect(`no key exceeds its limit and no partial take survives (${variant.name})`, () =>
      Effect.gen(function*() {
        const samples = fc.sample(
          fc.record({
            calls: fc.array(call, { minLength: 1, maxLength: 40 }),
            interrupt: fc.array(fc.nat(), { maxLength: 5 })
          }),
          { numRuns: 60, seed: 15 }
        )
        const capacity = [3, 5, 8, 13, 21]
        for (const { calls, interrupt } of samples) {
          yield* Effect.scoped(Effect.gen(function*() {
            // no refill within the run: what a key gave is exactly what it lost
            const limiter = yield* makeFor(variant)({
              policy: (key) =>
                Policy.tokenBucket({ capacity: capacity[Number(key)], refill: { tokens: 1, per: "1 hour" } })
            })
            const admitted: Array<boolean | undefined> = calls.map(() => undefined)
            const fibers = yield* Effect.forEach(calls, (c, i) => {
              const keys = c.keys.map(String)
              const run = c.mode === "acquire"
                ? limiter.acquire(keys, { cost: c.cost })
                : c.mode === "consume"
                ? Effect.map(limiter.consume(keys, { cost: c.cost }), (d) => d.allowed)
                : Effect.as(limiter.wait(keys, { cost: c.cost, maxWait: "1 second" }), true)
              return Effect.forkChild(
                Effect.tap(Effect.orElseSucceed(run, () => false), (ok) => Effect.sync(() => admitted[i] = ok))
              )
            })
            yield* Effect.yieldNow
            for (const i of interrupt) if (fibers.length > 0) yield* Fiber.interrupt(fibers[i % fibers.length])
            yield* settle
            yield* TestClock.adjust("2 seconds")
            yield* settle
            for (const fiber of fibers) yield* Fiber.await(fiber)
            for (let k = 0; k < capacity.length; k++) {
              let taken = 0
              calls.forEach((c, i) => {
                if (admitted[i] === true && c.keys.includes(k)) taken += c.cost
              })
              assert.isAtMost(taken, capacity[k], `key ${k} gave more than its limit`)
              const left = (yield* limiter.peek(String(k))).remaining
              assert.strictEqual(left, capacity[k] - taken, `key ${k}: a partial take survived`)
            }
          }))
        }
      }))
  }
})

describe("acquire over several keys: the policy of each key comes from the limiter's policy function", () => {
  it.effect("several zones in one request (nginx): a per-IP and a per-server limit", () =>
    Effect.gen(function*() {
      // limit_req zone=perip burst=2; limit_req zone=perserver burst=3 (both checked, all or nothing)
      const limiter = yield* RateLimiter.make({
        policy: (key) =>
          Policy.leakyBucket({
            rate: { tokens: 1, per: "1 second" },
            burst: key.startsWith("ip:") ? 2 : 3,
            nodelay: true
          })
      })
      const request = (ip: string) => limiter.acquire([`ip:${ip}`, "server:www"])
      assert.isTrue(yield* request("1"))
      assert.isTrue(yield* request("1"))
      assert.isTrue(yield* request("1"))
      assert.isFalse(yield* request("1")) // the IP's zone is full
      assert.isTrue(yield* request("2")) // the server's zone has room for one more
      assert.isFalse(yield* request("3")) // the server's zone is full: nothing taken from ip:3
      assert.strictEqual((yield* limiter.peek("ip:3")).remaining, 3)
    }))
})

describe("acquire over several keys: the fast path", () => {
  it.effect("decides exactly as the holds do (same calls, fast path on and off, same decisions and figures)", () =>
    Effect.gen(function*() {
      const step = fc.record({
        keys: fc.uniqueArray(fc.integer({ min: 0, max: 4 }), { minLength: 1, maxLength: 4 }),
        cost: fc.integer({ min: 1, max: 4 }),
        consume: fc.boolean(),
        advance: fc.integer({ min: 0, max: 1500 })
      })
      const policy = (key: string) =>
        Number(key) % 2 === 0
          ? Policy.tokenBucket({ capacity: 3 + Number(key), refill: { tokens: 2, per: "1 second" } })
          : Policy.fixedWindow({ limit: 4 + Number(key), window: "2 seconds" })
      for (const run of fc.sample(fc.array(step, { maxLength: 40 }), { numRuns: 50, seed: 3 })) {
        const transcript = (fastPath: boolean) =>
          Effect.scoped(Effect.gen(function*() {
            const limiter = yield* RateLimiter.make({ policy, fastPath })
            const out: Array<unknown> = []
            for (const s of run) {
              const keys = s.keys.map(String)
              if (s.consume) {
                const exit = yield* Effect.exit(limiter.consume(keys, { cost: s.cost }))
                if (Exit.isFailure(exit)) {
                  out.push(String(exit.cause))
                  continue
                }
                const d = exit.value
                out.push([
                  d.allowed,
                  d.remaining,
                  Duration.toMillis(d.retryAfter),
                  Duration.toMillis(d.resetAfter),
                  d.limit,
                  d.keys?.map((k) => [k.key, k.decision.allowed, k.decision.remaining])
                ])
              } else {
                const exit = yield* Effect.exit(limiter.acquire(keys, { cost: s.cost }))
                out.push(Exit.isSuccess(exit) ? exit.value : String(exit.cause))
              }
              yield* TestClock.adjust(s.advance)
            }
            return out
          }))
        assert.deepStrictEqual(yield* transcript(true), yield* transcript(false), JSON.stringify(run))
      }
    }))
})

describe("acquire over several keys: blocks and dry runs", () => {
  for (const variant of variants) {
    const make = makeFor(variant)
    it.effect(`a blocked key refuses the call and the others pay nothing (${variant.name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: tiers })
        yield* limiter.block("org:a", "1 minute")
        assert.isFalse(yield* limiter.acquire(["user:1", "org:a", "global"]))
        assert.strictEqual(yield* remaining(limiter, "user:1"), 5)
        assert.strictEqual(yield* remaining(limiter, "global"), 20)
        const d = yield* limiter.consume(["user:1", "org:a"])
        assert.isFalse(d.allowed)
        assert.strictEqual(Duration.toMillis(d.retryAfter), 60_000)
        yield* TestClock.adjust("1 minute")
        assert.isTrue(yield* limiter.acquire(["user:1", "org:a", "global"]))
      }))

    it.effect(`a key that runs dry decides for real inside a call over several keys (${variant.name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({
          policy: (key) =>
            Policy.tokenBucket({
              capacity: 1,
              refill: { tokens: 1, per: "1 hour" },
              ...(key === "dry" ? { dryRun: true } : {})
            })
        })
        assert.isTrue(yield* limiter.acquire(["dry", "a"]))
        // alone it lets the refusal through; with another key the call is all or nothing
        assert.isTrue(yield* limiter.acquire("dry"))
        assert.isFalse(yield* limiter.acquire(["dry", "b"]))
        assert.strictEqual(yield* remaining(limiter, "b"), 1)
      }))

    it.effect(`a call over several keys never starts a key's blockDuration (${variant.name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({
          policy: (key) =>
            Policy.tokenBucket({
              capacity: 1,
              refill: { tokens: 1, per: "1 second" },
              ...(key === "b" ? { blockDuration: "1 hour" } : {})
            })
        })
        assert.isTrue(yield* limiter.acquire(["a", "b"]))
        assert.isFalse(yield* limiter.acquire(["a", "b"]))
        yield* TestClock.adjust("1 second")
        assert.isTrue(yield* limiter.acquire(["a", "b"]))
      }))
  }
})

describe("acquire over several keys: the store's fallback", () => {
  it.effect("while the store is down the fallback decides, and the call says degraded; once back, it does not", () =>
    Effect.gen(function*() {
      const inner = yield* MemoryStore.make
      const applyAll = inner.applyAll
      if (applyAll === undefined) return assert.fail("MemoryStore takes from several keys at once")
      const control = { down: false }
      const store: Store.Store = {
        name: "flaky",
        apply: (call) =>
          Effect.suspend(() =>
            control.down
              ? Effect.fail(new Store.StoreUnavailable({ store: "flaky", reason: "down" }))
              : inner.apply(call)
          ),
        applyAll: (calls) =>
          Effect.suspend(() =>
            control.down
              ? Effect.fail(new Store.StoreUnavailable({ store: "flaky", reason: "down" }))
              : applyAll(calls)
          )
      }
      const limiter = yield* RateLimiter.make({
        policy: tiers,
        fallback: { mode: "local", share: 0.5, timeout: "100 millis", retryAfter: "1 second" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      const up = yield* limiter.consume(["user:1", "org:a"])
      assert.isTrue(up.allowed)
      assert.notProperty(up, "degraded")
      control.down = true
      const down = yield* limiter.consume(["user:1", "org:a"])
      assert.isTrue(down.allowed)
      assert.isTrue(down.degraded)
      // half of the user's limit, decided here
      assert.strictEqual(down.limit, 2.5)
      control.down = false
      yield* TestClock.adjust("1 second")
      const back = yield* limiter.consume(["user:1", "org:a"])
      assert.notProperty(back, "degraded")
      assert.strictEqual(back.limit, 5)
    }))

  it.effect("a caller that leaves while its call is out is no store failure: the next call goes to the store", () =>
    Effect.gen(function*() {
      const inner = yield* MemoryStore.make
      const applyAll = inner.applyAll
      if (applyAll === undefined) return assert.fail("MemoryStore takes from several keys at once")
      const control = { gate: undefined as Deferred.Deferred<void> | undefined, calls: 0 }
      const store: Store.Store = {
        name: "gated",
        apply: inner.apply,
        applyAll: (calls) =>
          Effect.suspend(() => {
            control.calls++
            return control.gate === undefined
              ? applyAll(calls)
              : Effect.andThen(Deferred.await(control.gate), applyAll(calls))
          })
      }
      const limiter = yield* RateLimiter.make({
        policy: tiers,
        fallback: { mode: "local", share: 0.5, timeout: "1 hour", retryAfter: "1 second" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      control.gate = yield* Deferred.make<void>()
      const left = yield* Effect.forkChild(limiter.consume(["user:1", "org:a"]), { startImmediately: true })
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow
      assert.strictEqual(control.calls, 1)
      yield* Fiber.interrupt(left)
      const opened = control.gate
      control.gate = undefined
      yield* Deferred.succeed(opened, undefined)
      assert.strictEqual((yield* limiter.stats).storeFailures, 0)
      const next = yield* limiter.consume(["user:1", "org:a"])
      assert.isTrue(next.allowed)
      assert.notProperty(next, "degraded")
    }))
})

describe("combine: one decision from the keys' own", () => {
  const part = (allowed: boolean, remaining: number, retryAfter: number, limit: number): Decision.Decision => ({
    allowed,
    remaining,
    retryAfter: Duration.millis(retryAfter),
    resetAfter: Duration.zero,
    limit
  })

  it("no keys: nothing remains, no limit", () => {
    const d = AllOrNothing.combine(true, [], [])
    assert.deepStrictEqual([d.allowed, d.remaining, d.limit, d.keys], [true, 0, 0, []])
  })

  it("denied while no key alone denies any more (a race): the first key that did not admit is binding", () => {
    const d = AllOrNothing.combine(false, ["a", "b", "c"], [
      part(true, 3, 0, 5),
      part(false, 0, 0, 7),
      part(false, 0, 0, 9)
    ])
    assert.deepStrictEqual([d.allowed, Duration.toMillis(d.retryAfter), d.limit], [false, 0, 7])
    const none = AllOrNothing.combine(false, ["a", "b"], [part(true, 3, 0, 5), part(true, 1, 0, 7)])
    assert.strictEqual(none.limit, 5)
  })

  it("admitted: no retryAfter, whatever a key's own says (a dry run's refusal let through)", () => {
    const d = AllOrNothing.combine(true, ["a", "b"], [part(true, 0, 3600_000, 1), part(true, 3, 0, 3)])
    assert.strictEqual(Duration.toMillis(d.retryAfter), 0)
    assert.deepStrictEqual([d.remaining, d.limit], [0, 1])
  })
})

// A token bucket whose step throws for cost 3: a stand-in for an algorithm bug.
const faulty = (() => {
  const base = Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }) as Policy.TokenBucket
  const algorithm: Policy.TokenBucket["algorithm"] = {
    ...base.algorithm,
    takeInPlace: undefined,
    step: (c, s, now, cost) => {
      if (cost === 3) throw new Error("step exploded")
      return base.algorithm.step(c, s, now, cost)
    }
  }
  return { ...base, algorithm, rule: bind(algorithm, base.config) } as Policy.Policy
})()

describe("acquire over several keys: a defect in one key's policy", () => {
  for (const fastPath of [true, false]) {
    it.effect(`fails the call with BucketFailed, and the other keys pay nothing (fastPath: ${fastPath})`, () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ fastPath, policy: (key) => key === "bad" ? faulty : tiers(key) })
        assert.isTrue(yield* limiter.acquire(["bad", "org:a"], { cost: 2 }))
        const error = yield* Effect.flip(limiter.acquire(["bad", "org:a"], { cost: 3 }))
        assert.strictEqual(error._tag, "BucketFailed")
        assert.strictEqual(yield* remaining(limiter, "org:a"), 8)
        assert.isTrue(yield* limiter.acquire(["bad", "org:a"], { cost: 2 }))
        assert.strictEqual(yield* remaining(limiter, "org:a"), 6)
      }))
  }
})

describe("wait over several keys on a store whose fallback denies", () => {
  it.effect("while the store is down the call fails at once, with the fallback's retryAfter, however long it may wait", () =>
    Effect.gen(function*() {
      const store: Store.Store = {
        name: "down",
        apply: () => Effect.fail(new Store.StoreUnavailable({ store: "down", reason: "down" })),
        applyAll: () => Effect.fail(new Store.StoreUnavailable({ store: "down", reason: "down" }))
      }
      const limiter = yield* RateLimiter.make({
        policy: tiers,
        fallback: { mode: "deny", timeout: "100 millis", retryAfter: "1 second" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      const fiber = yield* Effect.forkChild(Effect.flip(limiter.wait(["user:1", "org:a"])))
      yield* settle
      const error = fiber.pollUnsafe()
      assert.isDefined(error, "still waiting on a store that is down")
      const e = yield* Fiber.join(fiber)
      assert.strictEqual(e._tag, "RateLimitExceeded")
      if (e._tag === "RateLimitExceeded") assert.strictEqual(Duration.toMillis(e.retryAfter), 1000)
    }))
})
