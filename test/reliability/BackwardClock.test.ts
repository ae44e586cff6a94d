/**
 * Backward clock steps with reaping (invariants 2 and 6 of docs/architecture.md together;
 * KNOWN-FAILURES.md #2, fixed).
 *
 * The limiter's time is `max(clock, highest reading so far)`: a step back
 * freezes it until the clock passes its highest reading again. So forgetting
 * a settled bucket stays indistinguishable from keeping it, whatever the
 * clock does next. The property: for random requests, forward and backward
 * steps and sweeps, a supervisor that reaps gives exactly the answers of one
 * that never reaps, figures included. Then the semantics, one by one.
 *
 * Random runs replay with TOLLGATE_SEED=<seed>.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Duration, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { type Decision, Policy, RateLimiter } from "../../src/index.ts"
import * as Request from "../../src/internal/actor/Request.ts"
import * as Supervisor from "../../src/internal/supervisor/Supervisor.ts"
import { isDone, Probe, probed, settle } from "./probe.ts"

// Policies that start fresh: a fresh state is what a settled one forgets to.
const policies = [
  Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }),
  Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "2 seconds" } }),
  Policy.gcra({ rate: { count: 2, per: "1 second" }, maxBurst: 3 }),
  Policy.fixedWindow({ limit: 4, window: "3 seconds" }),
  Policy.slidingWindow({ limit: 4, window: "2 seconds" })
] as ReadonlyArray<Policy.Valid>
const KEYS = policies.length
const IDLE = 1000

type Command =
  | { readonly _tag: "acquire"; readonly key: number; readonly cost: number }
  | { readonly _tag: "consume"; readonly key: number; readonly cost: number }
  | { readonly _tag: "peek"; readonly key: number }
  | { readonly _tag: "forward"; readonly millis: number }
  | { readonly _tag: "back"; readonly millis: number }
  | { readonly _tag: "sweep" }

const key = fc.integer({ min: 0, max: KEYS - 1 })
const cost = fc.integer({ min: 1, max: 3 })
const command: fc.Arbitrary<Command> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ _tag: fc.constant("acquire" as const), key, cost }) },
  { weight: 3, arbitrary: fc.record({ _tag: fc.constant("consume" as const), key, cost }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("peek" as const), key }) },
  {
    weight: 4,
    arbitrary: fc.record({
      _tag: fc.constant("forward" as const),
      millis: fc.oneof(fc.integer({ min: 0, max: 1500 }), fc.integer({ min: 1500, max: 12_000 }))
    })
  },
  {
    weight: 3,
    arbitrary: fc.record({
      _tag: fc.constant("back" as const),
      millis: fc.oneof(fc.integer({ min: 1, max: 12_000 }), fc.integer({ min: 12_000, max: 10_000_000 }))
    })
  },
  { weight: 2, arbitrary: fc.constant({ _tag: "sweep" as const }) }
)

const seed = process.env.TOLLGATE_SEED !== undefined && process.env.TOLLGATE_SEED !== ""
  ? Number(process.env.TOLLGATE_SEED)
  : Math.floor(Math.random() * 0x7fffffff)

const show = (exit: Exit.Exit<unknown, unknown>): unknown => {
  if (Exit.isFailure(exit)) return { failure: Cause.pretty(exit.cause) }
  const v = exit.value
  if (typeof v !== "object" || v === null) return v
  const d = v as Decision.Decision
  return [d.allowed, d.remaining, Duration.toMillis(d.retryAfter), Duration.toMillis(d.resetAfter), d.limit]
}

const makeSupervisor = (fastPath: boolean, idleTimeoutMillis: number) =>
  Supervisor.make({
    policyFor: (k) => policies[k === "read" ? 0 : Number(k)],
    limits: { mailboxCapacity: 64, maxWaiters: 8 },
    idleTimeoutMillis,
    fastPath
  })

const runOne = (commands: ReadonlyArray<Command>, fastPath: boolean, totals: { reaped: number; after: number }) =>
  Effect.gen(function*() {
    const clock = yield* Clock.Clock
    yield* TestClock.setTime(1_000_000)
    const reaping = yield* makeSupervisor(fastPath, IDLE)
    const keeping = yield* makeSupervisor(fastPath, 1e12)
    let reapedBefore = 0
    // A limiter's time is the highest reading it has taken, and the reaping
    // one's sweep reads the clock every IDLE / 2: both read it after every
    // move, so they have seen the same highest reading (the sweeps' readings
    // on the way are below it) and differ only in what they reaped.
    const read = Effect.all([
      reaping.submit("read", Request.Kind.Peek, 1, 0),
      keeping.submit("read", Request.Kind.Peek, 1, 0)
    ])
    for (let i = 0; i < commands.length; i++) {
      const c = commands[i]
      switch (c._tag) {
        case "acquire":
        case "consume":
        case "peek": {
          const kind = c._tag === "acquire"
            ? Request.Kind.Acquire
            : c._tag === "consume"
            ? Request.Kind.Consume
            : Request.Kind.Peek
          const cost = c._tag === "peek" ? 1 : c.cost
          const a = show(yield* Effect.exit(reaping.submit(String(c.key), kind, cost, 0)))
          const b = show(yield* Effect.exit(keeping.submit(String(c.key), kind, cost, 0)))
          if (JSON.stringify(a) !== JSON.stringify(b)) {
            return yield* Effect.fail(
              `command ${i} (${JSON.stringify(c)}) at ${clock.currentTimeMillisUnsafe()}: ` +
                `the reaping limiter says ${JSON.stringify(a)}, the keeping one ${JSON.stringify(b)}`
            )
          }
          break
        }
        case "forward":
          yield* TestClock.adjust(c.millis) // the reaping one's sweep runs every IDLE / 2 on the way
          yield* read
          break
        case "back": {
          const reaped = (yield* reaping.stats).reaped
          if (reaped > reapedBefore) totals.after++ // a step back after a reap: the case of #2
          reapedBefore = reaped
          yield* TestClock.setTime(clock.currentTimeMillisUnsafe() - c.millis)
          yield* read
          break
        }
        case "sweep":
          yield* reaping.sweep
          break
      }
    }
    assert.strictEqual((yield* keeping.stats).reaped, 0)
    totals.reaped += (yield* reaping.stats).reaped
  })

for (const fastPath of [true, false]) {
  describe(`backward clock steps with reaping (fastPath: ${fastPath})`, () => {
    it.effect("a limiter that reaps admits exactly what one that never reaps admits", () =>
      Effect.gen(function*() {
        const samples = fc.sample(fc.array(command, { minLength: 20, maxLength: 80 }), { numRuns: 150, seed })
        const totals = { reaped: 0, after: 0 }
        for (let run = 0; run < samples.length; run++) {
          const exit = yield* Effect.exit(Effect.scoped(runOne(samples[run], fastPath, totals)))
          if (Exit.isFailure(exit)) {
            const message = `backward clock with reaping (fastPath: ${fastPath}) failed; ` +
              `replay with TOLLGATE_SEED=${seed}, run ${run}\n` +
              `commands: ${JSON.stringify(samples[run])}\n${Cause.pretty(exit.cause)}`
            console.error(message)
            assert.fail(message)
          }
        }
        console.log(`backward clock with reaping (fastPath: ${fastPath}): ${JSON.stringify({ seed, ...totals })}`)
        // the runs did reap, and did step back after reaps
        assert.isAbove(totals.reaped, 30)
        assert.isAbove(totals.after, 10)
      }), { timeout: 60_000 })

    it.effect("a step back freezes the limiter's time: nothing refills until the clock passes its highest reading", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ fastPath, policy: policies[0] })
        assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
        yield* TestClock.adjust(2000)
        assert.strictEqual((yield* limiter.peek("k")).remaining, 2) // the limiter reads 2 s
        yield* TestClock.setTime(500) // back 1.5 s: the limiter's time stays at 2 s
        assert.strictEqual((yield* limiter.peek("k")).remaining, 2)
        yield* TestClock.setTime(1999)
        assert.strictEqual((yield* limiter.peek("k")).remaining, 2)
        yield* TestClock.setTime(3000) // past 2 s: one more second of refill
        assert.strictEqual((yield* limiter.peek("k")).remaining, 3)
      }))

    it.effect("while frozen, retryAfter counts on the caller's clock and is exact", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ fastPath, policy: policies[0] })
        yield* TestClock.setTime(10_000)
        assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
        yield* TestClock.setTime(4000) // 6 s behind the limiter's time
        const d = yield* limiter.consume("k")
        assert.isFalse(d.allowed)
        // the token comes at 11 s on the limiter's time, reached when the clock is at 11 s
        assert.strictEqual(Duration.toMillis(d.retryAfter), 7000)
        assert.strictEqual(Duration.toMillis(d.resetAfter), 11_000)
        yield* TestClock.adjust(6999)
        assert.isFalse(yield* limiter.acquire("k"))
        yield* TestClock.adjust(1)
        assert.isTrue(yield* limiter.acquire("k"))
      }))

    it.effect("a key started while frozen is anchored at the highest reading, as a kept one would be", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ fastPath, policy: policies[0] })
        yield* TestClock.setTime(10_000)
        yield* limiter.acquire("kept") // starts "kept" at 10 s
        yield* TestClock.setTime(0)
        assert.isTrue(yield* limiter.acquire("new", { cost: 5 })) // starts full, anchored at 10 s
        assert.isTrue(yield* limiter.acquire("kept", { cost: 4 }))
        yield* TestClock.setTime(10_999)
        assert.isFalse(yield* limiter.acquire("new"))
        assert.isFalse(yield* limiter.acquire("kept"))
        yield* TestClock.setTime(11_000)
        assert.isTrue(yield* limiter.acquire("new"))
        assert.isTrue(yield* limiter.acquire("kept"))
      }))

    it.effect("a waiter re-timed while frozen sleeps once, until the clock reaches its turn", () =>
      Effect.gen(function*() {
        const probe = new Probe()
        yield* TestClock.setTime(100_000)
        const limiter = yield* probed(probe, RateLimiter.make({ fastPath, policy: policies[0], idleTimeout: "1 day" }))
        assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
        const first = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
        yield* settle()
        yield* TestClock.setTime(40_000) // a minute back: the turns are at 101 s and 102 s
        const second = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
        yield* settle()
        const sleeps = probe.sleepsStarted
        // a sleep of `turn - limiter time` (1 s) would wake every second on the way
        yield* TestClock.setTime(100_999)
        assert.isFalse(isDone(first))
        assert.strictEqual(probe.sleepsStarted - sleeps, 0, "a sleep started on the way to the turn")
        yield* TestClock.adjust(1)
        yield* Fiber.join(first)
        assert.isFalse(isDone(second))
        yield* TestClock.adjust(1000)
        yield* Fiber.join(second)
      }))
  })
}
