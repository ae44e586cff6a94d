import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as SlidingLog from "../../src/internal/algorithm/SlidingLog.ts"
import { least, windowRuns } from "./support.ts"

// The model: an unbounded log of every admitted request (and, with
// countBlocked, every blocked one), counted afresh over (t − W, t]. The clock
// is the latest of the key's creation and everything logged.
interface Params {
  readonly limit: number
  readonly window: number
  readonly minGap: number
  readonly countBlocked: boolean
}
interface Entry {
  readonly t: number
  readonly cost: number
  readonly admitted: boolean
}
interface Model {
  readonly clock: number
  readonly last: number
  readonly log: ReadonlyArray<Entry>
}
const count = (p: Params, m: Model, now: number): number => {
  const t = Math.max(now, m.clock)
  let n = 0
  for (const e of m.log) if (e.t > t - p.window) n += e.cost
  return n
}
const request = (p: Params, m: Model, now: number, cost: number): { allowed: boolean; model: Model } => {
  const t = Math.max(now, m.clock)
  if (count(p, m, t) + cost <= p.limit && t - m.last >= p.minGap) {
    return { allowed: true, model: { clock: t, last: t, log: [...m.log, { t, cost, admitted: true }] } }
  }
  if (p.countBlocked && cost <= p.limit) {
    return { allowed: false, model: { clock: t, last: m.last, log: [...m.log, { t, cost, admitted: false }] } }
  }
  return { allowed: false, model: m }
}

const params: fc.Arbitrary<Params> = fc
  .record({
    limit: fc.integer({ min: 1, max: 6 }),
    window: fc.integer({ min: 1, max: 200 }),
    countBlocked: fc.boolean()
  })
  .chain((p) =>
    fc
      .oneof(
        fc.constant(0),
        fc.integer({ min: 1, max: p.window }),
        fc.integer({ min: p.window + 1, max: 3 * p.window })
      )
      .map((minGap) => ({ ...p, minGap }))
  )

// The wait of a request of `cost` behind `queued` waiters of one unit: each
// waiter is logged at the earliest time (not before the one ahead of it) at
// which its unit fits, then the request at the earliest time all its units
// fit and minGap has run since the last admission (not between the waiters).
const waitModel = (p: Params, m: Model, now: number, queued: number, cost: number): number => {
  if (cost > p.limit) return Infinity
  const e = Math.max(now, m.clock)
  const units: Array<number> = []
  for (const x of m.log) for (let k = 0; k < x.cost; k++) if (x.t > e - p.window) units.push(x.t)
  const fit = (from: number, k: number): number => {
    for (const t of [from, ...units.map((u) => u + p.window)].filter((t) => t >= from).sort((a, b) => a - b)) {
      if (units.filter((u) => u > t - p.window).length + k <= p.limit) return t
    }
    return Infinity
  }
  let t = e
  for (let q = 0; q < queued; q++) {
    t = fit(t, 1)
    units.push(t)
  }
  t = Math.max(fit(t, cost), m.last + p.minGap)
  return t <= e ? 0 : t - now
}

const runs = (p: Params) => windowRuns(p.window, p.limit)

const cases = params.chain((p) => fc.tuple(fc.constant(p), fc.integer({ min: 0, max: 2 ** 42 }), runs(p)))

const configOf = (p: Params) =>
  SlidingLog.config({ limit: p.limit, windowMillis: p.window, minGap: p.minGap, countBlocked: p.countBlocked })

