import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"
import { least } from "./support.ts"

// The formal model, in exact integers: the level (tokens × period) as of the
// last admission, growing by `tokens` a millisecond up to the capacity. Time
// before the last admission counts as the last admission.
interface Params {
  readonly capacity: number
  readonly tokens: number
  readonly period: number
  readonly initial: number
}
interface Model {
  readonly level: bigint
  readonly at: number
}
const full = (p: Params): bigint => BigInt(p.capacity) * BigInt(p.period)
const levelOf = (p: Params, m: Model, now: number): bigint => {
  const grown = m.level + BigInt(Math.max(0, now - m.at)) * BigInt(p.tokens)
  return grown < full(p) ? grown : full(p)
}
const admit = (p: Params, m: Model, now: number, cost: number): Model | undefined => {
  const level = levelOf(p, m, now)
  const need = BigInt(cost) * BigInt(p.period)
  return level >= need ? { level: level - need, at: Math.max(now, m.at) } : undefined
}

const params: fc.Arbitrary<Params> = fc
  .record({
    capacity: fc.integer({ min: 1, max: 20 }),
    tokens: fc.integer({ min: 1, max: 5 }),
    period: fc.integer({ min: 1, max: 1000 })
  })
  .chain((p) => fc.integer({ min: 0, max: p.capacity }).map((initial) => ({ ...p, initial })))

const runs = (p: Params) => {
  const scale = Math.ceil((p.capacity * p.period) / p.tokens)
  const delta = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: scale }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 2, arbitrary: fc.integer({ min: -scale, max: -1 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 1e12 }) }
  )
  return fc.array(fc.record({ delta, cost: fc.integer({ min: 1, max: p.capacity + 1 }) }), { maxLength: 40 })
}

const configOf = (p: Params) =>
  TokenBucket.config({ capacity: p.capacity, tokens: p.tokens, periodMillis: p.period, initialTokens: p.initial })

