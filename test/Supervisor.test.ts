import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Latch, Metric, Scope } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../src/index.ts"
import * as Bucket from "../src/internal/actor/Bucket.ts"
import * as Request from "../src/internal/actor/Request.ts"
import * as Supervisor from "../src/internal/supervisor/Supervisor.ts"

const policy = Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid

const makeSupervisor = (idleTimeoutMillis = 60_000, fastPath = true) =>
  Supervisor.make({
    policyFor: () => policy,
    limits: { mailboxCapacity: 1024, maxWaiters: 1024 },
    idleTimeoutMillis,
    fastPath
  })

const acquire = (supervisor: Supervisor.Supervisor, key: string) => supervisor.submit(key, Request.Kind.Acquire, 1, 0)

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

describe("Supervisor: starting buckets", () => {
  it.effect("concurrent first calls for one key start exactly one bucket", () =>
    Effect.gen(function*() {
      const supervisor = yield* makeSupervisor()
      const results = yield* Effect.forEach(Array.from({ length: 100 }), () => acquire(supervisor, "k"), {
        concurrency: "unbounded"
      })
      assert.strictEqual(results.filter(Boolean).length, 3)
      const stats = yield* supervisor.stats
      assert.strictEqual(stats.started, 1)
      assert.strictEqual(stats.buckets, 1)
    }))

  it.effect("requests that queue while the actor starts are served in arrival order", () =>
    Effect.gen(function*() {
      // Without the fast path every request goes through the mailbox: the
      // first starts the actor, the others queue behind it before it runs.
      const supervisor = yield* makeSupervisor(60_000, false)
      const fibers = yield* Effect.forEach(
        Array.from({ length: 10 }),
        () => Effect.forkChild(acquire(supervisor, "k"), { startImmediately: true })
      )
      assert.deepStrictEqual(yield* Fiber.joinAll(fibers), [
        true,
        true,
        true,
        false,
        false,
        false,
        false,
        false,
        false,
        false
      ])
      yield* settle
      const stats = yield* supervisor.stats
      assert.strictEqual(stats.queued, 0)
      assert.strictEqual(stats.started, 1)
      assert.strictEqual(stats.actors, 0) // it hibernated once nothing came
    }))

  it.effect("an actor's stopped latch is closed while its fiber runs, and opens when it hibernates", () =>
    Effect.gen(function*() {
      const supervisor = yield* makeSupervisor(60_000, true)
      // a waiter that has to queue starts the actor
      assert.isTrue(yield* acquire(supervisor, "k"))
      const waiter = yield* Effect.forkChild(supervisor.submit("k", Request.Kind.Wait, 3, Infinity), {
        startImmediately: true
      })
      yield* settle
      const bucket = supervisor.bucket("k")!
      const latch = bucket.actor!.stopped
      assert.isFalse(Latch.isOpen(latch))
      assert.strictEqual((yield* supervisor.stats).actors, 1)
      yield* TestClock.adjust("1 second") // the waiter's turn: the actor admits it, then has nothing to do
      yield* Fiber.join(waiter)
      yield* settle
      assert.isTrue(Latch.isOpen(latch))
      assert.strictEqual((yield* supervisor.stats).actors, 0)
      yield* Bucket.stopped(bucket)! // completes at once
    }))

  it.effect("without the fast path an actor hibernates once its key is quiet, and its state stays", () =>
    Effect.gen(function*() {
      const supervisor = yield* makeSupervisor(60_000, false)
      assert.isTrue(yield* acquire(supervisor, "k"))
      yield* settle
      const bucket = supervisor.bucket("k")!
      const latch = bucket.actor!.stopped
      assert.isTrue(Latch.isOpen(latch))
      assert.isUndefined(bucket.actor!.mailbox)
      assert.strictEqual((yield* supervisor.stats).actors, 0)
      // started again by the next request, which it serves from the state it left
      assert.isTrue(yield* acquire(supervisor, "k"))
      assert.isTrue(yield* acquire(supervisor, "k"))
      assert.isFalse(yield* acquire(supervisor, "k"))
      yield* settle
      assert.strictEqual((yield* supervisor.stats).actors, 0)
      yield* TestClock.adjust("1 second")
      assert.isTrue(yield* acquire(supervisor, "k"))
      assert.isFalse(yield* acquire(supervisor, "k"))
      assert.strictEqual((yield* supervisor.stats).started, 1)
    }))
})

