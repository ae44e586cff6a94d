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
 * Edge cases:
 *
 * - A new key starts with a count of 0 (a full window's allowance).
 * - A denial takes nothing and leaves the state as it was (rate-limiter-flexible
 *   counts denials; the sliding log's `countBlocked` offers that instead).
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
}

/**
 * The state of one key: the current window's start and the units admitted in it.
 *
 * @since 0.1.0
 */
export interface State {
  readonly start: number
  readonly count: number
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
}): Config => ({
  limit: options.limit,
  windowMillis: options.windowMillis,
  align: options.align ?? false
})

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
 * FixedWindow.initial(c, 2500) // { start: 2000, count: 0 }
 * ```
 *
 * @since 0.1.0
 */
export const initial = (c: Config, now: number): State => ({ start: c.align ? alignedStart(c, now) : now, count: 0 })

/**
 * The window in force at `now`: the state's own while it lasts (and for any
 * time before its start), a fresh one after it.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = FixedWindow.config({ limit: 10, windowMillis: 1000 })
 * FixedWindow.windowAt(c, { start: 0, count: 4 }, 1500) // { start: 1500, count: 0 }
 * ```
 *
 * @since 0.1.0
 */
export const windowAt = (c: Config, s: State, now: number): State => {
  if (now < s.start + c.windowMillis && (c.align || s.count > 0)) return s
  // Only an empty first-hit window gets here before its start: it opens there.
  if (now <= s.start) return s
  return { start: c.align ? alignedStart(c, now) : now, count: 0 }
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
  if (count <= c.limit) {
    return {
      allowed: true,
      state: count === s.count && w.start === s.start ? s : { start: w.start, count },
      remaining: Math.floor(c.limit - count),
      retryAfter: 0,
      resetAfter: count > 0 ? w.start + c.windowMillis - now : 0,
      limit: c.limit
    }
  }
  // Denied: `w.count > 0` here unless the cost alone is above the limit, so
  // the window is live and ends at `w.start + windowMillis`, after `now`.
  return {
    allowed: false,
    state: s,
    remaining: Math.floor(c.limit - w.count),
    retryAfter: cost > c.limit ? Infinity : w.start + c.windowMillis - now,
    resetAfter: w.count > 0 ? w.start + c.windowMillis - now : 0,
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
  // units they leave in the next one.
  const spill = Math.max(0, queued - free)
  const full = Math.floor(spill / c.limit)
  const left = spill - full * c.limit
  const windows = 1 + full + (left + cost > c.limit ? 1 : 0)
  return w.start + windows * c.windowMillis - now
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
 * FixedWindow.settledAt(c, { start: 300, count: 2 }) // 1300
 * ```
 *
 * @since 0.1.0
 */
export const settledAt = (c: Config, s: State): number => s.count > 0 ? s.start + c.windowMillis : s.start

/**
 * Gives `amount` units back to the window in force (a refund), never below 0.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = FixedWindow.config({ limit: 10, windowMillis: 1000, align: true })
 * FixedWindow.release(c, { start: 0, count: 4 }, 500, 3) // { start: 0, count: 1 }
 * ```
 *
 * @since 0.1.0
 */
export const release = (c: Config, s: State, now: number, amount: number): State => {
  if (!(amount > 0)) return s
  const w = windowAt(c, s, now)
  return { start: w.start, count: Math.max(0, w.count - amount) }
}

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
  release
}
