/**
 * The operations beyond a plain decision, as one suite run on every backend
 * (test/Beyond.test.ts in-process and on MemoryStore, test/redis/Beyond.test.ts
 * on a real Redis). Each test starts its limiter with `make` and moves time
 * with `advance`.
 */
import { assert } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
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

  it.effect("setRate: a token bucket refills at the new rate from now (x/time/rate SetLimit)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: perSecond(10, 1) })
      assert.isTrue(yield* limiter.acquire("k", { cost: 10 }))
      yield* advance(1000)
      yield* limiter.setRate("k", 10)
      yield* advance(500)
      assert.strictEqual((yield* limiter.peek("k")).remaining, 6)
      const windowed = yield* make({ policy: Policy.fixedWindow({ limit: 1, window: "1 second" }) })
      const error = yield* Effect.flip(windowed.setRate("w", 5))
      assert.strictEqual(error._tag === "InvalidRequest" && error.field, "rate")
    }))

  it.effect("setRate: a smooth policy's next request pays the previous one's cost at the old rate (Guava)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: Policy.smooth({ permits: 1, per: "1 second" }) })
      // a request of 4 at 1 per second: the next one is free 4 seconds later
      assert.isTrue(yield* limiter.acquire("k", { cost: 4 }))
      yield* limiter.setRate("k", 10)
      const d = yield* limiter.consume("k")
      assert.isFalse(d.allowed)
      assert.strictEqual(millis(d.retryAfter), 4000)
      yield* advance(4000)
      assert.isTrue(yield* limiter.acquire("k"))
      // then 10 per second
      yield* advance(100)
      assert.isTrue(yield* limiter.acquire("k"))
    }))

  it.effect("unlimited admits every cost (x/time/rate rate.Inf)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({ policy: Policy.unlimited() })
      assert.isTrue(yield* limiter.acquire("k", { cost: 1_000_000 }))
      assert.strictEqual((yield* limiter.consume("k")).remaining, Infinity)
      assert.isTrue(Option.isNone(yield* limiter.get("k")))
    }))

  it.effect("burst: the base limit, then the burst allowance (rate-limiter-flexible BurstyRateLimiter)", () =>
    Effect.gen(function*() {
      const limiter = yield* make({
        policy: Policy.burst(
          Policy.fixedWindow({ limit: 2, window: "1 second" }),
          Policy.fixedWindow({ limit: 3, window: "1 minute" })
        )
      })
      const remaining: Array<number> = []
      for (let i = 0; i < 5; i++) remaining.push((yield* limiter.consume("k")).remaining)
      assert.deepStrictEqual(remaining, [4, 3, 2, 1, 0])
      const denied = yield* limiter.consume("k")
      assert.isFalse(denied.allowed)
      assert.strictEqual(millis(denied.retryAfter), 1000)
      yield* advance(1000)
      assert.isTrue(yield* limiter.acquire("k"))
    }))
}

// ---------------------------------------------------------------------------
// Random workloads of every operation: a store-backed limiter's transcript
// must be the in-process limiter's (the property test of both stores).

type Costed = "consume" | "acquire" | "wait" | "peek" | "force" | "add" | "addOver" | "upTo" | "set"

/** One step of a workload on one of {@link workloadPolicies}' keys. */
export type Step =
  | {
    readonly _tag: Costed
    readonly key: number
    readonly cost: number
  }
  | { readonly _tag: "fill" | "get" | "delete" | "reset"; readonly key: number }
  | { readonly _tag: "block"; readonly key: number; readonly millis: number }
  | { readonly _tag: "window"; readonly key: number; readonly cost: number; readonly millis: number }
  | { readonly _tag: "rate"; readonly key: number; readonly perSecond: number }
  | { readonly _tag: "advance"; readonly millis: number }

/** One key per policy: every algorithm with its operations, and the common options. */
export const workloadPolicies: ReadonlyArray<Policy.Policy> = [
  Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }),
  Policy.tokenBucket({ capacity: 4, refill: { tokens: 2, per: "1500 millis" }, mode: "interval", initialTokens: 1 }),
  Policy.gcra({ rate: { count: 2, per: "1 second" }, maxBurst: 3 }),
  Policy.leakyBucket({ rate: { tokens: 1, per: "500 millis" }, burst: 2 }),
  Policy.fixedWindow({ limit: 4, window: "2 seconds" }),
  Policy.fixedWindow({ limit: 3, window: "1 second", countBlocked: true, blockDuration: "3 seconds" }),
  Policy.fixedWindow({ limit: 4, window: "2 seconds", execEvenly: true }),
  Policy.slidingWindow({ limit: 5, window: "3 seconds" }),
  Policy.slidingLog({ limit: 3, window: "2 seconds" }),
  Policy.smooth({ permits: 2, per: "1 second" }),
  Policy.concurrency({ capacity: 3 }),
  Policy.all(
    Policy.tokenBucket({ capacity: 4, refill: { tokens: 1, per: "500 millis" } }),
    Policy.fixedWindow({ limit: 6, window: "3 seconds" })
  ),
  Policy.burst(
    Policy.fixedWindow({ limit: 2, window: "1 second" }),
    Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "2 seconds" } })
  ),
  Policy.unlimited()
]

// The keys whose policies shape (a leaky bucket, a fixed window with execEvenly).
const shapers = new Set([3, 6])

/** Workloads of {@link Step}s. */
export const workload = (() => {
  const key = fc.integer({ min: 0, max: workloadPolicies.length - 1 })
  return workloadOn(key, 40)
})()

