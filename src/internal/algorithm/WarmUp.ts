/**
 * Guava's smooth rate limiters: `SmoothWarmingUp` (a cold limiter ramps up to
 * its stable rate over a warm-up period) and, with no warm-up period,
 * `SmoothBursty` (idle time is stored as permits, up to `maxBurstMillis`
 * worth, and spent at no wait). The math is Guava's `SmoothRateLimiter`, in
 * milliseconds instead of microseconds:
 *
 * - `stableInterval = periodMillis / permits`, the spacing at the stable rate.
 * - The state is `storedPermits` and `nextFree` (Guava's `nextFreeTicket`).
 *   `resync(t)`: if `t > nextFree`, idle time becomes stored permits,
 *   `stored ← min(maxPermits, stored + (t − nextFree) / coolDownInterval)`,
 *   and `nextFree ← t`.
 * - A request is admitted iff `nextFree ≤ t` (Guava's `tryAcquire` with no
 *   timeout). It then resyncs and reserves: it spends
 *   `min(cost, stored)` stored permits, which cost `storedPermitsToWaitTime`,
 *   and the rest fresh at `stableInterval` each; `nextFree` moves on by that
 *   total. The request itself goes at once: its cost is paid by the *next*
 *   request ("pay later"), so any cost is admitted when the limiter is free
 *   (`maxCost` is `Infinity`), and a large one delays whoever comes next.
 * - Bursty: `maxPermits = maxBurstMillis / stableInterval` (Guava fixes
 *   `maxBurstSeconds` at 1; here it defaults to 1000 ms), stored permits are
 *   free, `coolDownInterval = stableInterval`.
 * - Warming up (`coldInterval = coldFactor × stableInterval`, Guava's
 *   `coldFactor` is 3): `thresholdPermits = 0.5 × warmup / stableInterval`,
 *   `maxPermits = threshold + 2 × warmup / (stableInterval + coldInterval)`;
 *   spending a stored permit above the threshold costs the interval on the
 *   line from `stableInterval` (at the threshold) to `coldInterval` (at
 *   `maxPermits`), integrated over the permits spent (a trapezoid); below the
 *   threshold it costs `stableInterval`. Going from `maxPermits` down to the
 *   threshold thus takes exactly the warm-up period, and
 *   `coolDownInterval = warmup / maxPermits` (a full cool-down takes as long).
 *
 * Differences from Guava, all deliberate:
 *
 * - Times are not truncated to whole microseconds at each reservation (Guava
 *   casts each wait to a `long`): `nextFree` is a fractional millisecond, kept
 *   as its distance `ahead` of the anchor `at` (an integer time) so that its
 *   fraction stays precise at epoch-sized clocks; the waits reported are
 *   rounded up to whole milliseconds.
 * - When enough idle time has passed to fill the store, the store is set to
 *   exactly `maxPermits` (decided by comparing times, not by adding floats),
 *   so a fully cooled limiter is exactly a new one.
 * - Guava's clock is monotonic; here time that goes backwards stands still at
 *   the anchor `at` (the latest admitted time) and stores nothing.
 * - There is no `release` (refund): Guava has none, and with "pay later" a
 *   refund would have to guess which reservation it undoes. Nor `forceAdd`.
 *
 * Guava's `setRate` (`rate.carryRate`, and `reconfigure` with carry
 * `"proportional"`): the store first resyncs at the old rate, `nextFree`
 * stays where the old rate put it (the next request pays the previous one's
 * cost at the old rate), and the stored permits are rescaled by
 * `newMaxPermits / oldMaxPermits` (bursty: none if the old maximum was 0;
 * warming up: the new maximum). `force` is Guava's `reserve`: the request
 * is taken now whatever `nextFree` says, and its cost moves `nextFree` on.
 *
 * Edge cases:
 *
 * - A new key is as in Guava: warming up starts cold (`maxPermits` stored, the
 *   first request at once, then slow); bursty starts with nothing stored (one
 *   request at once, then the stable rate). `initialPermits` overrides this.
 * - A denial takes nothing and leaves the state as it was.
 * - `remaining` is how many unit requests would be admitted right now, back to
 *   back: for bursty the stored whole permits plus the one that pays later, for
 *   warming up 1 (or 0 while `nextFree` is ahead). `limit` is `permits`.
 * - `resetAfter` and `settledAt` are when the store is full again and nothing
 *   is owed: a cooled warming-up limiter is then exactly a new one; a bursty
 *   one is at least as permissive as a new one (which stores nothing).
 * - A huge jump just fills the store: no overflow, no NaN.
 *
 * @since 0.1.0
 */
