/**
 * The operations beyond a plain decision, as one suite run on every backend
 * (test/Beyond.test.ts in-process and on MemoryStore, test/redis/Beyond.test.ts
 * on a real Redis). Each test starts its limiter with `make` and moves time
 * with `advance`.
 */
import { assert } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import { TestClock } from "effect/testing"
import { Policy, type RateLimiter } from "../src/index.ts"

type Make = (options: RateLimiter.Options) => Effect.Effect<RateLimiter["Service"], unknown, any>

interface It {
  readonly effect: (name: string, self: () => Effect.Effect<void, unknown, any>) => void
}

const millis = (d: Duration.Duration | undefined): number | undefined =>
  d === undefined ? undefined : Duration.toMillis(d)

const perSecond = (capacity: number, tokens: number, initialTokens?: number) =>
  Policy.tokenBucket({ capacity, refill: { tokens, per: "1 second" }, initialTokens })

/**
 * Declares the suite. `advance` moves the limiter's clock (TestClock by
 * default); `store` says the limiter keeps its state in a store.
 */
export const beyond = (
  it: It,
  make: Make,
  options: {
    readonly store: boolean
    readonly advance?: ((millis: number) => Effect.Effect<void, never, any>) | undefined
  }
): void => {
  const advance = options.advance ?? ((ms: number) => TestClock.adjust(ms))

  it.effect("force goes into debt and says how long it lasts (Bucket4j consumeIgnoringRateLimits)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: perSecond(5, 1) })
      const d = yield* limiter.force("k", { cost: 7 })
      assert.isTrue(d.allowed)
      assert.strictEqual(d.remaining, 0)
      assert.strictEqual(millis(d.delay), 2000)
      assert.isFalse(yield* limiter.acquire("k"))
      yield* advance(2000)
      assert.isFalse(yield* limiter.acquire("k"))
      yield* advance(1000)
      assert.isTrue(yield* limiter.acquire("k"))
      // a force within the limit leaves no debt
      const within = yield* limiter.force("j", { cost: 2 })
      assert.strictEqual(within.remaining, 3)
      assert.isUndefined(within.delay)
    }))

  it.effect("penalty and reward move a fixed window's count, the reward capped (rate-limiter-flexible)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: Policy.fixedWindow({ limit: 5, window: "10 seconds" }) })
      assert.strictEqual((yield* limiter.consume("k")).remaining, 4)
      assert.strictEqual((yield* limiter.penalty("k", 2)).remaining, 2)
      assert.strictEqual((yield* limiter.reward("k", 1)).remaining, 3)
      assert.strictEqual((yield* limiter.reward("k", 10)).remaining, 5)
      assert.strictEqual((yield* limiter.penalty("k", 8)).remaining, 0)
      const d = yield* limiter.consume("k")
      assert.isFalse(d.allowed)
      assert.strictEqual(millis(d.retryAfter), 10_000)
    }))

  it.effect("add with overLimit lifts a token bucket above its capacity (Bucket4j forceAddTokens)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: perSecond(5, 1) })
      assert.strictEqual((yield* limiter.add("k", 3)).remaining, 5)
      assert.strictEqual((yield* limiter.add("k", 3, { overLimit: true })).remaining, 8)
      assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
      assert.isTrue(yield* limiter.acquire("k", { cost: 3 }))
      assert.isFalse(yield* limiter.acquire("k"))
      const refused = yield* make({ policy: Policy.slidingWindow({ limit: 5, window: "1 second" }) })
      const error = yield* Effect.flip(refused.add("k", 1, { overLimit: true }))
      assert.strictEqual(error._tag, "InvalidRequest")
    }))

  it.effect("fill refills to capacity; reset goes back to the initial level (Bucket4j reset)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: perSecond(5, 1, 0) })
      assert.strictEqual((yield* limiter.peek("k")).remaining, 0)
      assert.strictEqual((yield* limiter.fill("k")).remaining, 5)
      assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
      yield* limiter.fill("k")
      assert.strictEqual((yield* limiter.peek("k")).remaining, 5)
      yield* limiter.reset("k")
      assert.strictEqual((yield* limiter.peek("k")).remaining, 0)
    }))

  it.effect("consumeUpTo takes what there is, at most the cost (Bucket4j tryConsumeAsMuchAsPossible)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: perSecond(5, 1) })
      assert.isTrue(yield* limiter.acquire("k", { cost: 3 }))
      const t = yield* limiter.consumeUpTo("k", { cost: 10 })
      assert.strictEqual(t.taken, 2)
      assert.isTrue(t.allowed)
      assert.strictEqual(t.remaining, 0)
      const none = yield* limiter.consumeUpTo("k", { cost: 10 })
      assert.strictEqual(none.taken, 0)
      assert.isFalse(none.allowed)
      assert.strictEqual(millis(none.retryAfter), 1000)
      yield* advance(1000)
      assert.strictEqual((yield* limiter.consumeUpTo("k")).taken, 1)
    }))

  it.effect("get answers none for a key never seen; delete says whether it had state (rate-limiter-flexible)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: Policy.fixedWindow({ limit: 5, window: "10 seconds" }) })
      assert.isTrue(Option.isNone(yield* limiter.get("k")))
      assert.isFalse(yield* limiter.delete("k"))
      assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
      const got = yield* limiter.get("k")
      assert.isTrue(Option.isSome(got))
      assert.strictEqual(Option.getOrThrow(got).remaining, 3)
      assert.isTrue(yield* limiter.delete("k"))
      assert.isTrue(Option.isNone(yield* limiter.get("k")))
      assert.isFalse(yield* limiter.delete("k"))
      assert.strictEqual((yield* limiter.peek("k")).remaining, 5)
    }))

  it.effect("set puts the key at a number used from full, a debt above the limit (rate-limiter-flexible)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: Policy.fixedWindow({ limit: 10, window: "10 seconds" }) })
      assert.strictEqual((yield* limiter.set("k", 4)).remaining, 6)
      assert.strictEqual((yield* limiter.set("k", 12)).remaining, 0)
      assert.isFalse(yield* limiter.acquire("k"))
      // a window of its own
      assert.strictEqual((yield* limiter.set("j", 10, { duration: "2 seconds" })).remaining, 0)
      yield* advance(2000)
      assert.isTrue(yield* limiter.acquire("j"))
    }))

  it.effect("block refuses everything until it ends (rate-limiter-flexible block)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: perSecond(5, 1) })
      const d = yield* limiter.block("k", "5 seconds")
      assert.isFalse(d.allowed)
      assert.strictEqual(millis(d.retryAfter), 5000)
      assert.isFalse(yield* limiter.acquire("k"))
      const c = yield* limiter.consume("k")
      assert.isFalse(c.allowed)
      assert.strictEqual(millis(c.retryAfter), 5000)
      yield* advance(4999)
      assert.isFalse(yield* limiter.acquire("k"))
      yield* advance(1)
      // nothing was taken while it was blocked
      assert.strictEqual((yield* limiter.consume("k")).remaining, 4)
      // fill ends a block
      yield* limiter.block("k", Duration.infinity)
      assert.isFalse(yield* limiter.acquire("k"))
      yield* limiter.fill("k")
      assert.isTrue(yield* limiter.acquire("k"))
    }))

  it.effect("blockDuration: a refused request blocks the key (rate-limiter-flexible)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({
        policy: Policy.fixedWindow({ limit: 2, window: "1 second", blockDuration: "10 seconds" })
      })
      assert.isTrue(yield* limiter.acquire("k"))
      assert.isTrue(yield* limiter.acquire("k"))
      const d = yield* limiter.consume("k")
      assert.isFalse(d.allowed)
      assert.strictEqual(millis(d.retryAfter), 10_000)
      yield* advance(5000)
      const still = yield* limiter.consume("k")
      assert.isFalse(still.allowed)
      assert.strictEqual(millis(still.retryAfter), 5000)
      yield* advance(5000)
      assert.isTrue(yield* limiter.acquire("k"))
    }))

  it.effect("peek of a cost above the limit answers never (Bucket4j estimateAbilityToConsume)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: perSecond(5, 1) })
      const d = yield* limiter.peek("k", { cost: 6 })
      assert.isFalse(d.allowed)
      assert.strictEqual(millis(d.retryAfter), Infinity)
      assert.strictEqual(d.remaining, 5)
    }))

  it.effect("a dry run lets refusals through, flagged and counted (nginx limit_req_dry_run)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: Policy.fixedWindow({ limit: 1, window: "1 second", dryRun: true }) })
      assert.isTrue(yield* limiter.acquire("k"))
      assert.isTrue(yield* limiter.acquire("k"))
      const d = yield* limiter.consume("k")
      assert.isTrue(d.allowed)
      assert.isTrue(d.dryRun)
      assert.strictEqual(millis(d.retryAfter), 1000)
      const stats = yield* limiter.stats
      assert.strictEqual(stats.dryRun, 2)
      assert.strictEqual(stats.denied, 2)
      assert.strictEqual(stats.allowed, 1)
    }))

  it.effect("a duration per call opens a window of that length (rate-limiter-flexible customDuration)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: Policy.fixedWindow({ limit: 2, window: "1 second" }) })
      assert.isTrue(yield* limiter.acquire("k", { duration: "5 seconds" }))
      assert.isTrue(yield* limiter.acquire("k"))
      yield* advance(1000)
      assert.isFalse(yield* limiter.acquire("k"))
      yield* advance(4000)
      assert.isTrue(yield* limiter.acquire("k"))
      const other = yield* make({ policy: perSecond(5, 1) })
      const error = yield* Effect.flip(other.acquire("k", { duration: "5 seconds" }))
      assert.strictEqual(error._tag === "InvalidRequest" && error.field, "duration")
    }))

  it.effect("a rate given as an interval between events (x/time/rate Every)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: Policy.tokenBucket({ capacity: 1, refill: { every: "250 millis" } }) })
      assert.isTrue(yield* limiter.acquire("k"))
      assert.isFalse(yield* limiter.acquire("k"))
      yield* advance(250)
      assert.isTrue(yield* limiter.acquire("k"))
    }))

  it.effect("a rate of 0: the burst, then never again (x/time/rate NewLimiter(0, b))", () =>
    Effect.gen(function*() {
      const limiter = yield* make({
        policy: Policy.tokenBucket({ capacity: 2, refill: { tokens: 0, per: "1 second" } })
      })
      assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
      const d = yield* limiter.consume("k")
      assert.isFalse(d.allowed)
      assert.strictEqual(millis(d.retryAfter), Infinity)
      yield* advance(3_600_000)
      assert.isFalse(yield* limiter.acquire("k"))
    }))

  if (!options.store) {
    it.effect("unlimited admits every cost (x/time/rate rate.Inf)", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.unlimited() })
        assert.isTrue(yield* limiter.acquire("k", { cost: 1_000_000 }))
        assert.strictEqual((yield* limiter.consume("k")).remaining, Infinity)
      }))
  }
}
