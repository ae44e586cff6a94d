/**
 * The leaky bucket as a shaper, as nginx's `limit_req` runs it: requests leave
 * the bucket at a fixed rate (`tokens` per `periodMillis`), at most `burst`
 * of them wait in it beyond the one being served, and the rest are rejected.
 * An admitted request is told how long to wait before it proceeds (`delay`),
 * so the flow that comes out is smooth.
 *
 * The model, in nginx's terms: the bucket holds a `level` of units that leaks
 * continuously at the rate. The *excess* a request meets is the level when it
 * arrives, `x = max(0, level − rate × elapsed)`. A request of `cost` is
 * admitted iff `x + cost ≤ burst + 1` (for `cost = 1` that is nginx's
 * `excess ≤ burst`), and then `level ← x + cost`. Its delay is
 * `max(0, x − delay) / rate`: the time for the units ahead of it to leak, less
 * the first `delay` units, which are not delayed. `nodelay` is `delay =
 * Infinity`: the whole burst goes at once, yet the accounting (what is
 * admitted) is unchanged. A request of cost `c` is released when the units
 * ahead of it have leaked; its own `c` units then delay those behind it.
 *
 * As a meter this is GCRA: `burst + 1` units at once, refilled at the rate.
 * nginx keeps the excess in integer milli-requests and truncates
 * `rate × ms / 1000` at each request while moving its clock forwards, so at
 * low rates and high request rates it leaks slower than configured; here the
 * level is scaled by `periodMillis` (as in the token bucket), which is exact
 * for every integer configuration while `(burst + 1) × periodMillis` is below
 * 2^53.
 *
 * The actor consumes `delay` by holding an admitted request for that long
 * before answering it (`acquire` succeeds after the delay); the units are
 * already accounted, so the actor need not keep the request in its state.
 *
 * Edge cases:
 *
 * - A new key has an empty bucket: its first `burst + 1` units are admitted,
 *   the first at once and the others delayed one emission interval apiece.
 * - A denial takes nothing and leaves the state as it was (nginx likewise).
 * - A cost above `burst + 1` can never be admitted: `retryAfter` is `Infinity`
 *   and `maxCost` is `burst + 1`.
 * - Time that goes backwards stands still at the anchor `at` (the latest
 *   admitted time): it leaks nothing, and a pending delay still runs from the
 *   anchor. nginx treats a step back of up to 60 s as 0 ms and a longer one as
 *   1 ms; standing still is the conservative half of that.
 * - A huge jump just empties the bucket: no overflow, no NaN.
 * - `release` (a refund, say a request that gave up while delayed) takes
 *   `amount` units out of the bucket, never below empty.
 * - Beyond the limit: `force` fills the bucket past `burst + 1` (a debt that
 *   leaks out before anything else is admitted); `forceAdd` takes units out
 *   below empty (a credit: more than `burst + 1` admitted at once), which
 *   does not leak further and is only spent by requests. A key with a credit
 *   never settles.
 *
 * @since 0.1.0
 */
import type { Algorithm, Outcome } from "./Algorithm.ts"

/**
 * A validated leaky bucket configuration.
 *
 * @since 0.1.0
 */
export interface Config {
  /** Units leaked (released) per period: nginx's `rate`. */
  readonly tokens: number
  /** The period in milliseconds. */
  readonly periodMillis: number
  /** Units that may wait beyond the one being served: nginx's `burst`. */
  readonly burst: number
  /** Units of excess released without delay: nginx's `delay` (`Infinity` for `nodelay`). */
  readonly delay: number
  /** `burst + 1`: the most units the bucket holds. */
  readonly capacity: number
  /** `capacity * periodMillis`: the scaled level of a full bucket. */
  readonly full: number
}

/**
 * The state of one bucket: the scaled level (`units * periodMillis`) as of
 * time `at`.
 *
 * @since 0.1.0
 */
export interface State {
  readonly level: number
  readonly at: number
}

/**
 * An outcome that also says how long to hold an admitted request.
 *
 * @since 0.1.0
 */
export interface Shaped<S> extends Outcome<S> {
  /** Milliseconds the caller waits before proceeding: 0 when denied or not delayed. */
  readonly delay: number
}

