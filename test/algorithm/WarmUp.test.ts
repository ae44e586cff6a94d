import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as WarmUp from "../../src/internal/algorithm/WarmUp.ts"

// Exact rationals, so that the model below is Guava's math without rounding.
interface Q {
  readonly n: bigint
  readonly d: bigint
}
const gcd = (a: bigint, b: bigint): bigint => {
  let x = a < 0n ? -a : a
  let y = b < 0n ? -b : b
  while (y !== 0n) [x, y] = [y, x % y]
  return x
}
const q = (n: bigint | number, d: bigint | number = 1n): Q => {
  let a = BigInt(n)
  let b = BigInt(d)
  if (b < 0n) [a, b] = [-a, -b]
  const g = gcd(a, b) || 1n
  return { n: a / g, d: b / g }
}
const add = (a: Q, b: Q): Q => q(a.n * b.d + b.n * a.d, a.d * b.d)
const sub = (a: Q, b: Q): Q => q(a.n * b.d - b.n * a.d, a.d * b.d)
const mul = (a: Q, b: Q): Q => q(a.n * b.n, a.d * b.d)
const div = (a: Q, b: Q): Q => q(a.n * b.d, a.d * b.n)
const cmp = (a: Q, b: Q): number => {
  const x = a.n * b.d - b.n * a.d
  return x < 0n ? -1 : x > 0n ? 1 : 0
}
const min = (a: Q, b: Q): Q => cmp(a, b) <= 0 ? a : b
const ceil = (a: Q): number => Number(a.n >= 0n ? (a.n + a.d - 1n) / a.d : -(-a.n / a.d))
const num = (a: Q): number => Number(a.n) / Number(a.d)
const isInteger = (a: Q): boolean => a.d === 1n

// Guava's SmoothRateLimiter, transcribed as the mutable object it is, in
// exact rationals and milliseconds (so with no truncation to whole micros).
// One tollgate rule on top: a clock behind the latest admission counts as that.
class Guava {
  storedPermits = q(0)
  maxPermits = q(0)
  stableInterval = q(1)
  nextFreeTicket = q(0)
  clock = 0
  thresholdPermits = q(0)
  slope = q(0)
  warmup = false
  coolDown = q(1)

  static bursty(permits: number, period: number, maxBurst: number, now: number): Guava {
    const g = new Guava()
    g.stableInterval = q(period, permits)
    g.maxPermits = q(maxBurst * permits, period) // maxBurstSeconds × permitsPerSecond
    g.storedPermits = q(0) // oldMaxPermits == 0: starts with nothing stored
    g.coolDown = g.stableInterval
    g.nextFreeTicket = q(now)
    g.clock = now
    return g
  }

  static warmingUp(permits: number, period: number, warmup: number, coldFactor: number, now: number): Guava {
    const g = new Guava()
    g.warmup = true
    g.stableInterval = q(period, permits)
    const coldInterval = mul(g.stableInterval, q(coldFactor))
    g.thresholdPermits = div(mul(q(1, 2), q(warmup)), g.stableInterval)
    g.maxPermits = add(g.thresholdPermits, div(q(2 * warmup), add(g.stableInterval, coldInterval)))
    g.slope = div(sub(coldInterval, g.stableInterval), sub(g.maxPermits, g.thresholdPermits))
    g.storedPermits = g.maxPermits // oldMaxPermits == 0: initial state is cold
    g.coolDown = div(q(warmup), g.maxPermits)
    g.nextFreeTicket = q(now)
    g.clock = now
    return g
  }

  copy(): Guava {
    return Object.assign(new Guava(), this)
  }

