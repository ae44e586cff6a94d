import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../src/index.ts"
import { onStore } from "./stores.ts"

// Lets forked fibers and bucket actors run until they park.
const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

const perSecond = (capacity: number, tokens: number) =>
  Policy.tokenBucket({ capacity, refill: { tokens, per: "1 second" } })

// Forks a waiter that records its name (and when) once admitted.
const waiter = (
  limiter: RateLimiter["Service"],
  log: Array<string>,
  name: string,
  options: RateLimiter.WaitOptions
) =>
  Effect.forkChild(
    Effect.andThen(
      limiter.wait("k", options),
      Effect.flatMap(Clock.currentTimeMillis, (t) => Effect.sync(() => log.push(`${name}@${t}`)))
    )
  )

describe("priorities", () => {
  for (const store of [false, true]) {
    const make = (options: RateLimiter.Options) => store ? onStore(options) : RateLimiter.make(options)
    it.effect(`a higher priority is served first; within one priority, in order of arrival${store ? " (on a store)" : ""}`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        const log: Array<string> = []
        for (const [name, priority] of [["a", 0], ["b", 0], ["c", 5], ["d", 1], ["e", 5]] as const) {
          yield* waiter(limiter, log, name, { priority })
          yield* settle
        }
        for (let i = 0; i < 5; i++) {
          yield* TestClock.adjust("1 second")
          yield* settle
        }
        assert.deepStrictEqual(log.map((l) => l.split("@")[0]), ["c", "e", "d", "a", "b"])
      }))
  }

  it.effect("a waiter passed by higher priorities still gives up at its maxWait", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: perSecond(1, 1) })
      assert.isTrue(yield* limiter.acquire("k"))
      // its turn is 1 s away: it joins with a maxWait of 1.5 s
      const low = yield* Effect.forkChild(limiter.wait("k", { maxWait: "1500 millis" }))
      yield* settle
      const high = yield* Effect.forkChild(limiter.wait("k", { priority: 1 }))
      yield* settle
      yield* TestClock.adjust("1 second")
      yield* settle
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(high)))
      assert.isUndefined(low.pollUnsafe())
      yield* TestClock.adjust("500 millis")
      yield* settle
      const exit = yield* Fiber.await(low)
      assert.isTrue(Exit.isFailure(exit))
      const e = yield* Effect.flip(Fiber.join(low))
      assert.strictEqual(e._tag, "RateLimitExceeded")
      // and it took nothing: the next second's token is there
      yield* TestClock.adjust("500 millis")
      assert.isTrue(yield* limiter.acquire("k"))
    }))

  it.effect("bad priorities, tenants and weights name the field", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: perSecond(1, 1) })
      const fields = [
        yield* Effect.flip(limiter.wait("k", { priority: 1.5 })),
        yield* Effect.flip(limiter.wait("k", { tenant: "" })),
        yield* Effect.flip(limiter.wait("k", { tenant: "t", weight: 0 })),
        yield* Effect.flip(limiter.wait("k", { weight: 2 }))
      ].map((e) => (e as { field?: string }).field)
      assert.deepStrictEqual(fields, ["priority", "tenant", "weight", "weight"])
    }))
})

