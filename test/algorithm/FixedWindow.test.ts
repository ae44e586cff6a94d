import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as FixedWindow from "../../src/internal/algorithm/FixedWindow.ts"
import { least, windowRuns } from "./support.ts"

// The model: the full history of admissions. The clock is the latest of the
// key's creation and its admissions. A window is [k·W, (k+1)·W) when aligned;
// otherwise windows are replayed from the history, each opened by the first
// admission at or after the end of the previous one.
interface Params {
  readonly limit: number
  readonly window: number
  readonly align: boolean
}
interface Admission {
  readonly t: number
  readonly cost: number
}
interface History {
  readonly created: number
  readonly admitted: ReadonlyArray<Admission>
}
const clockOf = (h: History): number => h.admitted.length > 0 ? h.admitted[h.admitted.length - 1].t : h.created

const windowStart = (p: Params, h: History, t: number): number => {
  if (p.align) return Math.floor(t / p.window) * p.window
  let start: number | undefined = undefined
  for (const a of h.admitted) if (start === undefined || a.t >= start + p.window) start = a.t
  return start !== undefined && t < start + p.window ? start : t
}

const countAt = (p: Params, h: History, now: number): number => {
  const t = Math.max(now, clockOf(h))
  const start = windowStart(p, h, t)
  let n = 0
  for (const a of h.admitted) if (a.t >= start && a.t < start + p.window) n += a.cost
  return n
}

const request = (p: Params, h: History, now: number, cost: number): History | undefined =>
  countAt(p, h, now) + cost <= p.limit
    ? { created: h.created, admitted: [...h.admitted, { t: Math.max(now, clockOf(h)), cost }] }
    : undefined

const params: fc.Arbitrary<Params> = fc.record({
  limit: fc.integer({ min: 1, max: 8 }),
  window: fc.integer({ min: 1, max: 200 }),
  align: fc.boolean()
})

const runs = (p: Params) => windowRuns(p.window, p.limit)

const cases = params.chain((p) => fc.tuple(fc.constant(p), fc.integer({ min: 0, max: 2 ** 42 }), runs(p)))

const configOf = (p: Params) => FixedWindow.config({ limit: p.limit, windowMillis: p.window, align: p.align })

