/**
 * The contract every algorithm keeps (Algorithm.ts), checked on random
 * sequences for each of them: never NaN, a denial takes nothing, `retryAfter`
 * is the exact first instant of success, `waitTime` agrees with `step` and
 * grows with the line, `resetAfter` agrees with `settledAt`, and forgetting a
 * settled key changes no later decision.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import type { Algorithm, Outcome } from "../../src/internal/algorithm/Algorithm.ts"
import * as Composite from "../../src/internal/algorithm/Composite.ts"
import * as Concurrency from "../../src/internal/algorithm/Concurrency.ts"
import * as FixedWindow from "../../src/internal/algorithm/FixedWindow.ts"
import * as Gcra from "../../src/internal/algorithm/Gcra.ts"
import * as LeakyBucket from "../../src/internal/algorithm/LeakyBucket.ts"
import * as SlidingLog from "../../src/internal/algorithm/SlidingLog.ts"
import * as SlidingWindow from "../../src/internal/algorithm/SlidingWindow.ts"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"
import * as WarmUp from "../../src/internal/algorithm/WarmUp.ts"

interface Case {
  readonly name: string
  readonly algorithm: Algorithm<any, any>
  readonly config: unknown
  /** A time scale for the random deltas (about a period or a window). */
  readonly scale: number
  /** Costs are drawn from 1 to this (above `maxCost` on purpose). */
  readonly costs: number
  /** A denial may change the state (sliding log with `countBlocked`). */
  readonly logsDenials?: boolean
  /** `retryAfter` may be Infinity below `maxCost` (waiting on a release). */
  readonly releases?: boolean
  /** A settled key behaves exactly as a new one. */
  readonly forgets: boolean
  /** Releasing what a request took undoes it exactly; releasing everything makes the key new. */
  readonly refunds?: boolean
}

const tb = (options: Parameters<typeof TokenBucket.config>[0]) => TokenBucket.config(options)

