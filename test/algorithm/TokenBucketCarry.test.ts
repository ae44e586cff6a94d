/**
 * A token bucket carried over to another policy (reconfigure) or another
 * rate (x/time/rate's SetLimit: rate.withRate and rate.carryRate), and the
 * options that only show at the edges: a first refill still to come, an
 * unaligned interval's own phase, a surplus kept through a refund.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"

// Tokens (not scaled) of a greedy bucket: `tokens` as of `at`, refilled at
// `rate` per `period` up to `capacity`; time before `at` adds nothing, and a
// surplus above capacity (a forced add) neither grows nor shrinks.
interface Params {
  readonly capacity: number
  readonly tokens: number
  readonly period: number
  readonly initial: number
}
interface Model {
  readonly tokens: number
  readonly at: number
}
const tokensOf = (p: Params, m: Model, now: number): number =>
  m.tokens >= p.capacity ? m.tokens : Math.min(p.capacity, m.tokens + (Math.max(0, now - m.at) * p.tokens) / p.period)

const params: fc.Arbitrary<Params> = fc
  .record({
    capacity: fc.integer({ min: 1, max: 20 }),
    tokens: fc.integer({ min: 1, max: 5 }),
    period: fc.integer({ min: 1, max: 1000 })
  })
  .chain((p) => fc.integer({ min: 0, max: p.capacity }).map((initial) => ({ ...p, initial })))

const configOf = (p: Params) =>
  TokenBucket.config({ capacity: p.capacity, tokens: p.tokens, periodMillis: p.period, initialTokens: p.initial })

const close = (a: number, b: number) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b))

const moves = fc.array(
  fc.record({
    delta: fc.integer({ min: -2000, max: 3000 }),
    cost: fc.integer({ min: 0, max: 21 }),
    add: fc.boolean()
  }),
  { maxLength: 12 }
)

describe("TokenBucket carried over", () => {
  it("reconfigure: as-is keeps the tokens, proportional the fraction, both capped; reset is a new key", () => {
    fc.assert(
      fc.property(
        params,
        params,
        fc.constantFrom("reset" as const, "proportional" as const, "as-is" as const),
        fc.integer({ min: -1e6, max: 1e6 }),
        moves,
        fc.integer({ min: -2000, max: 3000 }),
        (p, q, carry, t0, run, gap) => {
          const from = configOf(p)
          const to = configOf(q)
          let s = TokenBucket.initial(from, t0)
          let m: Model = { tokens: p.initial, at: t0 }
          let now = t0
          for (const { add, cost, delta } of run) {
            now += delta
            if (add) {
              // a forced add: above capacity, kept
              s = TokenBucket.forceAdd(from, s, now, cost)
              m = { tokens: tokensOf(p, m, now) + cost, at: Math.max(now, m.at) }
            } else {
              const o = TokenBucket.step(from, s, now, cost)
              if (o.allowed) m = { tokens: tokensOf(p, m, now) - cost, at: Math.max(now, m.at) }
              s = o.state
            }
            assert.isTrue(close(TokenBucket.tokensAt(from, s, now), tokensOf(p, m, now)))
          }
          now += gap
          const held = tokensOf(p, m, now)
          const carried = TokenBucket.reconfigure(from, s, to, now, carry)
          const expected: Model = carry === "reset"
            ? { tokens: q.initial, at: now }
            : {
              tokens: Math.min(q.capacity, carry === "as-is" ? held : (held * q.capacity) / p.capacity),
              at: Math.max(now, m.at)
            }
          assert.strictEqual(carried.at, expected.at)
          for (const later of [0, 1, q.period, 5 * q.period, q.capacity * q.period]) {
            const t = expected.at + later
            assert.isTrue(
              close(TokenBucket.tokensAt(to, carried, t), tokensOf(q, expected, t)),
              `${carry}: ${TokenBucket.tokensAt(to, carried, t)} vs ${tokensOf(q, expected, t)} at +${later}`
            )
          }
        }
      ),
      { numRuns: 400 }
    )
  })

  it("reconfiguring a key to its own policy changes nothing", () => {
    fc.assert(
      fc.property(params, fc.integer({ min: 0, max: 1e6 }), moves, (p, t0, run) => {
        const c = configOf(p)
        let s = TokenBucket.initial(c, t0)
        let now = t0
        for (const { cost, delta } of run) {
          now += Math.abs(delta)
          s = TokenBucket.step(c, s, now, cost).state
        }
        for (const carry of ["proportional", "as-is"] as const) {
          const same = TokenBucket.reconfigure(c, s, c, now, carry)
          assert.strictEqual(same.level, TokenBucket.step(c, s, now, 0).state.level)
        }
      })
    )
  })

  it("reconfiguring to its own policy changes nothing at a fractional rate either, proportional included", () => {
    // 0.3 tokens per 3 ms: a level of 3.3 at 11 ms; (3.3 × 6) / 6 is not 3.3
    const c = TokenBucket.config({ capacity: 2, tokens: 0.3, periodMillis: 3, initialTokens: 0 })
    const s = TokenBucket.initial(c, 0)
    for (const carry of ["proportional", "as-is"] as const) {
      const same = TokenBucket.reconfigure(c, s, c, 11, carry)
      assert.deepStrictEqual(same, TokenBucket.step(c, s, 11, 0).state, carry)
      // 3.3 + 9 × 0.3 is the 6 that 2 tokens need
      assert.isTrue(TokenBucket.step(c, same, 20, 2).allowed, carry)
      assert.isTrue(TokenBucket.rate.carryRate(c, TokenBucket.rate.rateOf(c), s, 11).level === same.level)
    }
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.double({ min: 0.01, max: 5, noNaN: true }),
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 1, max: 5000 }),
        (capacity, tokens, period, t) => {
          const f = TokenBucket.config({ capacity, tokens, periodMillis: period, initialTokens: 0 })
          const fresh = TokenBucket.initial(f, 0)
          const there = TokenBucket.step(f, fresh, t, 0).state
          assert.deepStrictEqual(TokenBucket.reconfigure(f, fresh, f, t, "proportional"), there)
          assert.deepStrictEqual(TokenBucket.reconfigure(f, fresh, f, t, "as-is"), there)
        }
      )
    )
  })

  // Each shape of refill a rate change must keep: greedy, interval from the
  // key's own phase, interval on the clock's periods, interval from a first
  // refill (with Bucket4j's adaptive initial tokens or without).
  const shapes = [
    {},
    { interval: true },
    { interval: true, aligned: true },
    { interval: true, firstRefill: 5000 },
    { interval: true, firstRefill: 5000, adaptive: true }
  ] as const

  it("withRate is the same policy at another rate, whatever its shape of refill", () => {
    for (const shape of shapes) {
      const c = TokenBucket.config({ capacity: 7, tokens: 2, periodMillis: 300, initialTokens: 3, ...shape })
      assert.deepStrictEqual(
        TokenBucket.rate.withRate(c, 5, 700),
        TokenBucket.config({ capacity: 7, tokens: 5, periodMillis: 700, initialTokens: 3, ...shape })
      )
      assert.deepStrictEqual(TokenBucket.rate.rateOf(c), [2, 300])
    }
  })

  it("carryRate keeps the tokens the bucket holds now at the old rate (and its shape), then runs at the new one", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...shapes),
        fc.record({
          tokens: fc.integer({ min: 1, max: 4 }),
          period: fc.integer({ min: 10, max: 500 }),
          newTokens: fc.integer({ min: 1, max: 4 }),
          newPeriod: fc.integer({ min: 10, max: 500 })
        }),
        fc.integer({ min: -3000, max: 8000 }),
        moves,
        (shape, r, t0, run) => {
          const old = TokenBucket.config({ capacity: 6, tokens: r.tokens, periodMillis: r.period, ...shape })
          const next = TokenBucket.config({ capacity: 6, tokens: r.newTokens, periodMillis: r.newPeriod, ...shape })
          let s = TokenBucket.initial(old, t0)
          let now = t0
          for (const { cost, delta } of run) {
            now += delta
            s = TokenBucket.step(old, s, now, cost).state
          }
          const carried = TokenBucket.rate.carryRate(next, TokenBucket.rate.rateOf(old), s, now)
          const held = Math.min(6, TokenBucket.tokensAt(old, s, now))
          assert.isTrue(close(TokenBucket.tokensAt(next, carried, now), held), `${JSON.stringify(shape)} at ${now}`)
          assert.strictEqual(carried.at, Math.max(now, s.at))
        }
      ),
      { numRuns: 400 }
    )
  })

  it("a rate change before the first refill refills nothing before it", () => {
    const old = TokenBucket.config({ capacity: 4, tokens: 1, periodMillis: 100, interval: true, firstRefill: 1000 })
    const next = TokenBucket.rate.withRate(old, 3, 100)
    const spent = TokenBucket.step(old, TokenBucket.initial(old, 500), 500, 4).state
    const carried = TokenBucket.rate.carryRate(next, TokenBucket.rate.rateOf(old), spent, 950)
    assert.strictEqual(TokenBucket.tokensAt(next, carried, 950), 0)
    assert.strictEqual(TokenBucket.tokensAt(next, carried, 999), 0)
    assert.strictEqual(TokenBucket.tokensAt(next, carried, 1000), 3)
  })

  it("a rate change on the clock's periods at times before 0 counts the periods that ended", () => {
    const old = TokenBucket.config({ capacity: 9, tokens: 1, periodMillis: 100, interval: true, aligned: true })
    const next = TokenBucket.rate.withRate(old, 2, 100)
    const spent = TokenBucket.step(old, TokenBucket.initial(old, -1000), -1000, 9).state
    // -900 ... -500: five periods of the old rate, one token each
    const carried = TokenBucket.rate.carryRate(next, TokenBucket.rate.rateOf(old), spent, -500)
    assert.strictEqual(TokenBucket.tokensAt(next, carried, -500), 5)
    assert.strictEqual(TokenBucket.tokensAt(next, carried, -400), 7)
  })
})

describe("TokenBucket at the edges of its options", () => {
  it("before the first refill, no period ends: a key seen early waits for it", () => {
    const c = TokenBucket.config({ capacity: 4, tokens: 3, periodMillis: 100, interval: true, firstRefill: 1000 })
    const spent = TokenBucket.step(c, TokenBucket.initial(c, 500), 500, 4).state
    const early = TokenBucket.step(c, spent, 950, 1)
    assert.isFalse(early.allowed)
    assert.strictEqual(early.retryAfter, 50)
    assert.isFalse(TokenBucket.step(c, spent, 999, 1).allowed)
    const first = TokenBucket.step(c, spent, 1000, 3)
    assert.isTrue(first.allowed)
    assert.strictEqual(first.remaining, 0)
  })

  it("an interval without alignment keeps the key's own phase", () => {
    const c = TokenBucket.config({ capacity: 1, tokens: 1, periodMillis: 100, interval: true })
    const spent = TokenBucket.step(c, TokenBucket.initial(c, 50), 50, 1).state
    assert.isFalse(TokenBucket.step(c, spent, 100, 1).allowed)
    assert.strictEqual(TokenBucket.step(c, spent, 100, 1).retryAfter, 50)
    assert.isFalse(TokenBucket.step(c, spent, 149, 1).allowed)
    assert.isTrue(TokenBucket.step(c, spent, 150, 1).allowed)
  })

  it("adaptive initial tokens need a first refill: without one a key starts at initialTokens, at any time", () => {
    const c = TokenBucket.config({ capacity: 4, tokens: 3, periodMillis: 100, adaptive: true })
    for (const now of [-1_000_000, -50, 0, 50]) {
      assert.strictEqual(TokenBucket.tokensAt(c, TokenBucket.initial(c, now), now), 4)
    }
    const interval = TokenBucket.config({ capacity: 4, tokens: 3, periodMillis: 100, interval: true, adaptive: true })
    assert.strictEqual(TokenBucket.tokensAt(interval, TokenBucket.initial(interval, -50), -50), 4)
  })

  it("a refund on top of a surplus keeps the surplus", () => {
    const c = TokenBucket.config({ capacity: 5, tokens: 1, periodMillis: 100 })
    const over = TokenBucket.forceAdd(c, TokenBucket.initial(c, 0), 0, 3)
    assert.strictEqual(TokenBucket.tokensAt(c, over, 0), 8)
    const refunded = TokenBucket.release(c, over, 10, 2)
    assert.strictEqual(TokenBucket.tokensAt(c, refunded, 10), 8)
    assert.strictEqual(TokenBucket.step(c, refunded, 10, 0).remaining, 8)
  })
})
