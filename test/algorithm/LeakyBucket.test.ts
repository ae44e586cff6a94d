import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Gcra from "../../src/internal/algorithm/Gcra.ts"
import { leakyConfig, least } from "./support.ts"

// nginx's limit_req, transcribed per request of one unit, in exact integers
// (excess × period instead of milli-requests). A key without a node has its
// first request at excess 0; a node keeps `excess` as of `last`, and a request
// meets `max(0, excess − rate × ms + 1)`, is rejected above `burst`, and is
// delayed by `(excess − delay) / rate` when that is positive. Two deliberate
// changes, as in tollgate: a clock behind `last` counts as `last` (nginx
// treats a step back beyond 60 s as 1 ms), and the delay is rounded up.
// A request of cost c is c such units arriving together, all or none; it is
// released with its first unit.
interface Params {
  readonly tokens: number
  readonly period: number
  readonly burst: number
  readonly delay: number
}
interface Node {
  /** Absent until the key's first admitted request. */
  readonly excess: bigint | undefined
  /** The time of the last admitted request, or of the key's creation. */
  readonly last: number
}
interface Verdict {
  readonly allowed: boolean
  readonly node: Node
  readonly delay: number
}
const limitReq = (p: Params, node: Node, now: number, cost: number): Verdict => {
  const unit = BigInt(p.period)
  let n = node
  let first = -1n
  for (let i = 0; i < cost; i++) {
    const last = Math.max(now, n.last)
    let excess = 0n
    if (n.excess !== undefined) {
      const ms = BigInt(last - n.last)
      excess = n.excess - BigInt(p.tokens) * ms + unit
      if (excess < 0n) excess = 0n
    }
    if (excess > BigInt(p.burst) * unit) return { allowed: false, node, delay: 0 }
    if (i === 0) first = excess
    n = { excess, last }
  }
  const over = first - BigInt(p.delay) * unit
  const wait = over <= 0n
    ? 0
    : Number((over + BigInt(p.tokens) - 1n) / BigInt(p.tokens)) + Math.max(0, node.last - now)
  return { allowed: true, node: n, delay: wait }
}

const params: fc.Arbitrary<Params> = fc
  .record({
    tokens: fc.integer({ min: 1, max: 5 }),
    period: fc.integer({ min: 1, max: 1000 }),
    burst: fc.integer({ min: 0, max: 6 })
  })
  .chain((p) => fc.integer({ min: 0, max: p.burst + 1 }).map((delay) => ({ ...p, delay })))

const runs = (p: Params) => {
  const scale = Math.ceil(((p.burst + 1) * p.period) / p.tokens)
  const delta = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: scale }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 2, arbitrary: fc.integer({ min: -scale, max: -1 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 1e12 }) }
  )
  return fc.array(fc.record({ delta, cost: fc.integer({ min: 1, max: p.burst + 2 }) }), { maxLength: 40 })
}

const cases = params.chain((p) => fc.tuple(fc.constant(p), fc.integer({ min: 0, max: 2 ** 42 }), runs(p)))

const configOf = (p: Params, nodelay = false) =>
  leakyConfig({ tokens: p.tokens, periodMillis: p.period, burst: p.burst, delay: p.delay, nodelay })

