/**
 * A burst policy (rate-limiter-flexible's BurstyRateLimiter) against its
 * definition: the base limit decides first; what it denies, the burst
 * allowance beside it may admit. Each part runs as its own module, apart:
 * the base sees every request (a denial it counts stays counted), the burst
 * only those the base denied. The figures add up the two limits; a refund,
 * a force and a forced add go to the base alone.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import type { Algorithm, Outcome } from "../../src/internal/algorithm/Algorithm.ts"
import * as Burst from "../../src/internal/algorithm/Burst.ts"
import * as Composite from "../../src/internal/algorithm/Composite.ts"
import * as Concurrency from "../../src/internal/algorithm/Concurrency.ts"
import * as FixedWindow from "../../src/internal/algorithm/FixedWindow.ts"
import * as Gcra from "../../src/internal/algorithm/Gcra.ts"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"
import * as WarmUp from "../../src/internal/algorithm/WarmUp.ts"
import { leakyConfig } from "./support.ts"

interface Part {
  readonly algorithm: Algorithm<unknown, unknown>
  readonly config: unknown
}
const part = <C, S>(algorithm: Algorithm<C, S>, config: C): Part => ({
  algorithm: algorithm as Algorithm<unknown, unknown>,
  config
})

const pairs: ReadonlyArray<readonly [string, Part, Part]> = [
  [
    "a fixed window counting denials, a token bucket beside it",
    part(FixedWindow.algorithm, FixedWindow.config({ limit: 3, windowMillis: 100, countBlocked: true })),
    part(TokenBucket.algorithm, TokenBucket.config({ capacity: 4, tokens: 1, periodMillis: 80 }))
  ],
  [
    "a leaky bucket that delays, a fixed window beside it",
    part(Gcra.algorithm, leakyConfig({ tokens: 1, periodMillis: 50, burst: 3, delay: 1 })),
    part(FixedWindow.algorithm, FixedWindow.config({ limit: 2, windowMillis: 200 }))
  ],
  [
    "a token bucket, a leaky bucket that delays beside it",
    part(TokenBucket.algorithm, TokenBucket.config({ capacity: 2, tokens: 1, periodMillis: 60 })),
    part(Gcra.algorithm, leakyConfig({ tokens: 1, periodMillis: 40, burst: 2, delay: 0 }))
  ],
  [
    "a concurrency limit (no forced add), a fixed window beside it",
    part(Concurrency.algorithm, Concurrency.config({ capacity: 2 })),
    part(FixedWindow.algorithm, FixedWindow.config({ limit: 2, windowMillis: 100 }))
  ],
  [
    "a smooth rate (no refund, no forced add), a token bucket beside it",
    part(WarmUp.algorithm, WarmUp.config({ permits: 1, periodMillis: 50 })),
    part(TokenBucket.algorithm, TokenBucket.config({ capacity: 3, tokens: 1, periodMillis: 100 }))
  ]
]

type Move = "step" | "release" | "force" | "forceAdd"

const run = fc.array(
  fc.record({
    delta: fc.integer({ min: -30, max: 120 }),
    cost: fc.integer({ min: 0, max: 5 }),
    move: fc.constantFrom<Move>("step", "step", "step", "release", "force", "forceAdd")
  }),
  { maxLength: 30 }
)

// What a part says as it stands: the figures of a step of no units.
const standing = (p: Part, s: unknown, now: number): Outcome<unknown> => p.algorithm.step(p.config, s, now, 0)

describe("Burst", () => {
  for (const [name, base, burst] of pairs) {
    it(`${name}: the base first, the burst for what it denies, the figures of both`, () => {
      const c = Burst.config(Composite.part(base.algorithm, base.config), Composite.part(burst.algorithm, burst.config))
      const limit = base.algorithm.step(base.config, base.algorithm.initial(base.config, 0), 0, 0).limit +
        burst.algorithm.step(burst.config, burst.algorithm.initial(burst.config, 0), 0, 0).limit
      fc.assert(
        fc.property(fc.integer({ min: -1e6, max: 1e6 }), run, (t0, moves) => {
          let s = Burst.initial(c, t0)
          let b = base.algorithm.initial(base.config, t0)
          let x = burst.algorithm.initial(burst.config, t0)
          let now = t0
          for (const { cost, delta, move } of moves) {
            now += delta
            switch (move) {
              case "step": {
                const o = Burst.step(c, s, now, cost)
                const ob = base.algorithm.step(base.config, b, now, cost)
                assert.strictEqual(o.limit, limit)
                if (ob.allowed) {
                  const rest = standing(burst, x, now)
                  assert.isTrue(o.allowed)
                  assert.strictEqual(o.by, "base")
                  assert.strictEqual(o.delay, ob.delay)
                  assert.strictEqual(o.remaining, ob.remaining + rest.remaining)
                  assert.strictEqual(o.resetAfter, Math.max(ob.resetAfter, rest.resetAfter))
                  b = ob.state
                } else {
                  const ox = burst.algorithm.step(burst.config, x, now, cost)
                  assert.strictEqual(o.allowed, ox.allowed)
                  if (ox.allowed) {
                    const left = standing(base, ob.state, now)
                    assert.strictEqual(o.by, "burst")
                    assert.strictEqual(o.delay, ox.delay)
                    assert.strictEqual(o.remaining, left.remaining + ox.remaining)
                    assert.strictEqual(o.resetAfter, Math.max(left.resetAfter, ox.resetAfter))
                  } else {
                    assert.strictEqual(o.by, undefined)
                    assert.strictEqual(o.retryAfter, Math.min(ob.retryAfter, ox.retryAfter))
                    assert.strictEqual(o.remaining, ob.remaining + ox.remaining)
                    assert.strictEqual(o.resetAfter, Math.max(ob.resetAfter, ox.resetAfter))
                    // a denial that changes neither part changes nothing
                    if (ob.state === b && ox.state === x) assert.strictEqual(o.state, s)
                  }
                  b = ob.state
                  x = ox.state
                }
                s = o.state
                break
              }
              case "release":
                s = Burst.release(c, s, now, cost)
                if (base.algorithm.release !== undefined) b = base.algorithm.release(base.config, b, now, cost)
                break
              case "force":
                s = Burst.force(c, s, now, cost)
                b = base.algorithm.force(base.config, b, now, cost)
                break
              case "forceAdd":
                s = Burst.forceAdd(c, s, now, cost)
                if (base.algorithm.forceAdd !== undefined) b = base.algorithm.forceAdd(base.config, b, now, cost)
                break
            }
            assert.deepStrictEqual(s, [b, x], `after ${move}`)
            assert.strictEqual(
              Burst.waitTime(c, s, now, 1, 1),
              Math.min(
                base.algorithm.waitTime(base.config, b, now, 1, 1),
                burst.algorithm.waitTime(burst.config, x, now, 1, 1)
              )
            )
          }
        }),
        { numRuns: 150 }
      )
    })
  }

  it("a move that changes nothing keeps the very same state", () => {
    const c = Burst.config(
      Composite.part(WarmUp.algorithm, WarmUp.config({ permits: 1, periodMillis: 50 })),
      Composite.part(TokenBucket.algorithm, TokenBucket.config({ capacity: 3, tokens: 1, periodMillis: 100 }))
    )
    const s = Burst.initial(c, 0)
    // the smooth rate has no refund and no forced add
    assert.strictEqual(Burst.release(c, s, 10, 1), s)
    assert.strictEqual(Burst.forceAdd(c, s, 10, 1), s)
    const u = Burst.config(
      Composite.part(TokenBucket.algorithm, TokenBucket.config({ capacity: 3, tokens: 1, periodMillis: 100 })),
      Composite.part(TokenBucket.algorithm, TokenBucket.config({ capacity: 3, tokens: 1, periodMillis: 100 }))
    )
    const fresh = Burst.initial(u, 0)
    // a force touches the base alone: the burst's state is the same object
    assert.strictEqual(Burst.force(u, fresh, 0, 2)[1], fresh[1])
  })
})
