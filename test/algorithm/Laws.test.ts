/**
 * The contract every algorithm keeps (Algorithm.ts), checked on random
 * sequences for each of them: never NaN, a denial takes nothing, `retryAfter`
 * is the exact first instant of success, `waitTime` agrees with `step` and
 * grows with the line, `resetAfter` agrees with `settledAt`, and forgetting a
 * settled key changes no later decision.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { type Algorithm, bind, type Outcome, takeUpTo } from "../../src/internal/algorithm/Algorithm.ts"
import * as Block from "../../src/internal/algorithm/Block.ts"
import * as Burst from "../../src/internal/algorithm/Burst.ts"
import * as Composite from "../../src/internal/algorithm/Composite.ts"
import * as Concurrency from "../../src/internal/algorithm/Concurrency.ts"
import * as FixedWindow from "../../src/internal/algorithm/FixedWindow.ts"
import * as Gcra from "../../src/internal/algorithm/Gcra.ts"
import * as SlidingLog from "../../src/internal/algorithm/SlidingLog.ts"
import * as SlidingWindow from "../../src/internal/algorithm/SlidingWindow.ts"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"
import * as Unlimited from "../../src/internal/algorithm/Unlimited.ts"
import * as WarmUp from "../../src/internal/algorithm/WarmUp.ts"
import * as Interpreter from "../../src/internal/operation/Interpreter.ts"
import * as Op from "../../src/internal/operation/Op.ts"
import { leakyConfig } from "./support.ts"

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
  /** `retryAfter` may be Infinity below `maxCost` (waiting on a release, or a rate of 0). */
  readonly releases?: boolean
  /** `remaining` does not bound what one request can take (pay later), so a partial take is not the most a step admits. */
  readonly paysLater?: boolean
  /** A `minGap` keeps the key out after a force with units to spare (it shows in retryAfter, not remaining). */
  readonly gapped?: boolean
  /**
   * A forced add and a force of the same units are not inverses: a first-hit
   * window whose count comes back to 0 closes (the next unit opens another),
   * and a composite adds only to the parts that can hold more.
   */
  readonly notInverse?: boolean
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
    name: "token bucket, rate 0 (x/time/rate NewLimiter(0, b))",
    algorithm: TokenBucket.algorithm,
    config: tb({ capacity: 3, tokens: 0, periodMillis: 1000 }),
    scale: 200,
    costs: 4,
    releases: true,
    forgets: true,
    refunds: true
  },
  {
    name: "token bucket, interval refill from a first refill",
    algorithm: TokenBucket.algorithm,
    config: tb({ capacity: 4, tokens: 3, periodMillis: 70, interval: true, firstRefill: 1000 }),
    scale: 150,
    costs: 5,
    forgets: true,
    refunds: true
  },
  {
    name: "token bucket, first refill with adaptive initial tokens",
    algorithm: TokenBucket.algorithm,
    config: tb({ capacity: 6, tokens: 4, periodMillis: 90, interval: true, firstRefill: 50_000, adaptive: true }),
    scale: 150,
    costs: 7,
    forgets: false,
    refunds: false
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
    algorithm: Gcra.algorithm,
    config: leakyConfig({ tokens: 1, periodMillis: 50, burst: 3 }),
    scale: 150,
    costs: 5,
    forgets: true,
    refunds: true
  },
  {
    name: "leaky bucket, delay 2",
    algorithm: Gcra.algorithm,
    config: leakyConfig({ tokens: 3, periodMillis: 100, burst: 5, delay: 2 }),
    scale: 150,
    costs: 7,
    forgets: true,
    refunds: true
  },
  {
    name: "leaky bucket, nodelay",
    algorithm: Gcra.algorithm,
    config: leakyConfig({ tokens: 2, periodMillis: 100, burst: 4, nodelay: true }),
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
    refunds: true,
    notInverse: true
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
    name: "fixed window, countBlocked (rate-limiter-flexible)",
    algorithm: FixedWindow.algorithm,
    config: FixedWindow.config({ limit: 4, windowMillis: 100, countBlocked: true }),
    scale: 150,
    costs: 5,
    logsDenials: true,
    forgets: true,
    notInverse: true
  },
  {
    name: "fixed window, execEvenly (rate-limiter-flexible)",
    algorithm: FixedWindow.algorithm,
    config: FixedWindow.config({ limit: 5, windowMillis: 100, execEvenly: true, minDelay: 7 }),
    scale: 150,
    costs: 6,
    forgets: true,
    refunds: true,
    notInverse: true
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
    forgets: true,
    gapped: true
  },
  {
    name: "sliding log, countBlocked",
    algorithm: SlidingLog.algorithm,
    config: SlidingLog.config({ limit: 3, windowMillis: 50, minGap: 5, countBlocked: true }),
    scale: 60,
    costs: 4,
    logsDenials: true,
    forgets: true,
    gapped: true
  },
  {
    name: "bursty",
    algorithm: WarmUp.algorithm,
    config: WarmUp.config({ permits: 2, periodMillis: 100, maxBurstMillis: 200 }),
    scale: 150,
    costs: 5,
    forgets: false,
    paysLater: true
  },
  {
    name: "bursty, starting full",
    algorithm: WarmUp.algorithm,
    config: WarmUp.config({ permits: 3, periodMillis: 100, maxBurstMillis: 100, initialPermits: 3 }),
    scale: 150,
    costs: 5,
    forgets: true,
    paysLater: true
  },
  {
    name: "warming up",
    algorithm: WarmUp.algorithm,
    config: WarmUp.config({ permits: 1, periodMillis: 10, warmupMillis: 100 }),
    scale: 60,
    costs: 4,
    forgets: true,
    paysLater: true
  },
  {
    name: "warming up, cold factor 5",
    algorithm: WarmUp.algorithm,
    config: WarmUp.config({ permits: 3, periodMillis: 20, warmupMillis: 70, coldFactor: 5 }),
    scale: 60,
    costs: 4,
    forgets: true,
    paysLater: true
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
    refunds: true,
    notInverse: true
  },
  {
    name: "burst: a fixed window counting denials, and a token bucket beside it",
    algorithm: Burst.algorithm,
    config: Burst.config(
      Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 3, windowMillis: 100, countBlocked: true })),
      Composite.part(TokenBucket.algorithm, tb({ capacity: 4, tokens: 1, periodMillis: 80 }))
    ),
    scale: 150,
    costs: 5,
    logsDenials: true,
    forgets: true,
    notInverse: true
  },
  {
    name: "burst: gcra and a sliding window",
    algorithm: Burst.algorithm,
    config: Burst.config(
      Composite.part(Gcra.algorithm, Gcra.config({ maxBurst: 1, count: 1, periodMillis: 30 })),
      Composite.part(SlidingWindow.algorithm, SlidingWindow.config({ limit: 3, windowMillis: 100 }))
    ),
    scale: 150,
    costs: 4,
    forgets: true
  },
  {
    name: "unlimited (x/time/rate rate.Inf)",
    algorithm: Unlimited.algorithm,
    config: Unlimited.config,
    scale: 100,
    costs: 1000,
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
          let compared = 0
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
                if (settled === Infinity) {
                  // Never settles (units held, or no refill): forgetting it
                  // would change a decision however long it waits, which is
                  // why it is kept. A year on, it still stands apart from a
                  // new key.
                  const later = now + 365 * 86_400_000
                  assert.notDeepEqual(
                    [0, 1, k.costs].map((cost) => figures(A.step(k.config as never, s as never, later, cost))),
                    [0, 1, k.costs].map((cost) =>
                      figures(A.step(k.config as never, A.initial(k.config as never, later) as never, later, cost))
                    ),
                    "a key that never settles differs from a new one"
                  )
                  return
                }
                // -Infinity (unlimited): settled from the start
                let t = Math.max(settled, now) + gap
                let kept = s
                let forgotten: unknown = A.initial(k.config as never, t)
                for (const { cost, delta } of after) {
                  const a = A.step(k.config as never, kept as never, t, cost)
                  const b = A.step(k.config as never, forgotten as never, t, cost)
                  assert.deepStrictEqual(figures(a), figures(b))
                  compared++
                  kept = a.state
                  forgotten = b.state
                  t += delta
                }
              }
            ),
            { numRuns: 200 }
          )
          // The law must be exercised, not skipped: for every kind, many
          // steps after a forgetting were compared.
          assert.isAtLeast(compared, 50, "steps compared after forgetting a settled key")
        })
      }
    })
  }
})

