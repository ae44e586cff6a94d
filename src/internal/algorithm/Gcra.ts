/**
 * GCRA, the generic cell rate algorithm, as redis-cell and throttled run it,
 * and the same algorithm as a shaper, as nginx's `limit_req` runs it (the
 * leaky bucket): one module, one parameter between them (`delay`).
 *
 * A key may make `count` requests per `periodMillis`, in bursts of
 * `maxBurst` beyond the one in progress.
 *
 * Definitions (redis-cell's names):
 *
 * - emission interval `T = periodMillis / count`, the spacing of a steady flow;
 * - delay variation tolerance `τ = T × (maxBurst + 1)`;
 * - the theoretical arrival time `TAT` of a new key is "now";
 * - a request of `cost` at `t` is admitted iff `max(TAT, t) + cost × T − τ ≤ t`,
 *   and then `TAT ← max(TAT, t) + cost × T`; a denied request changes nothing.
 *
 * So `maxBurst + 1` units can go at once (the `limit`, as redis-cell reports
 * it), and GCRA is exactly a token bucket of capacity `maxBurst + 1` refilled
 * by `count` per `periodMillis`, with `tokens = (t + τ − max(TAT, t)) / T`.
 * The tests check that equivalence decision by decision.
 *
 * **The leaky bucket is the same meter.** nginx's bucket holds a `level` that
 * leaks at the rate; the *excess* a request meets is `x = max(0, level − rate
 * × elapsed)`, and it is admitted iff `x + cost ≤ burst + 1`. That level is
 * GCRA's distance of the TAT ahead of now (`ahead`, below), `burst` is
 * `maxBurst`, and the rule is the same inequality. What the leaky bucket adds
 * is **shaping**: an admitted request is told how long to wait before it
 * proceeds (`delay`), `max(0, x − delay) / rate`, the time for the units
 * ahead of it to leak less the first `delay` units, which are not delayed
 * (nginx's `delay`; `nodelay` is `delay = Infinity`: the whole burst goes at
 * once, and the accounting is unchanged). GCRA as a meter is `delay =
 * Infinity`: nobody is delayed.
 *
 * The figures follow redis-cell, with `TAT'` the arrival time after the step:
 * `remaining = floor((τ − (TAT' − t)) / T)`, `resetAfter = TAT' − t`, and for
 * a denial `retryAfter = max(TAT, t) + cost × T − τ − t`. redis-cell reports
 * "never" (cost above `maxBurst + 1`) as -1; here it is `Infinity`. redis-cell
 * compares `diff.num_seconds() < 0`, which lets a request through up to a
 * second early; here the comparison is exact to the millisecond. nginx keeps
 * the excess in integer milli-requests and truncates `rate × ms / 1000` at
 * each request, so at low rates and high request rates it leaks slower than
 * configured; here it is exact.
 *
 * Arithmetic is scaled so that `T` never has to be a whole number of
 * milliseconds (redis-cell refuses rates above one per millisecond, #80):
 * time is counted in units of `1 / count` ms, so one unit of cost adds exactly
 * `periodMillis` and one millisecond takes away exactly `count`. The state
 * keeps `TAT` relative to an anchor `at` (how far it is ahead, `ahead =
 * (TAT − at) × count`), so epoch times are never multiplied by `count`. Every
 * integer configuration is exact while `(maxBurst + 1) × periodMillis` is below
 * 2^53; fractional ones round like any float.
 *
 * Edge cases:
 *
 * - A new key is fresh (`TAT = now`, an empty leaky bucket): a full burst of
 *   `maxBurst + 1`; a shaper admits the first at once and delays the others
 *   one emission interval apiece (beyond its first `delay`).
 * - A denial takes nothing and leaves the state as it was.
 * - A cost above `maxBurst + 1` can never succeed: `retryAfter` is `Infinity`
 *   and `maxCost` is `maxBurst + 1`. A cost of 0 is a peek that always passes.
 * - Time that goes backwards stands still at the anchor `at` (the latest
 *   admitted time), as in the token bucket: it never mints capacity, and a
 *   pending delay still runs from the anchor. redis-cell compares with the
 *   raw clock instead, which is stricter by the step back; nginx treats a
 *   step back of up to 60 s as 0 ms and a longer one as 1 ms (standing still
 *   is the conservative half of that).
 * - A huge jump just drains `ahead` to 0: no overflow, no NaN.
 * - `release` (a refund) moves the TAT back by `amount × T`, never before
 *   "now": exactly what the refunded request took, never more than fresh.
 * - Beyond the limit: `force` moves the TAT past the tolerance (a debt that
 *   drains before anything else is admitted); `forceAdd` moves it before
 *   "now" (`ahead` below zero: more than `maxBurst + 1` at once), a credit
 *   that does not drain further and is only spent by requests. A key with a
 *   credit never settles.
 *
 * The actor consumes a shaper's `delay` by holding an admitted request for
 * that long before answering it (`acquire` succeeds after the delay); the
 * units are already accounted, so the state need not keep the request.
 *
 * @since 0.1.0
 */
