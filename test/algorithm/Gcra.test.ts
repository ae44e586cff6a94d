import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Gcra from "../../src/internal/algorithm/Gcra.ts"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"

// The formal model: the theoretical arrival time itself, as an absolute time
// in exact integers of 1/count ms (so the emission interval T is `period`
// such units and τ is `period × (maxBurst + 1)`). The clock is the latest
// admitted time: an earlier `now` counts as that.
interface Params {
  readonly maxBurst: number
  readonly count: number
  readonly period: number
}
interface Model {
  readonly tat: bigint
  readonly clock: number
}
const scaled = (p: Params, t: number): bigint => BigInt(t) * BigInt(p.count)
const tau = (p: Params): bigint => BigInt(p.period) * BigInt(p.maxBurst + 1)
const ceilDiv = (a: bigint, b: bigint): number => Number(a <= 0n ? 0n : (a + b - 1n) / b)

interface Figures {
  readonly allowed: boolean
  readonly model: Model
  readonly remaining: number
  readonly retryAfter: number
  readonly resetAfter: number
}

// GCRA as redis-cell states it, with the figures it reports (in ms, rounded up).
const throttle = (p: Params, m: Model, now: number, cost: number): Figures => {
  const t = Math.max(now, m.clock)
  const nowS = scaled(p, t)
  const base = m.tat > nowS ? m.tat : nowS
  const newTat = base + BigInt(cost) * BigInt(p.period)
  const count = BigInt(p.count)
  const T = BigInt(p.period)
  const allowAt = newTat - tau(p)
  if (allowAt <= nowS) {
    return {
      allowed: true,
      model: { tat: newTat, clock: t },
      remaining: Number((tau(p) - (newTat - nowS)) / T),
      retryAfter: 0,
      // TAT' − now, from the caller's own clock
      resetAfter: ceilDiv(newTat - scaled(p, now), count)
    }
  }
  return {
    allowed: false,
    model: m,
    remaining: Number((tau(p) - (base - nowS)) / T),
    retryAfter: BigInt(cost) * T > tau(p) ? Infinity : ceilDiv(allowAt - scaled(p, now), count),
    resetAfter: m.tat > nowS ? ceilDiv(m.tat - scaled(p, now), count) : 0
  }
}

const params: fc.Arbitrary<Params> = fc.record({
  maxBurst: fc.integer({ min: 0, max: 10 }),
  count: fc.oneof(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1000, max: 100_000 })),
  period: fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.constantFrom(1000, 60_000, 3_600_000))
})

const runs = (p: Params) => {
  const scale = Math.max(1, Math.ceil(((p.maxBurst + 1) * p.period) / p.count))
  const delta = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: scale }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 2, arbitrary: fc.integer({ min: -scale, max: -1 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 1e12 }) }
  )
  return fc.array(fc.record({ delta, cost: fc.integer({ min: 1, max: p.maxBurst + 2 }) }), { maxLength: 40 })
}

const cases = params.chain((p) => fc.tuple(fc.constant(p), fc.integer({ min: 0, max: 2 ** 42 }), runs(p)))

const configOf = (p: Params) => Gcra.config({ maxBurst: p.maxBurst, count: p.count, periodMillis: p.period })

