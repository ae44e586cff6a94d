/**
 * Boundaries that mutation testing found unguarded (docs/reliability.md,
 * "Mutation testing"): each test here failed against one changed comparison
 * or one skipped rule in the core, and passes on the code as it is. They go
 * through the public API only (the limiter, its stats, a Store, the
 * headers), so they hold whatever the internals become.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, DateTime, Duration, Effect, Exit, Fiber, Metric, Option, Scope } from "effect"
import { TestClock } from "effect/testing"
import { RateLimitHeaders } from "../src/http/index.ts"
import { MemoryStore, Policy, RateLimiter, RateLimitExceeded, Store } from "../src/index.ts"
import * as Engine from "../src/internal/actor/Engine.ts"
import { Kind as OpKind } from "../src/internal/operation/Op.ts"
import { onStore } from "./stores.ts"

// Lets forked fibers and bucket actors run until they park.
const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

const perSecond = (capacity: number, tokens: number) =>
  Policy.tokenBucket({ capacity, refill: { tokens, per: "1 second" } })

const millis = (d: Duration.Duration) => Duration.toMillis(d)

// The limiter in process (fast path on and off) and on a store, where a test
// means all three.
const makers: ReadonlyArray<
  readonly [string, (options: RateLimiter.Options) => Effect.Effect<RateLimiter["Service"], unknown, any>]
> = [
  ["fast path", (options) => RateLimiter.make({ fastPath: true, ...options })],
  ["actor only", (options) => RateLimiter.make({ fastPath: false, ...options })],
  [
    "MemoryStore",
    onStore
  ]
]

// A store that is down and says so at once (a refused connection).
// A store that is down, counting the calls it gets.
let downCalls = 0
const down: Store.Store = {
  name: "down",
  apply: () =>
    Effect.suspend(() => {
      downCalls++
      return Effect.fail(new Store.StoreUnavailable({ store: "down", reason: "connection refused" }))
    }),
  applyAll: () =>
    Effect.suspend(() => {
      downCalls++
      return Effect.fail(new Store.StoreUnavailable({ store: "down", reason: "connection refused" }))
    })
}

describe("a waiter's maxWait is inclusive", () => {
  for (const [name, make] of makers) {
    it.effect(`a turn exactly maxWait away is waited for, a millisecond more is refused (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        // the next token is 1000 ms away
        const late = yield* Effect.exit(limiter.wait("k", { maxWait: "999 millis" }))
        assert.isTrue(Exit.isFailure(late) && late.cause.reasons.some((r) => r._tag === "Fail"))
        const exact = yield* Effect.forkChild(
          Effect.andThen(limiter.wait("k", { maxWait: "1 second" }), Clock.currentTimeMillis)
        )
        yield* settle
        assert.isUndefined(exact.pollUnsafe())
        yield* TestClock.adjust("1 second")
        assert.strictEqual(yield* Fiber.join(exact), 1000)
      }))
  }
})

describe("tenants with equal stamps keep their order of arrival", () => {
  for (const [name, make] of makers.slice(0, 2)) {
    it.effect(`three tenants new to the line are served as they came (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        const log: Array<string> = []
        // Each tenant is new, so each is stamped with the line's current
        // virtual time: the stamps tie, and arrival decides.
        for (const tenant of ["a", "b", "c"]) {
          yield* Effect.forkChild(
            Effect.andThen(limiter.wait("k", { tenant }), Effect.sync(() => log.push(tenant)))
          )
          yield* settle
        }
        for (let i = 0; i < 3; i++) {
          yield* TestClock.adjust("1 second")
          yield* settle
        }
        assert.deepStrictEqual(log, ["a", "b", "c"])
      }))
  }
})

describe("reaping waits exactly idleTimeout", () => {
  for (const [name, make] of makers.slice(0, 2)) {
    it.effect(`a full bucket is kept until idleTimeout has passed, and reaped at that moment (${name})`, () =>
      Effect.gen(function*() {
        // Full again 1 s after its last use, idle after 4 s; the sweep runs every 2 s.
        const limiter = yield* make({ policy: perSecond(2, 2), idleTimeout: "4 seconds" })
        assert.isTrue(yield* limiter.acquire("k"))
        assert.strictEqual((yield* limiter.stats).buckets, 1)
        // t = 2 s: the sweep finds it full (safe to forget) but used 2 s ago: kept
        yield* TestClock.adjust("2 seconds")
        yield* settle
        assert.strictEqual((yield* limiter.stats).buckets, 1)
        assert.strictEqual((yield* limiter.stats).reaped, 0)
        // t = 4 s: idle for exactly idleTimeout: reaped by this sweep, not the next
        yield* TestClock.adjust("2 seconds")
        yield* settle
        const stats = yield* limiter.stats
        assert.strictEqual(stats.buckets, 0)
        assert.strictEqual(stats.reaped, 1)
      }))
  }
})

describe("maxBuckets bounds calls over several keys too", () => {
  for (const [name, make] of makers.slice(0, 2)) {
    it.effect(`a call over new keys with the table full of busy buckets is Overloaded (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(5, 1), maxBuckets: 2 })
        // two buckets that are not full: neither may be forgotten to make room
        assert.isTrue(yield* limiter.acquire("a"))
        assert.isTrue(yield* limiter.acquire("b"))
        const error = yield* Effect.flip(limiter.acquire(["c", "d"]))
        assert.strictEqual(error._tag, "Overloaded")
        assert.strictEqual(error._tag === "Overloaded" && error.reason, "buckets")
        assert.strictEqual((yield* limiter.stats).buckets, 2)
        // once one of them is full again, it makes room
        yield* TestClock.adjust("1 second")
        assert.isTrue(yield* limiter.acquire(["a", "c"]))
      }))
  }
})

describe("fallback deny with the store down", () => {
  it.effect("a denial carries the configured retryAfter and nothing remaining", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: perSecond(10, 1),
        fallback: { mode: "deny", retryAfter: "3 seconds" }
      }).pipe(Effect.provideService(Store.CurrentStore, down))
      downCalls = 0
      const d = yield* limiter.consume("k")
      assert.strictEqual(downCalls, 1)
      assert.isFalse(d.allowed)
      assert.isTrue(d.degraded)
      assert.strictEqual(d.remaining, 0)
      assert.strictEqual(millis(d.retryAfter), 3000)
      assert.strictEqual(d.limit, 10)
      // and within that time the store is not asked again: still denied, same answer
      const again = yield* limiter.consume("k")
      assert.strictEqual(downCalls, 1, "the store was asked again")
      assert.isFalse(again.allowed)
      assert.strictEqual(millis(again.retryAfter), 3000)
    }))

  it.effect("a call over several keys is denied, each key's figures with the configured retryAfter", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: perSecond(10, 1),
        fallback: { mode: "deny", retryAfter: "2 seconds" }
      }).pipe(Effect.provideService(Store.CurrentStore, down))
      assert.isFalse(yield* limiter.acquire(["a", "b"]))
      const d = yield* limiter.consume(["a", "b"])
      assert.isFalse(d.allowed)
      assert.strictEqual(millis(d.retryAfter), 2000)
      assert.strictEqual(d.remaining, 0)
      assert.deepStrictEqual(
        d.keys?.map((k) => [k.key, k.decision.allowed, k.decision.remaining, millis(k.decision.retryAfter)]),
        [["a", false, 0, 2000], ["b", false, 0, 2000]]
      )
      const stats = yield* limiter.stats
      assert.strictEqual(stats.allowed, 0)
      assert.isAtLeast(stats.denied, 2)
    }))

  it.effect("fallback allow over several keys admits, with the full limit remaining", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: perSecond(10, 1),
        fallback: { mode: "allow" }
      }).pipe(Effect.provideService(Store.CurrentStore, down))
      const d = yield* limiter.consume(["a", "b"])
      assert.isTrue(d.allowed)
      assert.strictEqual(d.remaining, 10)
      assert.strictEqual(millis(d.retryAfter), 0)
    }))
})

describe("Retry-After", () => {
  it("is never 0, so a client never retries at once: a denial due now says 1", () => {
    const quota = { name: "api", limit: 10, windowSeconds: 10 }
    const denied = (retryAfter: Duration.Duration) =>
      RateLimitHeaders.make(quota, {
        allowed: false,
        remaining: 0,
        limit: 10,
        retryAfter,
        resetAfter: Duration.seconds(10)
      })["retry-after"]
    assert.strictEqual(denied(Duration.zero), "1")
    assert.strictEqual(denied(Duration.millis(1)), "1")
    assert.strictEqual(denied(Duration.millis(1000)), "1")
    assert.strictEqual(denied(Duration.millis(1001)), "2")
    assert.strictEqual(RateLimitHeaders.retryAfterValue(Duration.zero), "1")
    assert.strictEqual(RateLimitHeaders.retryAfterValue(Duration.millis(-5)), "1")
  })
})

describe("setRate on a smooth policy carries its stored permits (Guava's setRate)", () => {
  for (const [name, make] of makers) {
    it.effect(`stored permits scale with the rate: 4 stored at 4/s are 12 at 12/s (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.smooth({ permits: 4, per: "1 second" }) })
        assert.isTrue(yield* limiter.acquire("k"))
        // idle long enough to store a full second's worth: 4 permits
        yield* TestClock.adjust("10 seconds")
        // 4 stored, and the next permit is free: 5 may go now
        assert.strictEqual((yield* limiter.peek("k")).remaining, 5)
        yield* limiter.setRate("k", 12)
        // Guava: storedPermits * newMax / oldMax = 4 * 12 / 4 = 12, and the free one
        assert.strictEqual((yield* limiter.peek("k")).remaining, 13)
        const d = yield* limiter.consume("k")
        assert.isTrue(d.allowed)
        assert.strictEqual(d.remaining, 12)
      }))
  }
})

describe("Policy.share: the local fallback's fraction of each kind", () => {
  // Each kind at half, against the same kind built by hand at half: every
  // setting is carried, and the limits are halved (rounded down for counts,
  // at least 1). The policies are made inside each test, so that a mutation
  // run counts the test against the constructors it goes through.
  const per = "1 second"
  const cases = (): ReadonlyArray<readonly [string, Policy.Policy, Policy.Policy]> => [
    [
      "token bucket",
      Policy.tokenBucket({ capacity: 10, refill: { tokens: 4, per }, initialTokens: 6, dryRun: true }),
      Policy.tokenBucket({ capacity: 5, refill: { tokens: 2, per }, initialTokens: 3, dryRun: true })
    ],
    [
      "token bucket, interval refill from a first refill",
      Policy.tokenBucket({
        capacity: 10,
        refill: { tokens: 4, per },
        mode: "interval",
        firstRefill: 500,
        adaptiveInitialTokens: true
      }),
      Policy.tokenBucket({
        capacity: 5,
        refill: { tokens: 2, per },
        mode: "interval",
        firstRefill: 500,
        adaptiveInitialTokens: true
      })
    ],
    [
      "token bucket, interval refill",
      Policy.tokenBucket({ capacity: 10, refill: { tokens: 4, per }, mode: "interval" }),
      Policy.tokenBucket({ capacity: 5, refill: { tokens: 2, per }, mode: "interval" })
    ],
    [
      "token bucket, interval refill aligned to the clock",
      Policy.tokenBucket({ capacity: 10, refill: { tokens: 4, per }, mode: "interval", aligned: true }),
      Policy.tokenBucket({ capacity: 5, refill: { tokens: 2, per }, mode: "interval", aligned: true })
    ],
    [
      "gcra",
      Policy.gcra({ rate: { count: 10, per }, maxBurst: 9, blockDuration: "5 seconds" }),
      Policy.gcra({ rate: { count: 5, per }, maxBurst: 4, blockDuration: "5 seconds" })
    ],
    [
      "leaky bucket",
      Policy.leakyBucket({ rate: { tokens: 10, per }, burst: 20, delay: 8 }),
      Policy.leakyBucket({ rate: { tokens: 5, per }, burst: 10, delay: 4 })
    ],
    [
      "leaky bucket, nodelay",
      Policy.leakyBucket({ rate: { tokens: 10, per }, burst: 20, nodelay: true }),
      Policy.leakyBucket({ rate: { tokens: 5, per }, burst: 10, nodelay: true })
    ],
    [
      "fixed window",
      Policy.fixedWindow({ limit: 7, window: "1 minute", aligned: true, countBlocked: true, execEvenly: true }),
      Policy.fixedWindow({ limit: 3, window: "1 minute", aligned: true, countBlocked: true, execEvenly: true })
    ],
    [
      "fixed window spread evenly with a least delay of its own",
      Policy.fixedWindow({ limit: 7, window: "1 minute", execEvenly: true, execEvenlyMinDelay: "10 millis" }),
      Policy.fixedWindow({ limit: 3, window: "1 minute", execEvenly: true, execEvenlyMinDelay: "10 millis" })
    ],
    [
      "sliding window",
      Policy.slidingWindow({ limit: 7, window: "1 minute" }),
      Policy.slidingWindow({ limit: 3, window: "1 minute" })
    ],
    [
      "sliding log",
      Policy.slidingLog({ limit: 7, window: "1 minute", minGap: "2 seconds", countBlocked: true }),
      Policy.slidingLog({ limit: 3, window: "1 minute", minGap: "2 seconds", countBlocked: true })
    ],
    [
      "sliding log without minGap",
      Policy.slidingLog({ limit: 7, window: "1 minute" }),
      Policy.slidingLog({ limit: 3, window: "1 minute" })
    ],
    [
      "sliding log of 1 (never below 1)",
      Policy.slidingLog({ limit: 1, window: "1 minute" }),
      Policy.slidingLog({ limit: 1, window: "1 minute" })
    ],
    [
      "concurrency, replenished",
      Policy.concurrency({ capacity: 7, replenish: { tokens: 2, per } }),
      Policy.concurrency({ capacity: 3, replenish: { tokens: 1, per } })
    ],
    ["concurrency", Policy.concurrency({ capacity: 7 }), Policy.concurrency({ capacity: 3 })],
    [
      "all",
      Policy.all(
        Policy.tokenBucket({ capacity: 10, refill: { tokens: 4, per } }),
        Policy.fixedWindow({ limit: 7, window: "1 minute" })
      ),
      Policy.all(
        Policy.tokenBucket({ capacity: 5, refill: { tokens: 2, per } }),
        Policy.fixedWindow({ limit: 3, window: "1 minute" })
      )
    ],
    [
      "adaptive",
      Policy.adaptive({
        capacity: 10,
        rate: { tokens: 4, per },
        floor: 2,
        ceiling: 8,
        increase: 1,
        decrease: 0.5,
        latency: "100 millis"
      }),
      Policy.adaptive({
        capacity: 5,
        rate: { tokens: 2, per },
        floor: 1,
        ceiling: 4,
        increase: 0.5,
        decrease: 0.5,
        latency: "100 millis"
      })
    ],
    [
      "adaptive without a latency target",
      Policy.adaptive({ capacity: 10, rate: { tokens: 4, per }, floor: 2, ceiling: 8 }),
      Policy.adaptive({ capacity: 5, rate: { tokens: 2, per }, floor: 1, ceiling: 4 })
    ],
    [
      "burst",
      Policy.burst(
        Policy.fixedWindow({ limit: 4, window: per }),
        Policy.tokenBucket({ capacity: 6, refill: { tokens: 1, per: "2 seconds" } })
      ),
      Policy.burst(
        Policy.fixedWindow({ limit: 2, window: per }),
        Policy.tokenBucket({ capacity: 3, refill: { tokens: 0.5, per: "2 seconds" } })
      )
    ],
    // a smooth rate: half the rate (its store, idle time or a warm-up, follows)
    ["smooth", Policy.smooth({ permits: 5, per }), Policy.smooth({ permits: 2.5, per })],
    [
      "smooth, warming up",
      Policy.smooth({ permits: 6, per, warmup: "2 seconds", coldFactor: 4 }),
      Policy.smooth({ permits: 3, per, warmup: "2 seconds", coldFactor: 4 })
    ],
    // no limit at all has nothing to share
    ["unlimited", Policy.unlimited(), Policy.unlimited()]
  ]
  for (const [index, [name]] of cases().entries()) {
    it(`${name}: half of it is the same kind at half`, () => {
      const [, policy, half] = cases()[index]
      assert.notStrictEqual(policy._tag, "Invalid", name)
      assert.notStrictEqual(half._tag, "Invalid", name)
      if (policy._tag === "Invalid" || half._tag === "Invalid") return
      const shared = Policy.share(policy, 0.5)
      assert.deepStrictEqual(JSON.parse(JSON.stringify(shared)), JSON.parse(JSON.stringify(half)))
      assert.strictEqual(Policy.share(policy, 1), policy)
    })
  }

  it.effect("on a store that is down, fallback local decides with the share", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: perSecond(10, 4),
        fallback: { mode: "local", share: 0.5 }
      }).pipe(Effect.provideService(Store.CurrentStore, down))
      const first = yield* limiter.consume("k", { cost: 5 })
      assert.isTrue(first.allowed)
      assert.isTrue(first.degraded)
      assert.strictEqual(first.limit, 5)
      assert.strictEqual(first.remaining, 0)
      assert.isFalse(yield* limiter.acquire("k"))
      // half the refill: 2 a second
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* limiter.peek("k")).remaining, 2)
    }))
})

describe("options that need another, found unchecked by mutation testing", () => {
  const per = "1 second"
  const rows: ReadonlyArray<readonly [string, Policy.Policy, string, string]> = [
    [
      "a first refill without mode interval",
      Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per }, firstRefill: 100 }),
      "firstRefill",
      "100"
    ],
    [
      "adaptiveInitialTokens without a first refill",
      Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per }, mode: "interval", adaptiveInitialTokens: true }),
      "adaptiveInitialTokens",
      "boolean"
    ],
    [
      "initialTokens with adaptiveInitialTokens",
      Policy.tokenBucket({
        capacity: 5,
        refill: { tokens: 1, per },
        mode: "interval",
        firstRefill: 100,
        adaptiveInitialTokens: true,
        initialTokens: 2
      }),
      "initialTokens",
      "2"
    ],
    [
      "execEvenlyMinDelay without execEvenly",
      Policy.fixedWindow({ limit: 5, window: per, execEvenlyMinDelay: "10 millis" }),
      "execEvenlyMinDelay",
      "\"10 millis\""
    ],
    [
      "initialPermits above what a smooth rate stores",
      Policy.smooth({ permits: 5, per, initialPermits: 6 }),
      "initialPermits",
      "6"
    ],
    [
      "a rate without its count",
      Policy.gcra({ rate: { per } as any }),
      "rate.count",
      "undefined"
    ]
  ]
  for (const [label, policy, field, value] of rows) {
    it(`${label} is refused, naming ${field}`, () => {
      assert.strictEqual(policy._tag, "Invalid", label)
      if (policy._tag !== "Invalid") return
      assert.strictEqual(policy.error.field, field)
      assert.strictEqual(policy.error.value, value)
    })
  }
})

describe("maxBuckets bounds the keys reconfigured to a policy of their own", () => {
  for (const [name, make] of makers) {
    it.effect(`one more reconfigured key past maxBuckets is Overloaded; one set back gives its place up (${name})`, () =>
      Effect.gen(function*() {
        const base = perSecond(5, 1)
        const pro = perSecond(50, 10)
        const limiter = yield* make({ policy: base, maxBuckets: 2 })
        yield* limiter.reconfigure("a", pro)
        yield* limiter.reconfigure("b", pro)
        assert.strictEqual((yield* limiter.stats).overrides, 2)
        // a key already reconfigured may be again
        yield* limiter.reconfigure("a", pro)
        const error = yield* Effect.flip(limiter.reconfigure("c", pro))
        assert.strictEqual(error._tag, "Overloaded")
        assert.strictEqual(error._tag === "Overloaded" && error.reason, "buckets")
        assert.strictEqual(error._tag === "Overloaded" && error.capacity, 2)
        // "a" back on the policy it would get anyway: its place is free
        yield* limiter.reconfigure("a", base)
        assert.strictEqual((yield* limiter.stats).overrides, 1)
        yield* limiter.reconfigure("c", pro)
        assert.strictEqual((yield* limiter.stats).overrides, 2)
        assert.strictEqual((yield* limiter.consume("c")).limit, 50)
        assert.strictEqual((yield* limiter.consume("a")).limit, 5)
      }))
  }
})

describe("a first refill is an instant in any of its forms", () => {
  const at = Date.UTC(2026, 0, 1)
  const withFirst = (firstRefill: unknown) =>
    Policy.tokenBucket({
      capacity: 5,
      refill: { tokens: 1, per: "1 second" },
      mode: "interval",
      firstRefill: firstRefill as number
    })
  it("epoch milliseconds, an ISO 8601 string, a Date and a DateTime are the same instant", () => {
    const forms = [at, "2026-01-01T00:00:00.000Z", DateTime.toDateUtc(DateTime.makeUnsafe(at)), DateTime.makeUnsafe(at)]
      .map(withFirst)
    for (const policy of forms) assert.notStrictEqual(policy._tag, "Invalid", JSON.stringify(policy))
    const [first, ...others] = forms.map((p) => JSON.stringify(p))
    for (const other of others) assert.strictEqual(other, first)
  })
  it("anything else is refused, naming firstRefill", () => {
    for (const bad of [NaN, Infinity, "not a date", "", true, {}, null]) {
      const policy = withFirst(bad)
      assert.strictEqual(policy._tag, "Invalid", String(bad))
      assert.strictEqual(policy._tag === "Invalid" && policy.error.field, "firstRefill", String(bad))
    }
  })
})

describe("directed cases on every path (in process and on MemoryStore)", () => {
  // What each path answers, as text, so that the three can be compared whole.
  const show = (d: { readonly allowed: boolean; readonly remaining: number; readonly retryAfter: Duration.Duration }) =>
    `${d.allowed}/${d.remaining}/${millis(d.retryAfter)}`
  const onEvery = (
    name: string,
    options: RateLimiter.Options,
    run: (limiter: RateLimiter["Service"]) => Effect.Effect<ReadonlyArray<string>, unknown>,
    expected: ReadonlyArray<string>
  ) => {
    for (const [path, make] of makers) {
      it.effect(`${name} (${path})`, () =>
        Effect.gen(function*() {
          assert.deepStrictEqual(yield* run(yield* make(options)), expected)
        }))
    }
  }

  // A leaky bucket with delay 1 (nginx): the first excess request goes at
  // once, the next ones are held back, each by its place in the queue.
  onEvery(
    "shaped decisions carry their delay",
    { policy: Policy.leakyBucket({ rate: { tokens: 2, per: "1 second" }, burst: 3, delay: 1 }) },
    (limiter) =>
      Effect.forEach(
        [1, 2, 3, 4, 5],
        () => Effect.map(limiter.consume("k"), (d) => `${show(d)}/${d.delay === undefined ? "-" : millis(d.delay)}`)
      ),
    ["true/3/0/-", "true/2/0/-", "true/1/0/500", "true/0/0/1000", "false/0/500/-"]
  )

  onEvery(
    "a force is allowed whatever it takes, and leaves the key in debt",
    { policy: perSecond(5, 1) },
    (limiter) =>
      Effect.gen(function*() {
        const forced = yield* limiter.force("k", { cost: 8 })
        const after = yield* limiter.consume("k")
        return [show(forced), show(after)]
      }),
    ["true/0/0", "false/0/4000"]
  )

  onEvery(
    "reset unblocks a blocked key",
    { policy: perSecond(5, 1) },
    (limiter) =>
      Effect.gen(function*() {
        const blocked = yield* limiter.block("k", "10 seconds")
        const during = yield* limiter.consume("k")
        yield* limiter.reset("k")
        const after = yield* limiter.consume("k")
        return [String(blocked.allowed), show(during), show(after)]
      }),
    ["false", "false/0/10000", "true/4/0"]
  )

  onEvery(
    "delete forgets a blocked key: it is new again, and said to have been there",
    { policy: perSecond(5, 1) },
    (limiter) =>
      Effect.gen(function*() {
        yield* limiter.block("k", "10 seconds")
        const had = yield* limiter.delete("k")
        const after = yield* limiter.consume("k")
        const again = yield* limiter.delete("never")
        return [String(had), show(after), String(again)]
      }),
    ["true", "true/4/0", "false"]
  )

  onEvery(
    "setRate on a key never used: its refill is the new rate",
    { policy: perSecond(10, 1) },
    (limiter) =>
      Effect.gen(function*() {
        yield* limiter.setRate("fresh", 5)
        const drained = yield* limiter.consume("fresh", { cost: 10 })
        yield* TestClock.adjust("1 second")
        const refilled = yield* limiter.peek("fresh")
        return [show(drained), String(refilled.remaining)]
      }),
    ["true/0/0", "5"]
  )

  onEvery(
    "a partial take takes what there is, and nothing from an empty key",
    { policy: perSecond(5, 1) },
    (limiter) =>
      Effect.gen(function*() {
        const first = yield* limiter.consumeUpTo("k", { cost: 3 })
        const second = yield* limiter.consumeUpTo("k", { cost: 3 })
        const third = yield* limiter.consumeUpTo("k", { cost: 3 })
        return [first, second, third].map((d) => `${d.taken}:${show(d)}`)
      }),
    ["3:true/2/0", "2:true/0/0", "0:false/0/1000"]
  )

  it.effect("MemoryStore names itself in errors and metrics: memory", () =>
    Effect.map(MemoryStore.make, (store) => assert.strictEqual(store.name, "memory")))
})

describe("MemoryStore: operations on one key in one call see each other", () => {
  it.effect("a block, then a delete, then a take: the take finds a new key", () =>
    Effect.gen(function*() {
      const store = Engine.engineOf(yield* MemoryStore.make)
      const policy = perSecond(5, 1)
      assert.notStrictEqual(policy._tag, "Invalid")
      if (policy._tag === "Invalid") return
      const op = (kind: OpKind, cost: number) => ({ kind, cost, queued: 0 })
      const replies = yield* store.apply("k", policy, [
        op(OpKind.Block, 10_000),
        op(OpKind.Take, 1),
        op(OpKind.Delete, 0),
        op(OpKind.Take, 1)
      ])
      assert.deepStrictEqual(replies.map((r) => [r.allowed, r.remaining]), [[false, 0], [false, 0], [true, 5], [
        true,
        4
      ]])
    }))
})

describe("a bad field is named with its value and the rule it breaks", () => {
  it("a missing field is required; a bad one says what it must be", () => {
    const missing = Policy.tokenBucket({ refill: { tokens: 1, per: "1 second" } } as any)
    assert.deepStrictEqual(
      missing._tag === "Invalid" && [missing.error.field, missing.error.value, missing.error.reason],
      ["capacity", "undefined", "is required"]
    )
    const nested = Policy.gcra({ rate: { per: "1 second" }, maxBurst: 1 } as any)
    assert.deepStrictEqual(
      nested._tag === "Invalid" && [nested.error.field, nested.error.reason],
      ["rate.count", "is required"]
    )
    const negative = Policy.fixedWindow({ limit: -2, window: "1 second" })
    assert.deepStrictEqual(
      negative._tag === "Invalid" && [negative.error.field, negative.error.value],
      ["limit", "-2"]
    )
    assert.isTrue(negative._tag === "Invalid" && negative.error.reason.length > 0)
    // a long string is shown cut at 64 characters
    const long = Policy.fixedWindow({ limit: "x".repeat(100) as any, window: "1 second" })
    assert.strictEqual(long._tag === "Invalid" && long.error.value, JSON.stringify("x".repeat(64) + "…"))
    const short = Policy.fixedWindow({ limit: "x".repeat(64) as any, window: "1 second" })
    assert.strictEqual(short._tag === "Invalid" && short.error.value, JSON.stringify("x".repeat(64)))
    // an adaptive rate whose capacity times its period overflows
    const huge = Policy.adaptive({
      capacity: 1e308,
      rate: { tokens: 1, per: "1 hour" },
      floor: 1,
      ceiling: 2,
      increase: 1,
      decrease: 0.5
    })
    assert.strictEqual(huge._tag === "Invalid" && huge.error.field, "capacity")
    // parts of a combination are named by their place
    const part = Policy.all(perSecond(5, 1), Policy.fixedWindow({ limit: 0, window: "1 second" }))
    assert.strictEqual(part._tag === "Invalid" && part.error.field, "all[1].limit")
  })
})

describe("reservations on a shaper carry its delay", () => {
  for (const [name, make] of makers) {
    it.effect(`reserve on a leaky bucket with delay 1: the third and fourth act later (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({
          policy: Policy.leakyBucket({ rate: { tokens: 2, per: "1 second" }, burst: 3, delay: 1 })
        })
        const delays: Array<number> = []
        for (let i = 0; i < 4; i++) delays.push(millis((yield* limiter.reserve("k")).delay))
        assert.deepStrictEqual(delays, [0, 0, 500, 1000])
      }))
  }
})

describe("StoreUnavailable", () => {
  it("says which store and why", () => {
    const error = new Store.StoreUnavailable({ store: "redis", reason: "timed out after 250 ms" })
    assert.strictEqual(error.message, "the redis store is unavailable: timed out after 250 ms")
  })
})

describe("combinators refuse what is not a valid policy, naming where", () => {
  const good = perSecond(5, 1)
  const broken = Policy.fixedWindow({ limit: 0, window: "1 second" })
  const named = (p: Policy.Policy) => p._tag === "Invalid" ? [p.error.field, p.error.value] : p._tag
  it("burst: a part that is not a policy, or an invalid one", () => {
    assert.deepStrictEqual(named(Policy.burst(42 as any, good)), ["base", "number"])
    assert.deepStrictEqual(named(Policy.burst(good, "x" as any)), ["burst", "string"])
    assert.deepStrictEqual(named(Policy.burst(broken, good)), ["base.limit", "0"])
    assert.deepStrictEqual(named(Policy.burst(good, broken)), ["burst.limit", "0"])
  })
  it("withOptions: a value that is not a policy", () => {
    assert.deepStrictEqual(named(Policy.withOptions({} as any, { dryRun: true })), ["policy", "object"])
  })
  it("withRate: a token bucket takes any finite rate from 0; a smooth rate a positive one; others none", () => {
    const bucket = perSecond(5, 1)
    const smooth = Policy.smooth({ permits: 5, per: "1 second" })
    assert.isFalse(bucket._tag === "Invalid" || smooth._tag === "Invalid")
    if (bucket._tag === "Invalid" || smooth._tag === "Invalid") return
    assert.strictEqual(Policy.withRate(bucket, 0)._tag, "TokenBucket")
    for (const bad of [-1, NaN, Infinity]) {
      assert.deepStrictEqual(named(Policy.withRate(bucket, bad)), ["rate", String(bad)])
    }
    assert.strictEqual(Policy.withRate(smooth, 0.5)._tag, "Smooth")
    for (const bad of [0, -1, NaN, Infinity]) {
      assert.deepStrictEqual(named(Policy.withRate(smooth, bad)), ["rate", String(bad)])
    }
    const window = Policy.fixedWindow({ limit: 5, window: "1 second" })
    if (window._tag !== "Invalid") assert.deepStrictEqual(named(Policy.withRate(window, 5)), ["rate", "5"])
  })
  it("a refill without its tokens names them", () => {
    assert.deepStrictEqual(
      named(Policy.tokenBucket({ capacity: 5, refill: { per: "1 second" } } as any)),
      ["refill.tokens", "undefined"]
    )
  })
})

describe("priority comes before a tenant's fair share", () => {
  for (const [name, make] of makers.slice(0, 2)) {
    it.effect(`a new tenant of lower priority waits behind a busy tenant of higher priority (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        const log: Array<string> = []
        const join = (label: string, options: RateLimiter.WaitOptions) =>
          Effect.andThen(
            Effect.forkChild(Effect.andThen(limiter.wait("k", options), Effect.sync(() => log.push(label)))),
            settle
          )
        // the busy tenant's stamps run ahead of the line's; the newcomer's is the line's own
        for (const label of ["h1", "h2", "h3"]) yield* join(label, { tenant: "heavy", priority: 5 })
        yield* join("low", { tenant: "light", priority: 0 })
        for (let i = 0; i < 4; i++) {
          yield* TestClock.adjust("1 second")
          yield* settle
        }
        assert.deepStrictEqual(log, ["h1", "h2", "h3", "low"])
      }))
  }
})

describe("a waiter placed ahead by its priority is judged by the waiters ahead of it", () => {
  for (const [name, make] of makers.slice(0, 2)) {
    it.effect(`a high priority with a short maxWait joins a long line of low ones (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        for (let i = 0; i < 3; i++) yield* Effect.forkChild(limiter.wait("k"))
        yield* settle
        // 3 units in line, but none ahead of it: its turn is the next token, 1 s away
        const urgent = yield* Effect.forkChild(
          Effect.andThen(limiter.wait("k", { priority: 1, maxWait: "1500 millis" }), Clock.currentTimeMillis)
        )
        yield* settle
        assert.isUndefined(urgent.pollUnsafe())
        yield* TestClock.adjust("1 second")
        yield* settle
        assert.strictEqual(yield* Fiber.join(urgent), 1000)
        // two more of that priority: the second has one unit ahead of it (not
        // three behind), so its turn is 2 s away: past a maxWait of 1.5 s, in time for 2 s
        yield* Effect.forkChild(limiter.wait("k", { priority: 1 }))
        yield* settle
        const late = yield* Effect.exit(limiter.wait("k", { priority: 1, maxWait: "1500 millis" }))
        assert.isTrue(Exit.isFailure(late))
        const second = yield* Effect.forkChild(
          Effect.andThen(limiter.wait("k", { priority: 1, maxWait: "2 seconds" }), Clock.currentTimeMillis)
        )
        yield* settle
        yield* TestClock.adjust("2 seconds")
        yield* settle
        assert.strictEqual(yield* Fiber.join(second), 3000)
      }))
  }
})

// A metric of the limiter named `limiter`, as an exporter reads it.
const metricOf = (id: string, limiter: string) =>
  Effect.map(Metric.snapshot, (all) => {
    const found = all.find((s) => s.id === id && s.attributes?.limiter === limiter)
    if (found === undefined) return undefined
    const state: unknown = found.state
    return typeof state === "object" && state !== null && "value" in state
      ? state.value
      : typeof state === "object" && state !== null && "count" in state
      ? state.count
      : undefined
  })

describe("the supervisor's counts, as stats and metrics say them", () => {
  for (const [name, make] of makers.slice(0, 2)) {
    it.effect(`tollgate_buckets falls as buckets are reaped, and each Overloaded is counted once (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({
          policy: perSecond(2, 2),
          idleTimeout: "4 seconds",
          maxBuckets: 2,
          name: "counts"
        })
        assert.isTrue(yield* limiter.acquire("a"))
        assert.isTrue(yield* limiter.acquire("b"))
        assert.strictEqual(yield* metricOf("tollgate_buckets", "counts"), 2)
        // the table is full of buckets that are not full again: a new key is refused, and counted
        assert.strictEqual((yield* Effect.flip(limiter.acquire("c")))._tag, "Overloaded")
        assert.strictEqual((yield* limiter.stats).overloaded, 1)
        // and so is a key reconfigured past the cap
        yield* limiter.reconfigure("x", perSecond(9, 9))
        yield* limiter.reconfigure("y", perSecond(9, 9))
        assert.strictEqual((yield* Effect.flip(limiter.reconfigure("z", perSecond(9, 9))))._tag, "Overloaded")
        assert.strictEqual((yield* limiter.stats).overloaded, 2)
        assert.strictEqual(yield* metricOf("tollgate_overloaded_total", "counts"), 2)
        // both idle past idleTimeout: reaped, and the gauge says so
        yield* TestClock.adjust("6 seconds")
        yield* settle
        assert.strictEqual((yield* limiter.stats).reaped, 2)
        assert.strictEqual(yield* metricOf("tollgate_buckets", "counts"), 0)
      }))
  }
})

describe("a deleted key goes back to its own policy", () => {
  for (const [name, make] of makers) {
    it.effect(`reconfigured, then deleted: the next call runs the key's own policy, from a fresh state (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(5, 1) })
        yield* limiter.reconfigure("k", perSecond(50, 10))
        assert.strictEqual((yield* limiter.consume("k")).limit, 50)
        assert.strictEqual((yield* limiter.stats).overrides, 1)
        assert.isTrue(yield* limiter.delete("k"))
        assert.strictEqual((yield* limiter.stats).overrides, 0)
        assert.isTrue(Option.isNone(yield* limiter.get("k")))
        const after = yield* limiter.consume("k")
        assert.strictEqual(after.limit, 5)
        assert.strictEqual(after.remaining, 4)
      }))
  }
})

describe("a limiter that has shut down starts nothing", () => {
  for (const [name, make] of makers.slice(0, 2)) {
    it.effect(`a call for a new key after shutdown fails with LimiterShutdown and starts no bucket (${name})`, () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const limiter = yield* make({ policy: perSecond(5, 1) }).pipe(Scope.provide(scope))
        assert.isTrue(yield* limiter.acquire("before"))
        yield* Scope.close(scope, Exit.void)
        const started = (yield* limiter.stats).started
        assert.strictEqual((yield* Effect.flip(limiter.acquire("new")))._tag, "LimiterShutdown")
        assert.strictEqual((yield* Effect.flip(limiter.acquire(["new", "other"])))._tag, "LimiterShutdown")
        const stats = yield* limiter.stats
        assert.strictEqual(stats.started, started)
        assert.strictEqual(stats.buckets, 0)
      }))
  }
})

describe("waiters on a store's line give up at their deadline", () => {
  it.effect("waiting for a release: a turn within maxWait is taken, a later one fails at its own, counted denied", () =>
    Effect.gen(function*() {
      const limiter = yield* onStore({ policy: Policy.concurrency({ capacity: 1 }) })
      assert.isTrue(yield* limiter.acquire("k"))
      const first = yield* Effect.forkChild(Effect.exit(limiter.wait("k", { maxWait: "1 second" })), {
        startImmediately: true
      })
      const second = yield* Effect.forkChild(Effect.exit(limiter.wait("k", { maxWait: "3 seconds" })), {
        startImmediately: true
      })
      yield* settle
      const denied = (yield* limiter.stats).denied
      // the permit comes back within the first waiter's maxWait
      yield* TestClock.adjust("999 millis")
      yield* limiter.release("k")
      yield* settle
      assert.isTrue(Exit.isSuccess(yield* Fiber.join(first)))
      assert.isUndefined(second.pollUnsafe())
      // nothing comes back for the second: it fails at its own deadline, not before
      yield* TestClock.adjust("2000 millis")
      yield* settle
      assert.isUndefined(second.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      yield* settle
      const late = yield* Fiber.join(second)
      assert.isTrue(Exit.isFailure(late) && Cause.squash(late.cause) instanceof RateLimitExceeded)
      assert.strictEqual((yield* limiter.stats).denied, denied + 1)
      assert.strictEqual((yield* limiter.stats).waiting, 0)
    }))

  it.effect("waiting for a release: a waiter past its maxWait fails with nothing taken", () =>
    Effect.gen(function*() {
      const limiter = yield* onStore({ policy: Policy.concurrency({ capacity: 1 }) })
      assert.isTrue(yield* limiter.acquire("k"))
      const waiter = yield* Effect.forkChild(Effect.exit(limiter.wait("k", { maxWait: "2 seconds" })), {
        startImmediately: true
      })
      yield* TestClock.adjust("2001 millis")
      yield* settle
      assert.isTrue(Exit.isFailure(yield* Fiber.join(waiter)))
      // the permit it waited for is still the holder's: one release frees it, and one acquire takes it
      yield* limiter.release("k")
      assert.isTrue(yield* limiter.acquire("k"))
      assert.isFalse(yield* limiter.acquire("k"))
    }))
})