/**
 * Builds a configuration; the caller has validated the numbers.
 *
 * @example
 * ```ts
 * import * as LeakyBucket from "./LeakyBucket.ts"
 *
 * // limit_req rate=10r/s burst=20 delay=5
 * const config = LeakyBucket.config({ tokens: 10, periodMillis: 1000, burst: 20, delay: 5 })
 * // limit_req rate=1r/s burst=5 nodelay
 * const eager = LeakyBucket.config({ tokens: 1, periodMillis: 1000, burst: 5, nodelay: true })
 * ```
 *
 * @since 0.1.0
 */
export const config = (options: {
  readonly tokens: number
  readonly periodMillis: number
  readonly burst?: number | undefined
  readonly delay?: number | undefined
  readonly nodelay?: boolean | undefined
}): Config => {
  const burst = options.burst ?? 0
  return {
    tokens: options.tokens,
    periodMillis: options.periodMillis,
    burst,
    delay: options.nodelay === true ? Infinity : options.delay ?? 0,
    capacity: burst + 1,
    full: (burst + 1) * options.periodMillis
  }
}

/**
 * The state of a key never seen before: an empty bucket.
 *
 * @example
 * ```ts
 * import * as LeakyBucket from "./LeakyBucket.ts"
 *
 * const c = LeakyBucket.config({ tokens: 1, periodMillis: 1000, burst: 2 })
 * LeakyBucket.initial(c, 0) // { level: 0, at: 0 }
 * ```
 *
 * @since 0.1.0
 */
export const initial = (_c: Config, now: number): State => ({ level: 0, at: now })

/**
 * The scaled level at `now` (nginx's excess, times `periodMillis`).
 * Backwards or repeated time leaks nothing.
 *
 * @example
 * ```ts
 * import * as LeakyBucket from "./LeakyBucket.ts"
 *
 * const c = LeakyBucket.config({ tokens: 1, periodMillis: 1000, burst: 2 })
 * LeakyBucket.levelAt(c, { level: 2000, at: 0 }, 500) // 1500: one and a half units
 * ```
 *
 * @since 0.1.0
 */
export const levelAt = (c: Config, s: State, now: number): number =>
  now <= s.at || s.level <= 0 ? s.level : Math.max(0, s.level - (now - s.at) * c.tokens)

// Milliseconds from `now` until the level has leaked by `excess`. Leaking
// starts at `s.at`, later than `now` only when the clock went backwards.
const millisFor = (c: Config, s: State, now: number, excess: number): number =>
  excess <= 0 ? 0 : Math.ceil(excess / c.tokens) + (s.at > now ? s.at - now : 0)

/**
 * Decides one request; an admitted one carries its `delay`.
 *
 * @example
 * ```ts
 * import * as LeakyBucket from "./LeakyBucket.ts"
 *
 * const c = LeakyBucket.config({ tokens: 1, periodMillis: 1000, burst: 1 })
 * const first = LeakyBucket.step(c, LeakyBucket.initial(c, 0), 0, 1) // allowed, delay 0
 * const second = LeakyBucket.step(c, first.state, 0, 1) // allowed, delay 1000
 * const third = LeakyBucket.step(c, second.state, 0, 1) // denied, retryAfter 1000
 * ```
 *
 * @since 0.1.0
 */
export const step = (c: Config, s: State, now: number, cost: number): Shaped<State> => {
  const level = levelAt(c, s, now)
  const need = cost * c.periodMillis
  if (level + need <= c.full && need <= c.full) {
    const next = level + need
    return {
      allowed: true,
      state: { level: next, at: now > s.at ? now : s.at },
      remaining: Math.floor((c.full - next) / c.periodMillis),
      retryAfter: 0,
      resetAfter: millisFor(c, s, now, next),
      limit: c.capacity,
      // With `nodelay`, `c.delay * c.periodMillis` is Infinity and the excess -Infinity.
      delay: millisFor(c, s, now, level - c.delay * c.periodMillis)
    }
  }
  return {
    allowed: false,
    state: s,
    remaining: level < c.full ? Math.floor((c.full - level) / c.periodMillis) : 0,
    retryAfter: need > c.full ? Infinity : millisFor(c, s, now, level + need - c.full),
    resetAfter: millisFor(c, s, now, level),
    limit: c.capacity,
    delay: 0
  }
}

