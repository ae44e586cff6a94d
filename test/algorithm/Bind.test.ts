/**
 * `bind` applies an algorithm to its configuration: every member of the rule
 * is the algorithm's own function on that configuration, an optional member
 * is there exactly when the algorithm has it, and a rule reconfigures by the
 * algorithm's own rule only towards a rule of the same algorithm.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Adaptive from "../../src/internal/algorithm/Adaptive.ts"
import { type Algorithm, bind, peekOutcome, type Rule, takeUpTo } from "../../src/internal/algorithm/Algorithm.ts"
import * as Concurrency from "../../src/internal/algorithm/Concurrency.ts"
import * as FixedWindow from "../../src/internal/algorithm/FixedWindow.ts"
import * as Gcra from "../../src/internal/algorithm/Gcra.ts"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"
import * as Unlimited from "../../src/internal/algorithm/Unlimited.ts"
import * as WarmUp from "../../src/internal/algorithm/WarmUp.ts"

interface Case {
  readonly name: string
  readonly algorithm: Algorithm<unknown, unknown>
  readonly config: unknown
  /** Another configuration of the same algorithm, to reconfigure to. */
  readonly other: unknown
}

const make = <C, S>(name: string, algorithm: Algorithm<C, S>, config: C, other: C): Case => ({
  name,
  algorithm: algorithm as Algorithm<unknown, unknown>,
  config,
  other
})

const cases: ReadonlyArray<Case> = [
  make(
    "token bucket",
    TokenBucket.algorithm,
    TokenBucket.config({ capacity: 5, tokens: 2, periodMillis: 100 }),
    TokenBucket.config({ capacity: 9, tokens: 1, periodMillis: 50 })
  ),
  make(
    "token bucket, starting with 1 (full is not initial)",
    TokenBucket.algorithm,
    TokenBucket.config({ capacity: 5, tokens: 2, periodMillis: 100, initialTokens: 1 }),
    TokenBucket.config({ capacity: 5, tokens: 2, periodMillis: 100 })
  ),
  make(
    "adaptive",
    Adaptive.algorithm,
    Adaptive.config({ capacity: 4, periodMillis: 100, initial: 3, floor: 1, ceiling: 6, latencyMillis: 20 }),
    Adaptive.config({ capacity: 2, periodMillis: 300, initial: 2, floor: 2, ceiling: 4 })
  ),
  make(
    "fixed window",
    FixedWindow.algorithm,
    FixedWindow.config({ limit: 4, windowMillis: 100 }),
    FixedWindow.config({ limit: 2, windowMillis: 30 })
  ),
  make(
    "fixed window, aligned",
    FixedWindow.algorithm,
    FixedWindow.config({ limit: 4, windowMillis: 100, align: true }),
    FixedWindow.config({ limit: 6, windowMillis: 100, align: true })
  ),
  make(
    "gcra",
    Gcra.algorithm,
    Gcra.config({ maxBurst: 3, count: 2, periodMillis: 100 }),
    Gcra.config({ maxBurst: 1, count: 1, periodMillis: 100 })
  ),
  make(
    "warming up",
    WarmUp.algorithm,
    WarmUp.config({ permits: 2, periodMillis: 100, warmupMillis: 300 }),
    WarmUp.config({ permits: 5, periodMillis: 100, warmupMillis: 300 })
  ),
  make(
    "concurrency",
    Concurrency.algorithm,
    Concurrency.config({ capacity: 3 }),
    Concurrency.config({ capacity: 1 })
  ),
  make("unlimited", Unlimited.algorithm, Unlimited.config, Unlimited.config)
]

const run = fc.array(
  fc.record({
    delta: fc.integer({ min: -50, max: 300 }),
    cost: fc.integer({ min: 0, max: 6 }),
    move: fc.constantFrom("step", "force", "release", "adapt", "forceAdd", "full")
  }),
  { maxLength: 25 }
)

