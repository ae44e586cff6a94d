/**
 * The fixed window counter: at most `limit` units per window of
 * `windowMillis`. Windows either open at a key's first hit (`align: false`,
 * as rate-limiter-flexible and Effect's fixed window do) or are aligned to
 * the clock (`align: true`: `[k × window, (k + 1) × window)`, as Envoy and
 * Upstash do, so every key resets at the same instant).
 *
 * A request of `cost` is admitted iff the units already admitted in the
 * current window plus `cost` do not exceed `limit`. A window is over at
 * `start + windowMillis`; at that instant the count is 0 again. In first-hit
 * mode a window opens at the first admitted request after the previous one
 * ended (a window in which nothing was admitted is no window at all).
 *
 * Fixed windows admit up to `2 × limit` across a boundary (the end of one
 * window and the start of the next); the sliding window and the sliding log
 * exist to avoid that, and the tests pin the bound.
 *
 * Options from rate-limiter-flexible, whose limiter is a first-hit fixed
 * window:
 *
 * - `countBlocked`: a denied request is counted too (its cost is added to
 *   the window), as rate-limiter-flexible always does: a caller who keeps
 *   hammering stays over the limit until the window ends. The one denial
 *   that changes the state. A cost above `limit` is never counted.
 * - `execEvenly`: an admitted request is told to wait (`delay`) so that the
 *   window's requests are spread over it, by rate-limiter-flexible's rule:
 *   no wait for the window's first request; otherwise
 *   `⌈(end − now) / (remaining + 2)⌉`, or `count × minDelay` when that is
 *   below `minDelay` (`⌈window / limit⌉` by default).
 * - A window's own duration (`withWindow`, rate-limiter-flexible's
 *   `customDuration`): a window is as long as the call that opened it said;
 *   the state keeps its end.
 *
 * Edge cases:
 *
 * - A new key starts with a count of 0 (a full window's allowance).
 * - A denial takes nothing and leaves the state as it was (rate-limiter-flexible
 *   counts denials: `countBlocked` does that).
 * - A cost above `limit` can never succeed: `retryAfter` is `Infinity` and
 *   `maxCost` is `limit`. Costs are whole units; a fractional `limit` then
 *   admits `floor(limit)` units per window.
 * - A clock that goes backwards never reopens an earlier window: time before
 *   the current window's start counts as its start. (Only admitted requests
 *   move the window, so going back can never mint capacity.)
 * - A huge jump just lands in a fresh window: no overflow, no NaN.
 * - `release` (a refund) takes `amount` off the window in force, never below
 *   0; units of a window that has ended are gone already.
 * - `waitTime` with waiters ahead assumes their units fill each window to the
 *   limit (they are not split at window ends in reality, so the figure is a
 *   lower bound); with no waiters ahead it is exact.
 * - Beyond the limit: `force` counts units above the limit (a debt that the
 *   window's end forgives, as rate-limiter-flexible's `penalty` does);
 *   `forceAdd` counts below zero (a credit for the rest of the window, as its
 *   `reward` does). Either ends with the window.
 *
 * @since 0.1.0
 */
import type { Algorithm, Outcome } from "./Algorithm.ts"

/**
 * A validated fixed window configuration.
 *
 * @since 0.1.0
 */
export interface Config {
  /** Most units admitted per window. */
  readonly limit: number
  /** The window length in milliseconds. */
  readonly windowMillis: number
  /** Whether windows are aligned to the clock (`true`) or open at the first hit (`false`). */
  readonly align: boolean
  /** Whether a denied request is counted too. */
  readonly countBlocked: boolean
  /** Whether admitted requests are spread over the window (`delay`). */
  readonly execEvenly: boolean
  /** With `execEvenly`: the least delay, in milliseconds. */
  readonly minDelay: number
}

/**
 * The state of one key: the current window's start, the units counted in
 * it, and its end.
 *
 * @since 0.1.0
 */
export interface State {
  readonly start: number
  readonly count: number
  readonly end: number
}

/**
 * Builds a configuration; the caller has validated the numbers.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * // 100 per minute, windows on the minute
 * const config = FixedWindow.config({ limit: 100, windowMillis: 60_000, align: true })
 * ```
 *
 * @since 0.1.0
 */