describe("FixedWindow", () => {
  it("agrees with the count recomputed from the full history", () => {
    fc.assert(
      fc.property(cases, ([p, t0, run]) => {
        const c = configOf(p)
        let s = FixedWindow.initial(c, t0)
        let h: History = { created: t0, admitted: [] }
        let now = t0
        for (const { cost, delta } of run) {
          now += delta
          const o = FixedWindow.step(c, s, now, cost)
          const next = request(p, h, now, cost)
          assert.strictEqual(o.allowed, next !== undefined)
          const after = next ?? h
          const hi = Math.max(0, clockOf(h) - now) + 2 * p.window
          assert.strictEqual(o.remaining, p.limit - countAt(p, after, now))
          assert.strictEqual(
            o.retryAfter,
            next !== undefined
              ? 0
              : cost > p.limit
              ? Infinity
              : least((r) => request(p, h, now + r, cost) !== undefined, hi)
          )
          assert.strictEqual(o.resetAfter, least((r) => countAt(p, after, now + r) === 0, hi))
          s = o.state
          h = after
        }
      }),
      { numRuns: 500 }
    )
  })

  it("admits at most limit per window, and at most 2 × limit in any span of one window", () => {
    fc.assert(
      fc.property(cases, ([p, t0, run]) => {
        const c = configOf(p)
        let s = FixedWindow.initial(c, t0)
        let now = t0
        const admitted: Array<Admission & { readonly start: number }> = []
        for (const { cost, delta } of run) {
          now += delta
          const o = FixedWindow.step(c, s, now, cost)
          if (o.allowed) admitted.push({ t: Math.max(now, s.start), cost, start: o.state.start })
          s = o.state
        }
        const perWindow = new Map<number, number>()
        for (const a of admitted) {
          assert.isTrue(a.t >= a.start && a.t < a.start + p.window)
          perWindow.set(a.start, (perWindow.get(a.start) ?? 0) + a.cost)
        }
        for (const n of perWindow.values()) assert.isTrue(n <= p.limit)
        for (let i = 0; i < admitted.length; i++) {
          let sum = 0
          for (let j = i; j < admitted.length && admitted[j].t < admitted[i].t + p.window; j++) sum += admitted[j].cost
          assert.isTrue(sum <= 2 * p.limit)
        }
      }),
      { numRuns: 500 }
    )
  })

  it("opens a first-hit window at the first request, not at the key's creation", () => {
    const c = FixedWindow.config({ limit: 2, windowMillis: 1000 })
    let s = FixedWindow.initial(c, 0)
    s = FixedWindow.step(c, s, 500, 2).state
    assert.deepStrictEqual(s, { start: 500, count: 2, end: 1500 })
    const denied = FixedWindow.step(c, s, 1499, 1)
    assert.strictEqual(denied.allowed, false)
    assert.strictEqual(denied.retryAfter, 1)
    assert.strictEqual(denied.resetAfter, 1)
    assert.strictEqual(denied.remaining, 0)
    assert.deepStrictEqual(FixedWindow.step(c, s, 1500, 1).state, { start: 1500, count: 1, end: 2500 })
  })

  it("aligns windows to the clock, and lets 2 × limit through across a boundary", () => {
    const c = FixedWindow.config({ limit: 5, windowMillis: 1000, align: true })
    let s = FixedWindow.initial(c, 250)
    assert.strictEqual(s.start, 0)
    const before = FixedWindow.step(c, s, 999, 5)
    assert.strictEqual(before.resetAfter, 1)
    s = before.state
    const after = FixedWindow.step(c, s, 1000, 5)
    assert.strictEqual(after.allowed, true)
    assert.strictEqual(after.resetAfter, 1000)
    assert.strictEqual(FixedWindow.settledAt(c, after.state), 2000)
    assert.strictEqual(FixedWindow.initial(c, -1).start, -1000)
  })

  it("never reopens an earlier window when the clock goes back", () => {
    const c = FixedWindow.config({ limit: 1, windowMillis: 1000, align: true })
    const s = FixedWindow.step(c, FixedWindow.initial(c, 0), 1200, 1).state
    const back = FixedWindow.step(c, s, 500, 1)
    assert.strictEqual(back.allowed, false)
    assert.strictEqual(back.retryAfter, 1500)
    const first = FixedWindow.config({ limit: 1, windowMillis: 1000 })
    const t = FixedWindow.step(first, FixedWindow.initial(first, 0), 1200, 1).state
    assert.strictEqual(FixedWindow.step(first, t, 100, 1).retryAfter, 2100)
  })

  it("denies a cost above the limit forever; a fractional limit admits its whole part", () => {
    const c = FixedWindow.config({ limit: 2.5, windowMillis: 100, align: true })
    const s = FixedWindow.initial(c, 0)
    const o = FixedWindow.step(c, s, 0, 3)
    assert.strictEqual(o.allowed, false)
    assert.strictEqual(o.retryAfter, Infinity)
    assert.strictEqual(o.state, s)
    const two = FixedWindow.step(c, s, 0, 2)
    assert.strictEqual(two.remaining, 0)
    assert.strictEqual(FixedWindow.step(c, two.state, 0, 1).retryAfter, 100)
  })

  it("estimates the wait behind waiters by filling windows, and survives huge jumps", () => {
    const c = FixedWindow.config({ limit: 4, windowMillis: 100, align: true })
    const s = FixedWindow.step(c, FixedWindow.initial(c, 0), 10, 3).state
    assert.strictEqual(FixedWindow.waitTime(c, s, 10, 0, 1), 0)
    assert.strictEqual(FixedWindow.waitTime(c, s, 10, 1, 1), 90) // the waiter takes the last unit
    assert.strictEqual(FixedWindow.waitTime(c, s, 10, 4, 1), 90) // one here, three next window, one more fits
    assert.strictEqual(FixedWindow.waitTime(c, s, 10, 4, 2), 190)
    assert.strictEqual(FixedWindow.waitTime(c, s, 10, 9, 4), 290)
    const far = FixedWindow.step(c, s, Number.MAX_SAFE_INTEGER, 4)
    assert.strictEqual(far.allowed, true)
    assert.strictEqual(far.state.start % 100, 0)
    assert.isTrue(far.resetAfter > 0 && far.resetAfter <= 100)
  })
})