describe("Gcra", () => {
  it("agrees exactly with the TAT model, redis-cell's figures included", () => {
    fc.assert(
      fc.property(cases, ([p, t0, run]) => {
        const c = configOf(p)
        let s = Gcra.initial(c, t0)
        let m: Model = { tat: scaled(p, t0), clock: t0 }
        let now = t0
        for (const { cost, delta } of run) {
          now += delta
          const o = Gcra.step(c, s, now, cost)
          const f = throttle(p, m, now, cost)
          assert.deepStrictEqual(
            [o.allowed, o.remaining, o.retryAfter, o.resetAfter, o.limit],
            [f.allowed, f.remaining, f.retryAfter, f.resetAfter, p.maxBurst + 1]
          )
          // The state is the same arrival time.
          assert.strictEqual(
            scaled(p, o.state.at) + BigInt(o.state.ahead),
            f.model.tat > scaled(p, o.state.at) ? f.model.tat : scaled(p, o.state.at)
          )
          s = o.state
          m = f.model
        }
      }),
      { numRuns: 500 }
    )
  })

  it("is a token bucket of capacity maxBurst + 1 refilled at count per period", () => {
    fc.assert(
      fc.property(cases, ([p, t0, run]) => {
        const c = configOf(p)
        const b = TokenBucket.config({ capacity: p.maxBurst + 1, tokens: p.count, periodMillis: p.period })
        let s = Gcra.initial(c, t0)
        let u = TokenBucket.initial(b, t0)
        let now = t0
        for (const { cost, delta } of run) {
          now += delta
          const o = Gcra.step(c, s, now, cost)
          const v = TokenBucket.step(b, u, now, cost)
          assert.deepStrictEqual(
            [o.allowed, o.remaining, o.retryAfter, o.resetAfter, o.limit],
            [v.allowed, v.remaining, v.retryAfter, v.resetAfter, v.limit]
          )
          for (const queued of [0, 1, 4]) {
            assert.strictEqual(Gcra.waitTime(c, s, now, queued, cost), TokenBucket.waitTime(b, u, now, queued, cost))
          }
          s = o.state
          u = v.state
        }
      }),
      { numRuns: 500 }
    )
  })

  it("reproduces redis-cell's own test table (max_burst 4, 1 per second)", () => {
    const c = Gcra.config({ maxBurst: 4, count: 1, periodMillis: 1000 })
    const start = 1_700_000_000_000
    let s = Gcra.initial(c, start)
    // [offset ms, quantity, limited, remaining, resetAfter ms, retryAfter ms (-1: none)]
    const table: ReadonlyArray<readonly [number, number, boolean, number, number, number]> = [
      [0, 6, true, 5, 0, -1],
      [0, 1, false, 4, 1000, -1],
      [0, 1, false, 3, 2000, -1],
      [0, 1, false, 2, 3000, -1],
      [0, 1, false, 1, 4000, -1],
      [0, 1, false, 0, 5000, -1],
      [0, 1, true, 0, 5000, 1000],
      [3000, 1, false, 2, 3000, -1],
      [3100, 1, false, 1, 3900, -1],
      [4000, 1, false, 1, 4000, -1],
      [8000, 1, false, 4, 1000, -1],
      [9500, 1, false, 4, 1000, -1],
      [9500, 0, false, 4, 1000, -1],
      [9500, 2, false, 2, 3000, -1],
      [9500, 5, true, 2, 3000, 3000]
    ]
    for (const [offset, quantity, limited, remaining, resetAfter, retryAfter] of table) {
      const o = Gcra.step(c, s, start + offset, quantity)
      assert.strictEqual(o.allowed, !limited)
      assert.strictEqual(o.limit, 5)
      assert.strictEqual(o.remaining, remaining)
      assert.strictEqual(o.resetAfter, resetAfter)
      assert.strictEqual(o.retryAfter, retryAfter === -1 ? (limited ? Infinity : 0) : retryAfter)
      s = o.state
    }
  })

  it("works with emission intervals below a millisecond (redis-cell #80)", () => {
    // 8000 per second: T = 0.125 ms; a burst of 3.
    const c = Gcra.config({ maxBurst: 2, count: 8000, periodMillis: 1000 })
    let s = Gcra.initial(c, 0)
    for (let i = 0; i < 3; i++) s = Gcra.step(c, s, 0, 1).state
    const denied = Gcra.step(c, s, 0, 1)
    assert.strictEqual(denied.allowed, false)
    assert.strictEqual(denied.retryAfter, 1) // 0.125 ms, rounded up
    // One millisecond later exactly 8 units have drained, but only 3 fit.
    assert.strictEqual(Gcra.step(c, s, 1, 3).allowed, true)
    assert.strictEqual(Gcra.step(c, s, 1, 4).allowed, false)
    // A million per second, bursts of 1000, over a minute: no drift.
    const m = Gcra.config({ maxBurst: 999, count: 1_000_000, periodMillis: 1000 })
    let t = Gcra.initial(m, 0)
    let admitted = 0
    for (let ms = 0; ms < 60_000; ms++) {
      for (let k = 0; k < 2; k++) {
        const o = Gcra.step(m, t, ms, 1000)
        if (o.allowed) {
          admitted += 1000
          t = o.state
        }
      }
    }
    assert.strictEqual(admitted, 60_000_000)
  })

  it("keeps the fraction of fractional emission intervals (3 per second)", () => {
    // With a tolerance of two intervals a caller polling every millisecond is
    // admitted at the exact thirds, rounded up, without drift.
    const c = Gcra.config({ maxBurst: 1, count: 3, periodMillis: 1000 })
    let s = Gcra.initial(c, 0)
    const times: Array<number> = []
    for (let now = 0; now <= 10_000; now++) {
      const o = Gcra.step(c, s, now, 1)
      if (o.allowed) {
        times.push(now)
        s = o.state
      }
    }
    assert.deepStrictEqual(times.slice(0, 8), [0, 1, 334, 667, 1000, 1334, 1667, 2000])
    assert.strictEqual(times.length, 32)
    assert.closeTo(Gcra.tat(c, s), 32_000 / 3, 1e-9)
    // With no tolerance the idle fraction before each poll is lost, as GCRA says.
    const strict = Gcra.config({ maxBurst: 0, count: 3, periodMillis: 1000 })
    let u = Gcra.step(strict, Gcra.initial(strict, 0), 0, 1).state
    assert.strictEqual(Gcra.step(strict, u, 333, 1).allowed, false)
    u = Gcra.step(strict, u, 334, 1).state
    assert.strictEqual(Gcra.step(strict, u, 667, 1).allowed, false)
    assert.strictEqual(Gcra.step(strict, u, 668, 1).allowed, true)
  })

  it("stands still when the clock goes back, and survives huge jumps", () => {
    const c = Gcra.config({ maxBurst: 1, count: 1, periodMillis: 1000 })
    let s = Gcra.step(c, Gcra.initial(c, 5000), 5000, 2).state
    // Back by 4 s: no capacity, and the wait still counts from the anchor.
    const back = Gcra.step(c, s, 1000, 1)
    assert.strictEqual(back.allowed, false)
    assert.strictEqual(back.retryAfter, 5000)
    assert.strictEqual(back.state, s)
    s = Gcra.step(c, s, 6000, 1).state
    assert.strictEqual(Gcra.step(c, s, 6000, 1).allowed, false)
    const far = Gcra.step(c, s, 2 ** 52, 2)
    assert.strictEqual(far.allowed, true)
    assert.strictEqual(far.resetAfter, 2000)
    assert.strictEqual(Gcra.settledAt(c, far.state), 2 ** 52 + 2000)
  })
})

