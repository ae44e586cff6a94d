/**
 * The sliding log: exact sliding windows. Every admitted unit is logged with
 * its time; a request of `cost` at `t` is admitted iff the units logged in
 * `(t − windowMillis, t]` plus `cost` do not exceed `limit`. So no interval of
 * length `windowMillis` ever holds more than `limit` admitted units (the
 * property the fixed and sliding window counters only approximate). A unit
 * logged at `u` counts until `u + windowMillis`, exclusive.
 *
 * Options:
 *
 * - `minGap`: two admitted requests are at least `minGap` ms apart (a request
 *   before `last + minGap` is denied, `retryAfter` says until when).
 * - `countBlocked`: a denied attempt is logged too (its `cost` units, at its
 *   time), so a caller who keeps hammering stays blocked: they get in again
 *   only once enough of their own attempts have left the window (at least a
 *   pause that long). This is the one denial that changes the state. It does
 *   not move the `minGap` clock, which is about admitted requests.
 *
 * Memory is bounded by the limit: the log keeps at most `floor(limit)` unit
 * times (plus two numbers). Without `countBlocked` it never holds more than
 * that in a window anyway; with it, only the newest `floor(limit)` units are
 * kept, and that loses nothing: a decision only asks whether at least
 * `limit − cost + 1` units are in the window, and the oldest units are the
 * first to leave it. Each admission copies the live part of the log (the
 * state is immutable), so a step costs O(limit) at worst.
 *
 * Edge cases:
 *
 * - A new key has an empty log and no `minGap` constraint.
 * - A denial takes nothing and leaves the state as it was, except with
 *   `countBlocked` (see above). A cost above `limit` can never succeed
 *   (`retryAfter` is `Infinity`, `maxCost` is `limit`) and is never logged,
 *   even with `countBlocked`: it is a request that cannot be, not hammering.
 * - `remaining` is the window's quota (`limit` minus the units in the window);
 *   a `minGap` still to run shows in `retryAfter`, not there. Costs are whole
 *   units; a cost of 0 is an action of no units (it still obeys and resets
 *   `minGap`).
 * - With `countBlocked`, `retryAfter` is computed on the state after logging
 *   the denied attempt: it is when a retry succeeds if nothing else is tried.
 * - Time that goes backwards stands still at the anchor `at` (the newest time
 *   in the state): units are always logged in order and never expire early.
 * - A huge jump expires the whole log: no overflow, no NaN.
 * - `release` (a refund) removes the newest `amount` units still in the
 *   window. It does not rewind the `minGap` clock (the log does not know when
 *   the admission before the refunded one was).
 * - `waitTime` with waiters ahead assumes each of their units takes the next
 *   slot to free up; that is exact for waiters of one unit and a lower bound
 *   otherwise (and it ignores `minGap` between the waiters).
 * - `force` logs `cost` units now whatever the limit (and starts the
 *   `minGap` clock): the log keeps its newest `limit` units, so a debt is at
 *   most a full window from now. There is no `forceAdd`: a log has no units
 *   below empty.
 *
 * @since 0.1.0
 */
import type { Algorithm, Outcome } from "./Algorithm.ts"

/**
 * A validated sliding log configuration.
 *
 * @since 0.1.0
 */
export interface Config {
  /** Most units admitted in any window. */
  readonly limit: number
  /** The window length in milliseconds. */
  readonly windowMillis: number
  /** Least milliseconds between two admitted requests (0: no constraint). */
  readonly minGap: number
  /** Whether denied attempts are logged (and so keep a hammering caller out). */
  readonly countBlocked: boolean
  /** `floor(limit)`: the most unit times the log keeps. */
  readonly size: number
}

/**
 * The state of one key: unit times in ascending order (at most `size`), the
 * time of the last admitted request, and the anchor `at`.
 *
 * @since 0.1.0
 */
export interface State {
  readonly log: ReadonlyArray<number>
  readonly last: number
  readonly at: number
}

/**
 * Builds a configuration; the caller has validated the numbers.
 *
 * @example
 * ```ts
 * import * as SlidingLog from "./SlidingLog.ts"
 *
 * // 5 per any 10 seconds, at least 1 second apart, hammering keeps you out
 * const config = SlidingLog.config({ limit: 5, windowMillis: 10_000, minGap: 1000, countBlocked: true })
 * ```
 *
 * @since 0.1.0
 */
export const config = (options: {
  readonly limit: number
  readonly windowMillis: number
  readonly minGap?: number | undefined
  readonly countBlocked?: boolean | undefined
}): Config => ({
  limit: options.limit,
  windowMillis: options.windowMillis,
  minGap: options.minGap ?? 0,
  countBlocked: options.countBlocked ?? false,
  size: Math.floor(options.limit)
})