import type { Algorithm, Outcome } from "./Algorithm.ts"

/**
 * A validated GCRA configuration.
 *
 * @since 0.1.0
 */
export interface Config {
  /** Units allowed at once beyond the first (redis-cell's `max_burst`). */
  readonly maxBurst: number
  /** Units per period (redis-cell's `count_per_period`). */
  readonly count: number
  /** The period in milliseconds. */
  readonly periodMillis: number
  /** `maxBurst + 1`: the most units a fresh key admits at once. */
  readonly limit: number
  /** `τ × count = limit × periodMillis`: the scaled tolerance. */
  readonly tolerance: number
  /**
   * A shaper's undelayed units (nginx's `delay`): an admitted request waits
   * for the units ahead of it beyond these to drain. `Infinity`: none waits
   * (GCRA as a meter; nginx's `nodelay`).
   */
  readonly delay: number
}

/**
 * The state of one key: the theoretical arrival time, as its distance
 * `ahead` of the anchor `at` in units of `1 / count` ms
 * (`TAT = at + ahead / count`).
 *
 * @since 0.1.0
 */
export interface State {
  readonly ahead: number
  readonly at: number
}

/**
 * An outcome that also says how long to hold an admitted request (0 when
 * denied, not delayed, or a meter).
 *
 * @since 0.1.0
 */
export interface Shaped<S> extends Outcome<S> {
  /** Milliseconds the caller waits before proceeding. */
  readonly delay: number
}

/**
 * Builds a configuration; the caller has validated the numbers.
 *
 * @example
 * ```ts
 * import * as Gcra from "./Gcra.ts"
 *
 * // 30 per minute, bursts of 15 more (redis-cell: CL.THROTTLE key 15 30 60)
 * const config = Gcra.config({ maxBurst: 15, count: 30, periodMillis: 60_000 })
 * // nginx limit_req rate=10r/s burst=20 delay=5: a shaper
 * const shaper = Gcra.config({ maxBurst: 20, count: 10, periodMillis: 1000, delay: 5 })
 * ```
 *
 * @since 0.1.0
 */
export const config = (options: {
  readonly maxBurst: number
  readonly count: number
  readonly periodMillis: number
  /** A shaper's undelayed units (default `Infinity`: a meter, nobody waits). */
  readonly delay?: number | undefined
}): Config => ({
  maxBurst: options.maxBurst,
  count: options.count,
  periodMillis: options.periodMillis,
  limit: options.maxBurst + 1,
  tolerance: (options.maxBurst + 1) * options.periodMillis,
  delay: options.delay ?? Infinity
})

/**
 * The state of a key never seen before: `TAT = now`.
 *
 * @example
 * ```ts
 * import * as Gcra from "./Gcra.ts"
 *
 * const c = Gcra.config({ maxBurst: 4, count: 1, periodMillis: 1000 })
 * const s0 = Gcra.initial(c, 0) // { ahead: 0, at: 0 }
 * ```
 *
 * @since 0.1.0
 */
