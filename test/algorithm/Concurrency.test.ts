import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Concurrency from "../../src/internal/algorithm/Concurrency.ts"
import { least } from "./support.ts"

// The model, from the event history: units taken in total, and each release
// (time, units accepted, never more than are out). Released units flow back
// like a fluid queue served at `rate`: what has flowed back by t is
//   min(released by t, min over releases k of (released before k + rate × (t − t_k)))
// (or everything released at once, without a rate). Times are in tollgate's
// clock: the latest of creation, admissions and releases.
interface Params {
  readonly capacity: number
  readonly gradual: boolean
  readonly tokens: number
  readonly period: number
}
interface Release {
  readonly t: number
  readonly units: number
}
interface Model {
  readonly clock: number
  readonly taken: number
  readonly releases: ReadonlyArray<Release>
}
const released = (m: Model): number => m.releases.reduce((n, r) => n + r.units, 0)
// Units flowed back by `now`, times `period` (exact integers).
const backBy = (p: Params, m: Model, now: number): number => {
  const t = Math.max(now, m.clock)
  let all = 0
  for (const r of m.releases) all += r.units * p.period
  if (!p.gradual) return all
  let best = all
  let before = 0
  for (const r of m.releases) {
    best = Math.min(best, before + p.tokens * (t - r.t))
    before += r.units * p.period
  }
  return best
}
const available = (p: Params, m: Model, now: number): number =>
  p.capacity * p.period - m.taken * p.period + backBy(p, m, now)
const acquire = (p: Params, m: Model, now: number, cost: number): Model | undefined =>
  available(p, m, now) >= cost * p.period
    ? { clock: Math.max(now, m.clock), taken: m.taken + cost, releases: m.releases }
    : undefined
const giveBack = (m: Model, now: number, units: number): Model => {
  if (units <= 0) return m
  const t = Math.max(now, m.clock)
  const accepted = Math.min(units, m.taken - released(m))
  return { clock: t, taken: m.taken, releases: accepted > 0 ? [...m.releases, { t, units: accepted }] : m.releases }
}

const params: fc.Arbitrary<Params> = fc.record({
  capacity: fc.integer({ min: 1, max: 8 }),
  gradual: fc.boolean(),
  tokens: fc.integer({ min: 1, max: 3 }),
  period: fc.integer({ min: 1, max: 100 })
})

const runs = (p: Params) => {
  const scale = Math.ceil((p.capacity * p.period) / p.tokens)
  const delta = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: scale }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 2, arbitrary: fc.integer({ min: -scale, max: -1 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 1e12 }) }
  )
  const op = fc.oneof(
    fc.record({ kind: fc.constant("acquire" as const), n: fc.integer({ min: 1, max: p.capacity + 1 }) }),
    fc.record({ kind: fc.constant("release" as const), n: fc.integer({ min: 0, max: p.capacity + 1 }) })
  )
  return fc.array(fc.tuple(delta, op), { maxLength: 40 })
}

const cases = params.chain((p) => fc.tuple(fc.constant(p), fc.integer({ min: 0, max: 2 ** 40 }), runs(p)))

const configOf = (p: Params) =>
  Concurrency.config({
    capacity: p.capacity,
    replenish: p.gradual ? { tokens: p.tokens, periodMillis: p.period } : undefined
  })

describe("Concurrency", () => {
  it("agrees with the event-history model, and never holds more than capacity", () => {
    fc.assert(
      fc.property(cases, ([p, t0, run]) => {
        const c = configOf(p)
        const scale = p.gradual ? p.period : 1
        const q = { ...p, period: scale }
        let s = Concurrency.initial(c, t0)
        let m: Model = { clock: t0, taken: 0, releases: [] }
        let now = t0
        for (const [delta, op] of run) {
          now += delta
          if (op.kind === "release") {
            s = Concurrency.release(c, s, now, op.n)
            m = giveBack(m, now, op.n)
          } else {
            const o = Concurrency.step(c, s, now, op.n)
            const next = acquire(q, m, now, op.n)
            assert.strictEqual(o.allowed, next !== undefined)
            const after = next ?? m
            const hi = Math.max(0, m.clock - now) + Math.ceil((p.capacity * scale) / p.tokens) + 1
            assert.strictEqual(o.remaining, Math.floor(available(q, after, now) / scale))
            assert.strictEqual(
              o.retryAfter,
              next !== undefined
                ? 0
                : op.n > p.capacity
                ? Infinity
                : least((r) => acquire(q, m, now + r, op.n) !== undefined, hi)
            )
            const out = after.taken - released(after)
            assert.strictEqual(
              o.resetAfter,
              out > 0 ? Infinity : least((r) => available(q, after, now + r) === p.capacity * scale, hi)
            )
            s = o.state
            m = after
          }
          const out = m.taken - released(m)
          assert.strictEqual(Concurrency.inUse(c, s), out)
          assert.isTrue(out >= 0 && out <= p.capacity)
          assert.isTrue(s.level + s.pending <= c.full)
        }
      }),
      { numRuns: 500 }
    )
  })

  it("hands units out again only after a release", () => {
    const c = Concurrency.config({ capacity: 2 })
    let s = Concurrency.step(c, Concurrency.initial(c, 0), 0, 2).state
    const blocked = Concurrency.step(c, s, 1_000_000, 1)
    assert.strictEqual(blocked.allowed, false)
    assert.strictEqual(blocked.retryAfter, Infinity)
    assert.strictEqual(blocked.resetAfter, Infinity)
    assert.strictEqual(Concurrency.settledAt(c, s), Infinity)
    s = Concurrency.release(c, s, 10, 1)
    assert.strictEqual(Concurrency.step(c, s, 10, 1).allowed, true)
    assert.strictEqual(Concurrency.step(c, s, 10, 2).retryAfter, Infinity)
  })

  it("caps releases: a double release cannot mint units", () => {
    const c = Concurrency.config({ capacity: 3 })
    let s = Concurrency.step(c, Concurrency.initial(c, 0), 0, 2).state
    s = Concurrency.release(c, s, 1, 5)
    assert.strictEqual(Concurrency.inUse(c, s), 0)
    s = Concurrency.release(c, s, 2, 2)
    assert.strictEqual(s.level, 3)
    assert.strictEqual(Concurrency.step(c, s, 3, 4).allowed, false)
    assert.strictEqual(Concurrency.settledAt(c, s), 2)
    assert.strictEqual(Concurrency.release(c, s, 3, 0), s)
    assert.strictEqual(Concurrency.release(c, s, 3, -1), s)
  })

  it("with replenish, released units flow back at the rate", () => {
    const c = Concurrency.config({ capacity: 3, replenish: { tokens: 1, periodMillis: 100 } })
    let s = Concurrency.step(c, Concurrency.initial(c, 0), 0, 3).state
    s = Concurrency.release(c, s, 0, 3)
    const two = Concurrency.step(c, s, 100, 2)
    assert.strictEqual(two.allowed, false)
    assert.strictEqual(two.retryAfter, 100)
    assert.strictEqual(two.remaining, 1)
    assert.strictEqual(two.resetAfter, 200)
    assert.strictEqual(Concurrency.settledAt(c, s), 300)
    // Nothing flows while the clock is behind, and a huge jump completes the flow.
    assert.strictEqual(Concurrency.step(c, s, -5000, 1).retryAfter, 5100)
    const far = Concurrency.step(c, s, Number.MAX_SAFE_INTEGER, 3)
    assert.strictEqual(far.allowed, true)
    assert.strictEqual(far.state.pending, 0)
  })
})