// ---------------------------------------------------------------------------
// Beyond the limit: force (a debt), forceAdd (a credit), full, a partial take
// and a block. The per-step laws above must hold on every state these reach,
// and each has a law of its own.

type Move =
  | { readonly _tag: "step"; readonly delta: number; readonly cost: number }
  | { readonly _tag: "force"; readonly delta: number; readonly cost: number }
  | { readonly _tag: "forceAdd"; readonly delta: number; readonly cost: number }
  | { readonly _tag: "full"; readonly delta: number; readonly cost: number }
  | { readonly _tag: "takeUpTo"; readonly delta: number; readonly cost: number }

const moves = (k: Case): fc.Arbitrary<ReadonlyArray<Move>> => {
  const base = { delta: delta(k.scale, true), cost: fc.integer({ min: 0, max: 2 * k.costs }) }
  return fc.array(
    fc.oneof(
      { weight: 5, arbitrary: fc.record({ _tag: fc.constant("step" as const), ...base }) },
      { weight: 3, arbitrary: fc.record({ _tag: fc.constant("force" as const), ...base }) },
      {
        weight: k.algorithm.forceAdd === undefined ? 0 : 2,
        arbitrary: fc.record({ _tag: fc.constant("forceAdd" as const), ...base })
      },
      { weight: 1, arbitrary: fc.record({ _tag: fc.constant("full" as const), ...base }) },
      { weight: 2, arbitrary: fc.record({ _tag: fc.constant("takeUpTo" as const), ...base }) }
    ),
    { maxLength: 25 }
  )
}