const cases: ReadonlyArray<Case> = [
  {
    name: "token bucket",
    algorithm: TokenBucket.algorithm,
    config: tb({ capacity: 5, tokens: 2, periodMillis: 100 }),
    scale: 200,
    costs: 6,
    forgets: true,
    refunds: true
  },
  {
    name: "token bucket, 1000 per ms",
    algorithm: TokenBucket.algorithm,
    config: tb({ capacity: 3000, tokens: 1000, periodMillis: 1 }),
    scale: 5,
    costs: 3500,
    forgets: true,
    refunds: true
  },
  {
    name: "token bucket, fractional",
    algorithm: TokenBucket.algorithm,
    config: tb({ capacity: 2.5, tokens: 0.5, periodMillis: 100 }),
    scale: 500,
    costs: 3,
    forgets: true,
    refunds: true
  },
  {
    name: "gcra",
    algorithm: Gcra.algorithm,
    config: Gcra.config({ maxBurst: 4, count: 2, periodMillis: 100 }),
    scale: 200,
    costs: 6,
    forgets: true,
    refunds: true
  },
  {
    name: "gcra, T = 0.2 ms",
    algorithm: Gcra.algorithm,
    config: Gcra.config({ maxBurst: 2, count: 5000, periodMillis: 1000 }),
    scale: 3,
    costs: 4,
    forgets: true,
    refunds: true
  },
  {
    name: "gcra, T = 1000/3 ms",
    algorithm: Gcra.algorithm,
    config: Gcra.config({ maxBurst: 0, count: 3, periodMillis: 1000 }),
    scale: 1000,
    costs: 2,
    forgets: true,
    refunds: true
  },
  {
    name: "leaky bucket",
    algorithm: LeakyBucket.algorithm,
    config: LeakyBucket.config({ tokens: 1, periodMillis: 50, burst: 3 }),
    scale: 150,
    costs: 5,
    forgets: true,
    refunds: true
  },
  {
    name: "leaky bucket, delay 2",
    algorithm: LeakyBucket.algorithm,
    config: LeakyBucket.config({ tokens: 3, periodMillis: 100, burst: 5, delay: 2 }),
    scale: 150,
    costs: 7,
    forgets: true,
    refunds: true
  },
  {
    name: "leaky bucket, nodelay",
    algorithm: LeakyBucket.algorithm,
    config: LeakyBucket.config({ tokens: 2, periodMillis: 100, burst: 4, nodelay: true }),
    scale: 150,
    costs: 6,
    forgets: true,
    refunds: true
  },
  {
    name: "fixed window, first hit",
    algorithm: FixedWindow.algorithm,
    config: FixedWindow.config({ limit: 5, windowMillis: 100 }),
    scale: 150,
    costs: 6,
    forgets: true,
    refunds: true
  },
  {
    name: "fixed window, aligned",
    algorithm: FixedWindow.algorithm,
    config: FixedWindow.config({ limit: 5, windowMillis: 100, align: true }),
    scale: 150,
    costs: 6,
    forgets: true,
    refunds: true
  },
  {
    name: "fixed window, fractional limit",
    algorithm: FixedWindow.algorithm,
    config: FixedWindow.config({ limit: 2.5, windowMillis: 30, align: true }),
    scale: 50,
    costs: 3,
    forgets: true,
    refunds: true
  },
  {
    name: "sliding window",
    algorithm: SlidingWindow.algorithm,
    config: SlidingWindow.config({ limit: 5, windowMillis: 100 }),
    scale: 150,
    costs: 6,
    forgets: true,
    refunds: true
  },
  {
    name: "sliding window, odd sizes",
    algorithm: SlidingWindow.algorithm,
    config: SlidingWindow.config({ limit: 3, windowMillis: 7 }),
    scale: 12,
    costs: 4,
    forgets: true,
    refunds: true
  },
  {
    name: "sliding log",
    algorithm: SlidingLog.algorithm,
    config: SlidingLog.config({ limit: 4, windowMillis: 100 }),
    scale: 150,
    costs: 5,
    forgets: true,
    refunds: true
  },
  {
    name: "sliding log, minGap",
    algorithm: SlidingLog.algorithm,
    config: SlidingLog.config({ limit: 3, windowMillis: 50, minGap: 10 }),
    scale: 60,
    costs: 4,
    forgets: true
  },
  {
    name: "sliding log, countBlocked",
    algorithm: SlidingLog.algorithm,
    config: SlidingLog.config({ limit: 3, windowMillis: 50, minGap: 5, countBlocked: true }),
    scale: 60,
    costs: 4,
    logsDenials: true,
    forgets: true
  },
  {
    name: "bursty",
    algorithm: WarmUp.algorithm,
    config: WarmUp.config({ permits: 2, periodMillis: 100, maxBurstMillis: 200 }),
    scale: 150,
    costs: 5,
    forgets: false
  },
  {
    name: "bursty, starting full",
    algorithm: WarmUp.algorithm,
    config: WarmUp.config({ permits: 3, periodMillis: 100, maxBurstMillis: 100, initialPermits: 3 }),
    scale: 150,
    costs: 5,
    forgets: true
  },
  {
    name: "warming up",
    algorithm: WarmUp.algorithm,
    config: WarmUp.config({ permits: 1, periodMillis: 10, warmupMillis: 100 }),
    scale: 60,
    costs: 4,
    forgets: true
  },
  {
    name: "warming up, cold factor 5",
    algorithm: WarmUp.algorithm,
    config: WarmUp.config({ permits: 3, periodMillis: 20, warmupMillis: 70, coldFactor: 5 }),
    scale: 60,
    costs: 4,
    forgets: true
  },
  {
    name: "composite: token bucket and fixed window",
    algorithm: Composite.algorithm,
    config: Composite.config([
      Composite.part(TokenBucket.algorithm, tb({ capacity: 3, tokens: 3, periodMillis: 100 })),
      Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 5, windowMillis: 300, align: true }))
    ]),
    scale: 200,
    costs: 4,
    forgets: true,
    refunds: true
  },
  {
    name: "composite: gcra and sliding log with countBlocked",
    algorithm: Composite.algorithm,
    config: Composite.config([
      Composite.part(Gcra.algorithm, Gcra.config({ maxBurst: 2, count: 1, periodMillis: 20 })),
      Composite.part(SlidingLog.algorithm, SlidingLog.config({ limit: 4, windowMillis: 100, countBlocked: true }))
    ]),
    scale: 100,
    costs: 5,
    logsDenials: true,
    forgets: true,
    refunds: true
  },
  {
    name: "concurrency",
    algorithm: Concurrency.algorithm,
    config: Concurrency.config({ capacity: 3 }),
    scale: 50,
    costs: 4,
    releases: true,
    forgets: true,
    refunds: true
  },
  {
    name: "concurrency, replenished",
    algorithm: Concurrency.algorithm,
    config: Concurrency.config({ capacity: 3, replenish: { tokens: 1, periodMillis: 10 } }),
    scale: 50,
    costs: 4,
    releases: true,
    forgets: true
  }
]