describe("SlidingLog", () => {
  it("agrees with an unbounded log, while keeping at most limit times", () => {
    fc.assert(
      fc.property(cases, ([p, t0, run]) => {
        const c = configOf(p)
        let s = SlidingLog.initial(c, t0)
        let m: Model = { clock: t0, last: -Infinity, log: [] }
        let now = t0
        for (const { cost, delta } of run) {
          now += delta
          for (const queued of [0, 1, 2, 5]) {
            assert.strictEqual(SlidingLog.waitTime(c, s, now, queued, cost), waitModel(p, m, now, queued, cost))
          }
          const o = SlidingLog.step(c, s, now, cost)
          const v = request(p, m, now, cost)
          assert.strictEqual(o.allowed, v.allowed)
          const after = v.model
          // the log keeps the newest floor(limit) units, all a decision needs
          assert.strictEqual(SlidingLog.countAt(c, o.state, now), Math.min(p.limit, count(p, after, now)))
          const hi = Math.max(0, after.clock - now) + p.window + p.minGap + 1
          assert.strictEqual(o.remaining, Math.max(0, p.limit - count(p, after, now)))
          assert.strictEqual(
            o.retryAfter,
            v.allowed ? 0 : cost > p.limit ? Infinity : least((r) => request(p, after, now + r, cost).allowed, hi)
          )
          assert.strictEqual(
            o.resetAfter,
            least((r) => count(p, after, now + r) === 0 && Math.max(now + r, after.clock) - after.last >= p.minGap, hi)
          )
          assert.isTrue(o.state.log.length <= p.limit)
          s = o.state
          m = after
        }
      }),
      { numRuns: 500 }
    )
  })

  it("never admits more than limit in any window, nor two requests closer than minGap", () => {
    fc.assert(
      fc.property(cases, ([p, t0, run]) => {
        const c = configOf(p)
        let s = SlidingLog.initial(c, t0)
        let now = t0
        const admitted: Array<{ readonly t: number; readonly cost: number }> = []
        for (const { cost, delta } of run) {
          now += delta
          const o = SlidingLog.step(c, s, now, cost)
          if (o.allowed) admitted.push({ t: o.state.last, cost })
          s = o.state
        }
        for (let j = 0; j < admitted.length; j++) {
          let sum = 0
          for (let i = j; i >= 0 && admitted[i].t > admitted[j].t - p.window; i--) sum += admitted[i].cost
          assert.isTrue(sum <= p.limit, `${sum} units in a window`)
          if (j > 0) assert.isTrue(admitted[j].t - admitted[j - 1].t >= p.minGap)
        }
      }),
      { numRuns: 500 }
    )
  })

  it("is exact where the windows approximate", () => {
    const c = SlidingLog.config({ limit: 2, windowMillis: 1000 })
    let s = SlidingLog.step(c, SlidingLog.initial(c, 0), 0, 1).state
    s = SlidingLog.step(c, s, 600, 1).state
    const denied = SlidingLog.step(c, s, 900, 1)
    assert.strictEqual(denied.retryAfter, 100)
    assert.strictEqual(denied.resetAfter, 700)
    assert.strictEqual(SlidingLog.step(c, s, 999, 1).allowed, false)
    assert.strictEqual(SlidingLog.step(c, s, 1000, 1).allowed, true)
    assert.strictEqual(SlidingLog.step(c, s, 1000, 2).retryAfter, 600)
    assert.strictEqual(SlidingLog.waitTime(c, s, 700, 1, 1), 900) // slots free at 1000 and 1600
  })

  it("keeps admitted requests minGap apart", () => {
    const c = SlidingLog.config({ limit: 10, windowMillis: 1000, minGap: 100 })
    const s = SlidingLog.step(c, SlidingLog.initial(c, 0), 0, 1).state
    const early = SlidingLog.step(c, s, 50, 1)
    assert.strictEqual(early.allowed, false)
    assert.strictEqual(early.retryAfter, 50)
    assert.strictEqual(early.remaining, 9)
    assert.strictEqual(SlidingLog.step(c, s, 100, 1).allowed, true)
  })

  it("with countBlocked, keeps a hammering caller out, in bounded memory", () => {
    const c = SlidingLog.config({ limit: 3, windowMillis: 1000, countBlocked: true })
    let s = SlidingLog.initial(c, 0)
    let admitted = 0
    for (let t = 0; t < 100_000; t += 100) {
      const o = SlidingLog.step(c, s, t, 1)
      if (o.allowed) admitted++
      s = o.state
      assert.isTrue(s.log.length <= 3)
    }
    assert.strictEqual(admitted, 3)
    const last = 99_900
    // The log holds the last three attempts; one more fits once two have left.
    assert.deepStrictEqual(s.log, [last - 200, last - 100, last])
    assert.strictEqual(SlidingLog.step(c, s, last + 799, 1).allowed, false)
    assert.strictEqual(SlidingLog.step(c, s, last + 800, 1).allowed, true)
    // Without countBlocked the same caller gets 3 per second.
    const plain = SlidingLog.config({ limit: 3, windowMillis: 1000 })
    let u = SlidingLog.initial(plain, 0)
    let count = 0
    for (let t = 0; t < 100_000; t += 100) {
      const o = SlidingLog.step(plain, u, t, 1)
      if (o.allowed) count++
      u = o.state
    }
    assert.strictEqual(count, 300)
  })

  it("never logs a cost above the limit, even with countBlocked", () => {
    const c = SlidingLog.config({ limit: 3, windowMillis: 1000, countBlocked: true })
    const s = SlidingLog.initial(c, 0)
    const o = SlidingLog.step(c, s, 0, 4)
    assert.strictEqual(o.allowed, false)
    assert.strictEqual(o.retryAfter, Infinity)
    assert.strictEqual(o.state, s)
    const blocked = SlidingLog.step(c, SlidingLog.step(c, s, 0, 3).state, 10, 2)
    assert.deepStrictEqual(blocked.state.log, [0, 10, 10])
    assert.strictEqual(blocked.retryAfter, 1000) // both blocked units must leave
  })

  it("logs at the anchor when the clock goes back, and forgets everything after a huge jump", () => {
    const c = SlidingLog.config({ limit: 1, windowMillis: 1000 })
    const s = SlidingLog.step(c, SlidingLog.initial(c, 0), 5000, 1).state
    const back = SlidingLog.step(c, s, 4500, 1)
    assert.strictEqual(back.allowed, false)
    assert.strictEqual(back.retryAfter, 1500)
    const far = SlidingLog.step(c, s, Number.MAX_SAFE_INTEGER, 1)
    assert.strictEqual(far.allowed, true)
    assert.deepStrictEqual(far.state.log, [Number.MAX_SAFE_INTEGER])
    assert.strictEqual(SlidingLog.countAt(c, far.state, Number.MAX_SAFE_INTEGER), 1)
  })

  it("keeps floor(limit) times for a fractional limit", () => {
    const c = SlidingLog.config({ limit: 2.5, windowMillis: 100, countBlocked: true })
    let s = SlidingLog.initial(c, 0)
    for (let t = 0; t < 50; t += 10) s = SlidingLog.step(c, s, t, 1).state
    assert.deepStrictEqual(s.log, [30, 40])
    assert.strictEqual(SlidingLog.step(c, s, 130, 1).allowed, true)
  })
})