describe("Supervisor: reaping", () => {
  it.effect("an idle, refilled bucket is reaped and the live count falls", () =>
    Effect.gen(function*() {
      const supervisor = yield* makeSupervisor(10_000)
      for (const key of ["a", "b", "c"]) yield* acquire(supervisor, key)
      assert.strictEqual((yield* supervisor.stats).buckets, 3)
      yield* TestClock.adjust("15 seconds") // one sweep at 5 s (not idle yet), 10 s (idle: exactly 10 s), 15 s
      yield* settle
      const stats = yield* supervisor.stats
      assert.strictEqual(stats.buckets, 0)
      assert.strictEqual(stats.reaped, 3)
    }))

  it.effect("a bucket that has not refilled is not reaped, however long it idles", () =>
    Effect.gen(function*() {
      const slow = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 minute" } }) as Policy.Valid
      const supervisor = yield* Supervisor.make({
        policyFor: () => slow,
        limits: { mailboxCapacity: 64, maxWaiters: 64 },
        idleTimeoutMillis: 1000
      })
      for (let i = 0; i < 10; i++) yield* acquire(supervisor, "k")
      // idle for 9 minutes: one token short of full
      // the sweep runs every 500 ms all along
      yield* TestClock.adjust("9 minutes")
      yield* settle
      assert.strictEqual((yield* supervisor.stats).buckets, 1)
      assert.strictEqual(yield* supervisor.sweep, 0)
      yield* TestClock.adjust("59 seconds")
      assert.strictEqual((yield* supervisor.stats).buckets, 1)
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* supervisor.stats).buckets, 0)
      assert.strictEqual((yield* supervisor.stats).reaped, 1)
    }))

  it.effect("decisions before and after a reap are identical", () =>
    Effect.gen(function*() {
      // the same script against a limiter that reaps and one that never does
      const script = (limiter: RateLimiter["Service"]) =>
        Effect.gen(function*() {
          const out: Array<boolean> = []
          for (let round = 0; round < 6; round++) {
            for (let i = 0; i < 4; i++) out.push(yield* limiter.acquire("k"))
            yield* TestClock.adjust(round % 2 === 0 ? "3 seconds" : "10 seconds")
          }
          return out
        })
      const reaping = yield* RateLimiter.make({ policy, idleTimeout: "2 seconds" })
      const a = yield* script(reaping)
      const reaped = (yield* reaping.stats).reaped
      assert.isAbove(reaped, 0)
      // back to 0 before it starts: a limiter's time never goes below its first reading
      yield* TestClock.setTime(0)
      const keeping = yield* RateLimiter.make({ policy, idleTimeout: "365 days" })
      const b = yield* script(keeping)
      assert.strictEqual((yield* keeping.stats).reaped, 0)
      assert.deepStrictEqual(a, b)
    }))

  it.effect("the reap/acquire race: no request is lost or served twice", () =>
    Effect.gen(function*() {
      const supervisor = yield* makeSupervisor(1000)
      for (let round = 0; round < 20; round++) {
        yield* TestClock.adjust("5 seconds") // every bucket idle and full
        // sweeps interleaved with calls: some calls land on a bucket just reaped
        const work: Array<Effect.Effect<unknown, any>> = []
        for (let i = 0; i < 40; i++) {
          work.push(i % 5 === 0 ? supervisor.sweep : acquire(supervisor, `k${i % 4}`))
        }
        const exits = yield* Effect.forEach(work, (w) => Effect.exit(w), { concurrency: "unbounded" })
        const decisions = exits.filter((e, i) => i % 5 !== 0 && Exit.isSuccess(e))
        assert.strictEqual(decisions.length, 32)
        // each key saw 8 calls on a full bucket: exactly 3 allowed each
        const allowed = exits.filter((e, i) => i % 5 !== 0 && Exit.isSuccess(e) && e.value === true).length
        assert.strictEqual(allowed, 12)
      }
      const stats = yield* supervisor.stats
      assert.isAbove(stats.reaped, 0)
      assert.strictEqual(stats.allowed + stats.denied, 20 * 32)
    }))

  it.effect("after a reap the key gets a fresh bucket", () =>
    Effect.gen(function*() {
      const supervisor = yield* makeSupervisor(1000)
      yield* acquire(supervisor, "k")
      const old = supervisor.bucket("k")!
      yield* TestClock.adjust("10 seconds")
      assert.isUndefined(supervisor.bucket("k"))
      assert.isTrue(yield* acquire(supervisor, "k"))
      assert.notStrictEqual(supervisor.bucket("k"), old)
    }))
})