describe("TokenBucket", () => {
  it("agrees exactly with the formal model, figures included", () => {
    fc.assert(
      fc.property(
        params.chain((p) => fc.tuple(fc.constant(p), fc.integer({ min: 0, max: 2 ** 40 }), runs(p))),
        ([p, t0, run]) => {
          const c = configOf(p)
          let s = TokenBucket.initial(c, t0)
          let m: Model = { level: BigInt(p.initial) * BigInt(p.period), at: t0 }
          let now = t0
          for (const { cost, delta } of run) {
            now += delta
            const o = TokenBucket.step(c, s, now, cost)
            const next = admit(p, m, now, cost)
            assert.strictEqual(o.allowed, next !== undefined)
            const after = next ?? m
            const bound = Math.max(0, after.at - now) + Math.ceil((p.capacity * p.period) / p.tokens) + 1
            assert.strictEqual(o.remaining, Number(levelOf(p, after, now) / BigInt(p.period)))
            assert.strictEqual(
              o.retryAfter,
              next !== undefined
                ? 0
                : cost > p.capacity
                ? Infinity
                : least((r) => admit(p, m, now + r, cost) !== undefined, bound)
            )
            assert.strictEqual(o.resetAfter, least((r) => levelOf(p, after, now + r) === full(p), bound))
            assert.strictEqual(o.limit, p.capacity)
            s = o.state
            m = after
          }
        }
      ),
      { numRuns: 500 }
    )
  })

  it("never admits more than b + r*T in any window of length T", () => {
    fc.assert(
      fc.property(
        params.chain((p) => fc.tuple(fc.constant(p), fc.integer({ min: 0, max: 2 ** 40 }), runs(p))),
        ([p, t0, run]) => {
          const c = configOf(p)
          let s = TokenBucket.initial(c, t0)
          let now = t0
          // Admissions at the limiter's effective time (it never runs backwards).
          const admitted: Array<{ readonly t: number; readonly cost: number }> = []
          for (const { cost, delta } of run) {
            now += delta
            const o = TokenBucket.step(c, s, now, cost)
            if (o.allowed) admitted.push({ t: Math.max(now, s.at), cost })
            s = o.state
          }
          for (let i = 0; i < admitted.length; i++) {
            let sum = 0
            for (let j = i; j < admitted.length; j++) {
              sum += admitted[j].cost
              const T = admitted[j].t - admitted[i].t
              assert.isTrue(sum * p.period <= p.capacity * p.period + p.tokens * T, `${sum} in ${T} ms`)
            }
          }
        }
      ),
      { numRuns: 500 }
    )
  })

  it("starts full, or at initialTokens", () => {
    const c = TokenBucket.config({ capacity: 3, tokens: 1, periodMillis: 1000 })
    assert.strictEqual(TokenBucket.step(c, TokenBucket.initial(c, 0), 0, 3).allowed, true)
    const empty = TokenBucket.config({ capacity: 3, tokens: 1, periodMillis: 1000, initialTokens: 0 })
    const o = TokenBucket.step(empty, TokenBucket.initial(empty, 0), 0, 1)
    assert.strictEqual(o.allowed, false)
    assert.strictEqual(o.retryAfter, 1000)
    assert.strictEqual(o.resetAfter, 3000)
  })

  it("denies a cost above capacity forever, taking nothing", () => {
    const c = TokenBucket.config({ capacity: 3, tokens: 1, periodMillis: 1000 })
    const s = TokenBucket.initial(c, 0)
    const o = TokenBucket.step(c, s, 0, 4)
    assert.strictEqual(o.allowed, false)
    assert.strictEqual(o.retryAfter, Infinity)
    assert.strictEqual(o.state, s)
    assert.strictEqual(o.remaining, 3)
    assert.strictEqual(TokenBucket.waitTime(c, s, 0, 0, 4), Infinity)
    assert.strictEqual(TokenBucket.algorithm.maxCost(c), 3)
  })

  it("never mints tokens from a clock that goes back and forth (golang/go#56287)", () => {
    const c = TokenBucket.config({ capacity: 1, tokens: 1, periodMillis: 1000 })
    let s = TokenBucket.step(c, TokenBucket.initial(c, 10_000), 10_000, 1).state
    let admitted = 0
    // Alternate a millisecond before and after the anchor, 2000 times.
    for (let i = 0; i < 2000; i++) {
      const o = TokenBucket.step(c, s, i % 2 === 0 ? 9_999 : 10_001, 1)
      if (o.allowed) admitted++
      s = o.state
    }
    assert.strictEqual(admitted, 0)
    const back = TokenBucket.step(c, s, 5_000, 1)
    assert.strictEqual(back.retryAfter, 6_000)
  })

  it("is exact at 1000 per hour and at half a token per second", () => {
    const hourly = TokenBucket.config({ capacity: 1000, tokens: 1000, periodMillis: 3_600_000, initialTokens: 0 })
    const s = TokenBucket.initial(hourly, 0)
    assert.strictEqual(TokenBucket.step(hourly, s, 3_599, 1).allowed, false)
    assert.strictEqual(TokenBucket.step(hourly, s, 3_600, 1).allowed, true)
    assert.strictEqual(TokenBucket.step(hourly, s, 3_600_000, 1000).allowed, true)
    const half = TokenBucket.config({ capacity: 1, tokens: 0.5, periodMillis: 1000, initialTokens: 0 })
    const h = TokenBucket.initial(half, 0)
    assert.strictEqual(TokenBucket.step(half, h, 0, 1).retryAfter, 2000)
    assert.strictEqual(TokenBucket.step(half, h, 1999, 1).allowed, false)
    assert.strictEqual(TokenBucket.step(half, h, 2000, 1).allowed, true)
  })

  it("handles rates above one per millisecond and huge jumps", () => {
    const fast = TokenBucket.config({ capacity: 10_000, tokens: 8_000, periodMillis: 1000, initialTokens: 0 })
    const s = TokenBucket.initial(fast, 0)
    assert.strictEqual(TokenBucket.step(fast, s, 1, 8).allowed, true)
    assert.strictEqual(TokenBucket.step(fast, s, 1, 9).allowed, false)
    const far = TokenBucket.step(fast, s, Number.MAX_SAFE_INTEGER, 10_000)
    assert.strictEqual(far.allowed, true)
    assert.strictEqual(far.remaining, 0)
    assert.strictEqual(far.resetAfter, 1250)
  })
})
