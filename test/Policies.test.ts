/**
 * Every policy end to end through the limiter: its constructor validates and
 * names bad fields, and the bucket actor (fast path and mailbox) runs it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../src/index.ts"

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

const count = (limiter: RateLimiter["Service"], key: string, n: number) =>
  Effect.map(Effect.forEach(Array.from({ length: n }), () => limiter.acquire(key)), (r) => r.filter(Boolean).length)

describe("policy constructors name the bad field and value", () => {
  const cases: Array<[string, Policy.Policy, string, string]> = [
    ["gcra count", Policy.gcra({ rate: { count: 0, per: "1 second" } }), "rate.count", "0"],
    ["gcra per", Policy.gcra({ rate: { count: 1, per: "soon" as any } }), "rate.per", "\"soon\""],
    ["gcra burst", Policy.gcra({ rate: { count: 1, per: "1 second" }, maxBurst: -1 }), "maxBurst", "-1"],
    ["leaky rate", Policy.leakyBucket({ rate: { tokens: NaN, per: "1 second" } }), "rate.tokens", "NaN"],
    ["leaky burst", Policy.leakyBucket({ rate: { tokens: 1, per: "1 second" }, burst: Infinity }), "burst", "Infinity"],
    ["fixed limit", Policy.fixedWindow({ limit: 1.5, window: "1 minute" }), "limit", "1.5"],
    ["fixed window", Policy.fixedWindow({ limit: 1, window: "0 millis" }), "window", "\"0 millis\""],
    ["sliding limit", Policy.slidingWindow({ limit: -3, window: "1 minute" }), "limit", "-3"],
    ["log gap", Policy.slidingLog({ limit: 3, window: "1 minute", minGap: "never" as any }), "minGap", "\"never\""],
    ["smooth permits", Policy.smooth({ permits: 0, per: "1 second" }), "permits", "0"],
    ["smooth cold", Policy.smooth({ permits: 1, per: "1 second", coldFactor: 0.5 }), "coldFactor", "0.5"],
    ["concurrency", Policy.concurrency({ capacity: -1 }), "capacity", "-1"],
    [
      "interval mode",
      Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" }, mode: "x" as any }),
      "mode",
      "\"x\""
    ],
    [
      "all part",
      Policy.all(
        Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } }),
        Policy.fixedWindow({ limit: 0, window: "1 minute" })
      ),
      "all[1].limit",
      "0"
    ],
    ["all empty", Policy.all(), "all", "[]"]
  ]
  for (const [name, policy, field, value] of cases) {
    it.effect(name, () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(RateLimiter.make({ policy }))
        assert.strictEqual(error.field, field)
        assert.strictEqual(error.value, value)
        assert.include(error.message, field)
      }))
  }
})

for (const fastPath of [true, false]) {
  const make = (policy: Policy.Policy) => RateLimiter.make({ policy, fastPath })
  describe(`fastPath: ${fastPath}`, () => {
    it.effect("gcra: maxBurst + 1 at once, then the emission interval; redis-cell's figures", () =>
      Effect.gen(function*() {
        const limiter = yield* make(Policy.gcra({ rate: { count: 10, per: "1 second" }, maxBurst: 4 }))
        const first = yield* limiter.consume("k")
        assert.deepStrictEqual([first.allowed, first.limit, first.remaining], [true, 5, 4])
        assert.strictEqual(yield* count(limiter, "k", 10), 4)
        const denied = yield* limiter.consume("k")
        assert.strictEqual(Duration.toMillis(denied.retryAfter), 100)
        yield* TestClock.adjust("100 millis")
        assert.strictEqual(yield* count(limiter, "k", 3), 1)
      }))

    it.effect("leaky bucket: waiters are let through at the rate, a full queue refuses at once", () =>
      Effect.gen(function*() {
        const limiter = yield* make(Policy.leakyBucket({ rate: { tokens: 10, per: "1 second" }, burst: 3 }))
        const clock = yield* Clock.Clock
        const times: Array<number> = []
        const fibers = yield* Effect.forEach([0, 1, 2, 3], () =>
          limiter.wait("k").pipe(
            Effect.tap(() => Effect.sync(() => times.push(clock.currentTimeMillisUnsafe()))),
            Effect.forkChild({ startImmediately: true })
          ))
        // the queue (burst 3 beyond the one in service) is full: refused at once
        assert.isFalse(yield* limiter.acquire("k"))
        yield* settle
        yield* TestClock.adjust("1 second")
        yield* Fiber.joinAll(fibers)
        assert.deepStrictEqual(times, [0, 100, 200, 300])
        const d = yield* limiter.consume("k")
        assert.isTrue(d.allowed)
        assert.isUndefined(d.delay)
      }))

    it.effect("leaky bucket nodelay: admitted at once, same accounting", () =>
      Effect.gen(function*() {
        const limiter = yield* make(
          Policy.leakyBucket({ rate: { tokens: 10, per: "1 second" }, burst: 3, nodelay: true })
        )
        assert.strictEqual(yield* count(limiter, "k", 10), 4)
      }))

    it.effect("fixed window aligned to the clock", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(1_500)
        const limiter = yield* make(Policy.fixedWindow({ limit: 3, window: "1 second", aligned: true }))
        assert.strictEqual(yield* count(limiter, "k", 5), 3)
        const d = yield* limiter.consume("k")
        assert.strictEqual(Duration.toMillis(d.retryAfter), 500)
        yield* TestClock.adjust("500 millis")
        assert.strictEqual(yield* count(limiter, "k", 5), 3)
      }))

    it.effect("sliding window weighs the previous window", () =>
      Effect.gen(function*() {
        const limiter = yield* make(Policy.slidingWindow({ limit: 10, window: "1 second" }))
        assert.strictEqual(yield* count(limiter, "k", 10), 10)
        yield* TestClock.adjust("1500 millis") // half the previous window still counts: 5
        assert.strictEqual(yield* count(limiter, "k", 10), 5)
      }))

    it.effect("sliding log with countBlocked keeps a hammering caller out", () =>
      Effect.gen(function*() {
        const limiter = yield* make(Policy.slidingLog({ limit: 2, window: "1 second", countBlocked: true }))
        assert.strictEqual(yield* count(limiter, "k", 2), 2)
        for (let i = 0; i < 10; i++) {
          yield* TestClock.adjust("200 millis")
          assert.isFalse(yield* limiter.acquire("k"))
        }
        yield* TestClock.adjust("1 second")
        assert.isTrue(yield* limiter.acquire("k"))
      }))

    it.effect("sliding log with minGap: an admission within the gap of the last is refused, told the gap's end", () =>
      Effect.gen(function*() {
        const limiter = yield* make(Policy.slidingLog({ limit: 5, window: "1 minute", minGap: "2 seconds" }))
        assert.isTrue(yield* limiter.acquire("k"))
        yield* TestClock.adjust("1500 millis")
        const early = yield* limiter.consume("k")
        assert.isFalse(early.allowed)
        assert.strictEqual(Duration.toMillis(early.retryAfter), 500)
        yield* TestClock.adjust("500 millis")
        assert.isTrue(yield* limiter.acquire("k"))
      }))

    it.effect("smooth with warm-up starts slow and reaches the stable rate", () =>
      Effect.gen(function*() {
        const limiter = yield* make(Policy.smooth({ permits: 100, per: "1 second", warmup: "100 millis" }))
        const clock = yield* Clock.Clock
        const times: Array<number> = []
        for (let i = 0; i < 8; i++) {
          yield* limiter.wait("k")
          times.push(clock.currentTimeMillisUnsafe())
        }
        assert.deepStrictEqual(times, [0, 28, 52, 72, 88, 100, 110, 120].map((t) => t))
      }).pipe(
        Effect.forkChild,
        Effect.flatMap((fiber) => TestClock.adjust("1 second").pipe(Effect.andThen(Fiber.join(fiber))))
      ))

    it.effect("all: admitted only if every limit admits, and the most restrictive is reported", () =>
      Effect.gen(function*() {
        const limiter = yield* make(Policy.all(
          Policy.tokenBucket({ capacity: 5, refill: { tokens: 5, per: "1 second" } }),
          Policy.fixedWindow({ limit: 8, window: "1 minute" })
        ))
        assert.strictEqual(yield* count(limiter, "k", 10), 5)
        yield* TestClock.adjust("1 second")
        assert.strictEqual(yield* count(limiter, "k", 10), 3) // the window's 8 binds now
        const d = yield* limiter.consume("k")
        assert.strictEqual(d.limit, 8)
        assert.isAbove(Duration.toMillis(d.retryAfter), 50_000)
      }))

    it.effect("concurrency: permits come back only through release", () =>
      Effect.gen(function*() {
        const limiter = yield* make(Policy.concurrency({ capacity: 2 }))
        assert.strictEqual(yield* count(limiter, "k", 3), 2)
        yield* TestClock.adjust("1 hour")
        assert.isFalse(yield* limiter.acquire("k"))
        yield* limiter.release("k")
        assert.isTrue(yield* limiter.acquire("k"))
        assert.strictEqual(
          yield* limiter.withPermit("k")(Effect.succeed("never")).pipe(
            Effect.timeoutOption("1 second"),
            Effect.map((o) => o._tag),
            Effect.forkChild,
            Effect.flatMap((f) => TestClock.adjust("1 second").pipe(Effect.andThen(Fiber.join(f))))
          ),
          "None"
        )
      }))

    it.effect("concurrency: a waiter waits for a release up to its maxWait", () =>
      Effect.gen(function*() {
        const limiter = yield* make(Policy.concurrency({ capacity: 1 }))
        assert.isTrue(yield* limiter.acquire("k"))
        const patient = yield* Effect.exit(limiter.wait("k", { maxWait: "2 seconds" })).pipe(
          Effect.forkChild({ startImmediately: true })
        )
        const hasty = yield* Effect.exit(limiter.wait("k", { maxWait: "500 millis" })).pipe(
          Effect.forkChild({ startImmediately: true })
        )
        yield* settle
        yield* TestClock.adjust("500 millis")
        const gaveUp = yield* Fiber.join(hasty)
        assert.isTrue(
          gaveUp._tag === "Failure" &&
            gaveUp.cause.reasons.some((r) => r._tag === "Fail" && r.error._tag === "RateLimitExceeded")
        )
        yield* TestClock.adjust("500 millis")
        yield* limiter.release("k")
        yield* settle
        assert.strictEqual((yield* Fiber.join(patient))._tag, "Success")
        assert.isFalse(yield* limiter.acquire("k"))
      }))

    it.effect("token bucket in interval mode adds whole periods at once", () =>
      Effect.gen(function*() {
        const limiter = yield* make(
          Policy.tokenBucket({ capacity: 4, refill: { tokens: 4, per: "1 second" }, mode: "interval" })
        )
        assert.strictEqual(yield* count(limiter, "k", 5), 4)
        yield* TestClock.adjust("999 millis")
        assert.isFalse(yield* limiter.acquire("k"))
        yield* TestClock.adjust("1 millis")
        assert.strictEqual(yield* count(limiter, "k", 5), 4)
      }))
  })
}
