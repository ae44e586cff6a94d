import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Composite from "../../src/internal/algorithm/Composite.ts"
import * as FixedWindow from "../../src/internal/algorithm/FixedWindow.ts"
import * as SlidingLog from "../../src/internal/algorithm/SlidingLog.ts"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"
import * as WarmUp from "../../src/internal/algorithm/WarmUp.ts"
import { least } from "./support.ts"

// The model: independent token buckets in exact integers (level × period as
// of the last admission), and a request that every one of them must admit.
interface Bucket {
  readonly capacity: number
  readonly tokens: number
  readonly period: number
}
interface Level {
  readonly level: bigint
  readonly at: number
}
const full = (b: Bucket): bigint => BigInt(b.capacity) * BigInt(b.period)
const levelOf = (b: Bucket, m: Level, now: number): bigint => {
  const grown = m.level + BigInt(Math.max(0, now - m.at)) * BigInt(b.tokens)
  return grown < full(b) ? grown : full(b)
}
const take = (b: Bucket, m: Level, now: number, cost: number): Level | undefined => {
  const level = levelOf(b, m, now)
  const need = BigInt(cost) * BigInt(b.period)
  return level >= need ? { level: level - need, at: Math.max(now, m.at) } : undefined
}
const takeAll = (bs: ReadonlyArray<Bucket>, ms: ReadonlyArray<Level>, now: number, cost: number) => {
  const next = bs.map((b, i) => take(b, ms[i], now, cost))
  return next.every((m) => m !== undefined) ? (next as ReadonlyArray<Level>) : undefined
}

const bucket: fc.Arbitrary<Bucket> = fc.record({
  capacity: fc.integer({ min: 1, max: 12 }),
  tokens: fc.integer({ min: 1, max: 4 }),
  period: fc.integer({ min: 1, max: 500 })
})

const cases = fc.array(bucket, { minLength: 1, maxLength: 3 }).chain((bs) => {
  const scale = Math.max(...bs.map((b) => Math.ceil((b.capacity * b.period) / b.tokens)))
  const delta = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: scale }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 2, arbitrary: fc.integer({ min: -scale, max: -1 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 1e12 }) }
  )
  const maxCost = Math.max(...bs.map((b) => b.capacity)) + 1
  return fc.tuple(
    fc.constant(bs),
    fc.integer({ min: 0, max: 2 ** 40 }),
    fc.array(fc.record({ delta, cost: fc.integer({ min: 1, max: maxCost }) }), { maxLength: 40 }),
    fc.constant(scale)
  )
})

const configOf = (bs: ReadonlyArray<Bucket>) =>
  Composite.config(
    bs.map((b) =>
      Composite.part(
        TokenBucket.algorithm,
        TokenBucket.config({ capacity: b.capacity, tokens: b.tokens, periodMillis: b.period })
      )
    )
  )