const apply = (k: Case, s: unknown, now: number, m: Move): unknown => {
  const A = k.algorithm as Algorithm<unknown, unknown>
  const c = k.config
  switch (m._tag) {
    case "step":
      return A.step(c, s, now, m.cost).state
    case "force":
      return A.force(c, s, now, m.cost)
    case "forceAdd":
      return A.forceAdd!(c, s, now, m.cost)
    case "full":
      return A.full === undefined ? A.initial(c, now) : A.full(c, now)
    case "takeUpTo":
      return takeUpTo(A, c, s, now, m.cost).outcome.state
  }
}

// The figures of a state as it stands at `now`: what a step of no units and
// a unit request are told.
const standing = (k: Case, s: unknown, now: number) => {
  const A = k.algorithm as Algorithm<unknown, unknown>
  return [figures(A.step(k.config, s, now, 0)), figures(A.step(k.config, s, now, 1))]
}

describe("beyond the limit", () => {
  for (const k of cases) {
    describe(k.name, () => {
      const A = k.algorithm as Algorithm<unknown, unknown>
      const c = k.config
      it("the laws of a step hold on every state a force, a forced add, a fill or a partial take reaches", () => {
        fc.assert(
          fc.property(start, moves(k), fc.integer({ min: 1, max: k.costs }), (t0, run, cost) => {
            let s = A.initial(c, t0)
            let now = t0
            for (const m of run) {
              now += m.delta
              s = apply(k, s, now, m)
              assertNoNaN(s, `state after ${m._tag}`)
              checkStep(k, s, now, cost)
            }
          }),
          { numRuns: 150 }
        )
      })

      it("a force leaves the key out of its limit for exactly the debt it reports", () => {
        fc.assert(
          fc.property(start, moves(k), fc.integer({ min: 0, max: 3 * k.costs }), (t0, run, cost) => {
            let s = A.initial(c, t0)
            let now = t0
            for (const m of run) {
              now += m.delta
              s = apply(k, s, now, m)
            }
            const before = A.step(c, s, now, 0)
            const forced = A.force(c, s, now, cost)
            const within = A.step(c, forced, now, 0)
            assert.isTrue(within.remaining >= 0)
            // Whether or not it runs into debt, a force takes every unit it is
            // told to: what remains drops by the cost (to 0 at most). A burst
            // forces its base limit only: the allowance beside it stays.
            if (!Number.isFinite(before.remaining)) {
              assert.isTrue(within.allowed, "nothing is ever out of an unlimited key")
            } else if (A !== Burst.algorithm) {
              assert.isAtMost(within.remaining, Math.max(0, before.remaining - cost), "a force takes its cost")
            } else {
              assert.isAtMost(within.remaining, before.remaining, "a force gives nothing back")
            }
            if (within.allowed) return
            // the debt: when a request of no units is admitted again, exactly
            const debt = within.retryAfter
            assert.isTrue(debt > 0)
            if (!Number.isFinite(debt)) return
            assert.isTrue(A.step(c, forced, now + debt, 0).allowed, "within the limit when the debt is paid")
            assert.isFalse(A.step(c, forced, now + debt - 1, 0).allowed, "and not before")
            if (!k.gapped) assert.strictEqual(within.remaining, 0, "nothing remains while in debt")
          }),
          { numRuns: 150 }
        )
      })

      if (k.algorithm.forceAdd !== undefined && !k.notInverse) {
        it("a forced add and a force of the same units undo each other", () => {
          fc.assert(
            fc.property(start, moves(k), fc.integer({ min: 0, max: 3 * k.costs }), (t0, run, amount) => {
              let s = A.initial(c, t0)
              let now = t0
              for (const m of run) {
                now += m.delta
                s = apply(k, s, now, m)
              }
              const there = standing(k, s, now)
              assert.deepStrictEqual(standing(k, A.force(c, A.forceAdd!(c, s, now, amount), now, amount), now), there)
              assert.deepStrictEqual(standing(k, A.forceAdd!(c, A.force(c, s, now, amount), now, amount), now), there)
            }),
            { numRuns: 150 }
          )
        })
      }

      it("full is settled at once and no stricter than a new key", () => {
        fc.assert(
          fc.property(start, fc.integer({ min: 1, max: k.costs }), (t0, cost) => {
            const full = A.full === undefined ? A.initial(c, t0) : A.full(c, t0)
            assert.isTrue(A.settledAt(c, full) <= t0, "a full key has settled")
            const fresh = A.step(c, A.initial(c, t0), t0, cost)
            if (fresh.allowed) assert.isTrue(A.step(c, full, t0, cost).allowed)
            assert.isTrue(A.step(c, full, t0, 0).remaining >= A.step(c, A.initial(c, t0), t0, 0).remaining)
          }),
          { numRuns: 100 }
        )
      })

      it("a partial take takes the most one step admits, up to what is there, and nothing else", () => {
        fc.assert(
          fc.property(start, moves(k), fc.integer({ min: 0, max: 3 * k.costs }), (t0, run, most) => {
            let s = A.initial(c, t0)
            let now = t0
            for (const m of run) {
              now += m.delta
              s = apply(k, s, now, m)
            }
            const { outcome, taken } = takeUpTo(A, c, s, now, most)
            assertNoNaN(outcome, "outcome")
            assert.isTrue(taken >= 0 && taken <= most && Number.isInteger(taken))
            assert.strictEqual(outcome.allowed, taken > 0)
            if (taken > 0) assert.deepStrictEqual(outcome, A.step(c, s, now, taken), "the step that took them")
            else assert.strictEqual(outcome.state, s, "taking none changes nothing")
            const there = A.step(c, s, now, 0).remaining
            if (!k.paysLater && taken < Math.min(most, there)) {
              assert.isFalse(A.step(c, s, now, taken + 1).allowed, "one more would not fit")
            }
          }),
          { numRuns: 150 }
        )
      })

      it("a block denies everything until it ends, exactly, and is the policy from then on", () => {
        fc.assert(
          fc.property(
            start,
            moves(k),
            fc.integer({ min: 0, max: 4 * k.scale }),
            fc.integer({ min: 0, max: k.costs }),
            (t0, run, length, cost) => {
              let s = A.initial(c, t0)
              let now = t0
              for (const m of run) {
                now += m.delta
                s = apply(k, s, now, m)
              }
              // the key blocked until now + length, as the interpreter keeps it
              const policy = { rule: bindRule(k), blockMillis: 0 }
              const stored = new Block.Stored(now + length, s)
              const admit = (at: number) => Interpreter.applyOne(policy, stored, at, Op.make(Op.Kind.Admit, cost))
              const [o, after] = admit(now)
              if (length > 0) {
                assert.strictEqual((after as Block.Stored).state, s, "a blocked request takes nothing")
                assert.isFalse(o.allowed, "blocked")
                assert.strictEqual(o.remaining, 0)
                assert.isTrue(o.retryAfter >= length)
                // fresh neither before the block ends nor before the policy is
                assert.isTrue(o.resetAfter >= length)
                assert.isTrue(o.resetAfter >= A.step(c, s, now, 0).resetAfter)
                const [wait] = Interpreter.applyOne(policy, stored, now, Op.make(Op.Kind.WaitTime, cost))
                assert.strictEqual(wait.retryAfter, o.retryAfter)
                assert.isTrue(Interpreter.settledAt(policy, stored) >= now + length)
              }
              if (!o.allowed && Number.isFinite(o.retryAfter) && !k.logsDenials) {
                assert.isTrue(admit(now + o.retryAfter)[0].allowed, "admitted at retryAfter")
                assert.isFalse(admit(now + o.retryAfter - 1)[0].allowed, "and not before")
              }
              // once it ends, the policy's own decision
              assert.deepStrictEqual(admit(now + length)[0], Interpreter.replyOf(A.step(c, s, now + length, cost)))
            }
          ),
          { numRuns: 150 }
        )
      })
    })
  }
})

const bindRule = (k: Case) => bind(k.algorithm, k.config)