/**
 * The state of a key never seen before: an empty log, and a last admission
 * far enough back that `minGap` allows one now.
 *
 * @example
 * ```ts
 * import * as SlidingLog from "./SlidingLog.ts"
 *
 * const c = SlidingLog.config({ limit: 3, windowMillis: 1000, minGap: 100 })
 * SlidingLog.initial(c, 500) // { log: [], last: 400, at: 500 }
 * ```
 *
 * @since 0.1.0
 */
export const initial = (c: Config, now: number): State => ({ log: [], last: now - c.minGap, at: now })

// Index of the first unit still in the window at `t` (logged after t − window).
const firstLive = (c: Config, log: ReadonlyArray<number>, t: number): number => {
  let lo = 0
  let hi = log.length
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2)
    if (log[mid] + c.windowMillis <= t) lo = mid + 1
    else hi = mid
  }
  return lo
}

/**
 * The units counted in the window at `now` (at the anchor, if `now` is earlier).
 *
 * @example
 * ```ts
 * import * as SlidingLog from "./SlidingLog.ts"
 *
 * const c = SlidingLog.config({ limit: 3, windowMillis: 1000 })
 * SlidingLog.countAt(c, { log: [0, 400, 900], last: 900, at: 900 }, 1200) // 2
 * ```
 *
 * @since 0.1.0
 */
export const countAt = (c: Config, s: State, now: number): number =>
  s.log.length - firstLive(c, s.log, now > s.at ? now : s.at)

// The live part of the log with `cost` units at `t` appended, newest `size` kept.
const append = (
  c: Config,
  log: ReadonlyArray<number>,
  from: number,
  t: number,
  cost: number
): ReadonlyArray<number> => {
  const keep = Math.min(c.size, log.length - from + cost)
  const old = keep - Math.min(cost, keep)
  // A loop rather than `slice` and `push`: the same in JavaScript, and in
  // the Lua compiled from it no library call and no length taken per step.
  const out: Array<number> = []
  const end = log.length
  let n = 0
  for (let i = end - old; i < end; i++) out[n++] = log[i]
  while (n < keep) out[n++] = t
  return out
}

// The earliest time, not before `e`, at which `cost` units fit in the window
// (the log's units at or before `e` only expire) and `minGap` has run.
const earliest = (c: Config, s: State, e: number, cost: number): number => {
  const from = firstLive(c, s.log, e)
  const excess = s.log.length - from + cost - c.limit
  // The oldest `excess` live units must leave the window first.
  const slot = excess > 0 ? s.log[from + Math.ceil(excess) - 1] + c.windowMillis : e
  const gap = s.last + c.minGap
  return Math.max(slot, gap, e)
}

// When nothing counts any more and `minGap` has run.
const freshAt = (c: Config, s: State): number =>
  Math.max(s.at, s.last + c.minGap, s.log.length > 0 ? s.log[s.log.length - 1] + c.windowMillis : s.at)

// Milliseconds from `now` until `freshAt`; 0 if the state is fresh already at
// the effective time (which is the anchor when the clock is behind it).
const resetMillis = (c: Config, s: State, now: number): number => {
  const fresh = freshAt(c, s)
  return fresh <= (now > s.at ? now : s.at) ? 0 : fresh - now
}

/**
 * Decides one request.
 *
 * @example
 * ```ts
 * import * as SlidingLog from "./SlidingLog.ts"
 *
 * const c = SlidingLog.config({ limit: 2, windowMillis: 1000 })
 * const a = SlidingLog.step(c, SlidingLog.initial(c, 0), 0, 1)
 * const b = SlidingLog.step(c, a.state, 600, 1)
 * const d = SlidingLog.step(c, b.state, 900, 1) // denied, retryAfter 100 (the unit at 0 leaves at 1000)
 * ```
 *
 * @since 0.1.0
 */
export const step = (c: Config, s: State, now: number, cost: number): Outcome<State> => {
  const e = now > s.at ? now : s.at
  const from = firstLive(c, s.log, e)
  const count = s.log.length - from
  if (count + cost <= c.limit && e >= s.last + c.minGap) {
    const next: State = { log: append(c, s.log, from, e, cost), last: e, at: e }
    return {
      allowed: true,
      state: next,
      remaining: Math.floor(c.limit - count - cost),
      retryAfter: 0,
      resetAfter: resetMillis(c, next, now),
      limit: c.limit
    }
  }
  if (cost > c.limit) {
    return {
      allowed: false,
      state: s,
      remaining: Math.floor(c.limit - count),
      retryAfter: Infinity,
      resetAfter: resetMillis(c, s, now),
      limit: c.limit
    }
  }
  const next: State = c.countBlocked ? { log: append(c, s.log, from, e, cost), last: s.last, at: e } : s
  const live = next === s ? count : next.log.length
  return {
    allowed: false,
    state: next,
    remaining: Math.max(0, Math.floor(c.limit - live)),
    retryAfter: earliest(c, next, e, cost) - now,
    resetAfter: resetMillis(c, next, now),
    limit: c.limit
  }
}

