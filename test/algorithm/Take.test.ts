/**
 * `takeInPlace` is `step` without the figures: the same answer, and the same
 * state written in place (or the state untouched when denied).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Adaptive from "../../src/internal/algorithm/Adaptive.ts"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"
import * as Unlimited from "../../src/internal/algorithm/Unlimited.ts"

describe("takeInPlace agrees with step", () => {
  it("token bucket, greedy and interval, including backwards clocks", () => {
    fc.assert(
      fc.property(
        fc.record({
          capacity: fc.integer({ min: 1, max: 50 }),
          tokens: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.double({ min: 0.01, max: 5, noNaN: true })),
          period: fc.integer({ min: 1, max: 5000 }),
          interval: fc.boolean(),
          aligned: fc.boolean(),
          steps: fc.array(
            fc.record({ dt: fc.integer({ min: -3000, max: 6000 }), cost: fc.integer({ min: 1, max: 50 }) }),
            {
              maxLength: 50
            }
          )
        }),
        ({ aligned, capacity, interval, period, steps, tokens }) => {
          const c = TokenBucket.config({ capacity, tokens, periodMillis: period, interval, aligned })
          const algorithm = TokenBucket.algorithm
          let s = algorithm.initial(c, 10_000)
          let now = 10_000
          for (const { cost, dt } of steps) {
            now += dt
            const stepped = algorithm.step(c, s, now, cost)
            const owned = { ...s }
            const admitted = algorithm.takeInPlace!(c, owned, now, cost)
            assert.strictEqual(admitted, stepped.allowed)
            assert.deepStrictEqual(owned, stepped.allowed ? stepped.state : s)
            s = stepped.state
          }
        }
      ),
      { numRuns: 500 }
    )
  })

  it("adaptive, at the rate its signals set, including backwards clocks", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            dt: fc.integer({ min: -300, max: 600 }),
            cost: fc.integer({ min: 0, max: 6 }),
            signal: fc.constantFrom(undefined, "ok" as const, "throttled" as const)
          }),
          { maxLength: 50 }
        ),
        (steps) => {
          const c = Adaptive.config({ capacity: 5, periodMillis: 100, initial: 2, floor: 1, ceiling: 8 })
          const algorithm = Adaptive.algorithm
          let s = algorithm.initial(c, 10_000)
          let now = 10_000
          for (const { cost, dt, signal } of steps) {
            now += dt
            if (signal !== undefined) s = Adaptive.adapt(c, s, now, signal, 0)
            const stepped = algorithm.step(c, s, now, cost)
            const owned = { ...s }
            assert.strictEqual(algorithm.takeInPlace!(c, owned, now, cost), stepped.allowed)
            assert.deepStrictEqual(owned, stepped.allowed ? stepped.state : s)
            s = stepped.state
          }
        }
      ),
      { numRuns: 300 }
    )
  })

  it("unlimited: every take is admitted, as every step is", () => {
    const s = Unlimited.algorithm.initial(Unlimited.config, 0)
    for (const cost of [0, 1, 1e9]) {
      assert.isTrue(Unlimited.algorithm.step(Unlimited.config, s, 0, cost).allowed)
      assert.isTrue(Unlimited.algorithm.takeInPlace!(Unlimited.config, s, 0, cost))
    }
  })
})