interface Step {
  readonly delta: number
  readonly cost: number
}

const delta = (scale: number, backwards: boolean) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: scale }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: backwards ? 2 : 0, arbitrary: fc.integer({ min: -scale, max: -1 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 1e12 }) }
  )

const steps = (k: Case, backwards: boolean, maxLength = 30): fc.Arbitrary<ReadonlyArray<Step>> =>
  fc.array(fc.record({ delta: delta(k.scale, backwards), cost: fc.integer({ min: 1, max: k.costs }) }), {
    maxLength
  })

const start = fc.oneof(fc.constant(0), fc.integer({ min: -1e6, max: 1e6 }), fc.integer({ min: 0, max: 2 ** 45 }))

const assertNoNaN = (value: unknown, path: string): void => {
  if (typeof value === "number") assert.isFalse(Number.isNaN(value), `${path} is NaN`)
  else if (Array.isArray(value)) value.forEach((v, i) => assertNoNaN(v, `${path}[${i}]`))
  else if (typeof value === "object" && value !== null) {
    for (const [key, v] of Object.entries(value)) assertNoNaN(v, `${path}.${key}`)
  }
}

// Every figure of an outcome but its state.
const figures = (o: Outcome<unknown>): Record<string, unknown> => {
  const { state: _, ...rest } = o
  return rest
}

// All the per-step laws; returns the outcome to continue the run with.
const checkStep = (k: Case, s: unknown, now: number, cost: number): Outcome<unknown> => {
  const { algorithm: A, config: c } = k
  const o = A.step(c as never, s as never, now, cost)
  assertNoNaN(o, "outcome")
  const maxCost = A.maxCost(c as never)
  assert.isTrue(o.retryAfter >= 0)
  assert.isTrue(o.resetAfter >= 0)
  assert.isTrue(o.remaining >= 0 && (Number.isInteger(o.remaining) || o.remaining === Infinity))
  if (o.allowed) {
    assert.strictEqual(o.retryAfter, 0)
  } else {
    if (!k.logsDenials) assert.strictEqual(o.state, s, "a denial changes nothing")
    if (cost > maxCost) assert.strictEqual(o.retryAfter, Infinity)
    else if (!k.releases) assert.isTrue(Number.isFinite(o.retryAfter), "only cost above maxCost is never")
    assert.isTrue(o.retryAfter > 0)
    if (Number.isFinite(o.retryAfter)) {
      // Exactly then, and not a millisecond before (with nothing else happening).
      assert.isTrue(A.step(c as never, o.state as never, now + o.retryAfter, cost).allowed, "succeeds at retryAfter")
      assert.isFalse(A.step(c as never, o.state as never, now + o.retryAfter - 1, cost).allowed, "not before")
    }
  }
  const w0 = A.waitTime(c as never, s as never, now, 0, cost)
  assertNoNaN(w0, "waitTime")
  if (o.allowed) assert.strictEqual(w0, 0)
  else if (!k.logsDenials) assert.strictEqual(w0, o.retryAfter)
  else {
    assert.isTrue(w0 > 0)
    if (Number.isFinite(w0)) {
      assert.isTrue(A.step(c as never, s as never, now + w0, cost).allowed)
      assert.isFalse(A.step(c as never, s as never, now + w0 - 1, cost).allowed)
    }
  }
  let previous = w0
  for (const queued of [1, 2, 3, 5, 8, 13, 40]) {
    const w = A.waitTime(c as never, s as never, now, queued, cost)
    assertNoNaN(w, "waitTime")
    assert.isTrue(w >= previous, `waitTime grows with the line (${queued}: ${w} < ${previous})`)
    previous = w
  }
  assertNoNaN(A.settledAt(c as never, o.state as never), "settledAt")
  return o
}