export const initial = (_c: Config, now: number): State => ({ ahead: 0, at: now })

/**
 * How far (scaled) the TAT is ahead of `now`. Backwards or repeated time
 * takes nothing away.
 *
 * @example
 * ```ts
 * import * as Gcra from "./Gcra.ts"
 *
 * const c = Gcra.config({ maxBurst: 4, count: 1, periodMillis: 1000 })
 * Gcra.aheadAt(c, { ahead: 3000, at: 0 }, 1000) // 2000: two units still in flight
 * ```
 *
 * @since 0.1.0
 */
export const aheadAt = (c: Config, s: State, now: number): number =>
  now <= s.at || s.ahead <= 0 ? s.ahead : Math.max(0, s.ahead - (now - s.at) * c.count)

/**
 * The theoretical arrival time in milliseconds (fractional when `T` is), for
 * display and for stores that keep redis-cell's representation.
 *
 * @example
 * ```ts
 * import * as Gcra from "./Gcra.ts"
 *
 * const c = Gcra.config({ maxBurst: 0, count: 3, periodMillis: 1000 })
 * Gcra.tat(c, { ahead: 1000, at: 0 }) // 333.33…
 * ```
 *
 * @since 0.1.0
 */
export const tat = (c: Config, s: State): number => s.at + s.ahead / c.count

// Milliseconds from `now` until `ahead` has drained by `excess` (ceil: at that
// instant it has). Draining starts at `s.at`, later than `now` only when the
// clock went backwards.
const millisFor = (c: Config, s: State, now: number, excess: number): number =>
  excess <= 0 ? 0 : Math.ceil(excess / c.count) + (s.at > now ? s.at - now : 0)

/**
 * Decides one request.
 *
 * @example
 * ```ts
 * import * as Gcra from "./Gcra.ts"
 *
 * const c = Gcra.config({ maxBurst: 0, count: 1, periodMillis: 1000 })
 * const first = Gcra.step(c, Gcra.initial(c, 0), 0, 1) // allowed, resetAfter 1000
 * const second = Gcra.step(c, first.state, 400, 1) // denied, retryAfter 600
 * ```
 *
 * @since 0.1.0
 */
export const step = (c: Config, s: State, now: number, cost: number): Shaped<State> => {
  const ahead = aheadAt(c, s, now)
  const need = cost * c.periodMillis
  if (ahead + need <= c.tolerance && need <= c.tolerance) {
    const next = ahead + need
    return {
      allowed: true,
      state: { ahead: next, at: now > s.at ? now : s.at },
      remaining: Math.floor((c.tolerance - next) / c.periodMillis),
      retryAfter: 0,
      resetAfter: millisFor(c, s, now, next),
      limit: c.limit,
      // the units ahead beyond the undelayed ones drain first (a meter's
      // `delay` is Infinity: the excess is -Infinity, and nobody waits)
      delay: millisFor(c, s, now, ahead - c.delay * c.periodMillis)
    }
  }
  return {
    allowed: false,
    state: s,
    remaining: ahead < c.tolerance ? Math.floor((c.tolerance - ahead) / c.periodMillis) : 0,
    retryAfter: need > c.tolerance ? Infinity : millisFor(c, s, now, ahead + need - c.tolerance),
    resetAfter: millisFor(c, s, now, ahead),
    limit: c.limit,
    delay: 0
  }
}

/**
 * Milliseconds until a request of `cost` behind `queued` waiting units is
 * admitted: exact, since waiters are served in order as the TAT drains.
 *
 * @example
 * ```ts
 * import * as Gcra from "./Gcra.ts"
 *
 * const c = Gcra.config({ maxBurst: 0, count: 1, periodMillis: 1000 })
 * Gcra.waitTime(c, Gcra.initial(c, 0), 0, 2, 1) // 2000
 * ```
 *
 * @since 0.1.0
 */