describe("the head of the line", () => {
  // A head of cost 10 on an empty bucket of 10 at 1 per second, and a
  // small waiter every 500 ms (twice what the bucket refills).
  const scenario = (headOfLine: RateLimiter.Options["headOfLine"]) =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: perSecond(10, 1), headOfLine })
      assert.isTrue(yield* limiter.acquire("k", { cost: 10 }))
      const log: Array<string> = []
      yield* waiter(limiter, log, "big", { cost: 10 })
      yield* settle
      for (let i = 0; i < 60; i++) {
        yield* waiter(limiter, log, `s${i}`, { cost: 1 })
        yield* settle
        yield* TestClock.adjust("500 millis")
        yield* settle
      }
      return log.map((l) => {
        const [name, at] = l.split("@")
        return { name, at: Number(at) }
      })
    })

  it.effect("strict order (the default): the large head blocks everyone behind it", () =>
    Effect.gen(function*() {
      const log = yield* scenario(undefined)
      assert.deepStrictEqual(log[0], { name: "big", at: 10_000 })
      // and the small ones then go in order, one per second
      assert.deepStrictEqual(log.slice(1, 4).map((l) => l.name), ["s0", "s1", "s2"])
      assert.deepStrictEqual(log.slice(1, 4).map((l) => l.at), [11_000, 12_000, 13_000])
    }))

  it.effect("pass: small waiters go first while the head is young; the head waits at most pass + its refill", () =>
    Effect.gen(function*() {
      const log = yield* scenario({ pass: "5 seconds" })
      const big = log.find((l) => l.name === "big")!
      const before = log.filter((l) => l.at < big.at)
      // the small ones passed it for 5 s (one per second as the bucket refills)...
      assert.isAtLeast(before.length, 4)
      assert.isTrue(before.every((l) => l.at <= 5_000))
      // ...then it blocked them until it was admitted: 5 s + 10 s of refill at most
      assert.isAtMost(big.at, 15_000)
      assert.isAtLeast(big.at, 10_000)
      // the small ones are not starved either: they go on once it is in
      const after = log.filter((l) => l.at > big.at)
      assert.isAtLeast(after.length, 10)
    }))

  it.effect("pass: the head is never starved however many small waiters arrive (the bound holds for any rate)", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: perSecond(10, 10), headOfLine: { pass: "1 second" } })
      assert.isTrue(yield* limiter.acquire("k", { cost: 10 }))
      const log: Array<string> = []
      const big = yield* waiter(limiter, log, "big", { cost: 10 })
      yield* settle
      // 50 small waiters in line at once, and more every 100 ms
      for (let i = 0; i < 50; i++) yield* waiter(limiter, log, `s${i}`, { cost: 1 })
      for (let t = 0; t < 40; t++) {
        yield* waiter(limiter, log, `t${t}`, { cost: 1 })
        yield* TestClock.adjust("100 millis")
        yield* settle
      }
      yield* Fiber.join(big)
      const at = Number(log.find((l) => l.startsWith("big@"))!.split("@")[1])
      assert.isAtMost(at, 2_000) // pass 1 s + 1 s to refill 10 at 10 per second
    }))

  it.effect("headOfLine is validated", () =>
    Effect.gen(function*() {
      const e = yield* Effect.flip(
        RateLimiter.make({ policy: perSecond(1, 1), headOfLine: { pass: "0 seconds" } as never })
      )
      assert.strictEqual(e.field, "headOfLine.pass")
    }))
})

describe("fair share of one key between tenants", () => {
  // 100 per second toward an upstream, shared by tenants a (weight 1), b
  // (weight 1) and c (weight 2); each tenant keeps `loops` callers waiting.
  const share = (loops: { readonly a: number; readonly b: number; readonly c: number }, seconds: number) =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 100, per: "1 second" } }),
        maxWaiters: 10_000
      })
      const counts = { a: 0, b: 0, c: 0 }
      const weights = { a: 1, b: 1, c: 2 }
      for (const tenant of ["a", "b", "c"] as const) {
        for (let i = 0; i < loops[tenant]; i++) {
          yield* Effect.forkChild(Effect.forever(
            Effect.andThen(
              limiter.wait("upstream", { tenant, weight: weights[tenant] }),
              Effect.sync(() => counts[tenant]++)
            )
          ))
        }
      }
      yield* settle
      for (let t = 0; t < seconds * 20; t++) {
        yield* TestClock.adjust("50 millis")
        yield* settle
      }
      return counts
    })

  it.effect("1:1:2, one tenant flooding: each gets its share within 5%", () =>
    Effect.gen(function*() {
      const counts = yield* share({ a: 500, b: 20, c: 20 }, 60)
      const total = counts.a + counts.b + counts.c
      assert.isAtLeast(total, 5_900)
      const within = (got: number, want: number) =>
        assert.isAtMost(Math.abs(got / total - want), 0.05 * want, `${got} of ${total}, want ${want}`)
      within(counts.a, 0.25)
      within(counts.b, 0.25)
      within(counts.c, 0.5)
    }))

  it.effect("an idle tenant's share goes to the active ones, by their weights", () =>
    Effect.gen(function*() {
      const counts = yield* share({ a: 500, b: 0, c: 20 }, 30)
      const total = counts.a + counts.c
      assert.strictEqual(counts.b, 0)
      assert.isAtMost(Math.abs(counts.a / total - 1 / 3), 0.05 / 3)
      assert.isAtMost(Math.abs(counts.c / total - 2 / 3), 0.05 * 2 / 3)
    }))

  it.effect("a tenant that floods cannot starve one that comes later", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 10, per: "1 second" } }),
        maxWaiters: 10_000
      })
      assert.isTrue(yield* limiter.acquire("upstream"))
      // 1000 of the flooder's calls already in line: 100 s of the budget
      for (let i = 0; i < 1000; i++) yield* Effect.forkChild(limiter.wait("upstream", { tenant: "flood" }))
      yield* settle
      const start = yield* Clock.currentTimeMillis
      const late = yield* Effect.forkChild(
        Effect.andThen(limiter.wait("upstream", { tenant: "late" }), Clock.currentTimeMillis)
      )
      yield* settle
      for (let i = 0; i < 5; i++) {
        yield* TestClock.adjust("100 millis")
        yield* settle
      }
      const admitted = yield* Fiber.join(late)
      // the next token but one at most (the flooder's head may go first)
      // and not before a token is there: the bucket was empty at the start
      assert.isAtLeast(admitted - start, 100)
      assert.isAtMost(admitted - start, 200)
    }))
})