// A refund in the TAT model: the arrival time moves back by `amount × T`,
// never before the clock; a refund of nothing (or less) is no move at all.
const refund = (p: Params, m: Model, now: number, amount: number): Model => {
  if (!(amount > 0)) return m
  const t = Math.max(now, m.clock)
  const nowS = scaled(p, t)
  const base = m.tat > nowS ? m.tat : nowS
  const back = base - BigInt(amount) * BigInt(p.period)
  return { tat: back > nowS ? back : nowS, clock: t }
}

describe("Gcra refunds, forces and credits", () => {
  it("a refund agrees with the TAT model, and so does every decision after it", () => {
    const moves = (p: Params) =>
      runs(p).chain((run) =>
        fc.tuple(fc.constant(run), fc.array(fc.integer({ min: -1, max: p.maxBurst + 2 }), { minLength: run.length }))
      )
    fc.assert(
      fc.property(params.chain((p) => fc.tuple(fc.constant(p), fc.integer({ min: 0, max: 2 ** 42 }), moves(p))), ([
        p,
        t0,
        [run, refunds]
      ]) => {
        const c = configOf(p)
        let s = Gcra.initial(c, t0)
        let m: Model = { tat: scaled(p, t0), clock: t0 }
        let now = t0
        run.forEach(({ cost, delta }, i) => {
          now += delta
          const o = Gcra.step(c, s, now, cost)
          const f = throttle(p, m, now, cost)
          assert.deepStrictEqual(
            [o.allowed, o.remaining, o.retryAfter, o.resetAfter],
            [f.allowed, f.remaining, f.retryAfter, f.resetAfter]
          )
          // the refund comes a little later (or earlier: the clock may go back)
          const at = now + (i % 3) - 1
          s = Gcra.release(c, o.state, at, refunds[i])
          m = refund(p, f.model, at, refunds[i])
        })
      }),
      { numRuns: 300 }
    )
  })

  it("a refund of nothing, or of less, leaves the state as it was", () => {
    const c = Gcra.config({ maxBurst: 2, count: 1, periodMillis: 1000 })
    const s = Gcra.step(c, Gcra.initial(c, 1000), 1000, 3).state
    for (const amount of [0, -0, -1]) {
      for (const now of [1000, 1500, 10_000]) assert.strictEqual(Gcra.release(c, s, now, amount), s)
    }
  })

  it("a credit does not drain with time, survives a refund, and never settles", () => {
    // one per second, no burst: a credit of 2 lets 3 through at the same
    // instant (one at a time: a cost above 1 never passes), however late
    const c = Gcra.config({ maxBurst: 0, count: 1, periodMillis: 1000 })
    const credit = Gcra.forceAdd(c, Gcra.initial(c, 0), 0, 2)
    assert.strictEqual(Gcra.settledAt(c, credit), Infinity)
    const burst = (s: Gcra.State, now: number): number => {
      let n = 0
      for (let o = Gcra.step(c, s, now, 1); o.allowed; o = Gcra.step(c, o.state, now, 1)) n++
      return n
    }
    assert.strictEqual(burst(credit, 5000), 3)
    assert.strictEqual(burst(Gcra.initial(c, 0), 5000), 1)
    const refunded = Gcra.release(c, credit, 100, 1)
    assert.strictEqual(Gcra.settledAt(c, refunded), Infinity)
    assert.strictEqual(burst(refunded, 5000), 3)
  })
})