describe("Composite", () => {
  it("agrees with independent buckets that must all admit, figures of the binding limit included", () => {
    fc.assert(
      fc.property(cases, ([bs, t0, run, scale]) => {
        const c = configOf(bs)
        let s = Composite.initial(c, t0)
        let ms: ReadonlyArray<Level> = bs.map((b) => ({ level: full(b), at: t0 }))
        let now = t0
        for (const { cost, delta } of run) {
          now += delta
          const o = Composite.step(c, s, now, cost)
          const next = takeAll(bs, ms, now, cost)
          assert.strictEqual(o.allowed, next !== undefined)
          const after = next ?? ms
          const hi = Math.max(0, ...ms.map((m) => m.at - now)) + scale + 1
          const remaining = bs.map((b, i) => Number(levelOf(b, after[i], now) / BigInt(b.period)))
          const retries = bs.map((b, i) =>
            cost > b.capacity ? Infinity : least((r) => take(b, ms[i], now + r, cost) !== undefined, hi)
          )
          const resets = bs.map((b, i) => least((r) => levelOf(b, after[i], now + r) === full(b), hi))
          assert.strictEqual(o.remaining, Math.min(...remaining))
          assert.strictEqual(
            o.retryAfter,
            next !== undefined ? 0 : least((r) => takeAll(bs, ms, now + r, cost) !== undefined, hi)
          )
          assert.strictEqual(o.resetAfter, Math.max(...resets))
          const binding = next !== undefined
            ? remaining.indexOf(Math.min(...remaining))
            : retries.indexOf(Math.max(...retries))
          assert.strictEqual(o.binding, binding)
          assert.strictEqual(o.limit, bs[binding].capacity)
          if (next === undefined) assert.strictEqual(o.state, s)
          s = o.state
          ms = after
        }
      }),
      { numRuns: 500 }
    )
  })

  it("keeps every part's b + r*T bound at once", () => {
    fc.assert(
      fc.property(cases, ([bs, t0, run]) => {
        const c = configOf(bs)
        let s = Composite.initial(c, t0)
        let now = t0
        const admitted: Array<{ readonly t: number; readonly cost: number }> = []
        for (const { cost, delta } of run) {
          now += delta
          const o = Composite.step(c, s, now, cost)
          if (o.allowed) {
            admitted.push({ t: Math.max(now, ...(s as ReadonlyArray<TokenBucket.State>).map((x) => x.at)), cost })
          }
          s = o.state
        }
        for (const b of bs) {
          for (let i = 0; i < admitted.length; i++) {
            let sum = 0
            for (let j = i; j < admitted.length; j++) {
              sum += admitted[j].cost
              assert.isTrue(sum * b.period <= b.capacity * b.period + b.tokens * (admitted[j].t - admitted[i].t))
            }
          }
        }
      }),
      { numRuns: 300 }
    )
  })

  it("100 per minute and 1000 per hour: the minute binds first, then the hour", () => {
    const c = Composite.config([
      Composite.part(TokenBucket.algorithm, TokenBucket.config({ capacity: 100, tokens: 100, periodMillis: 60_000 })),
      Composite.part(
        TokenBucket.algorithm,
        TokenBucket.config({ capacity: 1000, tokens: 1000, periodMillis: 3_600_000 })
      )
    ])
    let s = Composite.initial(c, 0)
    const burst = Composite.step(c, s, 0, 100)
    assert.strictEqual(burst.allowed, true)
    assert.strictEqual(burst.remaining, 0)
    assert.strictEqual(burst.binding, 0)
    assert.strictEqual(burst.limit, 100)
    s = burst.state
    const minute = Composite.step(c, s, 0, 1)
    assert.strictEqual(minute.allowed, false)
    assert.strictEqual(minute.binding, 0)
    assert.strictEqual(minute.retryAfter, 600)
    assert.strictEqual(minute.resetAfter, 360_000) // the hour bucket refills 100 in 6 minutes
    // Take everything, every second, for 15 minutes. The minute refills 100 a
    // minute but the hour only 1000 an hour, so after about 11 minutes the
    // hour binds: by 15 minutes it has let through its 1000 and 250 refilled.
    let admitted = 100
    for (let t = 1000; t <= 900_000; t += 1000) {
      for (;;) {
        const o = Composite.step(c, s, t, 1)
        if (!o.allowed) break
        admitted++
        s = o.state
      }
    }
    assert.strictEqual(admitted, 1250)
    const hour = Composite.step(c, s, 900_000, 1)
    assert.strictEqual(hour.binding, 1)
    assert.strictEqual(hour.limit, 1000)
    assert.strictEqual(hour.retryAfter, 3600)
  })

  it("takes from all parts or none, and only a part's own denial leaves a trace", () => {
    const log = SlidingLog.config({ limit: 3, windowMillis: 1000, countBlocked: true })
    const window = FixedWindow.config({ limit: 2, windowMillis: 1000, align: true })
    const c = Composite.config([
      Composite.part(SlidingLog.algorithm, log),
      Composite.part(FixedWindow.algorithm, window)
    ])
    let s = Composite.step(c, Composite.initial(c, 0), 0, 2).state
    // The window denies: the log, which would have admitted, is untouched.
    const byWindow = Composite.step(c, s, 10, 1)
    assert.strictEqual(byWindow.allowed, false)
    assert.strictEqual(byWindow.state, s)
    assert.strictEqual(byWindow.binding, 1)
    assert.strictEqual(byWindow.remaining, 0)
    assert.strictEqual(byWindow.retryAfter, 990)
    // Both deny: the log records its blocked attempt, as it would alone.
    s = Composite.step(c, s, 1000, 2).state
    const both = Composite.step(c, s, 1100, 2)
    assert.strictEqual(both.allowed, false)
    assert.deepStrictEqual((both.state[0] as SlidingLog.State).log, [1000, 1100, 1100])
    assert.strictEqual(both.state[1], s[1])
    assert.strictEqual(both.binding, 0) // the log's 1000 ms (after logging) outlasts the window's 900
    assert.strictEqual(both.retryAfter, 1000)
  })

  it("takes the smallest maxCost, and never admits above it", () => {
    const c = Composite.config([
      Composite.part(TokenBucket.algorithm, TokenBucket.config({ capacity: 10, tokens: 1, periodMillis: 1000 })),
      Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 3, windowMillis: 1000 }))
    ])
    assert.strictEqual(Composite.maxCost(c), 3)
    const s = Composite.initial(c, 0)
    const o = Composite.step(c, s, 0, 4)
    assert.strictEqual(o.allowed, false)
    assert.strictEqual(o.retryAfter, Infinity)
    assert.strictEqual(o.binding, 1)
    assert.strictEqual(o.remaining, 3)
    assert.strictEqual(Composite.waitTime(c, s, 0, 0, 4), Infinity)
    const none = Composite.config([])
    assert.strictEqual(Composite.step(none, Composite.initial(none, 0), 0, 1).allowed, true)
  })
})

describe("Composite refunds", () => {
  it("a refund reaches every part that can release; a part that cannot keeps its state", () => {
    const warm = WarmUp.config({ permits: 2, periodMillis: 1000 })
    const bucket = TokenBucket.config({ capacity: 3, tokens: 3, periodMillis: 1000 })
    const c = Composite.config([Composite.part(WarmUp.algorithm, warm), Composite.part(TokenBucket.algorithm, bucket)])
    const s = Composite.step(c, Composite.initial(c, 0), 0, 2).state
    const r = Composite.release(c, s, 0, 2)
    assert.strictEqual(r[0], s[0])
    assert.deepStrictEqual(r[1], TokenBucket.release(bucket, s[1] as TokenBucket.State, 0, 2))
    // the bucket is full again: 3 at once pass it, the warm-up part still decides
    assert.isTrue(TokenBucket.step(bucket, r[1] as TokenBucket.State, 0, 3).allowed)
  })

  it("a refund of nothing, or of less, changes no part", () => {
    // a token bucket alone would take a negative refund as a cost
    const bucket = TokenBucket.config({ capacity: 3, tokens: 3, periodMillis: 1000 })
    const c = Composite.config([Composite.part(TokenBucket.algorithm, bucket)])
    const s = Composite.step(c, Composite.initial(c, 0), 0, 1).state
    for (const amount of [0, -0, -1]) {
      const r = Composite.release(c, s, 500, amount)
      assert.strictEqual(r, s)
      // at 200 (the clock went back) the bucket holds 2 + 0.6: 3 do not fit
      assert.isFalse(Composite.step(c, r, 200, 3).allowed)
      assert.isTrue(Composite.step(c, r, 0, 2).allowed)
    }
  })
})
