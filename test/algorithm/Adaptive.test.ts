import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Adaptive from "../../src/internal/algorithm/Adaptive.ts"
import type { Signal } from "../../src/internal/algorithm/Algorithm.ts"

// The formal model: a token bucket whose rate is a step function of time,
// kept in tokens (not scaled), with the AIMD rule written out on its own.
interface Params {
  readonly capacity: number
  readonly period: number
  readonly initial: number
  readonly floor: number
  readonly ceiling: number
  readonly increase: number
  readonly decrease: number
  readonly latency: number
}
interface Model {
  tokens: number
  at: number
  rate: number // tokens per period
  lastCut: number | undefined
}

const params: fc.Arbitrary<Params> = fc
  .record({
    capacity: fc.integer({ min: 1, max: 20 }),
    period: fc.integer({ min: 10, max: 2000 }),
    floor: fc.integer({ min: 1, max: 10 }),
    span: fc.integer({ min: 0, max: 100 }),
    increase: fc.integer({ min: 1, max: 10 }),
    decrease: fc.double({ min: 0.1, max: 0.9, noNaN: true }),
    latency: fc.integer({ min: 1, max: 500 })
  })
  .chain((p) =>
    fc.integer({ min: p.floor, max: p.floor + p.span }).map((initial) => ({
      capacity: p.capacity,
      period: p.period,
      initial,
      floor: p.floor,
      ceiling: p.floor + p.span,
      increase: p.increase,
      decrease: p.decrease,
      latency: p.latency
    }))
  )

const configOf = (p: Params) =>
  Adaptive.config({
    capacity: p.capacity,
    periodMillis: p.period,
    initial: p.initial,
    floor: p.floor,
    ceiling: p.ceiling,
    increase: p.increase,
    decrease: p.decrease,
    latencyMillis: p.latency
  })

const tokensAt = (p: Params, m: Model, now: number) =>
  now <= m.at ? m.tokens : Math.min(p.capacity, m.tokens + ((now - m.at) * m.rate) / p.period)

const signal = fc.oneof(
  // "ok" raises the rate whatever figure comes with it
  fc.record({ kind: fc.constant<Signal>("ok"), millis: fc.constantFrom(0, 0, 5000) }),
  fc.record({ kind: fc.constant<Signal>("throttled"), millis: fc.constantFrom(0, 0, 1, 50, 1000) }),
  fc.record({ kind: fc.constant<Signal>("latency"), millis: fc.integer({ min: 0, max: 1000 }) })
)

const run = (p: Params) => {
  const delta = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: p.period }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.integer({ min: -p.period, max: -1 }) }
  )
  return fc.array(
    fc.record({
      delta,
      event: fc.oneof(
        { weight: 3, arbitrary: fc.record({ cost: fc.integer({ min: 1, max: p.capacity + 1 }) }) },
        { weight: 2, arbitrary: signal }
      )
    }),
    { maxLength: 60 }
  )
}

const close = (a: number, b: number) => Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(a), Math.abs(b))

// The first whole millisecond d >= 0 at which `tokens + d * perMilli` reaches
// `need`; undefined when an instant lies too close to the edge for float
// rounding to decide.
const firstReach = (tokens: number, perMilli: number, need: number): number | undefined => {
  if (tokens >= need) return 0
  if (tokens > need - 1e-9) return undefined
  const d = Math.ceil((need - tokens) / perMilli)
  const at = (k: number) => tokens + k * perMilli - need
  if (Math.abs(at(d)) < 1e-9 || Math.abs(at(d - 1)) < 1e-9) return undefined
  return at(d) >= 0 && at(d - 1) < 0 ? d : undefined
}

// Milliseconds from `now` until the model holds `need` tokens (uncapped:
// what the refill brings), the refill starting at max(now, m.at).
const modelWait = (p: Params, m: Model, now: number, need: number): number | undefined => {
  const base = Math.max(now, m.at)
  const there = tokensAt(p, m, base)
  if (there >= need) return 0
  const e = firstReach(there, m.rate / p.period, need)
  return e === undefined ? undefined : base - now + e
}

// Whole tokens, or undefined too close to an integer to say.
const whole = (tokens: number): number | undefined =>
  tokens !== Math.round(tokens) && Math.abs(tokens - Math.round(tokens)) < 1e-9 ? undefined : Math.floor(tokens)

type Move =
  | { readonly _tag: "step" | "take" | "release" | "force" | "wait"; readonly cost: number; readonly queued: number }
  | { readonly _tag: "signal"; readonly kind: Signal; readonly millis: number }
  | { readonly _tag: "reconfigure"; readonly to: Params; readonly carry: "reset" | "proportional" | "as-is" }

