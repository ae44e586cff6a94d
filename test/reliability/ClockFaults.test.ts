/**
 * Clock faults (invariants 5 and 6 of docs/architecture.md): forward jumps of years, backward
 * jumps of any size (to before the epoch), the same instant repeated many
 * times. No tokens are minted: for every key, what it admitted never exceeds
 * `capacity + rate x (highest clock reading - creation time)`; no call throws
 * or dies; no figure is NaN.
 *
 * The limiter here never reaps (a long idleTimeout), so the bound is on one
 * bucket's life; BackwardClock.test.ts checks that reaping under backward
 * steps changes no decision (KNOWN-FAILURES.md #2, fixed).
 *
 * Random runs replay with TOLLGATE_SEED=<seed>.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Duration, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { type Decision, Policy, RateLimiter } from "../../src/index.ts"
import { failureOf, isDone, settle } from "./probe.ts"

const YEAR = 365 * 86_400_000

// capacity, and `tokens` per `period` ms, as integers over `den`
interface Spec {
  readonly capacity: number
  readonly tokens: number
  readonly period: number
}
const specs: ReadonlyArray<Spec> = [
  { capacity: 5, tokens: 1, period: 1000 },
  { capacity: 3, tokens: 0.5, period: 1000 },
  { capacity: 100, tokens: 1000, period: 3_600_000 },
  { capacity: 2, tokens: 1, period: 1 }
]
const policies = specs.map((s) =>
  Policy.tokenBucket({ capacity: s.capacity, refill: { tokens: s.tokens, per: Duration.millis(s.period) } })
)
const KEYS = specs.length

type Command =
  | { readonly _tag: "acquire"; readonly key: number; readonly cost: number; readonly times: number }
  | { readonly _tag: "consume"; readonly key: number; readonly cost: number }
  | { readonly _tag: "wait"; readonly key: number; readonly cost: number; readonly maxWait: number }
  | { readonly _tag: "jump"; readonly millis: number }
  | { readonly _tag: "set"; readonly to: number }
  | { readonly _tag: "same"; readonly times: number }

const key = fc.integer({ min: 0, max: KEYS - 1 })
const cost = fc.integer({ min: 1, max: 3 })
const command: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      _tag: fc.constant("acquire" as const),
      key,
      cost,
      times: fc.oneof(fc.constant(1), fc.integer({ min: 2, max: 50 }))
    })
  },
  { weight: 3, arbitrary: fc.record({ _tag: fc.constant("consume" as const), key, cost }) },
  {
    weight: 3,
    arbitrary: fc.record({
      _tag: fc.constant("wait" as const),
      key,
      cost,
      maxWait: fc.integer({ min: 0, max: 20_000 })
    })
  },
  {
    weight: 6,
    arbitrary: fc.record({
      _tag: fc.constant("jump" as const),
      millis: fc.oneof(
        fc.integer({ min: -5000, max: 5000 }), // small steps either way
        fc.integer({ min: -100 * YEAR, max: -5000 }), // far back
        fc.integer({ min: 5000, max: 100 * YEAR }) // years ahead
      )
    })
  },
  {
    weight: 2,
    arbitrary: fc.record({
      _tag: fc.constant("set" as const),
      // anywhere: before the epoch, the epoch, far in the future
      to: fc.oneof(fc.integer({ min: -1e12, max: 1e12 }), fc.constantFrom(0, -1, 1e15, -1e15, 253_402_300_799_999))
    })
  },
  { weight: 2, arbitrary: fc.record({ _tag: fc.constant("same" as const), times: fc.integer({ min: 2, max: 20 }) }) }
)

const seed = process.env.TOLLGATE_SEED !== undefined && process.env.TOLLGATE_SEED !== ""
  ? Number(process.env.TOLLGATE_SEED)
  : Math.floor(Math.random() * 0x7fffffff)

// Only decisions and these typed errors are acceptable answers.
const checkExit = (what: string, exit: Exit.Exit<unknown, unknown>) => {
  if (Exit.isSuccess(exit)) return
  const error = failureOf(exit)
  assert.include(["RateLimitExceeded", "Overloaded"], error?._tag, `${what}: ${Cause.pretty(exit.cause)}`)
}

const checkDecision = (what: string, d: Decision.Decision, spec: Spec) => {
  assert.isTrue(Number.isInteger(d.remaining) && d.remaining >= 0 && d.remaining <= spec.capacity, `${what}: remaining`)
  assert.isTrue(Number.isFinite(Duration.toMillis(d.retryAfter)), `${what}: retryAfter ${d.retryAfter}`)
  assert.isTrue(Number.isFinite(Duration.toMillis(d.resetAfter)), `${what}: resetAfter ${d.resetAfter}`)
  assert.isTrue(Duration.toMillis(d.retryAfter) >= 0 && Duration.toMillis(d.resetAfter) >= 0, what)
  assert.strictEqual(d.limit, spec.capacity, what)
}

const runOne = (commands: ReadonlyArray<Command>, fastPath: boolean) =>
  Effect.gen(function*() {
    const clock = yield* Clock.Clock
    yield* TestClock.setTime(0)
    const limiter = yield* RateLimiter.make({
      policy: (k) => policies[Number(k)],
      fastPath,
      idleTimeout: Duration.days(365 * 1000) // never reaps
    })
    const admitted = Array.from({ length: KEYS }, () => 0)
    const created: Array<number | undefined> = Array.from({ length: KEYS }, () => undefined)
    let highest = 0
    const waiters: Array<[number, number, Fiber.Fiber<Exit.Exit<void, unknown>>]> = []
    const counted = new Set<Fiber.Fiber<Exit.Exit<void, unknown>>>()
    const touch = (k: number) => {
      if (created[k] === undefined) created[k] = clock.currentTimeMillisUnsafe()
    }

    // Each key's admissions decided at once (acquire, consume), at the limiter's time: in any window of it,
    // no more than the capacity and the refill of that window (a waiter's admission, seen later, only
    // makes a window's true count higher, so it is left out of this check and kept in the one below)
    const atOnce: Array<Array<readonly [number, number]>> = specs.map(() => [])
    const tookAtOnce = (k: number, cost: number) => {
      // (every command ends with a peek, which moves the limiter's time to `highest`)
      const t = Math.max(highest, clock.currentTimeMillisUnsafe())
      const spec = specs[k]
      const list = atOnce[k]
      list.push([t, cost])
      let sum = 0
      for (let i = list.length - 1; i >= 0; i--) {
        sum += list[i][1]
        assert.isAtMost(
          sum * spec.period,
          spec.capacity * spec.period + spec.tokens * (t - list[i][0]),
          `key ${k}: ${sum} admitted in ${t - list[i][0]} ms of the limiter's time`
        )
      }
    }

    const checkBounds = (step: number) =>
      Effect.gen(function*() {
        yield* settle(5)
        for (const [k, c, fiber] of waiters) {
          const exit = fiber.pollUnsafe()
          if (exit === undefined || counted.has(fiber)) continue
          counted.add(fiber)
          assert.isTrue(Exit.isSuccess(exit), "a waiter was interrupted")
          const inner = (exit as Exit.Success<Exit.Exit<void, unknown>>).value
          checkExit(`wait on key ${k}`, inner)
          if (Exit.isSuccess(inner)) admitted[k] += c
        }
        for (let k = 0; k < KEYS; k++) {
          const spec = specs[k]
          const d = yield* limiter.peek(String(k))
          checkDecision(`peek ${k} at step ${step}`, d, spec)
          if (created[k] === undefined) continue
          // tokens * (highest - created) / period, compared without division
          const limit = spec.capacity * spec.period + spec.tokens * (highest - created[k]!)
          assert.isAtMost(
            admitted[k] * spec.period,
            limit,
            `key ${k} admitted ${admitted[k]} by step ${step}: more than capacity + rate x elapsed`
          )
        }
      })

    for (let step = 0; step < commands.length; step++) {
      const raw = commands[step]
      // costs never above the key's capacity (that is InvalidRequest, tested elsewhere)
      const c = "cost" in raw ? { ...raw, cost: Math.min(raw.cost, specs[raw.key].capacity) } : raw
      switch (c._tag) {
        case "acquire": {
          touch(c.key)
          for (let i = 0; i < c.times; i++) {
            const exit = yield* Effect.exit(limiter.acquire(String(c.key), { cost: c.cost }))
            checkExit("acquire", exit)
            if (Exit.isSuccess(exit) && exit.value) {
              admitted[c.key] += c.cost
              tookAtOnce(c.key, c.cost)
            }
          }
          break
        }
        case "consume": {
          touch(c.key)
          const exit = yield* Effect.exit(limiter.consume(String(c.key), { cost: c.cost }))
          checkExit("consume", exit)
          if (Exit.isSuccess(exit)) {
            checkDecision("consume", exit.value, specs[c.key])
            if (exit.value.allowed) {
              admitted[c.key] += c.cost
              tookAtOnce(c.key, c.cost)
            }
          }
          break
        }
        case "wait": {
          touch(c.key)
          const fiber = yield* Effect.forkChild(
            Effect.exit(limiter.wait(String(c.key), { cost: c.cost, maxWait: c.maxWait })),
            { startImmediately: true }
          )
          waiters.push([c.key, c.cost, fiber])
          break
        }
        case "jump":
          yield* TestClock.adjust(c.millis) // negative: backwards
          break
        case "set":
          yield* TestClock.setTime(c.to)
          break
        case "same":
          for (let i = 0; i < c.times; i++) {
            yield* TestClock.setTime(clock.currentTimeMillisUnsafe())
            for (let k = 0; k < KEYS; k++) {
              touch(k)
              const exit = yield* Effect.exit(limiter.acquire(String(k)))
              checkExit("acquire", exit)
              if (Exit.isSuccess(exit) && exit.value) {
                admitted[k] += 1
                tookAtOnce(k, 1)
              }
            }
          }
          break
      }
      highest = Math.max(highest, clock.currentTimeMillisUnsafe())
      yield* checkBounds(step)
    }
    // every waiter ends once the clock has moved far enough past the highest reading
    yield* TestClock.setTime(Math.max(highest, clock.currentTimeMillisUnsafe()) + 24 * 3_600_000)
    highest = clock.currentTimeMillisUnsafe()
    yield* checkBounds(commands.length)
    const left = waiters.filter(([, , fiber]) => !isDone(fiber)).length
    assert.strictEqual(left, 0, `${left} waiters never ended`)
  })

for (const fastPath of [true, false]) {
  describe(`clock faults (fastPath: ${fastPath})`, () => {
    it.effect(
      "random jumps of years, back before the epoch, and repeated instants mint nothing",
      () =>
        Effect.gen(function*() {
          const samples = fc.sample(fc.array(command, { minLength: 10, maxLength: 60 }), { numRuns: 150, seed })
          for (let run = 0; run < samples.length; run++) {
            const exit = yield* Effect.exit(Effect.scoped(runOne(samples[run], fastPath)))
            if (Exit.isFailure(exit)) {
              const message =
                `clock faults (fastPath: ${fastPath}) failed; replay with TOLLGATE_SEED=${seed}, run ${run}\n` +
                `commands: ${JSON.stringify(samples[run])}\n${Cause.pretty(exit.cause)}`
              console.error(message)
              assert.fail(message)
            }
          }
        }),
      { timeout: 60_000 }
    )

    it.effect("the same instant repeated 100,000 times admits exactly the capacity", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(1_000_000)
        const limiter = yield* RateLimiter.make({ fastPath, policy: policies[0] })
        let allowed = 0
        for (let i = 0; i < 100_000; i++) {
          if (i % 1000 === 0) yield* TestClock.setTime(1_000_000) // the clock "moves" to where it is
          if (yield* limiter.acquire("k")) allowed++
        }
        assert.strictEqual(allowed, 5)
        const d = yield* limiter.consume("k")
        assert.strictEqual(Duration.toMillis(d.retryAfter), 1000)
      }), { timeout: 60_000 })

    it.effect("a thousand years ahead fills the bucket to capacity, never above; back again adds nothing", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({
          fastPath,
          policy: policies[0],
          idleTimeout: Duration.days(365 * 2000)
        })
        assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
        const waiter = yield* Effect.forkChild(limiter.wait("k", { cost: 5 }), { startImmediately: true })
        yield* TestClock.adjust(1000 * YEAR) // the waiter is admitted on the way, at 5 s
        yield* Fiber.join(waiter)
        assert.strictEqual((yield* limiter.peek("k")).remaining, 5)
        assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
        assert.isFalse(yield* limiter.acquire("k"))
        // back to the epoch and before: nothing comes back until the clock
        // has caught up with the last admission
        for (const to of [0, -1000 * YEAR, 500 * YEAR]) {
          yield* TestClock.setTime(to)
          assert.isFalse(yield* limiter.acquire("k"))
          const d = yield* limiter.consume("k")
          assert.isFalse(d.allowed)
          assert.isTrue(Number.isFinite(Duration.toMillis(d.retryAfter)))
          assert.strictEqual(d.remaining, 0)
        }
        yield* TestClock.setTime(1000 * YEAR + 999)
        assert.isFalse(yield* limiter.acquire("k"))
        yield* TestClock.setTime(1000 * YEAR + 1000)
        assert.isTrue(yield* limiter.acquire("k"))
        assert.isFalse(yield* limiter.acquire("k"))
      }))

    it.effect("a clock at the end of the representable dates still decides, waits and refills", () =>
      Effect.gen(function*() {
        const end = 8.64e15 - 10_000 // 13 September 275760, minus ten seconds
        yield* TestClock.setTime(end)
        const limiter = yield* RateLimiter.make({ fastPath, policy: policies[0] })
        assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
        const waiter = yield* Effect.forkChild(limiter.wait("k", { cost: 2 }), { startImmediately: true })
        yield* settle()
        yield* TestClock.adjust(1999)
        assert.isFalse(isDone(waiter))
        yield* TestClock.adjust(1)
        yield* Fiber.join(waiter)
        yield* TestClock.setTime(-8.64e15) // and the earliest
        const d = yield* limiter.consume("k")
        assert.isFalse(d.allowed)
        assert.isTrue(Number.isFinite(Duration.toMillis(d.retryAfter)))
      }))
  })
}
