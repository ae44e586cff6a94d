/**
 * What a caller waiting in a key's line can rely on, through the public API:
 * the order of tenants by weight and by their stamps, a line that starts
 * afresh once it empties, waiters held to their `maxWait` (inclusive) and
 * told when they would fit, the head-of-line pass, and waiters that a new
 * limit can never admit. Each test was written for mutants of the line that
 * no other test caught (docs/reliability.md, "Line.ts survivors").
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Duration, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { MemoryStore, Policy, RateLimiter, RateLimitExceeded, Store } from "../src/index.ts"
import { onStore } from "./stores.ts"

// Lets forked fibers and bucket actors run until they park.
const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

const perSecond = (capacity: number, tokens: number) =>
  Policy.tokenBucket({ capacity, refill: { tokens, per: "1 second" } })

type Limiter = RateLimiter["Service"]

const makers: ReadonlyArray<readonly [string, (options: RateLimiter.Options) => Effect.Effect<Limiter, unknown, any>]> =
  [
    ["fast path", (options) => RateLimiter.make({ fastPath: true, ...options })],
    ["actor only", (options) => RateLimiter.make({ fastPath: false, ...options })],
    ["MemoryStore", onStore]
  ]
const inProcess = makers.slice(0, 2)

// Forks a waiter on "k" that logs its label once admitted; returns its fiber.
const joiner = (limiter: Limiter, log: Array<string>) => (label: string, options?: RateLimiter.WaitOptions) =>
  Effect.tap(
    Effect.forkChild(Effect.andThen(limiter.wait("k", options), Effect.sync(() => log.push(label)))),
    () => settle
  )

const seconds = (n: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < n; i++) {
      yield* TestClock.adjust("1 second")
      yield* settle
    }
  })

// The outcome of a call that must have ended by now (a call still waiting
// fails the test here, rather than hanging it).
const ended = <A, E>(fiber: Fiber.Fiber<A, E>): Effect.Effect<A, E> =>
  Effect.suspend(() => {
    assert.isDefined(fiber.pollUnsafe(), "the call is still waiting")
    return Fiber.join(fiber)
  })

// How a call ended, and when (on the test clock).
interface Outcome {
  readonly at: number
  readonly ok: boolean
  readonly error?: string | undefined
  readonly retryAfter?: number | undefined
}
const outcome = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<Outcome> =>
  Effect.flatMap(Effect.exit(effect), (exit) =>
    Effect.map(Clock.currentTimeMillis, (at): Outcome => {
      if (Exit.isSuccess(exit)) return { at, ok: true }
      const e = Cause.squash(exit.cause)
      return e instanceof RateLimitExceeded
        ? { at, ok: false, error: e._tag, retryAfter: Duration.toMillis(e.retryAfter) }
        : { at, ok: false, error: (e as { _tag?: string })._tag }
    }))

describe("tenants share a key by weight, in start-time order", () => {
  for (const [name, make] of makers) {
    it.effect(`weights 2 and 1, both with a backlog: two of the first for one of the second (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        const log: Array<string> = []
        const join = joiner(limiter, log)
        // a's waiters start at 0, 0.5, 1, 1.5 (cost 1 over weight 2); b's at 0 and 1.
        // Equal starts go in order of arrival.
        for (const label of ["a1", "a2", "a3", "a4"]) yield* join(label, { tenant: "a", weight: 2 })
        for (const label of ["b1", "b2"]) yield* join(label, { tenant: "b" })
        yield* seconds(6)
        assert.deepStrictEqual(log, ["a1", "b1", "a2", "a3", "b2", "a4"])
      }))

    it.effect(`a tenant back from idle brings no credit from the time it was away (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        const log: Array<string> = []
        const join = joiner(limiter, log)
        for (let i = 0; i < 10; i++) yield* join(`a${i}`, { tenant: "a" })
        yield* join("b0", { tenant: "b" })
        // six admitted: a0 b0 a1 a2 a3 a4; b has waited for nothing since its first
        yield* seconds(6)
        assert.deepStrictEqual(log, ["a0", "b0", "a1", "a2", "a3", "a4"])
        // b comes back with three: it starts where the line is (a4's start),
        // not where it left off, so it takes turns with a instead of going
        // ahead of a's whole backlog
        for (const label of ["b1", "b2", "b3"]) yield* join(label, { tenant: "b" })
        yield* seconds(8)
        assert.deepStrictEqual(log.slice(6), ["b1", "a5", "b2", "a6", "b3", "a7", "a8", "a9"])
      }))

    it.effect(`a line that empties starts afresh: tenants new to it go in order of arrival (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        const log: Array<string> = []
        const join = joiner(limiter, log)
        yield* join("a1", { tenant: "a" })
        yield* join("a2", { tenant: "a" })
        yield* seconds(2)
        assert.deepStrictEqual(log, ["a1", "a2"])
        // the line is empty: a's past use is forgotten with it
        yield* join("a3", { tenant: "a" })
        yield* join("b1", { tenant: "b" })
        yield* seconds(2)
        assert.deepStrictEqual(log, ["a1", "a2", "a3", "b1"])
      }))
  }

  for (const [name, make] of inProcess) {
    it.effect(`a line emptied by its callers leaving starts afresh too (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        const log: Array<string> = []
        const join = joiner(limiter, log)
        const gone = [yield* join("a1", { tenant: "a" }), yield* join("a2", { tenant: "a" })]
        for (const fiber of gone) yield* Fiber.interrupt(fiber)
        yield* settle
        assert.strictEqual((yield* limiter.stats).waiting, 0)
        yield* join("a3", { tenant: "a" })
        yield* join("b1", { tenant: "b" })
        yield* seconds(2)
        assert.deepStrictEqual(log, ["a3", "b1"])
      }))

    it.effect(`a waiter that leaves the line does not move it on: a newcomer still starts at the front (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        const log: Array<string> = []
        const join = joiner(limiter, log)
        const fibers = []
        for (let i = 0; i < 5; i++) fibers.push(yield* join(`a${i}`, { tenant: "a" }))
        // the last of a's waiters (the latest start) leaves before anyone is admitted
        yield* Fiber.interrupt(fibers[4])
        yield* settle
        yield* join("b0", { tenant: "b" })
        yield* seconds(5)
        assert.deepStrictEqual(log, ["a0", "b0", "a1", "a2", "a3"])
      }))
  }
})

describe("a tenant's use is remembered while the line is busy", () => {
  for (const [name, make] of inProcess) {
    it.effect(`a tenant of small weight served once waits its share, however many tenants came and went (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        const log: Array<string> = []
        const join = joiner(limiter, log)
        for (const label of ["a0", "a1", "a2"]) yield* join(label, { tenant: "a" })
        // twenty tenants join and leave at once: the line is short, the tenants it has seen many
        const gone = []
        for (let i = 0; i < 20; i++) gone.push(yield* join(`u${i}`, { tenant: `u${i}` }))
        for (const fiber of gone) yield* Fiber.interrupt(fiber)
        yield* settle
        // x's one call at weight 0.1 is ten calls of the others' weight
        yield* join("x0", { tenant: "x", weight: 0.1 })
        yield* seconds(2)
        assert.deepStrictEqual(log, ["a0", "x0"])
        // a newcomer, then x again: x waits until the others have had their ten
        yield* join("b0", { tenant: "b" })
        yield* join("x1", { tenant: "x", weight: 0.1 })
        yield* seconds(4)
        assert.deepStrictEqual(log, ["a0", "x0", "b0", "a1", "a2", "x1"])
      }))
  }
})

describe("callers without a tenant are one tenant of weight 1", () => {
  for (const [name, make] of makers) {
    it.effect(`plain callers already in line when a tenant comes take turns with it (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        const log: Array<string> = []
        const join = joiner(limiter, log)
        for (const label of ["p1", "p2", "p3"]) yield* join(label)
        yield* join("a1", { tenant: "a" })
        yield* join("a2", { tenant: "a" })
        yield* join("p4")
        yield* seconds(6)
        assert.deepStrictEqual(log, ["p1", "a1", "p2", "a2", "p3", "p4"])
      }))

    it.effect(`a plain caller that comes to a tenant's backlog is not put behind all of it (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        const log: Array<string> = []
        const join = joiner(limiter, log)
        for (const label of ["a1", "a2", "a3", "a4"]) yield* join(label, { tenant: "a" })
        yield* join("p1")
        yield* seconds(5)
        assert.deepStrictEqual(log, ["a1", "p1", "a2", "a3", "a4"])
      }))
  }

  for (const [name, make] of inProcess) {
    for (const history of ["a new line", "a line that had a tenant and emptied"]) {
      it.effect(`a tenant that comes to a line of plain callers does not take its head's turn: ${history} (${name})`, () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: perSecond(1, 1) })
          assert.isTrue(yield* limiter.acquire("k"))
          const log: Array<string> = []
          const join = joiner(limiter, log)
          if (history !== "a new line") {
            // the line had a tenant in it, and emptied: it is plain again
            yield* join("z1", { tenant: "z" })
            yield* seconds(1)
            log.length = 0
          }
          for (const label of ["p1", "p2", "p3", "p4"]) yield* join(label)
          yield* seconds(2)
          // p3 was next before the tenant came, and stays next
          yield* join("a1", { tenant: "a" })
          yield* seconds(3)
          assert.deepStrictEqual(log, ["p1", "p2", "p3", "a1", "p4"])
        }))
    }
  }
})

describe("a line cleared while its store was down starts afresh", () => {
  it.effect("a tenant that comes to a line of plain callers afterwards does not take its head's turn", () =>
    Effect.gen(function*() {
      const memory = yield* MemoryStore.make
      let down = false
      const unavailable = Effect.fail(new Store.StoreUnavailable({ store: "flaky", reason: "connection refused" }))
      const flaky: Store.Store = {
        name: "flaky",
        // one key only: no call over several keys to pass on
        apply: (...args) => down ? unavailable : memory.apply(...args)
      }
      const limiter = yield* RateLimiter.make({
        policy: perSecond(1, 1),
        fallback: { mode: "deny", retryAfter: "1 second" }
      }).pipe(Effect.provideService(Store.CurrentStore, flaky))
      assert.isTrue(yield* limiter.acquire("k"))
      const log: Array<string> = []
      const join = joiner(limiter, log)
      // a tenant's waiter is in line when the store stops answering: the line is cleared, the waiter refused
      const refused = yield* Effect.forkChild(outcome(limiter.wait("k", { tenant: "z" })))
      yield* settle
      down = true
      yield* seconds(1)
      const gone = yield* ended(refused)
      assert.deepStrictEqual([gone.ok, gone.error], [false, "RateLimitExceeded"])
      down = false
      yield* seconds(2)
      // the store answers again, and the bucket is full: empty it, so the plain callers line up
      assert.isTrue(yield* limiter.acquire("k"))
      for (const label of ["p1", "p2", "p3", "p4"]) yield* join(label)
      yield* seconds(2)
      yield* join("a1", { tenant: "a" })
      yield* seconds(3)
      assert.deepStrictEqual(log, ["p1", "p2", "p3", "a1", "p4"])
    }))
})

describe("a waiter's deadline", () => {
  for (const [name, make] of inProcess) {
    it.effect(`passed by a higher priority, it fails at its maxWait, not before, told when it would fit behind those ahead (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(5, 1) })
        assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
        const log: Array<string> = []
        const join = joiner(limiter, log)
        yield* join("p", { cost: 2 }) // its turn: 2 s
        // its turn: 3 s, within its maxWait
        const low = yield* Effect.forkChild(outcome(limiter.wait("k", { maxWait: "3 seconds" })))
        yield* settle
        const denied = (yield* limiter.stats).denied
        // goes ahead of both: p's turn is now 4 s and low's 5 s, past its maxWait
        yield* join("high", { cost: 2, priority: 1 })
        yield* seconds(2)
        assert.deepStrictEqual(log, ["high"])
        yield* TestClock.adjust("999 millis")
        yield* settle
        assert.isUndefined(low.pollUnsafe())
        yield* TestClock.adjust("1 millis")
        yield* settle
        // at 3 s: p (2 units) is still ahead of it, with 1 token there: 3 more seconds... less the one there
        assert.deepStrictEqual(yield* ended(low), {
          at: 3000,
          ok: false,
          error: "RateLimitExceeded",
          retryAfter: 2000
        })
        const stats = yield* limiter.stats
        assert.strictEqual(stats.denied, denied + 1)
        assert.strictEqual(stats.waiting, 1)
        // it took nothing: p goes at 4 s
        yield* seconds(1)
        assert.deepStrictEqual(log, ["high", "p"])
      }))

    it.effect(`passed by a higher priority, it is told when it would fit behind the units a call over several keys holds (${name})`, () =>
      Effect.gen(function*() {
        // "slow" refills 1 a minute: a call over "k" and "slow" holds its units on "k" for minutes
        const limiter = yield* make({
          policy: (key) =>
            key === "slow"
              ? Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 minute" } })
              : perSecond(10, 1)
        })
        assert.isTrue(yield* limiter.acquire("slow", { cost: 5 }))
        const call = yield* Effect.forkChild(limiter.wait(["k", "slow"], { cost: 4 }))
        yield* settle
        // 4 tokens left on "k", all held
        assert.isTrue(yield* limiter.acquire("k", { cost: 6 }))
        // its turn: 1 s (the 4 held, then its own)
        const low = yield* Effect.forkChild(outcome(limiter.wait("k", { maxWait: "1 second" })))
        yield* settle
        const high = yield* Effect.forkChild(outcome(limiter.wait("k", { priority: 1 })))
        yield* settle
        yield* seconds(1)
        assert.deepStrictEqual(yield* ended(high), { at: 1000, ok: true })
        // at 1 s: 4 there, all held: one more in 1 s
        assert.deepStrictEqual(yield* ended(low), { at: 1000, ok: false, error: "RateLimitExceeded", retryAfter: 1000 })
        yield* Fiber.interrupt(call)
      }))

    it.effect(`a turn that comes exactly at maxWait is taken, in process too (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        // its turn is 1 s away; a higher priority makes it 2 s: exactly its maxWait
        const low = yield* Effect.forkChild(outcome(limiter.wait("k", { maxWait: "2 seconds" })))
        yield* settle
        yield* Effect.forkChild(limiter.wait("k", { priority: 1 }))
        yield* settle
        yield* seconds(2)
        assert.deepStrictEqual(yield* ended(low), { at: 2000, ok: true })
      }))

    it.effect(`waiting for a release: each waiter fails at its own maxWait, the earlier first (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.concurrency({ capacity: 1 }) })
        assert.isTrue(yield* limiter.acquire("k"))
        const short = yield* Effect.forkChild(outcome(limiter.wait("k", { maxWait: "1 second" })))
        const long = yield* Effect.forkChild(outcome(limiter.wait("k", { maxWait: "3 seconds" })))
        const patient = yield* Effect.forkChild(outcome(limiter.wait("k")))
        yield* settle
        yield* TestClock.adjust("999 millis")
        yield* settle
        assert.isUndefined(short.pollUnsafe())
        yield* TestClock.adjust("1 millis")
        yield* settle
        // no time makes room on a concurrency limit: only a release does
        assert.deepStrictEqual(yield* ended(short), {
          at: 1000,
          ok: false,
          error: "RateLimitExceeded",
          retryAfter: Infinity
        })
        assert.isUndefined(long.pollUnsafe())
        yield* TestClock.adjust("1999 millis")
        yield* settle
        assert.isUndefined(long.pollUnsafe())
        yield* TestClock.adjust("1 millis")
        yield* settle
        assert.strictEqual((yield* ended(long)).at, 3000)
        // the one without a maxWait waits on, and takes the permit given back
        assert.strictEqual((yield* limiter.stats).waiting, 1)
        yield* limiter.release("k")
        yield* settle
        assert.deepStrictEqual(yield* ended(patient), { at: 3000, ok: true })
      }))
  }

  for (const [name, make] of inProcess) {
    it.effect(`a waiter already past its maxWait when a higher priority passes it gives up at once; only it (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(1, 1) })
        assert.isTrue(yield* limiter.acquire("k"))
        const low = yield* Effect.forkChild(outcome(limiter.wait("k", { maxWait: "2 seconds" })))
        yield* settle
        // a slower rate re-times it past its maxWait (checked once, when it joined): 0.5 token to go at 0.1 per second
        yield* TestClock.adjust("500 millis")
        yield* limiter.reconfigure("k", Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "10 seconds" } }))
        yield* TestClock.adjust("2500 millis")
        yield* settle
        assert.isUndefined(low.pollUnsafe())
        // passed at 3 s: its maxWait ended at 2 s, so it goes now, told when it would fit behind the one ahead
        const high = yield* Effect.forkChild(outcome(limiter.wait("k", { priority: 1 })))
        yield* settle
        assert.deepStrictEqual(yield* ended(low), {
          at: 3000,
          ok: false,
          error: "RateLimitExceeded",
          retryAfter: 12_500
        })
        assert.isUndefined(high.pollUnsafe())
        yield* TestClock.adjust("2500 millis")
        yield* settle
        assert.deepStrictEqual(yield* ended(high), { at: 5500, ok: true })
      }))

    it.effect(`a waiter past its maxWait is refused even when room comes in the same instant (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(2, 1) })
        assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
        const low = yield* Effect.forkChild(outcome(limiter.wait("k", { maxWait: "2 seconds" })))
        yield* settle
        yield* TestClock.adjust("500 millis")
        yield* limiter.reconfigure("k", Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "10 seconds" } }))
        yield* TestClock.adjust("2500 millis")
        yield* settle
        // at 3 s, together: a higher priority passes it, and two tokens come back
        const high = yield* Effect.forkChild(outcome(limiter.wait("k", { priority: 1 })))
        yield* Effect.forkChild(limiter.release("k", 2))
        yield* settle
        assert.deepStrictEqual(yield* ended(high), { at: 3000, ok: true })
        const refused = yield* ended(low)
        assert.deepStrictEqual([refused.at, refused.ok, refused.error], [3000, false, "RateLimitExceeded"])
        // the token it did not take is still there
        assert.isTrue(yield* limiter.acquire("k"))
      }))
  }

  for (const [name, make] of makers) {
    it.effect(`waiting for a release: a permit given back exactly at maxWait is taken (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.concurrency({ capacity: 1 }) })
        assert.isTrue(yield* limiter.acquire("k"))
        // the release is due at 1 s, as is the waiter's deadline
        yield* Effect.forkChild(Effect.andThen(Effect.sleep("1 second"), limiter.release("k")))
        const waiter = yield* Effect.forkChild(outcome(limiter.wait("k", { maxWait: "1 second" })))
        yield* settle
        yield* TestClock.adjust("1 second")
        yield* settle
        assert.deepStrictEqual(yield* ended(waiter), { at: 1000, ok: true })
      }))
  }

  for (const [name, make] of makers) {
    it.effect(`a key blocked for good under a policy without a release (smooth): a waiter is refused at once (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.smooth({ permits: 1, per: "1 second" }) })
        yield* limiter.block("k", Duration.infinity)
        // its turn never comes, and no release could bring it: waiting its maxWait would change nothing
        const waiter = yield* Effect.forkChild(outcome(limiter.wait("k", { maxWait: "10 seconds" })))
        yield* settle
        assert.deepStrictEqual(yield* ended(waiter), {
          at: 0,
          ok: false,
          error: "RateLimitExceeded",
          retryAfter: Infinity
        })
        assert.strictEqual((yield* limiter.stats).waiting, 0)
      }))
  }

  it.effect("a reservation cannot be promised a turn that only a release brings: refused at once past its maxWait", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: Policy.concurrency({ capacity: 1 }) })
      assert.isTrue(yield* limiter.acquire("k"))
      const refused = yield* outcome(limiter.reserve("k", { maxWait: "5 seconds" }))
      assert.deepStrictEqual(refused, { at: 0, ok: false, error: "RateLimitExceeded", retryAfter: Infinity })
      assert.strictEqual((yield* limiter.stats).waiting, 0)
    }))

  it.effect("on a shared store, a waiter whose turn another process took gives up at its maxWait", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const policy = perSecond(2, 1)
      const here = yield* RateLimiter.make({ policy }).pipe(Effect.provideService(Store.CurrentStore, store))
      const there = yield* RateLimiter.make({ policy }).pipe(Effect.provideService(Store.CurrentStore, store))
      assert.isTrue(yield* here.acquire("k", { cost: 2 }))
      // its turn is estimated at 2 s; it will wait 2.5 s
      const waiter = yield* Effect.forkChild(outcome(here.wait("k", { cost: 2, maxWait: "2500 millis" })))
      yield* settle
      // another process takes a token meanwhile: the turn here comes at 3 s
      yield* TestClock.adjust("1500 millis")
      yield* settle
      assert.isTrue(yield* there.acquire("k"))
      yield* TestClock.adjust("999 millis")
      yield* settle
      assert.isUndefined(waiter.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      yield* settle
      const result = yield* ended(waiter)
      assert.deepStrictEqual([result.at, result.ok, result.error], [2500, false, "RateLimitExceeded"])
    }))
})

describe("the line on a shared store keeps its accounts", () => {
  it.effect("when the head leaves, the next waiter goes at its own turn", () =>
    Effect.gen(function*() {
      const limiter = yield* onStore({ policy: perSecond(5, 1) })
      assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
      const head = yield* Effect.forkChild(limiter.wait("k", { cost: 3 }))
      yield* settle
      const next = yield* Effect.forkChild(outcome(limiter.wait("k")))
      yield* settle
      yield* Fiber.interrupt(head)
      yield* settle
      yield* seconds(1)
      assert.deepStrictEqual(yield* ended(next), { at: 1000, ok: true })
    }))

  it.effect("once the head is admitted, a newcomer waits behind those still in line only", () =>
    Effect.gen(function*() {
      const limiter = yield* onStore({ policy: perSecond(5, 1) })
      assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
      yield* Effect.forkChild(limiter.wait("k"))
      yield* Effect.forkChild(limiter.wait("k"))
      yield* settle
      yield* seconds(1)
      // one waiter left, 0 tokens: the newcomer's turn is 2 s away
      const newcomer = yield* Effect.forkChild(outcome(limiter.wait("k", { maxWait: "2 seconds" })))
      yield* settle
      assert.isUndefined(newcomer.pollUnsafe())
      yield* seconds(2)
      assert.deepStrictEqual(yield* ended(newcomer), { at: 3000, ok: true })
    }))
})

describe("the head-of-line pass", () => {
  // An empty bucket of 10 at 1 per second, from 5 s on (so the head's age is
  // not its clock time): a head of 10 and, behind it, one of 1 that fits at 6 s.
  const scenario = (pass: Duration.Input) =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: perSecond(10, 1), headOfLine: { pass } })
      yield* TestClock.adjust("5 seconds")
      assert.isTrue(yield* limiter.acquire("k", { cost: 10 }))
      const big = yield* Effect.forkChild(outcome(limiter.wait("k", { cost: 10 })))
      yield* settle
      const small = yield* Effect.forkChild(outcome(limiter.wait("k")))
      yield* settle
      return { limiter, big, small }
    })

  it.effect("a head that has waited less than pass is passed by one behind it that fits", () =>
    Effect.gen(function*() {
      const { big, limiter, small } = yield* scenario("2 seconds")
      yield* seconds(1)
      assert.deepStrictEqual(yield* ended(small), { at: 6000, ok: true })
      assert.strictEqual((yield* limiter.stats).waiting, 1)
      // the line counts the head only: a newcomer's turn is 10 + 1 tokens away
      const newcomer = yield* Effect.forkChild(outcome(limiter.wait("k", { maxWait: "11 seconds" })))
      yield* settle
      assert.isUndefined(newcomer.pollUnsafe())
      assert.strictEqual((yield* limiter.stats).waiting, 2)
      yield* seconds(10)
      assert.deepStrictEqual(yield* ended(big), { at: 16_000, ok: true })
    }))

  it.effect("while the head may be passed, the first one behind it to fit goes at its own turn, not a later one's", () =>
    Effect.gen(function*() {
      const { big, limiter, small } = yield* scenario("5 seconds")
      // behind the small one (1 token, at 6 s), one of 3 (at 8 s): the actor wakes for the earlier
      const three = yield* Effect.forkChild(outcome(limiter.wait("k", { cost: 3 })))
      yield* settle
      yield* seconds(1)
      assert.deepStrictEqual(yield* ended(small), { at: 6000, ok: true })
      yield* seconds(3)
      assert.deepStrictEqual(yield* ended(three), { at: 9000, ok: true })
      yield* seconds(10)
      assert.deepStrictEqual(yield* ended(big), { at: 19_000, ok: true })
    }))

  it.effect("several that fit at once pass the head together, and leave the line", () =>
    Effect.gen(function*() {
      const { big, limiter, small } = yield* scenario("2 seconds")
      const second = yield* Effect.forkChild(outcome(limiter.wait("k")))
      yield* settle
      // two tokens back at once: both small ones fit
      yield* limiter.release("k", 2)
      yield* settle
      assert.deepStrictEqual(yield* ended(small), { at: 5000, ok: true })
      assert.deepStrictEqual(yield* ended(second), { at: 5000, ok: true })
      assert.strictEqual((yield* limiter.stats).waiting, 1)
      // they took the two tokens, once each: the head goes when 10 are there
      yield* seconds(10)
      assert.deepStrictEqual(yield* ended(big), { at: 15_000, ok: true })
    }))

  it.effect("a head that has waited exactly pass is not passed any more", () =>
    Effect.gen(function*() {
      const { big, small } = yield* scenario("1 second")
      yield* seconds(11)
      assert.deepStrictEqual(yield* ended(big), { at: 15_000, ok: true })
      assert.deepStrictEqual(yield* ended(small), { at: 16_000, ok: true })
    }))

  it.effect("tenants that pass the head move the line on; new tenants are served in the order they came", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: perSecond(10, 1), headOfLine: { pass: "5 seconds" } })
      assert.isTrue(yield* limiter.acquire("k", { cost: 10 }))
      const log: Array<string> = []
      const join = joiner(limiter, log)
      // a's head starts at 0; b's and d's waiters at 0, 1, 2, in turn
      yield* join("a1", { tenant: "a", cost: 10 })
      for (const i of [1, 2, 3]) {
        yield* join(`b${i}`, { tenant: "b" })
        yield* join(`d${i}`, { tenant: "d" })
      }
      // one token a second: b1 and d1 (started at 0) pass the head, then b2 (started at 1)
      yield* seconds(3)
      assert.deepStrictEqual(log, ["b1", "d1", "b2"])
      // a new tenant starts where the line is now (1): behind d2, which started there before it came
      yield* join("c", { tenant: "c" })
      // d2 passes at 4 s; from 5 s the head blocks, and goes at 14 s
      yield* seconds(11)
      assert.deepStrictEqual(log, ["b1", "d1", "b2", "d2", "a1"])
      // another new tenant: it came after c, and goes after it
      yield* join("e", { tenant: "e" })
      yield* seconds(4)
      assert.deepStrictEqual(log, ["b1", "d1", "b2", "d2", "a1", "c", "e", "b3", "d3"])
    }))

  for (const tenant of [undefined, "t"]) {
    it.effect(`a passed head is still held to its maxWait, and told when it would fit (${tenant === undefined ? "plain" : "with a tenant"})`, () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ policy: perSecond(10, 1), headOfLine: { pass: "5 seconds" } })
        assert.isTrue(yield* limiter.acquire("k", { cost: 10 }))
        // its turn is 10 s away, and it waits up to 12 s
        const big = yield* Effect.forkChild(outcome(limiter.wait("k", { cost: 10, maxWait: "12 seconds", tenant })))
        yield* settle
        const log: Array<string> = []
        const join = joiner(limiter, log)
        for (let i = 0; i < 5; i++) yield* join(`s${i}`)
        // four pass it (1 to 4 s); from 5 s it blocks, and needs 10 tokens: 14 s
        yield* seconds(11)
        assert.deepStrictEqual(log, ["s0", "s1", "s2", "s3"])
        yield* TestClock.adjust("999 millis")
        yield* settle
        assert.isUndefined(big.pollUnsafe())
        yield* TestClock.adjust("1 millis")
        yield* settle
        // at 12 s, 8 tokens: 2 more seconds
        assert.deepStrictEqual(yield* ended(big), {
          at: 12_000,
          ok: false,
          error: "RateLimitExceeded",
          retryAfter: 2000
        })
        yield* settle
        assert.deepStrictEqual(log, ["s0", "s1", "s2", "s3", "s4"])
      }))
  }
})

describe("a new limit drops the waiters it can never admit", () => {
  for (const [name, make] of inProcess) {
    it.effect(`the dropped waiter is told at once and takes nothing; the one behind it goes at its turn (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: perSecond(5, 1) })
        assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
        const big = yield* Effect.forkChild(outcome(limiter.wait("k", { cost: 4 })))
        yield* settle
        const small = yield* Effect.forkChild(outcome(limiter.wait("k")))
        yield* settle
        yield* limiter.reconfigure("k", perSecond(3, 1))
        yield* settle
        assert.deepStrictEqual(yield* ended(big), { at: 0, ok: false, error: "InvalidRequest" })
        assert.strictEqual((yield* limiter.stats).waiting, 1)
        yield* seconds(1)
        assert.deepStrictEqual(yield* ended(small), { at: 1000, ok: true })
      }))
  }
})