import type { Algorithm, Carry, Outcome } from "./Algorithm.ts"

/**
 * A validated smooth rate limiter configuration, with Guava's derived values.
 *
 * @since 0.1.0
 */
export interface Config {
  /** Permits per period at the stable rate. */
  readonly permits: number
  /** The period in milliseconds. */
  readonly periodMillis: number
  /** The warm-up period in milliseconds; 0 for the bursty limiter. */
  readonly warmupMillis: number
  /** The cold interval over the stable interval (warming up only). */
  readonly coldFactor: number
  /** Milliseconds of idle time stored as permits (bursty only). */
  readonly maxBurstMillis: number
  /** Stored permits of a new key. */
  readonly initialPermits: number
  /** `periodMillis / permits`. */
  readonly stableInterval: number
  /** The most permits stored. */
  readonly maxPermits: number
  /** Stored permits below which spending costs `stableInterval` (warming up). */
  readonly thresholdPermits: number
  /** The growth of the interval per stored permit above the threshold. */
  readonly slope: number
  /** Milliseconds of idle time per stored permit. */
  readonly coolDownInterval: number
}

/**
 * The state of one key: stored permits, and the time from which the next
 * request is admitted, `nextFree = at + ahead` (`ahead ≥ 0`, fractional), with
 * `at` the anchor (the latest admitted time).
 *
 * @since 0.1.0
 */
export interface State {
  readonly stored: number
  readonly ahead: number
  readonly at: number
}

/**
 * Builds a configuration; the caller has validated the numbers (positive
 * `permits` and `periodMillis`, `warmupMillis ≥ 0`, `coldFactor ≥ 1`,
 * `maxBurstMillis ≥ 0`, `0 ≤ initialPermits ≤ maxPermits`).
 *
 * @example
 * ```ts
 * import * as WarmUp from "./WarmUp.ts"
 *
 * // RateLimiter.create(10, 5, SECONDS): 10 per second after a 5 second warm-up
 * const warming = WarmUp.config({ permits: 10, periodMillis: 1000, warmupMillis: 5000 })
 * // RateLimiter.create(10): 10 per second, a second's worth of idle time stored
 * const bursty = WarmUp.config({ permits: 10, periodMillis: 1000 })
 * ```
 *
 * @since 0.1.0
 */
export const config = (options: {
  readonly permits: number
  readonly periodMillis: number
  readonly warmupMillis?: number | undefined
  readonly coldFactor?: number | undefined
  readonly maxBurstMillis?: number | undefined
  readonly initialPermits?: number | undefined
}): Config => {
  const { periodMillis, permits } = options
  const warmupMillis = options.warmupMillis ?? 0
  const coldFactor = options.coldFactor ?? 3
  const maxBurstMillis = options.maxBurstMillis ?? 1000
  const stableInterval = periodMillis / permits
  if (warmupMillis > 0) {
    const coldInterval = stableInterval * coldFactor
    const thresholdPermits = 0.5 * warmupMillis / stableInterval
    const maxPermits = thresholdPermits + 2.0 * warmupMillis / (stableInterval + coldInterval)
    return {
      permits,
      periodMillis,
      warmupMillis,
      coldFactor,
      maxBurstMillis,
      initialPermits: options.initialPermits ?? maxPermits,
      stableInterval,
      maxPermits,
      thresholdPermits,
      slope: (coldInterval - stableInterval) / (maxPermits - thresholdPermits),
      coolDownInterval: warmupMillis / maxPermits
    }
  }
  const maxPermits = maxBurstMillis * permits / periodMillis
  return {
    permits,
    periodMillis,
    warmupMillis: 0,
    coldFactor,
    maxBurstMillis,
    initialPermits: options.initialPermits ?? 0,
    stableInterval,
    maxPermits,
    thresholdPermits: maxPermits,
    slope: 0,
    coolDownInterval: stableInterval
  }
}

