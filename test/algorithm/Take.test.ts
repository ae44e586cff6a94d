/**
 * `takeInPlace` is `step` without the figures: the same answer, and the same
 * state written in place (or the state untouched when denied).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"

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
})
