import * as fc from "fast-check"
import * as Gcra from "../../src/internal/algorithm/Gcra.ts"
/**
 * Helpers shared by the algorithm property tests.
 */

/**
 * The least r in [0, hi] with ok(r), for ok monotone in r; Infinity if none.
 * The models use it to find the exact retryAfter by search.
 */
export const least = (ok: (r: number) => boolean, hi: number): number => {
  if (!ok(hi)) return Infinity
  let lo = 0
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2)
    if (ok(mid)) hi = mid
    else lo = mid + 1
  }
  return lo
}

/**
 * Random runs for window algorithms: mostly steps within a window, some
 * repeated instants, some steps back, a few huge jumps; costs up to one past
 * the limit.
 */
export const windowRuns = (window: number, limit: number) => {
  const delta = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: window }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 2, arbitrary: fc.integer({ min: -window, max: -1 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 1e12 }) }
  )
  return fc.array(fc.record({ delta, cost: fc.integer({ min: 1, max: limit + 1 }) }), { maxLength: 40 })
}

/**
 * The leaky bucket in nginx's terms (rate `tokens` per `periodMillis`,
 * `burst`, `delay` or `nodelay`): GCRA as a shaper, the one module that runs
 * both.
 */
export const leakyConfig = (o: {
  readonly tokens: number
  readonly periodMillis: number
  readonly burst?: number | undefined
  readonly delay?: number | undefined
  readonly nodelay?: boolean | undefined
}): Gcra.Config =>
  Gcra.config({
    count: o.tokens,
    periodMillis: o.periodMillis,
    maxBurst: o.burst ?? 0,
    delay: o.nodelay === true ? Infinity : o.delay ?? 0
  })