export const waitTime = (c: Config, s: State, now: number, queued: number, cost: number): number =>
  cost > c.limit ? Infinity : millisFor(c, s, now, aheadAt(c, s, now) + (queued + cost) * c.periodMillis - c.tolerance)

/**
 * The moment the TAT is no longer ahead of the clock: from then on the key is
 * indistinguishable from a new one.
 *
 * @example
 * ```ts
 * import * as Gcra from "./Gcra.ts"
 *
 * const c = Gcra.config({ maxBurst: 4, count: 1, periodMillis: 1000 })
 * Gcra.settledAt(c, { ahead: 3000, at: 10 }) // 3010
 * ```
 *
 * @since 0.1.0
 */
export const settledAt = (c: Config, s: State): number => s.ahead < 0 ? Infinity : s.at + millisFor(c, s, s.at, s.ahead)

/**
 * Gives `amount` units back (a refund): the TAT moves back by `amount × T`,
 * never before the clock.
 *
 * @example
 * ```ts
 * import * as Gcra from "./Gcra.ts"
 *
 * const c = Gcra.config({ maxBurst: 4, count: 1, periodMillis: 1000 })
 * const taken = Gcra.step(c, Gcra.initial(c, 0), 0, 3).state // ahead 3000
 * Gcra.release(c, taken, 0, 2) // { ahead: 1000, at: 0 }
 * ```
 *
 * @since 0.1.0
 */
export const release = (c: Config, s: State, now: number, amount: number): State => {
  if (!(amount > 0)) return s
  const ahead = aheadAt(c, s, now)
  // never before "now"; a credit (a forced add) is kept as it is
  return { ahead: ahead <= 0 ? ahead : Math.max(0, ahead - amount * c.periodMillis), at: now > s.at ? now : s.at }
}

/**
 * Takes `cost` units whatever the TAT (a debt: the TAT may end up past the
 * tolerance).
 *
 * @example
 * ```ts
 * import * as Gcra from "./Gcra.ts"
 *
 * const c = Gcra.config({ maxBurst: 0, count: 1, periodMillis: 1000 })
 * Gcra.force(c, Gcra.initial(c, 0), 0, 3) // { ahead: 3000, at: 0 }: two units past the tolerance
 * ```
 *
 * @since 0.2.0
 */
export const force = (c: Config, s: State, now: number, cost: number): State => ({
  ahead: aheadAt(c, s, now) + cost * c.periodMillis,
  at: now > s.at ? now : s.at
})

/**
 * Adds `amount` units with no cap: the TAT moves back by `amount × T`, also
 * before "now" (a credit beyond `maxBurst + 1`).
 *
 * @example
 * ```ts
 * import * as Gcra from "./Gcra.ts"
 *
 * const c = Gcra.config({ maxBurst: 0, count: 1, periodMillis: 1000 })
 * Gcra.forceAdd(c, Gcra.initial(c, 0), 0, 2) // { ahead: -2000, at: 0 }: 3 at once
 * ```
 *
 * @since 0.2.0
 */
export const forceAdd = (c: Config, s: State, now: number, amount: number): State => ({
  ahead: aheadAt(c, s, now) - amount * c.periodMillis,
  at: now > s.at ? now : s.at
})

/**
 * GCRA as an {@link Algorithm}.
 *
 * @example
 * ```ts
 * import * as Gcra from "./Gcra.ts"
 *
 * const c = Gcra.config({ maxBurst: 9, count: 10, periodMillis: 1000 })
 * Gcra.algorithm.maxCost(c) // 10
 * ```
 *
 * @since 0.1.0
 */
export const algorithm: Algorithm<Config, State> = {
  name: "gcra",
  initial,
  step,
  waitTime,
  settledAt,
  maxCost: (c) => c.limit,
  release,
  force,
  forceAdd
}