/**
 * Milliseconds until a request of `cost` behind `queued` waiting units is
 * admitted: the units free up slots in the order they were logged, and each
 * waiting unit takes the next free slot (and frees it again a window later).
 *
 * @example
 * ```ts
 * import * as SlidingLog from "./SlidingLog.ts"
 *
 * const c = SlidingLog.config({ limit: 2, windowMillis: 1000 })
 * SlidingLog.waitTime(c, { log: [0, 600], last: 600, at: 600 }, 700, 1, 1) // 900: slots free at 1000, 1600
 * ```
 *
 * @since 0.1.0
 */
export const waitTime = (c: Config, s: State, now: number, queued: number, cost: number): number => {
  if (cost > c.limit) return Infinity
  const e = now > s.at ? now : s.at
  if (queued <= 0 || c.size <= 0) {
    const t = earliest(c, s, e, cost)
    return t <= e ? 0 : t - now
  }
  const from = firstLive(c, s.log, e)
  const count = s.log.length - from
  const free = c.size - count
  // Slot m (0-based) frees at: `e` for the first `free`, then as each live
  // unit leaves, then a window after the unit that took slot m − size.
  const m = queued + cost - 1
  const round = Math.floor(m / c.size)
  const i = m - round * c.size
  const slot = (i < free ? e : s.log[from + i - free] + c.windowMillis) + round * c.windowMillis
  const t = Math.max(slot, s.last + c.minGap, e)
  return t <= e ? 0 : t - now
}

/**
 * When nothing counts any more and `minGap` has run: from then on the key is
 * indistinguishable from a new one.
 *
 * @example
 * ```ts
 * import * as SlidingLog from "./SlidingLog.ts"
 *
 * const c = SlidingLog.config({ limit: 2, windowMillis: 1000 })
 * SlidingLog.settledAt(c, { log: [0, 600], last: 600, at: 600 }) // 1600
 * ```
 *
 * @since 0.1.0
 */
export const settledAt = (c: Config, s: State): number => freshAt(c, s)

/**
 * Gives `amount` units back (a refund): the newest units in the window leave
 * the log.
 *
 * @example
 * ```ts
 * import * as SlidingLog from "./SlidingLog.ts"
 *
 * const c = SlidingLog.config({ limit: 3, windowMillis: 1000 })
 * SlidingLog.release(c, { log: [0, 500, 500], last: 500, at: 500 }, 600, 2) // { log: [0], last: 500, at: 600 }
 * ```
 *
 * @since 0.1.0
 */
export const release = (c: Config, s: State, now: number, amount: number): State => {
  if (!(amount > 0)) return s
  const e = now > s.at ? now : s.at
  const from = firstLive(c, s.log, e)
  const keep = Math.max(from, s.log.length - Math.floor(amount))
  return { log: s.log.slice(from, keep), last: s.last, at: e }
}

/**
 * Logs `cost` units now whatever the limit (a debt; the newest `limit` are kept).
 *
 * @example
 * ```ts
 * import * as SlidingLog from "./SlidingLog.ts"
 *
 * const c = SlidingLog.config({ limit: 2, windowMillis: 1000 })
 * SlidingLog.force(c, SlidingLog.initial(c, 0), 0, 3) // { log: [0, 0], last: 0, at: 0 }
 * ```
 *
 * @since 0.2.0
 */
export const force = (c: Config, s: State, now: number, cost: number): State => {
  const e = now > s.at ? now : s.at
  return { log: append(c, s.log, firstLive(c, s.log, e), e, cost), last: e, at: e }
}

/**
 * The sliding log as an {@link Algorithm}.
 *
 * @example
 * ```ts
 * import * as SlidingLog from "./SlidingLog.ts"
 *
 * const c = SlidingLog.config({ limit: 5, windowMillis: 1000 })
 * SlidingLog.algorithm.maxCost(c) // 5
 * ```
 *
 * @since 0.1.0
 */
export const algorithm: Algorithm<Config, State> = {
  name: "sliding-log",
  initial,
  step,
  waitTime,
  settledAt,
  maxCost: (c) => c.limit,
  release,
  force
}
