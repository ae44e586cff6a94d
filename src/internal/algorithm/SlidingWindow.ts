/**
 * The sliding window counter, as Cloudflare describes it: at most `limit`
 * units per `windowMillis`, estimated from two clock-aligned fixed windows.
 * The units counted in the previous window are weighted by the part of it that
 * the sliding window still covers:
 *
 *   estimate(t) = previous × (window − (t − start)) / window + current
 *
 * with `start` the start of the aligned window holding `t`. A request of
 * `cost` is admitted iff `estimate(t) + cost ≤ limit`: the request's own cost
 * is included, so the estimate never exceeds the limit (the usual
 * formulation admits while the estimate *before* the request is below the
 * limit, which lets the estimate end up to one request over). The estimate
 * assumes the previous window's units were spread evenly; it smooths the
 * fixed window's boundary burst at the price of being an approximation (the
 * sliding log is exact). The comparison is done multiplied out by
 * `windowMillis` (a whole number of milliseconds), so it is decided exactly.
 *
 * Edge cases:
 *
 * - A new key starts with both counts at 0.
 * - A window that is not a whole number of milliseconds is rounded up to one
 *   (141.4 ms decides as 142 ms): the counts weigh whole milliseconds, and a
 *   window's products and quotients are then exact, so `retryAfter` is too
 *   (with 141.4 ms, a retry at `retryAfter` was refused in about 0.7 % of the
 *   denials). A longer window never admits more.
 * - A denial takes nothing and leaves the state as it was.
 * - A cost above `limit` can never succeed: `retryAfter` is `Infinity` and
 *   `maxCost` is `limit`.
 * - `retryAfter` is exact: the estimate falls linearly inside a window and
 *   continuously across window ends, so the first instant at which the request
 *   fits has a closed form. `resetAfter` is when both windows that count are
 *   empty: the end of the next window if anything counts in the current one.
 * - Time that goes backwards stands still at the anchor `at` (the latest
 *   admitted time): the previous window's weight never grows back, so going
 *   back never mints capacity (nor does it take any).
 * - A huge jump lands in a window with no history: no overflow, no NaN.
 * - `release` (a refund) takes `amount` off the current window's count, then
 *   off the previous one's (the newest units first), never below 0.
 * - `force` counts units above the limit (a debt, weighed like any count as
 *   it slides out). There is no `forceAdd`: a count below zero would weigh
 *   the next window by a negative share, which has no meaning here.
 * - `waitTime` with waiters ahead assumes their units are admitted as early as
 *   the estimate allows and, once they spill into later windows, that those
 *   windows fill evenly (a slight over-estimate there); with no waiters ahead
 *   it is exact.
 *
 * @since 0.1.0
 */
import type { Algorithm, Outcome } from "./Algorithm.ts"

/**
 * A validated sliding window configuration.
 *
 * @since 0.1.0
 */
export interface Config {
  /** Most units admitted per window. */
  readonly limit: number
  /** The window length in milliseconds. */
  readonly windowMillis: number
}

/**
 * The state of one key: the aligned window `start`, the units admitted in it
 * (`current`) and in the window before (`previous`), and the anchor `at`.
 *
 * @since 0.1.0
 */
export interface State {
  readonly start: number
  readonly current: number
  readonly previous: number
  readonly at: number
}

/**
 * Builds a configuration; the caller has validated the numbers.
 *
 * @example
 * ```ts
 * import * as SlidingWindow from "./SlidingWindow.ts"
 *
 * // about 100 per any minute
 * const config = SlidingWindow.config({ limit: 100, windowMillis: 60_000 })
 * ```
 *
 * @since 0.1.0
 */
export const config = (options: { readonly limit: number; readonly windowMillis: number }): Config => ({
  limit: options.limit,
  // whole milliseconds: every product and quotient below is then exact
  windowMillis: Math.ceil(options.windowMillis)
})

const alignedStart = (c: Config, t: number): number => t - (((t % c.windowMillis) + c.windowMillis) % c.windowMillis)