describe("LeakyBucket", () => {
  it("agrees with nginx's limit_req, delays and retryAfter included", () => {
    fc.assert(
      fc.property(cases, ([p, t0, run]) => {
        const c = configOf(p)
        let s = Gcra.initial(c, t0)
        let node: Node = { excess: undefined, last: t0 }
        let now = t0
        for (const { cost, delta } of run) {
          now += delta
          const o = Gcra.step(c, s, now, cost)
          const v = limitReq(p, node, now, cost)
          assert.strictEqual(o.allowed, v.allowed)
          assert.strictEqual(o.delay, v.delay)
          if (!o.allowed) {
            const hi = Math.max(0, node.last - now) + Math.ceil(((p.burst + 2) * p.period) / p.tokens)
            const retry = cost > p.burst + 1 ? Infinity : least((r) => limitReq(p, node, now + r, cost).allowed, hi)
            assert.strictEqual(o.retryAfter, retry)
          }
          s = o.state
          node = v.node
        }
      }),
      { numRuns: 500 }
    )
  })

  it("shapes: admitted requests are released at most at the rate", () => {
    fc.assert(
      fc.property(cases, ([p0, t0, run]) => {
        const p = { ...p0, delay: 0 }
        const c = configOf(p)
        let s = Gcra.initial(c, t0)
        let now = t0
        const released: Array<{ readonly at: number; readonly cost: number }> = []
        for (const { cost, delta } of run) {
          now += delta
          const o = Gcra.step(c, s, now, cost)
          if (o.allowed) released.push({ at: now + o.delay, cost })
          s = o.state
        }
        // Release i + 1 comes at least cost_i / rate after release i (less the
        // rounding of each delay to a whole millisecond).
        for (let i = 0; i + 1 < released.length; i++) {
          const gap = released[i + 1].at - released[i].at
          assert.isTrue(gap * p.tokens > released[i].cost * p.period - p.tokens, `gap ${gap}`)
        }
      }),
      { numRuns: 500 }
    )
  })

  it("nodelay admits exactly the same requests, without delay", () => {
    fc.assert(
      fc.property(cases, ([p, t0, run]) => {
        const shaped = configOf(p)
        const eager = configOf(p, true)
        let a = Gcra.initial(shaped, t0)
        let b = Gcra.initial(eager, t0)
        let now = t0
        for (const { cost, delta } of run) {
          now += delta
          const x = Gcra.step(shaped, a, now, cost)
          const y = Gcra.step(eager, b, now, cost)
          assert.deepStrictEqual({ ...x, delay: 0 }, y)
          a = x.state
          b = y.state
        }
      }),
      { numRuns: 300 }
    )
  })

  it("follows nginx on a fresh key: burst 5 at 1 r/s, delay 2", () => {
    const c = leakyConfig({ tokens: 1, periodMillis: 1000, burst: 5, delay: 2 })
    let s = Gcra.initial(c, 0)
    const delays: Array<number> = []
    for (let i = 0; i < 7; i++) {
      const o = Gcra.step(c, s, 0, 1)
      delays.push(o.allowed ? o.delay : -1)
      s = o.state
    }
    // Units meet excess 0..5: the first three go at once, the next wait 1, 2, 3 s; the 7th is rejected.
    assert.deepStrictEqual(delays, [0, 0, 0, 1000, 2000, 3000, -1])
    const denied = Gcra.step(c, s, 0, 1)
    assert.strictEqual(denied.retryAfter, 1000)
    assert.strictEqual(denied.remaining, 0)
    assert.strictEqual(denied.resetAfter, 6000)
    assert.strictEqual(denied.limit, 6)
  })

  it("denies a cost above burst + 1 forever, taking nothing", () => {
    const c = leakyConfig({ tokens: 1, periodMillis: 1000, burst: 2 })
    const s = Gcra.initial(c, 0)
    const o = Gcra.step(c, s, 0, 4)
    assert.strictEqual(o.allowed, false)
    assert.strictEqual(o.retryAfter, Infinity)
    assert.strictEqual(o.state, s)
    assert.strictEqual(Gcra.algorithm.maxCost(c), 3)
  })

  it("leaks nothing while the clock is behind, and survives huge jumps", () => {
    const c = leakyConfig({ tokens: 1, periodMillis: 1000, burst: 1 })
    let s = Gcra.initial(c, 10_000)
    s = Gcra.step(c, s, 10_000, 2).state
    const back = Gcra.step(c, s, 9_000, 1)
    assert.strictEqual(back.allowed, false)
    assert.strictEqual(back.retryAfter, 2000)
    // Admitted with the clock a second behind: its delay runs from the anchor.
    const later = Gcra.step(c, s, 11_000, 1)
    assert.strictEqual(later.delay, 1000)
    const behind = Gcra.step(c, later.state, 10_500, 1)
    assert.strictEqual(behind.allowed, false)
    const far = Gcra.step(c, s, 2 ** 52, 2)
    assert.strictEqual(far.allowed, true)
    assert.strictEqual(far.delay, 0)
    assert.strictEqual(far.resetAfter, 2000)
  })

  it("is exact for fractional rates (1 per minute, 30 per 7 seconds)", () => {
    const perMinute = leakyConfig({ tokens: 1, periodMillis: 60_000, burst: 0 })
    let s = Gcra.step(perMinute, Gcra.initial(perMinute, 0), 0, 1).state
    assert.strictEqual(Gcra.step(perMinute, s, 59_999, 1).allowed, false)
    s = Gcra.step(perMinute, s, 60_000, 1).state
    assert.strictEqual(Gcra.settledAt(perMinute, s), 120_000)
    const odd = leakyConfig({ tokens: 30, periodMillis: 7000, burst: 29 })
    let t = Gcra.initial(odd, 0)
    let admitted = 0
    for (let now = 0; now < 70_000; now += 10) {
      const o = Gcra.step(odd, t, now, 1)
      if (o.allowed) {
        admitted++
        t = o.state
      }
    }
    // A burst of 30, then 30 per 7 s for the remaining 70 s less one 10 ms poll.
    assert.strictEqual(admitted, 30 + Math.floor((69_990 * 30) / 7000))
  })
})