/**
 * The state of a key never seen before: `initialPermits` stored and free now.
 *
 * @example
 * ```ts
 * import * as WarmUp from "./WarmUp.ts"
 *
 * const c = WarmUp.config({ permits: 1, periodMillis: 1000 })
 * WarmUp.initial(c, 0) // { stored: 0, ahead: 0, at: 0 }
 * ```
 *
 * @since 0.1.0
 */
export const initial = (c: Config, now: number): State => ({ stored: c.initialPermits, ahead: 0, at: now })

/**
 * Guava's `nextFreeTicket`: the time from which the next request is admitted.
 *
 * @example
 * ```ts
 * import * as WarmUp from "./WarmUp.ts"
 *
 * WarmUp.nextFree({ stored: 0, ahead: 250.5, at: 1000 }) // 1250.5
 * ```
 *
 * @since 0.1.0
 */
export const nextFree = (s: State): number => s.at + s.ahead

// The interval at `permits` stored above the threshold (warming up).
const permitsToTime = (c: Config, permits: number): number => c.stableInterval + permits * c.slope

/**
 * Milliseconds that spending `take` of `stored` permits costs (Guava's
 * `storedPermitsToWaitTime`): 0 for bursty; for warming up the area under
 * the interval line over `[stored − take, stored]`.
 *
 * @example
 * ```ts
 * import * as WarmUp from "./WarmUp.ts"
 *
 * const c = WarmUp.config({ permits: 1, periodMillis: 1000, warmupMillis: 4000 })
 * WarmUp.storedPermitsToWaitTime(c, c.maxPermits, c.maxPermits - c.thresholdPermits) // 4000
 * ```
 *
 * @since 0.1.0
 */
export const storedPermitsToWaitTime = (c: Config, stored: number, take: number): number => {
  if (c.warmupMillis <= 0) return 0
  const above = stored - c.thresholdPermits
  let rest = take
  let wait = 0
  if (above > 0.0) {
    const aboveTake = Math.min(above, rest)
    const length = permitsToTime(c, above) + permitsToTime(c, above - aboveTake)
    wait = aboveTake * length / 2.0
    rest -= aboveTake
  }
  return wait + c.stableInterval * rest
}

// How far after `s.at` the store is full and nothing is owed.
const freshIn = (c: Config, s: State): number =>
  s.stored >= c.maxPermits ? s.ahead : s.ahead + (c.maxPermits - s.stored) * c.coolDownInterval

/**
 * The state resynchronised to effective time `t` (Guava's `resync`): if `t` is
 * past `nextFree`, the idle time since becomes stored permits and `nextFree`
 * (the anchor) moves to `t`; otherwise nothing changes.
 *
 * @example
 * ```ts
 * import * as WarmUp from "./WarmUp.ts"
 *
 * const c = WarmUp.config({ permits: 1, periodMillis: 1000, maxBurstMillis: 5000 })
 * WarmUp.resync(c, { stored: 0, ahead: 500, at: 0 }, 3000) // { stored: 2.5, ahead: 0, at: 3000 }
 * ```
 *
 * @since 0.1.0
 */
export const resync = (c: Config, s: State, t: number): State => {
  // Idle time since `nextFree`: an integer difference less a small fraction.
  const idle = (t - s.at) - s.ahead
  if (!(idle > 0)) return s
  // Full once `t` has reached the very sum that `settledAt` rounds up, so a
  // key is exactly full (exactly a new one) from its settled time on.
  const stored = t - s.at >= freshIn(c, s)
    ? c.maxPermits
    : Math.min(c.maxPermits, s.stored + idle / c.coolDownInterval)
  return { stored, ahead: 0, at: t }
}