/**
 * The state of a key never seen before.
 *
 * @example
 * ```ts
 * import * as SlidingWindow from "./SlidingWindow.ts"
 *
 * const c = SlidingWindow.config({ limit: 10, windowMillis: 1000 })
 * SlidingWindow.initial(c, 2500) // { start: 2000, current: 0, previous: 0, at: 2500 }
 * ```
 *
 * @since 0.1.0
 */
export const initial = (c: Config, now: number): State => ({
  start: alignedStart(c, now),
  current: 0,
  previous: 0,
  at: now
})

/**
 * The state as of `now` (the windows rolled forward; `at` is the effective
 * time, never before the anchor).
 *
 * @example
 * ```ts
 * import * as SlidingWindow from "./SlidingWindow.ts"
 *
 * const c = SlidingWindow.config({ limit: 10, windowMillis: 1000 })
 * SlidingWindow.rollTo(c, { start: 0, current: 4, previous: 9, at: 10 }, 1500)
 * // { start: 1000, current: 0, previous: 4, at: 1500 }
 * ```
 *
 * @since 0.1.0
 */
export const rollTo = (c: Config, s: State, now: number): State => {
  const at = now > s.at ? now : s.at
  const start = alignedStart(c, at)
  if (start === s.start) return at === s.at ? s : { start, current: s.current, previous: s.previous, at }
  if (start === s.start + c.windowMillis) return { start, current: 0, previous: s.current, at }
  return { start, current: 0, previous: 0, at }
}

// The estimate multiplied by the window length: exact for integers.
const scaledEstimate = (c: Config, r: State): number =>
  r.previous * (r.start + c.windowMillis - r.at) + r.current * c.windowMillis

// Whole units a request could take now, given the scaled estimate: the most
// `k` with `estimate + k × window ≤ limit × window`, the admission's own
// comparison. A division alone agrees with it for whole-millisecond windows
// but can round either way for others (even below 0).
const takeable = (c: Config, estimate: number): number => {
  const w = c.windowMillis
  const most = c.limit * w
  let k = Math.max(0, Math.floor((most - estimate) / w))
  while (k > 0 && estimate + k * w > most) k--
  while (estimate + (k + 1) * w <= most) k++
  return k
}

// The earliest time, not before `r.at`, at which `cost` more units fit.
const earliest = (c: Config, r: State, cost: number): number => {
  const w = c.windowMillis
  const room = (c.limit - r.current - cost) * w
  if (room >= 0) {
    if (r.previous * (r.start + w - r.at) <= room) return r.at
    // previous × (w − y) ≤ room, for the smallest whole y; y < w means this window.
    const y = w - Math.floor(room / r.previous)
    if (y < w) return r.start + y
  }
  // In the next window `current` becomes the previous count: same equation.
  const next = (c.limit - cost) * w
  if (r.current * w <= next) return r.start + w
  return r.start + w + (w - Math.floor(next / r.current))
}

// When nothing counts any more, not before `r.at`.
const freshAt = (c: Config, r: State): number =>
  r.current > 0 ? r.start + 2 * c.windowMillis : r.previous > 0 ? r.start + c.windowMillis : r.at

/**
 * Decides one request.
 *
 * @example
 * ```ts
 * import * as SlidingWindow from "./SlidingWindow.ts"
 *
 * const c = SlidingWindow.config({ limit: 10, windowMillis: 1000 })
 * // 9 last window, 0 so far; a quarter into this window the estimate is 6.75
 * const d = SlidingWindow.step(c, { start: 0, current: 9, previous: 0, at: 900 }, 1250, 3) // allowed
 * ```
 *
 * @since 0.1.0
 */
export const step = (c: Config, s: State, now: number, cost: number): Outcome<State> => {
  const r = rollTo(c, s, now)
  const w = c.windowMillis
  const estimate = scaledEstimate(c, r)
  if (estimate + cost * w <= c.limit * w) {
    const next: State = { start: r.start, current: r.current + cost, previous: r.previous, at: r.at }
    return {
      allowed: true,
      state: next,
      // what the next step sees: the same window, anchor and estimate
      remaining: takeable(c, scaledEstimate(c, next)),
      retryAfter: 0,
      resetAfter: freshAt(c, next) <= next.at ? 0 : freshAt(c, next) - now,
      limit: c.limit
    }
  }
  return {
    allowed: false,
    state: s,
    remaining: takeable(c, estimate),
    retryAfter: cost > c.limit ? Infinity : earliest(c, r, cost) - now,
    resetAfter: r.current > 0 || r.previous > 0 ? freshAt(c, r) - now : 0,
    limit: c.limit
  }
}