const figureMoves = (p: Params): fc.Arbitrary<ReadonlyArray<{ readonly delta: number; readonly move: Move }>> => {
  const delta = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: p.period }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.integer({ min: -p.period, max: -1 }) }
  )
  const cost = fc.integer({ min: 0, max: p.capacity + 1 })
  const counted = (tag: "step" | "take" | "release" | "force" | "wait") =>
    fc.record({ _tag: fc.constant(tag), cost, queued: fc.integer({ min: 0, max: 2 * p.capacity }) })
  const move: fc.Arbitrary<Move> = fc.oneof(
    { weight: 4, arbitrary: counted("step") },
    { weight: 2, arbitrary: counted("take") },
    { weight: 1, arbitrary: counted("release") },
    { weight: 1, arbitrary: counted("force") },
    { weight: 2, arbitrary: counted("wait") },
    { weight: 2, arbitrary: signal.map((x) => ({ _tag: "signal" as const, kind: x.kind, millis: x.millis })) },
    {
      weight: 1,
      arbitrary: fc.record({
        _tag: fc.constant("reconfigure" as const),
        to: params,
        carry: fc.constantFrom("reset" as const, "proportional" as const, "as-is" as const)
      })
    }
  )
  return fc.array(fc.record({ delta, move }), { maxLength: 40 })
}