// Whole milliseconds from `now` until `at + offset` (`at` an integer time,
// `offset` fractional and small), 0 if the effective time `max(now, at)` is
// there already.
const millisUntil = (now: number, at: number, offset: number): number =>
  offset <= (now > at ? now - at : 0) ? 0 : Math.ceil(offset) + (at - now)

/**
 * Decides one request (Guava's `tryAcquire(cost)` with no timeout).
 *
 * @example
 * ```ts
 * import * as WarmUp from "./WarmUp.ts"
 *
 * const c = WarmUp.config({ permits: 1, periodMillis: 1000 })
 * const first = WarmUp.step(c, WarmUp.initial(c, 0), 0, 5) // allowed: it pays later
 * const second = WarmUp.step(c, first.state, 1000, 1) // denied, retryAfter 4000
 * ```
 *
 * @since 0.1.0
 */
export const step = (c: Config, s: State, now: number, cost: number): Outcome<State> => {
  const t = now > s.at ? now : s.at
  if (s.ahead > t - s.at) {
    return {
      allowed: false,
      state: s,
      remaining: 0,
      retryAfter: millisUntil(now, s.at, s.ahead),
      resetAfter: millisUntil(now, s.at, freshIn(c, s)),
      limit: c.permits
    }
  }
  // Admitted: after the resync `nextFree` is `t` (or was `t` exactly already).
  const r = resync(c, s, t)
  const spend = Math.min(cost, r.stored)
  const fresh = cost - spend
  const wait = storedPermitsToWaitTime(c, r.stored, spend) + fresh * c.stableInterval
  const next: State = { stored: r.stored - spend, ahead: wait, at: t }
  return {
    allowed: true,
    state: next,
    remaining: wait > 0 ? 0 : c.warmupMillis > 0 ? 1 : Math.floor(next.stored) + 1,
    retryAfter: 0,
    resetAfter: millisUntil(now, t, freshIn(c, next)),
    limit: c.permits
  }
}

/**
 * Milliseconds until a request behind `queued` waiting units is admitted:
 * the waiters reserve in turn, each when `nextFree` comes, so this request
 * goes when their combined reservation has been paid. Its own cost does not
 * matter (it pays later).
 *
 * @example
 * ```ts
 * import * as WarmUp from "./WarmUp.ts"
 *
 * const c = WarmUp.config({ permits: 1, periodMillis: 1000 })
 * WarmUp.waitTime(c, WarmUp.initial(c, 0), 0, 3, 1) // 3000
 * ```
 *
 * @since 0.1.0
 */
export const waitTime = (c: Config, s: State, now: number, queued: number, _cost: number): number => {
  if (queued <= 0) return millisUntil(now, s.at, s.ahead)
  const r = resync(c, s, now > s.at ? now : s.at)
  const spend = Math.min(queued, r.stored)
  const free = r.ahead + storedPermitsToWaitTime(c, r.stored, spend) + (queued - spend) * c.stableInterval
  return millisUntil(now, r.at, free)
}

/**
 * When the store is full and nothing is owed.
 *
 * @example
 * ```ts
 * import * as WarmUp from "./WarmUp.ts"
 *
 * const c = WarmUp.config({ permits: 1, periodMillis: 1000, maxBurstMillis: 2000 })
 * WarmUp.settledAt(c, { stored: 0, ahead: 500, at: 0 }) // 2500
 * ```
 *
 * @since 0.1.0
 */
export const settledAt = (c: Config, s: State): number => s.at + Math.ceil(freshIn(c, s))

/**
 * Takes `cost` now whatever `nextFree` says (Guava's `reserve`): stored
 * permits first, the rest at the stable interval, `nextFree` moved on by
 * their cost.
 *
 * @example
 * ```ts
 * import * as WarmUp from "./WarmUp.ts"
 *
 * const c = WarmUp.config({ permits: 1, periodMillis: 1000 })
 * const s = WarmUp.force(c, WarmUp.force(c, WarmUp.initial(c, 0), 0, 2), 0, 1) // nextFree 3000
 * ```
 *
 * @since 0.2.0
 */