  storedPermitsToWaitTime(storedPermits: Q, permitsToTake: Q): Q {
    if (!this.warmup) return q(0)
    const availablePermitsAboveThreshold = sub(storedPermits, this.thresholdPermits)
    let wait = q(0)
    let take = permitsToTake
    if (cmp(availablePermitsAboveThreshold, q(0)) > 0) {
      const permitsAboveThresholdToTake = min(availablePermitsAboveThreshold, take)
      const length = add(
        this.permitsToTime(availablePermitsAboveThreshold),
        this.permitsToTime(sub(availablePermitsAboveThreshold, permitsAboveThresholdToTake))
      )
      wait = div(mul(permitsAboveThresholdToTake, length), q(2))
      take = sub(take, permitsAboveThresholdToTake)
    }
    return add(wait, mul(this.stableInterval, take))
  }

  permitsToTime(permits: Q): Q {
    return add(this.stableInterval, mul(permits, this.slope))
  }

  resync(now: Q): void {
    if (cmp(now, this.nextFreeTicket) > 0) {
      const newPermits = div(sub(now, this.nextFreeTicket), this.coolDown)
      this.storedPermits = min(this.maxPermits, add(this.storedPermits, newPermits))
      this.nextFreeTicket = now
    }
  }

  reserveEarliestAvailable(requiredPermits: number, now: Q): void {
    this.resync(now)
    const storedPermitsToSpend = min(q(requiredPermits), this.storedPermits)
    const freshPermits = sub(q(requiredPermits), storedPermitsToSpend)
    const wait = add(
      this.storedPermitsToWaitTime(this.storedPermits, storedPermitsToSpend),
      mul(freshPermits, this.stableInterval)
    )
    this.nextFreeTicket = add(this.nextFreeTicket, wait)
    this.storedPermits = sub(this.storedPermits, storedPermitsToSpend)
  }

  canAcquire(now: number): boolean {
    return cmp(this.nextFreeTicket, q(Math.max(now, this.clock))) <= 0
  }

  tryAcquire(permits: number, now: number): boolean {
    if (!this.canAcquire(now)) return false
    const t = Math.max(now, this.clock)
    this.reserveEarliestAvailable(permits, q(t))
    this.clock = t
    return true
  }
}

interface Params {
  readonly permits: number
  readonly period: number
  readonly warmup: number
  readonly coldFactor: number
  readonly maxBurst: number
}

const params: fc.Arbitrary<Params> = fc.record({
  permits: fc.integer({ min: 1, max: 5 }),
  period: fc.integer({ min: 1, max: 200 }),
  warmup: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 500 })),
  coldFactor: fc.oneof(fc.constant(3), fc.integer({ min: 1, max: 6 })),
  maxBurst: fc.integer({ min: 0, max: 500 })
})

const runs = (p: Params) => {
  const scale = Math.max(p.period, p.warmup, p.maxBurst)
  const delta = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: scale }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 2, arbitrary: fc.integer({ min: -scale, max: -1 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 1e12 }) }
  )
  // a cost of 0 too: it reads the figures and reserves nothing
  return fc.array(fc.record({ delta, cost: fc.integer({ min: 0, max: 5 }), queued: fc.integer({ min: 1, max: 6 }) }), {
    maxLength: 40
  })
}

const cases = params.chain((p) => fc.tuple(fc.constant(p), fc.integer({ min: 0, max: 2 ** 40 }), runs(p)))

const configOf = (p: Params) =>
  WarmUp.config({
    permits: p.permits,
    periodMillis: p.period,
    warmupMillis: p.warmup,
    coldFactor: p.coldFactor,
    maxBurstMillis: p.maxBurst
  })

const modelOf = (p: Params, now: number) =>
  p.warmup > 0
    ? Guava.warmingUp(p.permits, p.period, p.warmup, p.coldFactor, now)
    : Guava.bursty(p.permits, p.period, p.maxBurst, now)

// Unit requests the model admits right now, back to back (bounded).
const burstNow = (g: Guava, now: number): number => {
  const h = g.copy()
  let n = 0
  while (n < 10_000 && h.tryAcquire(1, now)) n++
  return n
}