export const config = (options: {
  readonly limit: number
  readonly windowMillis: number
  readonly align?: boolean | undefined
  readonly countBlocked?: boolean | undefined
  readonly execEvenly?: boolean | undefined
  readonly minDelay?: number | undefined
}): Config => ({
  limit: options.limit,
  windowMillis: options.windowMillis,
  align: options.align ?? false,
  countBlocked: options.countBlocked ?? false,
  execEvenly: options.execEvenly ?? false,
  minDelay: options.minDelay ?? Math.ceil(options.windowMillis / options.limit)
})

// A window opening at `now`.
const open = (c: Config, now: number): State => {
  const start = c.align ? alignedStart(c, now) : now
  return { start, count: 0, end: start + c.windowMillis }
}

// The start of the aligned window holding `t` (also for negative `t`).
const alignedStart = (c: Config, t: number): number => t - (((t % c.windowMillis) + c.windowMillis) % c.windowMillis)

/**
 * The state of a key never seen before: nothing admitted.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = FixedWindow.config({ limit: 10, windowMillis: 1000, align: true })
 * FixedWindow.initial(c, 2500) // { start: 2000, count: 0, end: 3000 }
 * ```
 *
 * @since 0.1.0
 */
export const initial = (c: Config, now: number): State => open(c, now)

/**
 * The window in force at `now`: the state's own while it lasts (and for any
 * time before its start), a fresh one after it.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = FixedWindow.config({ limit: 10, windowMillis: 1000 })
 * FixedWindow.windowAt(c, { start: 0, count: 4, end: 1000 }, 1500) // { start: 1500, count: 0, end: 2500 }
 * ```
 *
 * @since 0.1.0
 */
export const windowAt = (c: Config, s: State, now: number): State => {
  if (now < s.end && (c.align || s.count !== 0)) return s
  if (c.align) return open(c, now)
  // First hit, and nothing counted (or the window is over): a window opens
  // now, as long as this call says (never before the last one's start).
  const start = now > s.start ? now : s.start
  return start === s.start && s.end === start + c.windowMillis ? s : { start, count: 0, end: start + c.windowMillis }
}

// rate-limiter-flexible's execEvenly: how long an admission that leaves
// `count` counted waits, `end − now` before the window ends.
const evenly = (c: Config, first: boolean, count: number, left: number): number => {
  if (!c.execEvenly || first || !(left > 0)) return 0
  const delay = Math.ceil(left / (Math.max(c.limit - count, 0) + 2))
  return delay < c.minDelay ? count * c.minDelay : delay
}

/**
 * Decides one request.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = FixedWindow.config({ limit: 1, windowMillis: 1000, align: true })
 * const first = FixedWindow.step(c, FixedWindow.initial(c, 0), 200, 1) // allowed
 * const second = FixedWindow.step(c, first.state, 700, 1) // denied, retryAfter 300
 * ```
 *
 * @since 0.1.0
 */
export const step = (c: Config, s: State, now: number, cost: number): Outcome<State> => {
  const w = windowAt(c, s, now)
  const count = w.count + cost
  if (count <= c.limit && cost <= c.limit) {
    const outcome: Outcome<State> = {
      allowed: true,
      state: count === s.count && w.start === s.start && w.end === s.end ? s : { start: w.start, count, end: w.end },
      remaining: Math.floor(c.limit - count),
      retryAfter: 0,
      resetAfter: count !== 0 ? w.end - now : 0,
      limit: c.limit
    }
    return c.execEvenly ? { ...outcome, delay: evenly(c, w.count === 0, count, w.end - now) } : outcome
  }
  // Denied: the window is live unless the cost alone is above the limit, so
  // it ends at `w.end`, after `now`. With countBlocked the attempt counts.
  const counted = c.countBlocked && !(cost > c.limit)
  const after = counted ? count : w.count
  return {
    allowed: false,
    state: counted ? { start: w.start, count, end: w.end } : s,
    remaining: after < c.limit ? Math.floor(c.limit - after) : 0,
    retryAfter: cost > c.limit ? Infinity : w.end - now,
    resetAfter: after !== 0 ? w.end - now : 0,
    limit: c.limit
  }
}