describe("Adaptive (AIMD)", () => {
  it("every figure is the model's: remaining, retryAfter, resetAfter, waitTime, settledAt, release, force, reconfigure", () => {
    let checked = 0
    fc.assert(
      fc.property(params.chain((p) => fc.tuple(fc.constant(p), figureMoves(p))), ([p0, events]) => {
        let p = p0
        let c = configOf(p)
        let now = 1_000_000
        let s = Adaptive.initial(c, now)
        const m: Model = { tokens: p.capacity, at: now, rate: p.initial, lastCut: undefined }
        const eq = (actual: number, expected: number | undefined, what: string) => {
          if (expected === undefined) return
          checked++
          assert.strictEqual(actual, expected, what)
        }
        for (const { delta, move } of events) {
          now += delta
          const tokens = tokensAt(p, m, now)
          const at = Math.max(m.at, now)
          switch (move._tag) {
            case "step":
            case "take": {
              const o = Adaptive.step(c, s, now, move.cost)
              if (tokens !== move.cost && Math.abs(tokens - move.cost) < 1e-9) {
                // too close to the edge for float rounding to decide: follow it
                s = o.state
                m.tokens = s.level / p.period
                m.at = s.at
                break
              }
              const allowed = tokens >= move.cost
              assert.strictEqual(o.allowed, allowed)
              assert.strictEqual(o.limit, p.capacity)
              if (move._tag === "take") {
                const owned = { ...s }
                assert.strictEqual(Adaptive.takeInPlace(c, owned, now, move.cost), allowed)
                assert.deepStrictEqual(owned, allowed ? o.state : s)
              }
              if (allowed) {
                m.tokens = tokens - move.cost
                m.at = at
                eq(o.retryAfter, 0, "retryAfter")
                eq(o.remaining, whole(m.tokens), "remaining")
              } else {
                assert.strictEqual(o.state, s)
                eq(o.remaining, whole(Math.max(0, tokens)), "remaining")
                eq(o.retryAfter, move.cost > p.capacity ? Infinity : modelWait(p, m, now, move.cost), "retryAfter")
              }
              eq(o.resetAfter, modelWait(p, m, now, p.capacity), "resetAfter")
              s = o.state
              break
            }
            case "wait": {
              const w = Adaptive.waitTime(c, s, now, move.queued, move.cost)
              eq(w, move.cost > p.capacity ? Infinity : modelWait(p, m, now, move.queued + move.cost), "waitTime")
              break
            }
            case "release":
              s = Adaptive.release(c, s, now, move.cost)
              m.tokens = Math.min(p.capacity, tokens + move.cost)
              m.at = at
              break
            case "force":
              s = Adaptive.force(c, s, now, move.cost)
              m.tokens = tokens - move.cost
              m.at = at
              break
            case "signal": {
              const throttled = move.kind === "throttled" || (move.kind === "latency" && move.millis > p.latency)
              m.tokens = tokens
              m.at = at
              if (!throttled) m.rate = Math.min(p.ceiling, m.rate + p.increase)
              else {
                if (m.lastCut === undefined || at - m.lastCut >= p.period) {
                  m.rate = Math.max(p.floor, m.rate * p.decrease)
                  m.lastCut = at
                }
                if (move.kind === "throttled" && move.millis > 0) {
                  m.tokens = Math.min(m.tokens, 1 - (move.millis * m.rate) / p.period)
                }
              }
              s = Adaptive.adapt(c, s, now, move.kind, move.millis)
              break
            }
            case "reconfigure": {
              const to = move.to
              const next = configOf(to)
              s = Adaptive.reconfigure(c, s, next, now, move.carry)
              if (move.carry === "reset") {
                m.tokens = to.capacity
                m.at = now
                m.rate = to.initial
                m.lastCut = undefined
              } else {
                const kept = move.carry === "as-is" ? tokens : (tokens * to.capacity) / p.capacity
                m.tokens = Math.min(to.capacity, kept)
                m.at = at
                m.rate = Math.min(to.ceiling, Math.max(to.floor, m.rate))
              }
              p = to
              c = next
              break
            }
          }
          assert.isTrue(close(s.rate, m.rate), `rate ${s.rate} vs ${m.rate}`)
          assert.isTrue(
            close(s.level / p.period, m.tokens),
            `${move._tag}: tokens ${s.level / p.period} vs ${m.tokens}`
          )
          assert.strictEqual(s.at, m.at)
          // settled: full at a rate a new key would not exceed
          const settled = Adaptive.settledAt(c, s)
          if (m.rate < p.initial) assert.strictEqual(settled, Infinity)
          else {
            const full = firstReach(m.tokens, m.rate / p.period, p.capacity)
            if (full !== undefined) eq(settled, m.at + full, "settledAt")
          }
        }
      }),
      { numRuns: 400 }
    )
    assert.isAtLeast(checked, 1000, "figures compared")
  })

  it("agrees with the model: admissions at the rate in force, the rate by AIMD between floor and ceiling", () => {
    fc.assert(
      fc.property(params.chain((p) => fc.tuple(fc.constant(p), run(p))), ([p, events]) => {
        const c = configOf(p)
        let now = 1_000_000
        let s = Adaptive.initial(c, now)
        const m: Model = { tokens: p.capacity, at: now, rate: p.initial, lastCut: undefined }
        for (const { delta, event } of events) {
          now += delta
          if ("cost" in event) {
            const o = Adaptive.step(c, s, now, event.cost)
            const tokens = tokensAt(p, m, now)
            // away from the edge (float rounding), the decision is the model's
            if (Math.abs(tokens - event.cost) > 1e-6) assert.strictEqual(o.allowed, tokens >= event.cost)
            if (o.allowed) {
              m.tokens = tokensAt(p, m, now) - event.cost
              m.at = Math.max(m.at, now)
            }
            s = o.state
          } else {
            const at = Math.max(m.at, now)
            m.tokens = tokensAt(p, m, now)
            m.at = at
            const throttled = event.kind === "throttled" || (event.kind === "latency" && event.millis > p.latency)
            if (!throttled) m.rate = Math.min(p.ceiling, m.rate + p.increase)
            else {
              if (m.lastCut === undefined || at - m.lastCut >= p.period) {
                m.rate = Math.max(p.floor, m.rate * p.decrease)
                m.lastCut = at
              }
              if (event.kind === "throttled" && event.millis > 0) {
                m.tokens = Math.min(m.tokens, 1 - (event.millis * m.rate) / p.period)
              }
            }
            s = Adaptive.adapt(c, s, now, event.kind, event.millis)
          }
          assert.isTrue(s.rate >= p.floor && s.rate <= p.ceiling, `rate ${s.rate}`)
          assert.isTrue(close(s.rate, m.rate), `rate ${s.rate} vs ${m.rate}`)
          assert.isTrue(close(s.level / p.period, m.tokens), `tokens ${s.level / p.period} vs ${m.tokens}`)
          assert.isFalse(Number.isNaN(s.level) || Number.isNaN(s.at))
        }
      }),
      { numRuns: 500 }
    )
  })

  it("throttled with a Retry-After: nothing is admitted before it, one unit is there exactly then", () => {
    fc.assert(
      fc.property(
        params,
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 0, max: 20 }),
        (p, wait, spent) => {
          const c = configOf(p)
          let s = Adaptive.initial(c, 0)
          const take = Math.min(spent, p.capacity)
          if (take > 0) s = Adaptive.step(c, s, 0, take).state
          s = Adaptive.adapt(c, s, 0, "throttled", wait)
          for (const d of [0, 1, Math.floor(wait / 2), wait - 1]) {
            if (d < wait) assert.isFalse(Adaptive.step(c, s, d, 1).allowed, `admitted at ${d} < ${wait}`)
          }
          // the refill from then on is the cut rate: one unit at `wait` if
          // nothing was owed from before
          if (take === 0 || s.level === c.periodMillis - wait * s.rate) {
            assert.isTrue(Adaptive.step(c, s, wait, 1).allowed, `not admitted at ${wait}`)
          }
          assert.strictEqual(Adaptive.waitTime(c, s, 0, 0, 1) >= wait, true)
        }
      )
    )
  })

  it("a burst of throttled replies is one cut per period", () => {
    const c = Adaptive.config({ capacity: 10, periodMillis: 1000, initial: 100, floor: 10, ceiling: 1000 })
    let s = Adaptive.initial(c, 0)
    for (let i = 0; i < 5; i++) s = Adaptive.adapt(c, s, i * 10, "throttled", 0)
    assert.strictEqual(s.rate, 50)
    s = Adaptive.adapt(c, s, 1000, "throttled", 0)
    assert.strictEqual(s.rate, 25)
    for (let i = 0; i < 10; i++) s = Adaptive.adapt(c, s, 1000, "throttled", 0)
    assert.strictEqual(s.rate, 25)
    // additive increase up to the ceiling, down to the floor and no further
    for (let i = 0; i < 200; i++) s = Adaptive.adapt(c, s, 2000, "ok", 0)
    assert.strictEqual(s.rate, 1000)
    for (let i = 0; i < 20; i++) s = Adaptive.adapt(c, s, 3000 + i * 1000, "throttled", 0)
    assert.strictEqual(s.rate, 10)
  })

  it("a latency above the target cuts, at or below it raises", () => {
    const c = Adaptive.config({
      capacity: 10,
      periodMillis: 1000,
      initial: 100,
      floor: 10,
      ceiling: 1000,
      increase: 5,
      latencyMillis: 200
    })
    const s = Adaptive.initial(c, 0)
    assert.strictEqual(Adaptive.adapt(c, s, 0, "latency", 200).rate, 105)
    assert.strictEqual(Adaptive.adapt(c, s, 0, "latency", 201).rate, 50)
  })

  it("reaping: a key below its initial rate never settles; at or above it, once full", () => {
    const c = Adaptive.config({ capacity: 2, periodMillis: 1000, initial: 4, floor: 1, ceiling: 8 })
    const cut = Adaptive.adapt(c, Adaptive.initial(c, 0), 0, "throttled", 0)
    assert.strictEqual(Adaptive.settledAt(c, cut), Infinity)
    const raised = Adaptive.step(c, Adaptive.adapt(c, Adaptive.initial(c, 0), 0, "ok", 0), 0, 2).state
    // 2 tokens at 5 per second: 400 ms
    assert.strictEqual(Adaptive.settledAt(c, raised), 400)
  })

  it("time going backwards adds nothing and changes no rate by itself", () => {
    const c = Adaptive.config({ capacity: 3, periodMillis: 1000, initial: 2, floor: 1, ceiling: 8 })
    const s = Adaptive.step(c, Adaptive.initial(c, 5000), 5000, 3).state
    const back = Adaptive.step(c, s, 1000, 1)
    assert.isFalse(back.allowed)
    assert.strictEqual(back.state, s)
    assert.strictEqual(Adaptive.adapt(c, s, 1000, "ok", 0).level, s.level)
    // a full key read before its anchor is fresh already: nothing to wait for
    const full = Adaptive.release(c, s, 5000, 3)
    const read = Adaptive.step(c, full, 4000, 0)
    assert.isTrue(read.allowed)
    assert.strictEqual(read.resetAfter, 0)
    assert.strictEqual(read.remaining, 3)
  })

  it("a full key carried as-is to another period is still full: the level is scaled with one rounding", () => {
    // 3 units per 465 ms, full, carried as-is to 3 per 273 ms: 1395 × 273 / 465 is 819, the new full level
    // (1395 × (273 / 465) rounds below it, and the key then waits 1 ms for a unit it has)
    const from = Adaptive.config({ capacity: 3, periodMillis: 465, initial: 1, floor: 1, ceiling: 1 })
    const to = Adaptive.config({ capacity: 3, periodMillis: 273, initial: 1, floor: 1, ceiling: 1 })
    const carried = Adaptive.reconfigure(from, Adaptive.initial(from, 0), to, 0, "as-is")
    assert.strictEqual(carried.level, to.full)
    assert.strictEqual(Adaptive.settledAt(to, carried), 0)
    assert.isTrue(Adaptive.step(to, carried, 0, 3).allowed)
    // onto its own policy, either carry changes nothing
    for (const carry of ["as-is", "proportional"] as const) {
      // (573.0264 × 465 / 465 and 820.4593 × 1395 / 1395 both round off their level)
      for (const level of [1395, 1394.7, 573.0264, 820.4593, 0.1]) {
        const s = { ...Adaptive.initial(from, 0), level }
        assert.strictEqual(Adaptive.reconfigure(from, s, from, 0, carry).level, level)
      }
    }
  })
})