const close = (x: number, y: number): boolean => Math.abs(x - y) <= 1e-9 * (1 + Math.abs(y))

describe("WarmUp", () => {
  it("agrees with Guava's SmoothRateLimiter in exact arithmetic", () => {
    fc.assert(
      fc.property(cases, ([p, t0, run]) => {
        const c = configOf(p)
        let s = WarmUp.initial(c, t0)
        const g = modelOf(p, t0)
        let now = t0
        for (const { cost, delta, queued } of run) {
          now += delta
          const before = g.copy()
          const t = Math.max(now, before.clock)
          const tie = cmp(before.nextFreeTicket, q(t)) === 0
          // waitTime: the waiters ahead reserve `queued` units in turn (at t,
          // or when nextFree comes); this request goes when they are paid
          const line = before.copy()
          line.reserveEarliestAvailable(queued, q(t))
          const due = sub(line.nextFreeTicket, q(now))
          const expected = cmp(line.nextFreeTicket, q(t)) <= 0 ? 0 : ceil(due)
          const w = WarmUp.waitTime(c, s, now, queued, cost)
          // Floats may put a nextFree that is exactly t a sliver past it (the
          // stored permits summed to 4.999…), which a caller at now must then
          // wait for: t − now, plus the sliver's whole millisecond.
          const lineTie = cmp(line.nextFreeTicket, q(t)) === 0
          assert.isTrue(
            w === expected || (isInteger(due) && w === expected + 1) || (lineTie && w === t - now + 1),
            `waitTime ${w} vs ${expected}`
          )
          const o = WarmUp.step(c, s, now, cost)
          const allowed = g.tryAcquire(cost, now)
          // Floats may resolve an exact tie (nextFree = now) either way; the
          // runs part there.
          if (o.allowed !== allowed) {
            assert.isTrue(tie, "decisions differ away from a tie")
            return
          }
          // The state is Guava's, to float precision: `nextFree` as its distance
          // from the anchor, where both are small.
          assert.isTrue(close(o.state.ahead, num(sub(g.nextFreeTicket, q(o.state.at)))), "nextFree")
          assert.isTrue(close(o.state.stored, num(g.storedPermits)), "stored")
          if (!allowed) {
            const exact = ceil(sub(before.nextFreeTicket, q(now)))
            const integral = isInteger(sub(before.nextFreeTicket, q(now)))
            assert.isTrue(o.retryAfter === exact || (integral && o.retryAfter === exact + 1), "retryAfter")
          }
          const stored = num(g.storedPermits)
          if (Math.abs(stored - Math.round(stored)) > 1e-9) assert.strictEqual(o.remaining, burstNow(g, now))
          s = o.state
        }
      }),
      { numRuns: 500 }
    )
  })

  it("bursty: at most maxPermits + rate × T before any admission at T (pay later)", () => {
    fc.assert(
      fc.property(cases, ([p0, t0, run]) => {
        const p = { ...p0, warmup: 0 }
        const c = configOf(p)
        let s = WarmUp.initial(c, t0)
        let now = t0
        const admitted: Array<{ readonly t: number; readonly cost: number }> = []
        for (const { cost, delta } of run) {
          now += delta
          const o = WarmUp.step(c, s, now, cost)
          if (o.allowed) admitted.push({ t: o.state.at, cost })
          s = o.state
        }
        for (let i = 0; i < admitted.length; i++) {
          let before = 0 // the costs admitted from i up to, not including, j
          for (let j = i + 1; j < admitted.length; j++) {
            before += admitted[j - 1].cost
            const bound = c.maxPermits + (admitted[j].t - admitted[i].t) / c.stableInterval
            assert.isTrue(before <= bound + 1e-9, `${before} > ${bound}`)
          }
        }
      }),
      { numRuns: 500 }
    )
  })

  it("warming up: never faster than the stable rate, not even cold", () => {
    fc.assert(
      fc.property(cases, ([p0, t0, run]) => {
        const p = { ...p0, warmup: Math.max(1, p0.warmup) }
        const c = configOf(p)
        let s = WarmUp.initial(c, t0)
        let now = t0
        const admitted: Array<{ readonly t: number; readonly cost: number }> = []
        for (const { cost, delta } of run) {
          now += delta
          const o = WarmUp.step(c, s, now, cost)
          if (o.allowed) admitted.push({ t: o.state.at, cost })
          s = o.state
        }
        for (let i = 0; i + 1 < admitted.length; i++) {
          const gap = admitted[i + 1].t - admitted[i].t
          assert.isTrue(gap >= admitted[i].cost * c.stableInterval * (1 - 1e-12), `gap ${gap}`)
        }
      }),
      { numRuns: 500 }
    )
  })

  it("ramps from cold to the stable rate over exactly the warm-up period", () => {
    // 1 per 10 ms after 100 ms of warm-up, cold factor 3: threshold 5, max 10, slope 4.
    const c = WarmUp.config({ permits: 1, periodMillis: 10, warmupMillis: 100 })
    assert.deepStrictEqual([c.thresholdPermits, c.maxPermits, c.slope, c.coolDownInterval], [5, 10, 4, 10])
    let s = WarmUp.initial(c, 0)
    const times: Array<number> = []
    let now = 0
    while (times.length < 8) {
      const o = WarmUp.step(c, s, now, 1)
      if (o.allowed) {
        times.push(now)
        s = o.state
      } else now += o.retryAfter
    }
    // Intervals 28, 24, 20, 16, 12 (the trapezoids from 30 down to 10), then 10.
    assert.deepStrictEqual(times, [0, 28, 52, 72, 88, 100, 110, 120])
    assert.strictEqual(s.stored, 2)
    // Idle, it cools down at one permit per 10 ms, back to exactly a new limiter.
    assert.strictEqual(WarmUp.settledAt(c, s), 130 + 80)
    assert.deepStrictEqual(WarmUp.resync(c, s, 210), { stored: 10, ahead: 0, at: 210 })
    assert.deepStrictEqual(WarmUp.resync(c, s, 125), s)
  })

  it("bursty: stores idle time, and the first request pays nothing", () => {
    const c = WarmUp.config({ permits: 1, periodMillis: 1000, maxBurstMillis: 5000 })
    let s = WarmUp.initial(c, 0)
    const first = WarmUp.step(c, s, 0, 1)
    assert.strictEqual(first.allowed, true)
    assert.strictEqual(first.remaining, 0)
    s = first.state
    assert.strictEqual(WarmUp.step(c, s, 500, 1).retryAfter, 500)
    // After 10 s idle: 5 stored, so 5 at once, a 6th that pays later, then no more.
    let admitted = 0
    for (let i = 0; i < 10; i++) {
      const o = WarmUp.step(c, s, 11_000, 1)
      if (i === 0) assert.strictEqual(o.remaining, 5)
      if (o.allowed) admitted++
      s = o.state
    }
    assert.strictEqual(admitted, 6)
    assert.strictEqual(WarmUp.step(c, s, 11_000, 1).retryAfter, 1000)
  })

  it("admits any cost when free, and makes the next request pay for it", () => {
    const c = WarmUp.config({ permits: 2, periodMillis: 1000 })
    assert.strictEqual(WarmUp.algorithm.maxCost(c), Infinity)
    const big = WarmUp.step(c, WarmUp.initial(c, 0), 0, 1000)
    assert.strictEqual(big.allowed, true)
    const next = WarmUp.step(c, big.state, 1, 1)
    assert.strictEqual(next.allowed, false)
    assert.strictEqual(next.retryAfter, 499_999)
    assert.strictEqual(WarmUp.waitTime(c, big.state, 1, 0, 7), 499_999)
    assert.strictEqual(WarmUp.waitTime(c, big.state, 1, 2, 1), 500_999)
  })

  it("stands still when the clock goes back, and fills exactly after a huge jump", () => {
    const c = WarmUp.config({ permits: 1, periodMillis: 100, maxBurstMillis: 300, initialPermits: 3 })
    let s = WarmUp.step(c, WarmUp.initial(c, 1000), 1000, 1).state
    // Stored permits cost nothing, so `nextFree` is the anchor: a step back still finds them.
    assert.strictEqual(WarmUp.step(c, s, 900, 1).allowed, true)
    s = WarmUp.step(c, s, 1000, 3).state
    const back = WarmUp.step(c, s, 500, 1)
    assert.strictEqual(back.allowed, false)
    assert.strictEqual(back.retryAfter, 600)
    const far = WarmUp.step(c, s, 2 ** 52, 1)
    assert.strictEqual(far.allowed, true)
    assert.strictEqual(far.state.stored, 2)
    assert.strictEqual(far.remaining, 3)
  })

  it("a force of nothing at exactly nextFree changes nothing, also for a clock that then goes back", () => {
    // Guava's resync is strict (`now > nextFree`): at `nextFree` exactly no
    // idle time is credited, so the anchor stays at the latest admission and
    // a clock that goes back still finds `nextFree` ahead of it.
    const c = WarmUp.config({ permits: 1, periodMillis: 100, maxBurstMillis: 300, initialPermits: 0 })
    const s = WarmUp.step(c, WarmUp.initial(c, 1000), 1000, 3).state // nextFree 1300
    const forced = WarmUp.force(c, s, 1300, 0)
    assert.deepStrictEqual(forced, s)
    for (const state of [s, forced]) {
      const back = WarmUp.step(c, state, 1200, 1)
      assert.strictEqual(back.allowed, false)
      assert.strictEqual(back.retryAfter, 100)
    }
  })

  it("handles fractional rates: one permit every three seconds", () => {
    const c = WarmUp.config({ permits: 1, periodMillis: 3000, maxBurstMillis: 1000 })
    assert.closeTo(c.maxPermits, 1 / 3, 1e-15)
    const s = WarmUp.step(c, WarmUp.initial(c, 0), 0, 1).state
    assert.strictEqual(WarmUp.step(c, s, 2999, 1).retryAfter, 1)
    const next = WarmUp.step(c, s, 3000, 1)
    assert.strictEqual(next.allowed, true)
    assert.strictEqual(next.resetAfter, 4000) // pays 3 s, then stores its third of a permit in 1 s
  })

  it("a change of rate after an idle time stores that time at the old rate first (Guava's doSetRate)", () => {
    // bursty, 1 per second, 4 s stored at most; idle from 0 to 2500: 2.5 permits
    const one = WarmUp.config({ permits: 1, periodMillis: 1000, maxBurstMillis: 4000 })
    const two = WarmUp.config({ permits: 2, periodMillis: 1000, maxBurstMillis: 4000 })
    const idle = WarmUp.initial(one, 0)
    // setRate: 2.5 × (8 / 4)
    assert.deepStrictEqual(WarmUp.rate.carryRate(two, WarmUp.rate.rateOf(one), idle, 2500), {
      stored: 5,
      ahead: 0,
      at: 2500
    })
    assert.deepStrictEqual(WarmUp.reconfigure(one, idle, two, 2500, "proportional"), { stored: 5, ahead: 0, at: 2500 })
    // as-is keeps the 2.5; reset is a new key of the new rate
    assert.deepStrictEqual(WarmUp.reconfigure(one, idle, two, 2500, "as-is"), { stored: 2.5, ahead: 0, at: 2500 })
    assert.deepStrictEqual(WarmUp.reconfigure(one, idle, two, 2500, "reset"), WarmUp.initial(two, 2500))
    const full = WarmUp.reconfigure(two, WarmUp.full(two, 0), one, 2500, "reset")
    assert.deepStrictEqual(full, { stored: 0, ahead: 0, at: 2500 })
    // a clock behind the anchor stores nothing
    const owing = WarmUp.step(one, idle, 1000, 3).state
    assert.deepStrictEqual(WarmUp.reconfigure(one, owing, two, 500, "proportional"), owing)
  })

  it("from a store of 0: bursty keeps none, warming up starts cold (Guava's doSetRate)", () => {
    const none = WarmUp.config({ permits: 1, periodMillis: 1000, maxBurstMillis: 0 })
    const bursty = WarmUp.config({ permits: 1, periodMillis: 1000, maxBurstMillis: 3000 })
    const warming = WarmUp.config({ permits: 1, periodMillis: 1000, warmupMillis: 4000 })
    const s = WarmUp.initial(none, 0)
    for (const now of [0, 5000]) {
      assert.strictEqual(WarmUp.rate.carryRate(bursty, WarmUp.rate.rateOf(none), s, now).stored, 0)
      assert.strictEqual(WarmUp.rate.carryRate(warming, WarmUp.rate.rateOf(none), s, now).stored, warming.maxPermits)
      assert.strictEqual(WarmUp.reconfigure(none, s, warming, now, "proportional").stored, warming.maxPermits)
    }
  })

  it("withRate keeps an initialPermits of its own (within the new store), else takes the new default", () => {
    const own = WarmUp.config({ permits: 2, periodMillis: 1000, maxBurstMillis: 2000, initialPermits: 3 })
    assert.deepStrictEqual(
      WarmUp.rate.withRate(own, 4, 1000),
      WarmUp.config({ permits: 4, periodMillis: 1000, maxBurstMillis: 2000, initialPermits: 3 })
    )
    // a store of 1 cannot start with 3
    assert.deepStrictEqual(
      WarmUp.rate.withRate(own, 1, 2000),
      WarmUp.config({ permits: 1, periodMillis: 2000, maxBurstMillis: 2000, initialPermits: 1 })
    )
    // bursty starting full is a choice of its own too (its default is 0)
    const fullStart = WarmUp.config({ permits: 2, periodMillis: 1000, maxBurstMillis: 2000, initialPermits: 4 })
    assert.strictEqual(WarmUp.rate.withRate(fullStart, 4, 1000).initialPermits, 4)
    const plain = WarmUp.config({ permits: 2, periodMillis: 1000, maxBurstMillis: 2000 })
    assert.deepStrictEqual(
      WarmUp.rate.withRate(plain, 4, 1000),
      WarmUp.config({ permits: 4, periodMillis: 1000, maxBurstMillis: 2000 })
    )
    const cold = WarmUp.config({ permits: 2, periodMillis: 1000, warmupMillis: 3000, coldFactor: 4 })
    assert.deepStrictEqual(
      WarmUp.rate.withRate(cold, 5, 1000),
      WarmUp.config({ permits: 5, periodMillis: 1000, warmupMillis: 3000, coldFactor: 4 })
    )
    const warm = WarmUp.config({ permits: 2, periodMillis: 1000, warmupMillis: 3000, initialPermits: 0 })
    assert.strictEqual(WarmUp.rate.withRate(warm, 5, 1000).initialPermits, 0)
  })

  it("is exactly full at its settled time, whatever the float rounding", () => {
    // Intervals of 33⅓ ms: the time to full is not a whole number of ms.
    const c = WarmUp.config({ permits: 3, periodMillis: 100, maxBurstMillis: 100, initialPermits: 3 })
    let s = WarmUp.initial(c, 0)
    for (const [now, cost] of [[0, 5], [101, 1], [101, 3]] as const) s = WarmUp.step(c, s, now, cost).state
    const settled = WarmUp.settledAt(c, s)
    assert.strictEqual(WarmUp.resync(c, s, settled).stored, c.maxPermits)
    assert.isTrue(WarmUp.resync(c, s, settled - 1).stored < c.maxPermits)
  })
})