/**
 * Long workloads on one or two keys: a key's history runs to dozens of
 * operations (over all fourteen keys, a run of 40 gives each about three).
 */
export const focusedWorkload = (maxLength: number): fc.Arbitrary<ReadonlyArray<Step>> =>
  fc.uniqueArray(fc.integer({ min: 0, max: workloadPolicies.length - 1 }), { minLength: 1, maxLength: 2 })
    // (a shaper alone would leave acquire and wait nothing to draw)
    .filter((keys) => keys.some((k) => !shapers.has(k)))
    .chain((keys) => workloadOn(fc.constantFrom(...keys), maxLength))

function workloadOn(key: fc.Arbitrary<number>, maxLength: number): fc.Arbitrary<ReadonlyArray<Step>> {
  const cost = fc.integer({ min: 0, max: 5 })
  const costed = (tag: Costed) => fc.record({ _tag: fc.constant(tag), key, cost })
  const step: fc.Arbitrary<Step> = fc.oneof(
    { weight: 5, arbitrary: costed("consume") },
    // (not on the shapers' keys: their sleeps would wait for a TestClock nobody moves)
    { weight: 2, arbitrary: costed("acquire").filter((s) => !shapers.has(s.key)) },
    { weight: 1, arbitrary: costed("wait").filter((s) => !shapers.has(s.key)) },
    { weight: 1, arbitrary: costed("peek") },
    { weight: 2, arbitrary: costed("force") },
    { weight: 1, arbitrary: costed("add") },
    { weight: 1, arbitrary: costed("addOver") },
    { weight: 2, arbitrary: costed("upTo") },
    { weight: 1, arbitrary: costed("set") },
    {
      weight: 1,
      arbitrary: fc.record({
        _tag: fc.constantFrom("fill" as const, "get" as const, "delete" as const, "reset" as const),
        key
      })
    },
    {
      weight: 1,
      arbitrary: fc.record({ _tag: fc.constant("block" as const), key, millis: fc.integer({ min: 1, max: 4000 }) })
    },
    {
      weight: 1,
      arbitrary: fc.record({
        _tag: fc.constant("window" as const),
        key,
        cost,
        millis: fc.integer({ min: 1, max: 4000 })
      })
    },
    {
      weight: 1,
      arbitrary: fc.record({ _tag: fc.constant("rate" as const), key, perSecond: fc.constantFrom(0.5, 1, 2, 5) })
    },
    {
      weight: 4,
      arbitrary: fc.record({ _tag: fc.constant("advance" as const), millis: fc.integer({ min: 0, max: 3000 }) })
    }
  )
  return fc.array(step, { minLength: 1, maxLength })
}

const showDecision = (d: {
  readonly allowed: boolean
  readonly remaining: number
  readonly retryAfter: Duration.Duration
  readonly resetAfter: Duration.Duration
  readonly delay?: Duration.Duration | undefined
}) => `${d.allowed}/${d.remaining}/${millis(d.retryAfter)}/${millis(d.resetAfter)}/${millis(d.delay)}`

/**
 * Runs a workload on a limiter of {@link workloadPolicies} (every call
 * awaited, time moved by `advance`) and returns the transcript of every
 * outcome, a failure as its tag.
 */
export const transcript = (
  limiter: RateLimiter["Service"],
  steps: ReadonlyArray<Step>,
  advance: (millis: number) => Effect.Effect<void, never, any>
) =>
  Effect.gen(function*() {
    const out: Array<string> = []
    const record = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>, f: (a: A) => string) =>
      Effect.map(Effect.result(effect), (r) => out.push(r._tag === "Success" ? f(r.success) : r.failure._tag))
    for (const s of steps) {
      if (s._tag === "advance") {
        yield* advance(s.millis)
        continue
      }
      const k = `k${s.key}`
      switch (s._tag) {
        case "consume":
          yield* record(limiter.consume(k, { cost: s.cost }), showDecision)
          break
        case "peek":
          yield* record(limiter.peek(k, { cost: s.cost }), showDecision)
          break
        case "acquire":
          yield* record(limiter.acquire(k, { cost: s.cost }), String)
          break
        case "wait":
          // admitted now (after a shaper's delay), or refused at once: nothing is left waiting
          yield* record(limiter.wait(k, { cost: s.cost, maxWait: 0 }), () => "admitted")
          break
        case "force":
          yield* record(limiter.force(k, { cost: s.cost }), showDecision)
          break
        case "add":
          yield* record(limiter.add(k, Math.max(1, s.cost)), showDecision)
          break
        case "addOver":
          yield* record(limiter.add(k, Math.max(1, s.cost), { overLimit: true }), showDecision)
          break
        case "upTo":
          yield* record(limiter.consumeUpTo(k, { cost: Math.max(1, s.cost) }), (t) => `${t.taken}:${showDecision(t)}`)
          break
        case "set":
          yield* record(limiter.set(k, s.cost), showDecision)
          break
        case "fill":
          yield* record(limiter.fill(k), showDecision)
          break
        case "get":
          yield* record(limiter.get(k), Option.match({ onNone: () => "none", onSome: showDecision }))
          break
        case "delete":
          yield* record(limiter.delete(k), String)
          break
        case "reset":
          yield* record(limiter.reset(k), () => "reset")
          break
        case "block":
          yield* record(limiter.block(k, s.millis), showDecision)
          break
        case "window":
          yield* record(limiter.consume(k, { cost: s.cost, duration: s.millis }), showDecision)
          break
        case "rate":
          yield* record(limiter.setRate(k, s.perSecond), () => "rate")
          break
      }
    }
    return out
  })
