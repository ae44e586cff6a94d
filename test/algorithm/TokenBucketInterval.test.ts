/**
 * Interval refill (whole periods at once) against a brute-force model that
 * walks time one millisecond at a time and adds the tokens at each period's
 * end.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"

interface Model {
  tokens: number
  t: number
}

const boundary = (t: number, origin: number, period: number, aligned: boolean) =>
  aligned ? t % period === 0 : (t - origin) % period === 0

interface Params {
  readonly capacity: number
  readonly tokens: number
  readonly period: number
  readonly aligned: boolean
}

// Advances the model to `now`, one millisecond at a time (never backwards).
// It reads the parameters it was drawn with, never the configuration built
// from them (a mistake in building it must show).
const advance = (m: Model, now: number, origin: number, p: Params) => {
  while (m.t < now) {
    m.t++
    if (boundary(m.t, origin, p.period, p.aligned)) m.tokens = Math.min(p.capacity, m.tokens + p.tokens)
  }
}

describe("TokenBucket interval refill", () => {
  it("matches the millisecond-by-millisecond model, and retryAfter is exact", () => {
    fc.assert(
      fc.property(
        fc.record({
          capacity: fc.integer({ min: 1, max: 6 }),
          tokens: fc.integer({ min: 1, max: 4 }),
          period: fc.integer({ min: 1, max: 40 }),
          aligned: fc.boolean(),
          start: fc.integer({ min: 0, max: 100 }),
          steps: fc.array(fc.record({ dt: fc.integer({ min: -20, max: 90 }), cost: fc.integer({ min: 1, max: 6 }) }), {
            maxLength: 40
          })
        }),
        ({ aligned, capacity, period, start, steps, tokens }) => {
          const c = TokenBucket.config({ capacity, tokens, periodMillis: period, interval: true, aligned })
          const p: Params = { capacity, tokens, period, aligned }
          let s = TokenBucket.initial(c, start)
          const model: Model = { tokens: capacity, t: start }
          let now = start
          for (const { cost, dt } of steps) {
            now = Math.max(0, now + dt)
            const need = Math.min(cost, capacity)
            // The model, like the bucket, only moves on an admission: a denial
            // (or time running backwards) leaves it where it was.
            const seen = { ...model }
            advance(seen, now, start, p)
            const out = TokenBucket.step(c, s, now, need)
            const want = seen.tokens >= need
            assert.strictEqual(out.allowed, want, JSON.stringify({ now, model, s }))
            if (want) {
              model.tokens = seen.tokens - need
              model.t = seen.t
            } else {
              // exact: admitted at now + retryAfter, not a millisecond earlier
              const late = { ...model }
              advance(late, now + out.retryAfter, start, p)
              assert.isAtLeast(late.tokens, need, `retryAfter ${out.retryAfter} too short`)
              const early = { ...model }
              advance(early, now + out.retryAfter - 1, start, p)
              assert.isBelow(early.tokens, need, `retryAfter ${out.retryAfter} too long`)
            }
            assert.isFalse(Number.isNaN(out.remaining) || Number.isNaN(out.retryAfter) || Number.isNaN(out.resetAfter))
            s = out.state
          }
        }
      ),
      { numRuns: 500 }
    )
  })

  it("adds nothing until a whole period ends, then all of it", () => {
    const c = TokenBucket.config({ capacity: 10, tokens: 5, periodMillis: 1000, interval: true })
    let s = TokenBucket.step(c, TokenBucket.initial(c, 0), 0, 10).state
    assert.isFalse(TokenBucket.step(c, s, 999, 1).allowed)
    const at1000 = TokenBucket.step(c, s, 1000, 5)
    assert.isTrue(at1000.allowed)
    s = at1000.state
    assert.strictEqual(TokenBucket.step(c, s, 1500, 1).retryAfter, 500)
  })

  it("aligned periods end at multiples of the period on the clock", () => {
    const c = TokenBucket.config({ capacity: 10, tokens: 10, periodMillis: 1000, interval: true, aligned: true })
    const s = TokenBucket.step(c, TokenBucket.initial(c, 1700), 1700, 10).state
    assert.strictEqual(TokenBucket.step(c, s, 1800, 1).retryAfter, 200)
    assert.isTrue(TokenBucket.step(c, s, 2000, 10).allowed)
  })
})