describe("bind", () => {
  for (const k of cases) {
    const A = k.algorithm
    const c = k.config
    describe(k.name, () => {
      // built in each test, not when the file is collected: each test is the
      // one that runs the construction it checks
      it("has the algorithm's name and maxCost, and an optional member exactly when the algorithm has it", () => {
        const rule = bind(A, c)
        assert.strictEqual(rule.name, A.name)
        assert.strictEqual(rule.maxCost, A.maxCost(c))
        assert.strictEqual(rule.takeInPlace === undefined, A.takeInPlace === undefined)
        assert.strictEqual(rule.release === undefined, A.release === undefined)
        assert.strictEqual(rule.adapt === undefined, A.adapt === undefined)
        assert.strictEqual(rule.forceAdd === undefined, A.forceAdd === undefined)
        assert.strictEqual(rule.rate === undefined, A.rate === undefined)
        if (A.rate !== undefined) assert.deepStrictEqual(rule.rate!.of, A.rate.rateOf(c))
      })

      it("every member is the algorithm's own function on its configuration", () => {
        const rule = bind(A, c)
        fc.assert(
          fc.property(fc.integer({ min: -1e6, max: 1e6 }), run, (t0, moves) => {
            assert.deepStrictEqual(rule.initial(t0), A.initial(c, t0))
            assert.deepStrictEqual(rule.full(t0), A.full === undefined ? A.initial(c, t0) : A.full(c, t0))
            let s = A.initial(c, t0)
            let now = t0
            for (const { cost, delta, move } of moves) {
              now += delta
              assert.deepStrictEqual(rule.step(s, now, cost), A.step(c, s, now, cost))
              assert.deepStrictEqual(rule.peek(s, now, cost), peekOutcome(A, c, s, now, cost))
              assert.deepStrictEqual(rule.takeUpTo(s, now, cost), takeUpTo(A, c, s, now, cost))
              assert.strictEqual(rule.waitTime(s, now, 2, cost), A.waitTime(c, s, now, 2, cost))
              assert.strictEqual(rule.settledAt(s), A.settledAt(c, s))
              assert.deepStrictEqual(rule.force(s, now, cost), A.force(c, s, now, cost))
              if (A.takeInPlace !== undefined) {
                const mine = structuredClone(s)
                const theirs = structuredClone(s)
                assert.strictEqual(rule.takeInPlace!(mine, now, cost), A.takeInPlace(c, theirs, now, cost))
                assert.deepStrictEqual(mine, theirs)
              }
              if (A.release !== undefined) {
                assert.deepStrictEqual(rule.release!(s, now, cost), A.release(c, s, now, cost))
              }
              if (A.forceAdd !== undefined) {
                assert.deepStrictEqual(rule.forceAdd!(s, now, cost), A.forceAdd(c, s, now, cost))
              }
              if (A.adapt !== undefined) {
                for (const signal of ["ok", "throttled", "latency"] as const) {
                  assert.deepStrictEqual(rule.adapt!(s, now, signal, 40 * cost), A.adapt(c, s, now, signal, 40 * cost))
                }
              }
              if (A.rate !== undefined) {
                const from = A.rate.rateOf(k.other)
                assert.deepStrictEqual(rule.rate!.carry(from, s, now), A.rate.carryRate(c, from, s, now))
              }
              for (const carry of ["reset", "proportional", "as-is"] as const) {
                assert.deepStrictEqual(
                  rule.reconfigure(s, bind(A, k.other), now, carry),
                  A.reconfigure === undefined ? undefined : A.reconfigure(c, s, k.other, now, carry)
                )
              }
              s = move === "force"
                ? A.force(c, s, now, cost)
                : move === "release" && A.release !== undefined
                ? A.release(c, s, now, cost)
                : move === "adapt" && A.adapt !== undefined
                ? A.adapt(c, s, now, "throttled", 10 * cost)
                : move === "forceAdd" && A.forceAdd !== undefined
                ? A.forceAdd(c, s, now, cost)
                : move === "full"
                ? rule.full(now)
                : A.step(c, s, now, cost).state
            }
          }),
          { numRuns: 60 }
        )
      })

      it("reconfigures by its own rule only towards a rule of the same algorithm", () => {
        const rule = bind(A, c)
        const s = A.step(c, A.initial(c, 0), 10, 1).state
        for (const other of cases) {
          if (other.algorithm === A) continue
          assert.strictEqual(rule.reconfigure(s, bind(other.algorithm, other.config), 20, "as-is"), undefined)
        }
        // a rule built elsewhere, with the same fields, is not one of bind's
        const lookalike: Rule = { ...bind(A, k.other) } as Rule
        assert.strictEqual(rule.reconfigure(s, lookalike, 20, "as-is"), undefined)
      })

      it("withWindow: a rule of the algorithm's configuration with that window, when it has a window to set", () => {
        const rule = bind(A, c)
        for (const millis of [1, 250, 5000]) {
          const config = A.withWindow?.(c, millis)
          const windowed = rule.withWindow(millis)
          if (config === undefined) assert.strictEqual(windowed, undefined)
          else {
            assert.notStrictEqual(windowed, undefined)
            assert.strictEqual(windowed!.name, A.name)
            for (const t of [0, millis - 1, millis, 2 * millis]) {
              let viaRule = windowed!.initial(0)
              let direct = A.initial(config, 0)
              for (const now of [0, 0, 0, 0, 0, t, t]) {
                const a = windowed!.step(viaRule, now, 1)
                const b = A.step(config, direct, now, 1)
                assert.deepStrictEqual(a, b)
                viaRule = a.state
                direct = b.state
              }
            }
          }
        }
        // the fixed window sets one unless aligned (the clock's windows)
        if (A === (FixedWindow.algorithm as Algorithm<unknown, unknown>)) {
          assert.strictEqual(rule.withWindow(250) === undefined, (c as FixedWindow.Config).align)
        }
      })
    })
  }
})