describe("Supervisor: shutdown", () => {
  it.effect("stops every bucket fiber; queued calls get decisions, waiters LimiterShutdown", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const supervisor = yield* makeSupervisor(60_000, false).pipe(Scope.provide(scope))
      for (const key of ["a", "b"]) yield* acquire(supervisor, key)
      const waiter = yield* Effect.forkChild(
        supervisor.submit("a", Request.Kind.Wait, 3, Infinity),
        { startImmediately: true }
      )
      yield* settle
      const queued = yield* Effect.forEach(
        Array.from({ length: 5 }),
        () => Effect.forkChild(acquire(supervisor, "b"), { startImmediately: true })
      )
      const latches = [supervisor.bucket("a")!.actor!.stopped, supervisor.bucket("b")!.actor!.stopped]
      for (const latch of latches) assert.isFalse(Latch.isOpen(latch))
      yield* Scope.close(scope, Exit.void)
      // closing waited for every actor to stop
      for (const latch of latches) assert.isTrue(Latch.isOpen(latch))
      assert.strictEqual((yield* supervisor.stats).actors, 0)
      assert.deepStrictEqual(yield* Fiber.joinAll(queued), [true, true, false, false, false])
      const exit = yield* Fiber.await(waiter)
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual((yield* supervisor.stats).buckets, 0)
    }))
})

describe("Supervisor: a key's state handed to the next owner (snapshot, restore)", () => {
  const slow = Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "10 seconds" } })
  const fast = Policy.tokenBucket({ capacity: 3, refill: { tokens: 100, per: "1 second" } })
  const options: RateLimiter.Options = {
    policy: (key) =>
      key.startsWith("slow:")
        ? slow
        : key.startsWith("bad:")
        ? Policy.tokenBucket({ capacity: -1, refill: { tokens: 1, per: "1 second" } })
        : fast
  }
  // A limiter and the supervisor it runs on.
  const limiterWithSupervisor = (name: string) =>
    Effect.gen(function*() {
      let supervisor: Supervisor.Supervisor | undefined
      const limiter = yield* RateLimiter.make({ ...options, name }).pipe(
        Effect.provideService(Supervisor.OnMake, (s) => {
          supervisor = s
        })
      )
      assert.isDefined(supervisor)
      return { limiter, supervisor: supervisor! }
    })

  it.effect("every key that is not settled, with its state, a block as its time left; restored as it was", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1_000)
      const { limiter, supervisor } = yield* limiterWithSupervisor("first")
      assert.isTrue(yield* limiter.acquire("slow:a", { cost: 2 }))
      yield* limiter.block("slow:b", "5 seconds")
      assert.isTrue(yield* limiter.acquire("fast:a"))
      // 100 ms on, "fast:a" is full again (settled: nothing to hand over)
      yield* TestClock.adjust("100 millis")
      const handed = supervisor.snapshot()
      assert.deepStrictEqual(handed.map((h) => [h.key, h.blockedFor]).sort(), [["slow:a", 0], ["slow:b", 4_900]])

      const next = yield* limiterWithSupervisor("next")
      for (const h of handed) assert.isUndefined(next.supervisor.restore(h.key, h.state))
      // again on a key that has its bucket: the state is written, no bucket started
      const a = handed.find((h) => h.key === "slow:a")!
      assert.isUndefined(next.supervisor.restore(a.key, a.state))
      const stats = yield* next.limiter.stats
      assert.strictEqual(stats.started, 2)
      assert.strictEqual(stats.buckets, 2)
      const live = (yield* Metric.snapshot).find((s) => s.id === "tollgate_buckets" && s.attributes?.limiter === "next")
      assert.deepStrictEqual(live?.state, { value: 2 })
      // the restored key goes on from the state it had: 1 token left
      const d = yield* next.limiter.consume("slow:a")
      assert.isTrue(d.allowed)
      assert.strictEqual(d.remaining, 0)
      // a key whose policy is invalid is refused, naming it
      const refused = next.supervisor.restore("bad:x", a.state)
      assert.strictEqual(refused?._tag, "InvalidPolicy")
      assert.strictEqual((yield* next.limiter.stats).started, 2)
    }))
})