describe("FixedWindow at its edges", () => {
  it("a first-hit window that ended exactly one window ago is over: the next one opens now", () => {
    const c = FixedWindow.config({ limit: 2, windowMillis: 1000 })
    const s = FixedWindow.step(c, FixedWindow.initial(c, 0), 0, 2).state
    // [0, 1000) is over; at 2000 nothing of it counts
    const o = FixedWindow.step(c, s, 2000, 1)
    assert.isTrue(o.allowed)
    assert.strictEqual(o.remaining, 1)
    assert.strictEqual(o.resetAfter, 1000)
    assert.deepStrictEqual(o.state, { start: 2000, count: 1, end: 3000 })
  })

  it("a call of its own duration that reads the key moves its clock, even when the window would end where it did", () => {
    const c = FixedWindow.config({ limit: 2, windowMillis: 1000 })
    const s = FixedWindow.initial(c, 0)
    // a read (cost 0) at 500 by a call whose windows last 500 ms: the latest
    // time the key has seen is 500
    const read = FixedWindow.step(FixedWindow.withWindow(c, 500)!, s, 500, 0)
    assert.isTrue(read.allowed)
    assert.strictEqual(read.state.start, 500)
    assert.strictEqual(FixedWindow.settledAt(c, read.state), 500)
    // so a request at 200 (the clock went back) opens its window at 500
    const back = FixedWindow.step(c, read.state, 200, 1)
    assert.isTrue(back.allowed)
    assert.strictEqual(back.resetAfter, 1300)
  })

  it("countBlocked counts a denied cost up to the limit, never one above it (rate-limiter-flexible)", () => {
    const c = FixedWindow.config({ limit: 2, windowMillis: 1000, countBlocked: true })
    const one = FixedWindow.step(c, FixedWindow.initial(c, 0), 0, 1).state
    // 1 + 2 > 2: denied, and the 2 units count
    const denied = FixedWindow.step(c, one, 10, 2)
    assert.isFalse(denied.allowed)
    assert.deepStrictEqual(denied.state, { start: 0, count: 3, end: 1000 })
    assert.strictEqual(denied.remaining, 0)
    assert.strictEqual(denied.retryAfter, 990)
    // a cost of 3 can never pass: not counted, the state is the one given
    const never = FixedWindow.step(c, one, 10, 3)
    assert.isFalse(never.allowed)
    assert.strictEqual(never.retryAfter, Infinity)
    assert.strictEqual(never.state, one)
    assert.strictEqual(never.remaining, 1)
  })

  it("execEvenly's delay at the minimum itself is the computed one, below it consumed × minDelay", () => {
    // rate-limiter-flexible: delay = ⌈msBeforeNext / (remainingPoints + 2)⌉,
    // replaced by consumedPoints × minDelay when it is below minDelay
    const c = FixedWindow.config({ limit: 3, windowMillis: 5000, execEvenly: true, minDelay: 1000 })
    const first = FixedWindow.step(c, FixedWindow.initial(c, 0), 0, 1)
    assert.strictEqual(first.delay, 0)
    // at 2000: 3000 ms left, 1 remaining after: ⌈3000 / 3⌉ = 1000, not below 1000
    const second = FixedWindow.step(c, first.state, 2000, 1)
    assert.strictEqual(second.delay, 1000)
    // at 2001: ⌈2999 / 3⌉ = 1000 too; at 2003: ⌈2997 / 3⌉ = 999, below: 2 × 1000
    assert.strictEqual(FixedWindow.step(c, first.state, 2001, 1).delay, 1000)
    assert.strictEqual(FixedWindow.step(c, first.state, 2003, 1).delay, 2000)
  })

  it("execEvenly is off by default: no delay at all", () => {
    const c = FixedWindow.config({ limit: 3, windowMillis: 5000 })
    assert.isFalse(c.execEvenly)
    const first = FixedWindow.step(c, FixedWindow.initial(c, 0), 0, 1)
    const second = FixedWindow.step(c, first.state, 1, 1)
    assert.strictEqual(second.delay, undefined)
  })

  it("a refund of nothing (or less) changes nothing; a credit is kept through a refund", () => {
    for (const align of [false, true]) {
      const c = FixedWindow.config({ limit: 3, windowMillis: 1000, align })
      const s = FixedWindow.step(c, FixedWindow.initial(c, 0), 0, 2).state
      for (const amount of [0, -1, -0]) {
        assert.strictEqual(FixedWindow.release(c, s, 500, amount), s)
        // after the window too: a refund of nothing opens no window
        assert.strictEqual(FixedWindow.release(c, s, 1500, amount), s)
      }
      // a credit of 2 (count -2), refunded 1: still -2, so 5 units fit
      const credit = FixedWindow.forceAdd(c, FixedWindow.initial(c, 0), 0, 2)
      const refunded = FixedWindow.release(c, credit, 10, 1)
      assert.strictEqual(refunded.count, -2)
      const a = FixedWindow.step(c, refunded, 20, 3)
      assert.isTrue(a.allowed)
      assert.isTrue(FixedWindow.step(c, a.state, 30, 2).allowed)
    }
  })
})