describe("SlidingLog at its edges", () => {
  it("a wait that ends at the anchor is no wait, even behind waiters, when the clock went back", () => {
    const c = SlidingLog.config({ limit: 3, windowMillis: 1000 })
    const s = SlidingLog.step(c, SlidingLog.initial(c, 0), 5000, 1).state
    // at 4000 time stands still at 5000, where two more units fit
    assert.strictEqual(SlidingLog.waitTime(c, s, 4000, 1, 1), 0)
    assert.strictEqual(SlidingLog.waitTime(c, s, 4000, 0, 2), 0)
    // the third waiting unit waits for the first to leave, at 6000
    assert.strictEqual(SlidingLog.waitTime(c, s, 4000, 2, 1), 2000)
  })

  it("a refund of nothing (or less) changes nothing, not even the clock", () => {
    const c = SlidingLog.config({ limit: 1, windowMillis: 1000 })
    const s = SlidingLog.step(c, SlidingLog.initial(c, 0), 0, 1).state
    for (const amount of [0, -0, -1]) {
      const r = SlidingLog.release(c, s, 5000, amount)
      assert.strictEqual(r, s)
      // so at 200 the unit logged at 0 still counts
      assert.isFalse(SlidingLog.step(c, r, 200, 1).allowed)
    }
  })

  it("a refund moves the clock to its time: a later request back in time is logged there", () => {
    const c = SlidingLog.config({ limit: 1, windowMillis: 1000 })
    const s = SlidingLog.step(c, SlidingLog.initial(c, 0), 0, 1).state
    const r = SlidingLog.release(c, s, 500, 1)
    assert.deepStrictEqual(r.log, [])
    assert.strictEqual(SlidingLog.settledAt(c, r), 500)
    const back = SlidingLog.step(c, r, 200, 1)
    assert.isTrue(back.allowed)
    assert.deepStrictEqual(back.state.log, [500])
    assert.strictEqual(back.resetAfter, 1300)
  })

  it("a limit below one unit admits only actions of no units, and never answers NaN", () => {
    const c = SlidingLog.config({ limit: 0.5, windowMillis: 1000 })
    const s = SlidingLog.initial(c, 0)
    assert.strictEqual(SlidingLog.step(c, s, 0, 1).retryAfter, Infinity)
    assert.isTrue(SlidingLog.step(c, s, 0, 0).allowed)
    for (const queued of [0, 1, 3]) {
      assert.strictEqual(SlidingLog.waitTime(c, s, 10, queued, 0), 0)
      assert.strictEqual(SlidingLog.waitTime(c, s, 10, queued, 1), Infinity)
    }
  })
})