/**
 * Milliseconds until a request of `cost` behind `queued` waiting units is
 * admitted to the bucket (its `delay` comes on top). Exact: waiters enter in
 * order as the bucket leaks.
 *
 * @example
 * ```ts
 * import * as LeakyBucket from "./LeakyBucket.ts"
 *
 * const c = LeakyBucket.config({ tokens: 1, periodMillis: 1000, burst: 0 })
 * LeakyBucket.waitTime(c, { level: 1000, at: 0 }, 0, 0, 1) // 1000
 * ```
 *
 * @since 0.1.0
 */
export const waitTime = (c: Config, s: State, now: number, queued: number, cost: number): number =>
  cost > c.capacity ? Infinity : millisFor(c, s, now, levelAt(c, s, now) + (queued + cost) * c.periodMillis - c.full)

/**
 * The moment the bucket is empty: from then on the key is indistinguishable
 * from a new one.
 *
 * @example
 * ```ts
 * import * as LeakyBucket from "./LeakyBucket.ts"
 *
 * const c = LeakyBucket.config({ tokens: 1, periodMillis: 1000, burst: 2 })
 * LeakyBucket.settledAt(c, { level: 2000, at: 5 }) // 2005
 * ```
 *
 * @since 0.1.0
 */
export const settledAt = (c: Config, s: State): number => s.level < 0 ? Infinity : s.at + millisFor(c, s, s.at, s.level)

/**
 * Gives `amount` units back (a refund): they leave the bucket, never below empty.
 *
 * @example
 * ```ts
 * import * as LeakyBucket from "./LeakyBucket.ts"
 *
 * const c = LeakyBucket.config({ tokens: 1, periodMillis: 1000, burst: 2 })
 * LeakyBucket.release(c, { level: 3000, at: 0 }, 0, 1) // { level: 2000, at: 0 }
 * ```
 *
 * @since 0.1.0
 */
export const release = (c: Config, s: State, now: number, amount: number): State => {
  if (!(amount > 0)) return s
  const level = levelAt(c, s, now)
  // never below empty; a credit (a forced add) is kept as it is
  return { level: level <= 0 ? level : Math.max(0, level - amount * c.periodMillis), at: now > s.at ? now : s.at }
}

/**
 * Puts `cost` units in the bucket whatever its level (a debt: it may hold
 * more than `burst + 1`).
 *
 * @example
 * ```ts
 * import * as LeakyBucket from "./LeakyBucket.ts"
 *
 * const c = LeakyBucket.config({ tokens: 1, periodMillis: 1000, burst: 1 })
 * LeakyBucket.force(c, LeakyBucket.initial(c, 0), 0, 4) // { level: 4000, at: 0 }: two units over
 * ```
 *
 * @since 0.2.0
 */
export const force = (c: Config, s: State, now: number, cost: number): State => ({
  level: levelAt(c, s, now) + cost * c.periodMillis,
  at: now > s.at ? now : s.at
})

/**
 * Takes `amount` units out with no floor (a credit below empty).
 *
 * @example
 * ```ts
 * import * as LeakyBucket from "./LeakyBucket.ts"
 *
 * const c = LeakyBucket.config({ tokens: 1, periodMillis: 1000, burst: 1 })
 * LeakyBucket.forceAdd(c, LeakyBucket.initial(c, 0), 0, 2) // { level: -2000, at: 0 }
 * ```
 *
 * @since 0.2.0
 */
export const forceAdd = (c: Config, s: State, now: number, amount: number): State => ({
  level: levelAt(c, s, now) - amount * c.periodMillis,
  at: now > s.at ? now : s.at
})

/**
 * The leaky bucket as an {@link Algorithm}; its `step` returns {@link Shaped}
 * outcomes.
 *
 * @example
 * ```ts
 * import * as LeakyBucket from "./LeakyBucket.ts"
 *
 * const c = LeakyBucket.config({ tokens: 2, periodMillis: 1000, burst: 3 })
 * LeakyBucket.algorithm.maxCost(c) // 4
 * ```
 *
 * @since 0.1.0
 */
export const algorithm: Algorithm<Config, State> = {
  name: "leaky-bucket",
  initial,
  step,
  waitTime,
  settledAt,
  maxCost: (c) => c.capacity,
  release,
  force,
  forceAdd
}