/**
 * Milliseconds until a request of `cost` behind `queued` waiting units is
 * admitted (exact with no waiters; an estimate behind them).
 *
 * @example
 * ```ts
 * import * as SlidingWindow from "./SlidingWindow.ts"
 *
 * const c = SlidingWindow.config({ limit: 10, windowMillis: 1000 })
 * SlidingWindow.waitTime(c, { start: 0, current: 10, previous: 0, at: 0 }, 0, 0, 1) // 1100
 * ```
 *
 * @since 0.1.0
 */
export const waitTime = (c: Config, s: State, now: number, queued: number, cost: number): number => {
  if (cost > c.limit) return Infinity
  const r = rollTo(c, s, now)
  const room = c.limit - r.current
  const at = queued <= Math.max(room, 0)
    // The waiters' units all land in this window, admitted as early as they
    // fit; by the time this request fits they count as if admitted now.
    ? earliest(c, { start: r.start, current: r.current + queued, previous: r.previous, at: r.at }, cost)
    // They spill over: from the next window on, `limit` units per window.
    : r.start + c.windowMillis + Math.ceil((queued + cost - room) * c.windowMillis / c.limit)
  return at <= r.at ? 0 : at - now
}

/**
 * When nothing counts any more: from then on the key is indistinguishable
 * from a new one.
 *
 * @example
 * ```ts
 * import * as SlidingWindow from "./SlidingWindow.ts"
 *
 * const c = SlidingWindow.config({ limit: 10, windowMillis: 1000 })
 * SlidingWindow.settledAt(c, { start: 1000, current: 3, previous: 0, at: 1200 }) // 3000
 * ```
 *
 * @since 0.1.0
 */
export const settledAt = (c: Config, s: State): number => freshAt(c, s)

/**
 * Gives `amount` units back (a refund): from the current window's count, then
 * from the previous one's.
 *
 * @example
 * ```ts
 * import * as SlidingWindow from "./SlidingWindow.ts"
 *
 * const c = SlidingWindow.config({ limit: 10, windowMillis: 1000 })
 * SlidingWindow.release(c, { start: 1000, current: 2, previous: 5, at: 1200 }, 1200, 3)
 * // { start: 1000, current: 0, previous: 4, at: 1200 }
 * ```
 *
 * @since 0.1.0
 */
export const release = (c: Config, s: State, now: number, amount: number): State => {
  if (!(amount > 0)) return s
  const r = rollTo(c, s, now)
  const current = Math.max(0, r.current - amount)
  const previous = Math.max(0, r.previous - (amount - (r.current - current)))
  return { start: r.start, current, previous, at: r.at }
}

/**
 * Counts `cost` units in the current window whatever the limit (a debt).
 *
 * @example
 * ```ts
 * import * as SlidingWindow from "./SlidingWindow.ts"
 *
 * const c = SlidingWindow.config({ limit: 2, windowMillis: 1000 })
 * SlidingWindow.force(c, SlidingWindow.initial(c, 0), 0, 3) // current 3: one over
 * ```
 *
 * @since 0.2.0
 */
export const force = (c: Config, s: State, now: number, cost: number): State => {
  const r = rollTo(c, s, now)
  return { start: r.start, current: r.current + cost, previous: r.previous, at: r.at }
}

/**
 * The sliding window counter as an {@link Algorithm}.
 *
 * @example
 * ```ts
 * import * as SlidingWindow from "./SlidingWindow.ts"
 *
 * const c = SlidingWindow.config({ limit: 10, windowMillis: 1000 })
 * SlidingWindow.algorithm.maxCost(c) // 10
 * ```
 *
 * @since 0.1.0
 */
export const algorithm: Algorithm<Config, State> = {
  name: "sliding-window",
  initial,
  step,
  waitTime,
  settledAt,
  maxCost: (c) => c.limit,
  release,
  force
}