/**
 * Milliseconds until a request of `cost` behind `queued` waiting units is
 * admitted, assuming the waiters' units fill each window to the limit.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = FixedWindow.config({ limit: 2, windowMillis: 1000, align: true })
 * FixedWindow.waitTime(c, FixedWindow.initial(c, 0), 0, 3, 1) // 1000: the waiters take this window and half the next
 * ```
 *
 * @since 0.1.0
 */
export const waitTime = (c: Config, s: State, now: number, queued: number, cost: number): number => {
  if (cost > c.limit) return Infinity
  const w = windowAt(c, s, now)
  const free = c.limit - w.count
  if (queued + cost <= free) return 0
  // Windows after the current one that the waiters fill completely, and the
  // units they leave in the next one (a debt ends with the current window).
  const spill = Math.max(0, queued - Math.max(0, free))
  const full = Math.floor(spill / c.limit)
  const left = spill - full * c.limit
  const windows = full + (left + cost > c.limit ? 1 : 0)
  return w.end + windows * c.windowMillis - now
}

/**
 * The end of the current window (or its start, if nothing is counted in it):
 * from then on the key is indistinguishable from a new one.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = FixedWindow.config({ limit: 10, windowMillis: 1000 })
 * FixedWindow.settledAt(c, { start: 300, count: 2, end: 1300 }) // 1300
 * ```
 *
 * @since 0.1.0
 */
export const settledAt = (_c: Config, s: State): number => s.count !== 0 ? s.end : s.start

/**
 * Gives `amount` units back to the window in force (a refund), never below 0.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = FixedWindow.config({ limit: 10, windowMillis: 1000, align: true })
 * FixedWindow.release(c, { start: 0, count: 4, end: 1000 }, 500, 3) // { start: 0, count: 1, end: 1000 }
 * ```
 *
 * @since 0.1.0
 */
export const release = (c: Config, s: State, now: number, amount: number): State => {
  if (!(amount > 0)) return s
  const w = windowAt(c, s, now)
  // never below 0; a credit (a forced add) is kept as it is
  return { start: w.start, count: w.count <= 0 ? w.count : Math.max(0, w.count - amount), end: w.end }
}

/**
 * Counts `cost` units whatever the limit (rate-limiter-flexible's
 * `penalty`): the window may hold more than `limit`, until it ends.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = FixedWindow.config({ limit: 3, windowMillis: 1000 })
 * FixedWindow.force(c, FixedWindow.initial(c, 0), 0, 5) // { start: 0, count: 5, end: 1000 }
 * ```
 *
 * @since 0.2.0
 */
export const force = (c: Config, s: State, now: number, cost: number): State => {
  const w = windowAt(c, s, now)
  return { start: w.start, count: w.count + cost, end: w.end }
}

/**
 * Takes `amount` units off the count with no floor (rate-limiter-flexible's
 * `reward` below zero): a credit until the window ends.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = FixedWindow.config({ limit: 3, windowMillis: 1000, align: true })
 * FixedWindow.forceAdd(c, FixedWindow.initial(c, 0), 0, 2) // { start: 0, count: -2, end: 1000 }
 * ```
 *
 * @since 0.2.0
 */
export const forceAdd = (c: Config, s: State, now: number, amount: number): State => {
  const w = windowAt(c, s, now)
  return { start: w.start, count: w.count - amount, end: w.end }
}

/**
 * The configuration with windows of `millis` (for the window a call opens);
 * `undefined` for aligned windows, whose length is the clock's.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = FixedWindow.config({ limit: 3, windowMillis: 1000 })
 * FixedWindow.withWindow(c, 5000)?.windowMillis // 5000
 * ```
 *
 * @since 0.2.0
 */
export const withWindow = (c: Config, millis: number): Config | undefined =>
  c.align ? undefined : { ...c, windowMillis: millis }

/**
 * The fixed window as an {@link Algorithm}.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = FixedWindow.config({ limit: 10, windowMillis: 1000 })
 * FixedWindow.algorithm.maxCost(c) // 10
 * ```
 *
 * @since 0.1.0
 */
export const algorithm: Algorithm<Config, State> = {
  name: "fixed-window",
  initial,
  step,
  waitTime,
  settledAt,
  maxCost: (c) => c.limit,
  release,
  force,
  forceAdd,
  withWindow
}