describe("algorithm laws", () => {
  for (const k of cases) {
    describe(k.name, () => {
      it("never NaN; denials take nothing; retryAfter and waitTime are exact", () => {
        fc.assert(
          fc.property(start, steps(k, true), (t0, run) => {
            let s: unknown = k.algorithm.initial(k.config as never, t0)
            let now = t0
            for (const { cost, delta } of run) {
              now += delta
              s = checkStep(k, s, now, cost).state
            }
          }),
          { numRuns: 200 }
        )
      })

      it("resetAfter agrees with settledAt on a clock that never goes back", () => {
        fc.assert(
          fc.property(start, steps(k, false), (t0, run) => {
            const A = k.algorithm
            let s: unknown = A.initial(k.config as never, t0)
            let now = t0
            for (const { cost, delta } of run) {
              now += delta
              const o = A.step(k.config as never, s as never, now, cost)
              const settled = A.settledAt(k.config as never, o.state as never)
              if (o.resetAfter === 0) assert.isTrue(settled <= now, `settled at ${settled} after ${now}`)
              else assert.strictEqual(settled, now + o.resetAfter)
              s = o.state
            }
          }),
          { numRuns: 200 }
        )
      })

      if (k.refunds) {
        it("release undoes a request exactly, and releasing everything makes the key new", () => {
          const release = k.algorithm.release!
          fc.assert(
            fc.property(
              start,
              steps(k, true),
              fc.integer({ min: 1, max: k.costs }),
              steps(k, false),
              (t0, before, cost, after) => {
                const A = k.algorithm
                const c = k.config as never
                let s: unknown = A.initial(c, t0)
                let now = t0
                let latest = t0
                for (const { cost, delta } of before) {
                  now += delta
                  latest = Math.max(latest, now)
                  s = A.step(c, s as never, now, cost).state
                }
                const o = A.step(c, s as never, now, cost)
                // Each pair: a released state, and the state it must decide
                // exactly like from `now` on (or from `latest`, not before any
                // anchor, when it is compared with a new key).
                const pairs: ReadonlyArray<readonly [unknown, unknown, number]> = [
                  [release(c, s as never, now, 0), s, now],
                  [release(c, A.initial(c, latest) as never, latest, cost), A.initial(c, latest), latest],
                  [release(c, s as never, latest, 1e9), A.initial(c, latest), latest],
                  ...(o.allowed ? [[release(c, o.state as never, now, cost), s, now] as const] : [])
                ]
                for (const [released, expected, from] of pairs) {
                  assertNoNaN(released, "released")
                  let x = released
                  let y = expected
                  let t = from
                  for (const { cost, delta } of after) {
                    const a = A.step(c, x as never, t, cost)
                    const b = A.step(c, y as never, t, cost)
                    assert.deepStrictEqual(figures(a), figures(b))
                    x = a.state
                    y = b.state
                    t += delta
                  }
                }
              }
            ),
            { numRuns: 200 }
          )
        })
      }

      if (k.forgets) {
        it("forgetting a settled key changes no later decision", () => {
          fc.assert(
            fc.property(
              start,
              steps(k, true),
              fc.integer({ min: 0, max: 2 * k.scale }),
              steps(k, false),
              (t0, before, gap, after) => {
                const A = k.algorithm
                let s: unknown = A.initial(k.config as never, t0)
                let now = t0
                for (const { cost, delta } of before) {
                  now += delta
                  s = A.step(k.config as never, s as never, now, cost).state
                }
                const settled = A.settledAt(k.config as never, s as never)
                if (!Number.isFinite(settled)) return
                let t = Math.max(settled, now) + gap
                let kept = s
                let forgotten: unknown = A.initial(k.config as never, t)
                for (const { cost, delta } of after) {
                  const a = A.step(k.config as never, kept as never, t, cost)
                  const b = A.step(k.config as never, forgotten as never, t, cost)
                  assert.deepStrictEqual(figures(a), figures(b))
                  kept = a.state
                  forgotten = b.state
                  t += delta
                }
              }
            ),
            { numRuns: 200 }
          )
        })
      }
    })
  }
})