export const force = (c: Config, s: State, now: number, cost: number): State => {
  const r = resync(c, s, now > s.at ? now : s.at)
  const spend = Math.min(cost, r.stored)
  const wait = storedPermitsToWaitTime(c, r.stored, spend) + (cost - spend) * c.stableInterval
  return { stored: r.stored - spend, ahead: r.ahead + wait, at: r.at }
}

/**
 * A key with its store full and nothing owed (bursty: a full burst; warming
 * up: cold).
 *
 * @since 0.2.0
 */
export const full = (c: Config, now: number): State => ({ stored: c.maxPermits, ahead: 0, at: now })

// Guava's doSetRate: resync at the old rate (its store limit and cool-down),
// keep nextFree, rescale the stored permits to the new store.
const carryStore = (
  to: Config,
  fromMax: number,
  fromCoolDown: number,
  s: State,
  now: number,
  proportional: boolean
): State => {
  const r = resync({ ...to, maxPermits: fromMax, coolDownInterval: fromCoolDown }, s, now > s.at ? now : s.at)
  const stored = !proportional
    ? Math.min(r.stored, to.maxPermits)
    : fromMax === 0
    ? (to.warmupMillis > 0 ? to.maxPermits : 0)
    : r.stored * to.maxPermits / fromMax
  return { stored, ahead: r.ahead, at: r.at }
}

/**
 * Guava's `setRate`: the rate as the numbers a carry needs (the most
 * permits stored and the cool-down interval), the configuration at another
 * rate, and the store carried over (see the module's description).
 *
 * @since 0.2.0
 */
export const rate: NonNullable<Algorithm<Config, State>["rate"]> = {
  rateOf: (c) => [c.maxPermits, c.coolDownInterval],
  withRate: (c, permits, periodMillis) => {
    const next = config({
      permits,
      periodMillis,
      warmupMillis: c.warmupMillis > 0 ? c.warmupMillis : undefined,
      coldFactor: c.coldFactor,
      maxBurstMillis: c.maxBurstMillis
    })
    // an initialPermits of its own is kept (within the new store)
    const own = c.initialPermits !== (c.warmupMillis > 0 ? c.maxPermits : 0)
    return own ? { ...next, initialPermits: Math.min(c.initialPermits, next.maxPermits) } : next
  },
  carryRate: (to, [fromMax, fromCoolDown], s, now) => carryStore(to, fromMax, fromCoolDown, s, now, true)
}

/**
 * Carries a key over to a new smooth configuration: `"proportional"` is
 * Guava's `setRate` (the store rescaled), `"as-is"` keeps the stored permits
 * (capped by the new store), `"reset"` starts afresh; `nextFree` is kept
 * by the first two.
 *
 * @example
 * ```ts
 * import * as WarmUp from "./WarmUp.ts"
 *
 * const one = WarmUp.config({ permits: 1, periodMillis: 1000 })
 * const two = WarmUp.config({ permits: 2, periodMillis: 1000 })
 * WarmUp.reconfigure(one, { stored: 1, ahead: 0, at: 0 }, two, 0, "proportional") // { stored: 2, ahead: 0, at: 0 }
 * ```
 *
 * @since 0.2.0
 */
export const reconfigure = (from: Config, s: State, to: Config, now: number, carry: Carry): State =>
  carry === "reset"
    ? initial(to, now)
    : carryStore(to, from.maxPermits, from.coolDownInterval, s, now, carry === "proportional")

/**
 * The smooth rate limiter as an {@link Algorithm}.
 *
 * @example
 * ```ts
 * import * as WarmUp from "./WarmUp.ts"
 *
 * const c = WarmUp.config({ permits: 10, periodMillis: 1000, warmupMillis: 3000 })
 * WarmUp.algorithm.maxCost(c) // Infinity: the cost is paid by the next request
 * ```
 *
 * @since 0.1.0
 */
export const algorithm: Algorithm<Config, State> = {
  name: "warm-up",
  initial,
  step,
  waitTime,
  settledAt,
  maxCost: () => Infinity,
  force,
  full,
  reconfigure,
  rate
}
