/**
 * Wait mode (tollgate only): `callers` fibers loop on `limiter.wait(key)` on
 * one key whose bucket holds `capacity` tokens and refills `rate` per second,
 * on the real clock, for `seconds`, after a short untimed run that empties
 * the bucket. Every admission is stamped with `performance.now()` as its
 * caller resumes.
 */
import { Effect } from "effect"
import * as Policy from "../src/Policy.ts"
import { makeTollgate, type TollgateVariant } from "./contenders.ts"
import { quantile } from "./stats.ts"
import type { WaitResult } from "./types.ts"

export const runWait = async (
  variant: TollgateVariant,
  options: { readonly capacity: number; readonly rate: number; readonly callers: number; readonly seconds: number }
): Promise<WaitResult> => {
  const { callers, capacity, rate, seconds } = options
  const base = { id: variant.id, label: variant.label, capacity, ratePerSecond: rate, callers, seconds }
  const handle = await makeTollgate(
    variant,
    Policy.tokenBucket({ capacity, refill: { tokens: rate, per: "1 second" } }),
    { maxWaiters: callers * 2 }
  )
  const stamps: Array<number> = []
  let deadline = 0
  const worker = Effect.gen(function*() {
    while (performance.now() < deadline) {
      yield* handle.limiter.wait("saturated")
      stamps.push(performance.now())
    }
  })
  const slots = Array.from({ length: callers }, (_, i) => i)
  try {
    // Saturate the key first (a short untimed run), then measure.
    deadline = performance.now() + 200
    await Effect.runPromise(Effect.forEach(slots, () => worker, { concurrency: callers, discard: true }))
    stamps.length = 0
    const start = performance.now()
    deadline = start + seconds * 1000
    await Effect.runPromise(Effect.forEach(slots, () => worker, { concurrency: callers, discard: true }))
    const inWindow = stamps.filter((t) => t <= deadline)
    const spacing = 1000 / rate
    const intervals: Array<number> = []
    for (let i = 1; i < inWindow.length; i++) intervals.push(inWindow[i] - inWindow[i - 1])
    const errors = intervals.map((d) => Math.abs(d - spacing))
    const last = inWindow.length - 1
    const span = last > 0 ? inWindow[last] - inWindow[0] : NaN
    return {
      ...base,
      admissions: inWindow.length,
      admissionsPerSec: last / span * 1000,
      intervalMedianMs: quantile(intervals, 0.5),
      intervalP99Ms: quantile(intervals, 0.99),
      intervalMaxMs: intervals.length === 0 ? NaN : Math.max(...intervals),
      spacingErrorMedianMs: quantile(errors, 0.5),
      spacingErrorP99Ms: quantile(errors, 0.99),
      lagMs: span - last * spacing,
      burstFraction: intervals.length === 0 ? NaN : intervals.filter((d) => d < spacing / 2).length / intervals.length
    }
  } catch (e) {
    return {
      ...base,
      admissions: 0,
      admissionsPerSec: NaN,
      intervalMedianMs: NaN,
      intervalP99Ms: NaN,
      intervalMaxMs: NaN,
      spacingErrorMedianMs: NaN,
      spacingErrorP99Ms: NaN,
      lagMs: NaN,
      burstFraction: NaN,
      error: e instanceof Error ? e.message : String(e)
    }
  } finally {
    await handle.close()
  }
}
