import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Scope } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../src/index.ts"

const perSecond = (capacity: number, tokens: number, initialTokens?: number) =>
  Policy.tokenBucket({ capacity, refill: { tokens, per: "1 second" }, initialTokens })

// Lets forked fibers and bucket actors run until they park.
const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

const acquireN = (limiter: RateLimiter["Service"], key: string, n: number) =>
  Effect.forEach(Array.from({ length: n }), () => limiter.acquire(key)).pipe(
    Effect.map((results) => results.filter(Boolean).length)
  )

// Every behaviour holds with the caller-side fast path on and off.
for (const fastPath of [true, false]) {
  const make = (options: RateLimiter.Options) => RateLimiter.make({ fastPath, ...options })
  describe(`fastPath: ${fastPath}`, () => {
    describe("RateLimiter: token bucket refill (Keter's examples)", () => {
      it.effect("capacity 100 at 10 per second: a full burst, then 10 per second", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(100, 10) })
          assert.strictEqual(yield* acquireN(limiter, "k", 150), 100)
          yield* TestClock.adjust("1 second")
          assert.strictEqual(yield* acquireN(limiter, "k", 20), 10)
          yield* TestClock.adjust("100 millis")
          assert.strictEqual(yield* acquireN(limiter, "k", 5), 1)
          yield* TestClock.adjust("99 millis")
          assert.isFalse(yield* limiter.acquire("k"))
          yield* TestClock.adjust("1 millis")
          assert.isTrue(yield* limiter.acquire("k"))
        }))

      it.effect("1000 per hour with capacity 100: one token every 3.6 seconds, exactly", () =>
        Effect.gen(function*() {
          const limiter = yield* make({
            policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 1000, per: "1 hour" } })
          })
          assert.strictEqual(yield* acquireN(limiter, "k", 100), 100)
          yield* TestClock.adjust(3599)
          assert.isFalse(yield* limiter.acquire("k"))
          yield* TestClock.adjust(1)
          assert.isTrue(yield* limiter.acquire("k"))
          // 36 seconds: exactly 10 more
          yield* TestClock.adjust("36 seconds")
          assert.strictEqual(yield* acquireN(limiter, "k", 20), 10)
        }))

      it.effect("fractional rate 0.5 per second: one token every two seconds", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(1, 0.5) })
          assert.isTrue(yield* limiter.acquire("k"))
          yield* TestClock.adjust("1999 millis")
          assert.isFalse(yield* limiter.acquire("k"))
          const d = yield* limiter.consume("k")
          assert.strictEqual(Duration.toMillis(d.retryAfter), 1)
          yield* TestClock.adjust("1 millis")
          assert.isTrue(yield* limiter.acquire("k"))
        }))

      it.effect("a long idle period refills to capacity, never above", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(10, 1), idleTimeout: "365 days" })
          assert.strictEqual(yield* acquireN(limiter, "k", 10), 10)
          yield* TestClock.adjust("30 days")
          assert.strictEqual(yield* acquireN(limiter, "k", 25), 10)
        }))

      it.effect("starts full unless told otherwise", () =>
        Effect.gen(function*() {
          const limiter = yield* make({
            policy: (key) => key.startsWith("empty:") ? perSecond(5, 1, 0) : perSecond(5, 1)
          })
          assert.strictEqual(yield* acquireN(limiter, "full:a", 10), 5)
          assert.strictEqual(yield* acquireN(limiter, "empty:a", 10), 0)
          yield* TestClock.adjust("2 seconds")
          assert.strictEqual(yield* acquireN(limiter, "empty:a", 10), 2)
        }))

      it.effect("a denial takes nothing", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(5, 1) })
          assert.isTrue(yield* limiter.acquire("k", { cost: 3 }))
          assert.isFalse(yield* limiter.acquire("k", { cost: 3 }))
          assert.isFalse(yield* limiter.acquire("k", { cost: 3 }))
          assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
        }))
    })

    describe("RateLimiter: decisions", () => {
      it.effect("a call is a description: each run decides anew", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(3, 1) })
          const once = limiter.acquire("k")
          assert.deepStrictEqual(yield* Effect.all([once, once, once, once]), [true, true, true, false])
          const consume = limiter.consume("j", { cost: 2 })
          assert.isTrue((yield* consume).allowed)
          assert.isFalse((yield* consume).allowed)
        }))

      it.effect("consume reports remaining, retryAfter, resetAfter and limit", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(10, 2) })
          const first = yield* limiter.consume("k", { cost: 4 })
          assert.deepStrictEqual(
            [first.allowed, first.remaining, Duration.toMillis(first.retryAfter), Duration.toMillis(first.resetAfter)],
            [true, 6, 0, 2000]
          )
          assert.strictEqual(first.limit, 10)
          const denied = yield* limiter.consume("k", { cost: 8 })
          assert.deepStrictEqual(
            [
              denied.allowed,
              denied.remaining,
              Duration.toMillis(denied.retryAfter),
              Duration.toMillis(denied.resetAfter)
            ],
            [false, 6, 1000, 2000]
          )
        }))

      it.effect("peek reads without consuming and does not start a bucket; reset refills", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(3, 1) })
          const fresh = yield* limiter.peek("new")
          assert.isTrue(fresh.allowed)
          assert.strictEqual(fresh.remaining, 3)
          assert.strictEqual((yield* limiter.stats).buckets, 0)
          assert.strictEqual(yield* acquireN(limiter, "k", 3), 3)
          const peeked = yield* limiter.peek("k")
          assert.isFalse(peeked.allowed)
          assert.strictEqual(Duration.toMillis(peeked.retryAfter), 1000)
          assert.isFalse((yield* limiter.peek("k")).allowed)
          yield* limiter.reset("k")
          assert.strictEqual(yield* acquireN(limiter, "k", 5), 3)
          yield* limiter.reset("never-seen")
        }))

      it.effect("a cost above capacity can never succeed and says so", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(5, 1) })
          const error = yield* Effect.flip(limiter.acquire("k", { cost: 6 }))
          assert.strictEqual(error._tag === "InvalidRequest" && error.field, "cost")
          assert.strictEqual(error._tag === "InvalidRequest" && error.value, "6")
          assert.include(error.message, "never")
          assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
        }))
    })

    describe("RateLimiter: clocks that go backwards", () => {
      it.effect("never add tokens, never throw, never NaN", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(1_000_000)
          const limiter = yield* make({ policy: perSecond(2, 1) })
          assert.strictEqual(yield* acquireN(limiter, "k", 2), 2)
          yield* TestClock.setTime(500_000) // eight minutes back
          assert.isFalse(yield* limiter.acquire("k"))
          const d = yield* limiter.consume("k")
          assert.isFalse(Number.isNaN(d.remaining))
          assert.isTrue(Duration.isFinite(d.retryAfter))
          // back and forth around the anchor: no minting
          yield* TestClock.setTime(1_000_000)
          assert.isFalse(yield* limiter.acquire("k"))
          yield* TestClock.setTime(999_000)
          yield* TestClock.setTime(1_000_999)
          assert.isFalse(yield* limiter.acquire("k"))
          yield* TestClock.setTime(1_001_000)
          assert.isTrue(yield* limiter.acquire("k"))
          assert.isFalse(yield* limiter.acquire("k"))
        }))

      it.effect("the same instant repeated adds nothing", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(3, 1) })
          for (let i = 0; i < 5; i++) yield* limiter.acquire("k")
          assert.isFalse(yield* limiter.acquire("k"))
        }))
    })

    describe("RateLimiter: concurrency", () => {
      it.effect("1000 concurrent fibers on one fresh key admit exactly capacity", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(100, 1), mailboxCapacity: 2048 })
          const results = yield* Effect.forEach(Array.from({ length: 1000 }), () => limiter.acquire("hot"), {
            concurrency: "unbounded"
          })
          assert.strictEqual(results.filter(Boolean).length, 100)
          const stats = yield* limiter.stats
          assert.strictEqual(stats.started, 1)
          assert.strictEqual(stats.allowed, 100)
          assert.strictEqual(stats.denied, 900)
        }))

      it.effect("a full mailbox refuses with Overloaded, counted, and takes nothing", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(1000, 1), mailboxCapacity: 8, fastPath: false })
          const exits = yield* Effect.forEach(Array.from({ length: 50 }), () => Effect.exit(limiter.acquire("k")), {
            concurrency: "unbounded"
          })
          const allowed = exits.filter((e) => Exit.isSuccess(e) && e.value).length
          const overloaded = exits.filter((e) => Exit.isFailure(e)).length
          assert.strictEqual(allowed + overloaded, 50)
          assert.isAbove(overloaded, 0)
          const stats = yield* limiter.stats
          assert.strictEqual(stats.overloaded, overloaded)
          // every refused call took nothing
          assert.strictEqual((yield* limiter.peek("k")).remaining, 1000 - allowed)
        }))
    })

    describe("RateLimiter: wait", () => {
      it.effect("a full line of waiters refuses with Overloaded and takes nothing", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(1, 1), maxWaiters: 3 })
          assert.isTrue(yield* limiter.acquire("k"))
          const waiters = yield* Effect.forEach(
            Array.from({ length: 5 }),
            () => Effect.forkChild(Effect.exit(limiter.wait("k")), { startImmediately: true })
          )
          yield* settle
          assert.strictEqual((yield* limiter.stats).waiting, 3)
          assert.strictEqual((yield* limiter.stats).overloaded, 2)
          yield* TestClock.adjust("3 seconds")
          const exits = yield* Fiber.joinAll(waiters)
          assert.strictEqual(exits.filter(Exit.isSuccess).length, 3)
          assert.isFalse(yield* limiter.acquire("k"))
        }))

      it.effect("waiters are admitted in arrival order at the refill rate", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(1, 1) })
          const order: Array<number> = []
          const fibers = []
          for (let i = 0; i < 3; i++) {
            fibers.push(
              yield* limiter.wait("k").pipe(Effect.tap(() => Effect.sync(() => order.push(i))), Effect.forkChild)
            )
          }
          yield* settle
          assert.deepStrictEqual(order, [0])
          yield* TestClock.adjust("999 millis")
          assert.deepStrictEqual(order, [0])
          yield* TestClock.adjust("1 millis")
          assert.deepStrictEqual(order, [0, 1])
          yield* TestClock.adjust("1 second")
          assert.deepStrictEqual(order, [0, 1, 2])
          yield* Fiber.joinAll(fibers)
        }))

      it.effect("past maxWait fails at once with RateLimitExceeded and takes nothing", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(2, 1) })
          assert.strictEqual(yield* acquireN(limiter, "k", 2), 2)
          const error = yield* Effect.flip(limiter.wait("k", { cost: 2, maxWait: "1 second" }))
          assert.strictEqual(error._tag, "RateLimitExceeded")
          if (error._tag === "RateLimitExceeded") assert.strictEqual(Duration.toMillis(error.retryAfter), 2000)
          yield* TestClock.adjust("1 second")
          assert.isTrue(yield* limiter.acquire("k"))
        }))

      it.effect("an interrupted waiter takes nothing and those behind it move up", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(2, 1) })
          assert.strictEqual(yield* acquireN(limiter, "k", 2), 2)
          const first = yield* limiter.wait("k", { cost: 2 }).pipe(Effect.forkChild)
          yield* settle
          const second = yield* limiter.wait("k", { cost: 1 }).pipe(Effect.forkChild)
          yield* settle
          yield* Fiber.interrupt(first)
          // without the first waiter, the second needs one token: one second
          yield* TestClock.adjust("999 millis")
          assert.isUndefined(second.pollUnsafe(), "admitted before its token")
          yield* TestClock.adjust("1 millis")
          const admitted = second.pollUnsafe()
          assert.isTrue(admitted !== undefined && Exit.isSuccess(admitted), "admitted at one second")
          // the cancelled waiter took nothing: one more second gives one token
          yield* TestClock.adjust("1 second")
          assert.isTrue(yield* limiter.acquire("k"))
        }))

      it.effect("decide-now calls do not jump the line", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(2, 1) })
          assert.strictEqual(yield* acquireN(limiter, "k", 2), 2)
          const waiter = yield* limiter.wait("k", { cost: 2 }).pipe(Effect.forkChild)
          yield* settle
          yield* TestClock.adjust("1 second")
          const d = yield* limiter.consume("k")
          assert.isFalse(d.allowed)
          assert.strictEqual(Duration.toMillis(d.retryAfter), 2000)
          yield* TestClock.adjust("1 second")
          yield* Fiber.join(waiter)
        }))
    })

    describe("RateLimiter: shutdown", () => {
      it.effect("every pending call ends with a decision or LimiterShutdown", () =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const limiter = yield* make({ policy: perSecond(5, 1), mailboxCapacity: 4096 }).pipe(
            Scope.provide(scope)
          )
          const calls = yield* Effect.forEach(
            Array.from({ length: 200 }, (_, i) => i),
            (i) =>
              Effect.forkChild(
                Effect.exit(i % 10 === 0 ? limiter.wait(`k${i % 3}`, { cost: 5 }) : limiter.acquire(`k${i % 3}`)),
                { startImmediately: true }
              )
          )
          yield* Scope.close(scope, Exit.void)
          const exits = yield* Fiber.joinAll(calls)
          let decided = 0
          let shutdown = 0
          for (const exit of exits) {
            if (Exit.isSuccess(exit)) decided++
            else if (exit.cause.reasons.some((r) => r._tag === "Fail" && r.error._tag === "LimiterShutdown")) shutdown++
          }
          assert.strictEqual(decided + shutdown, 200)
          assert.isAbove(shutdown, 0)
          const after = yield* Effect.flip(limiter.acquire("k0"))
          assert.strictEqual(after._tag, "LimiterShutdown")
        }))
    })

    describe("RateLimiter: bad configuration and bad input", () => {
      const bad: Array<[string, Policy.Policy, string, string]> = [
        [
          "NaN capacity",
          Policy.tokenBucket({ capacity: NaN, refill: { tokens: 1, per: "1 second" } }),
          "capacity",
          "NaN"
        ],
        [
          "negative capacity",
          Policy.tokenBucket({ capacity: -1, refill: { tokens: 1, per: "1 second" } }),
          "capacity",
          "-1"
        ],
        ["zero capacity", Policy.tokenBucket({ capacity: 0, refill: { tokens: 1, per: "1 second" } }), "capacity", "0"],
        [
          "Infinity refill",
          Policy.tokenBucket({ capacity: 1, refill: { tokens: Infinity, per: "1 second" } }),
          "refill.tokens",
          "Infinity"
        ],
        [
          "unparsable duration",
          Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 fortnight" as any } }),
          "refill.per",
          "\"1 fortnight\""
        ],
        [
          "zero duration",
          Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "0 seconds" } }),
          "refill.per",
          "\"0 seconds\""
        ],
        [
          "initialTokens above capacity",
          Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" }, initialTokens: 2 }),
          "initialTokens",
          "2"
        ]
      ]
      for (const [name, policy, field, value] of bad) {
        it.effect(`${name} fails with InvalidPolicy naming ${field}`, () =>
          Effect.gen(function*() {
            const error = yield* Effect.flip(make({ policy }))
            assert.strictEqual(error._tag, "InvalidPolicy")
            assert.strictEqual(error.field, field)
            assert.strictEqual(error.value, value)
            assert.include(error.message, field)
          }))
      }

      it.effect("bad limiter options name the field", () =>
        Effect.gen(function*() {
          const policy = perSecond(1, 1)
          const e1 = yield* Effect.flip(make({ policy, mailboxCapacity: 0 }))
          assert.strictEqual(e1.field, "mailboxCapacity")
          const e2 = yield* Effect.flip(make({ policy, idleTimeout: "soon" as any }))
          assert.strictEqual(e2.field, "idleTimeout")
          const e3 = yield* Effect.flip(make({ policy, maxWaiters: 1.5 }))
          assert.strictEqual(e3.field, "maxWaiters")
        }))

      it.effect("a per-key policy function that fails only fails that key", () =>
        Effect.gen(function*() {
          const limiter = yield* make({
            policy: (key) => {
              if (key === "boom") throw new Error("no policy for boom")
              return key === "bad"
                ? Policy.tokenBucket({ capacity: -5, refill: { tokens: 1, per: "1 second" } })
                : perSecond(1, 1)
            }
          })
          const boom = yield* Effect.flip(limiter.acquire("boom"))
          assert.strictEqual(boom._tag, "InvalidPolicy")
          const bad = yield* Effect.flip(limiter.acquire("bad"))
          assert.strictEqual(bad._tag === "InvalidPolicy" && bad.field, "capacity")
          assert.isTrue(yield* limiter.acquire("good"))
        }))

      const badInputs: Array<[string, () => any, string]> = [
        ["NaN cost", () => ({ cost: NaN }), "cost"],
        ["negative cost", () => ({ cost: -1 }), "cost"],
        ["Infinity cost", () => ({ cost: Infinity }), "cost"],
        ["fractional cost", () => ({ cost: 1.5 }), "cost"]
      ]
      for (const [name, options, field] of badInputs) {
        it.effect(`${name} fails with InvalidRequest and leaves the bucket unchanged`, () =>
          Effect.gen(function*() {
            const limiter = yield* make({ policy: perSecond(5, 1) })
            assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
            const calls: Array<Effect.Effect<unknown, RateLimiter.CallError>> = [
              limiter.acquire("k", options()),
              limiter.consume("k", options()),
              limiter.peek("k", options())
            ]
            for (const call of calls) {
              const error = yield* Effect.flip(call)
              assert.strictEqual(error._tag === "InvalidRequest" && error.field, field)
            }
            const waitError = yield* Effect.flip(limiter.wait("k", options()))
            assert.strictEqual(waitError._tag, "InvalidRequest")
            assert.strictEqual((yield* limiter.peek("k")).remaining, 3)
          }))
      }

      it.effect("a cost of 0 is admitted, takes nothing and reports the key (x/time/rate's AllowN(t, 0))", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(5, 1) })
          assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
          const d = yield* limiter.consume("k", { cost: 0 })
          assert.isTrue(d.allowed)
          assert.strictEqual(d.remaining, 0)
          assert.isTrue(yield* limiter.acquire("k", { cost: 0 }))
          assert.isFalse(yield* limiter.acquire("k"))
        }))

      it.effect("empty, oversized and non-string keys fail with InvalidRequest naming the key", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(5, 1), maxKeyLength: 16 })
          for (const key of ["", "x".repeat(17), 42 as any]) {
            const error = yield* Effect.flip(limiter.acquire(key))
            assert.strictEqual(error._tag === "InvalidRequest" && error.field, "key")
          }
          assert.strictEqual((yield* limiter.stats).buckets, 0)
          assert.isTrue(yield* limiter.acquire("ключ-🔑-\u0000"))
        }))

      it.effect("a bad maxWait names the field", () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(5, 1) })
          const error = yield* Effect.flip(limiter.wait("k", { maxWait: "later" as any }))
          assert.strictEqual(error._tag === "InvalidRequest" && error.field, "maxWait")
        }))
    })
  })
}
