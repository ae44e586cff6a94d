/**
 * The token bucket, as in the Keter worker: the bucket starts full (unless
 * told otherwise), refills continuously by `min(capacity, tokens + rate * elapsed)`,
 * and a request that finds too few tokens is denied and takes nothing.
 *
 * Arithmetic is done on a scaled level, `tokens * periodMillis`, so that a
 * refill of `elapsed * tokens` is an exact product of integers for every
 * integer configuration (1000 tokens per hour never drifts to 0.9999 tokens).
 * It stays exact while `capacity * periodMillis` is below 2^53.
 *
 * Time that goes backwards adds nothing: the refill anchor `at` only moves
 * forwards, so a clock that steps back and forth can never mint tokens.
 *
 * Refill is greedy (continuous) by default. In interval mode (Bucket4j's
 * `refillIntervally`) the whole `tokens` arrive at once at the end of each
 * period: periods count from the key's anchor (phase kept as the anchor
 * moves), or, `aligned`, from multiples of the period on the clock, or,
 * with a first refill (Bucket4j's `refillIntervallyAligned`), at
 * `firstRefill + k × period` for k ≥ 0 and never before `firstRefill`.
 *
 * Beyond the limit (see `force` and `forceAdd`): the level may be below
 * zero (a debt, Bucket4j's `consumeIgnoringRateLimits`), which refills like
 * any level, or above capacity (Bucket4j's `forceAddTokens`), which does not
 * refill further and is never lost to a cap: only requests spend it. A
 * bucket above capacity never settles (forgetting it would take the surplus
 * away).
 *
 * A rate of 0 (x/time/rate's `NewLimiter(0, b)`) refills nothing: the bucket
 * admits what it starts with, then never again, and never settles.
 *
 * @since 0.1.0
 */
import { type Algorithm, carriedLevel, type Carry, type Outcome } from "./Algorithm.ts"

/**
 * A validated token bucket configuration.
 *
 * @since 0.1.0
 */
export interface Config {
  /** Most tokens the bucket holds. */
  readonly capacity: number
  /** Tokens added per period. */
  readonly tokens: number
  /** The refill period in milliseconds. */
  readonly periodMillis: number
  /** Tokens a new key starts with. */
  readonly initialTokens: number
  /** `capacity * periodMillis`: the scaled level of a full bucket. */
  readonly full: number
  /** Whole periods at once (interval mode) instead of continuous refill. */
  readonly interval: boolean
  /** In interval mode: periods aligned to multiples of `periodMillis` on the clock (or to `origin`). */
  readonly aligned: boolean
  /** Aligned periods end at `origin + k × periodMillis` (0, or the first refill). */
  readonly origin: number
  /**
   * No period ends before `origin` (a first refill): times before
   * `origin − periodMillis` count as that time. `-Infinity` without one.
   */
  readonly floor: number
  /** A key first seen before the first refill starts with Bucket4j's adaptive initial tokens. */
  readonly adaptive: boolean
}

/**
 * The state of one bucket: the scaled level (`tokens * periodMillis`) as of
 * time `at`.
 *
 * @since 0.1.0
 */
export interface State {
  readonly level: number
  readonly at: number
}

/**
 * Builds a configuration; the caller has validated the numbers.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * // 100 tokens, 10 more every second
 * const config = TokenBucket.config({ capacity: 100, tokens: 10, periodMillis: 1000 })
 * ```
 *
 * @since 0.1.0
 */
export const config = (options: {
  readonly capacity: number
  readonly tokens: number
  readonly periodMillis: number
  readonly initialTokens?: number | undefined
  readonly interval?: boolean | undefined
  readonly aligned?: boolean | undefined
  /** In interval mode: the time of the first refill; periods end at `firstRefill + k × periodMillis`. */
  readonly firstRefill?: number | undefined
  /** With `firstRefill`: Bucket4j's adaptive initial tokens for a key first seen before it. */
  readonly adaptive?: boolean | undefined
}): Config => {
  const interval = options.interval === true
  const first = interval ? options.firstRefill : undefined
  return {
    capacity: options.capacity,
    tokens: options.tokens,
    periodMillis: options.periodMillis,
    initialTokens: options.initialTokens ?? options.capacity,
    full: options.capacity * options.periodMillis,
    interval,
    aligned: interval && (options.aligned === true || first !== undefined),
    origin: first ?? 0,
    floor: first === undefined ? -Infinity : first - options.periodMillis,
    adaptive: first !== undefined && options.adaptive === true
  }
}

// Aligned periods: the index of the last boundary at or before `t` (times
// before the first refill count as the boundary before it).
const boundary = (c: Config, t: number): number => Math.floor(((t > c.floor ? t : c.floor) - c.origin) / c.periodMillis)

// Whole periods that ended in (s.at, now]; 0 when time did not move forwards.
const periods = (c: Config, s: State, now: number): number =>
  now <= s.at
    ? 0
    : c.aligned
    ? boundary(c, now) - boundary(c, s.at)
    : Math.floor((now - s.at) / c.periodMillis)

/**
 * The scaled level at `now`. Backwards or repeated time adds nothing, and a
 * level at or above capacity (a forced add) neither grows nor shrinks.
 *
 * @since 0.1.0
 */
export const levelAt = (c: Config, s: State, now: number): number =>
  now <= s.at || s.level >= c.full
    ? s.level
    : Math.min(c.full, s.level + (c.interval ? periods(c, s, now) * c.periodMillis : now - s.at) * c.tokens)

// The anchor after a refill at `now`: now (greedy, aligned), or the end of the
// last whole period (interval), so the phase of the periods is kept.
const anchorAt = (c: Config, s: State, now: number): number =>
  now <= s.at ? s.at : c.interval && !c.aligned ? s.at + periods(c, s, now) * c.periodMillis : now

/**
 * Whole tokens in the bucket at `now`.
 *
 * @since 0.1.0
 */
export const tokensAt = (c: Config, s: State, now: number): number => levelAt(c, s, now) / c.periodMillis

// Milliseconds from `now` until the scaled level has grown by `deficit` (ceil:
// at that instant it has). Refill starts at `s.at`, which is later than `now`
// only when the clock went backwards.
const millisFor = (c: Config, s: State, now: number, deficit: number): number => {
  if (deficit <= 0) return 0
  if (!c.interval) return Math.ceil(deficit / c.tokens) + (s.at > now ? s.at - now : 0)
  // k more whole periods; the first ends at the next boundary after max(now, at)
  const k = Math.ceil(deficit / (c.tokens * c.periodMillis))
  const from = now > s.at ? now : s.at
  const next = c.aligned
    ? c.origin + (boundary(c, from) + 1) * c.periodMillis
    : anchorAt(c, s, from) + c.periodMillis
  return next + (k - 1) * c.periodMillis - now
}

/**
 * Decides one request.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const c = TokenBucket.config({ capacity: 1, tokens: 1, periodMillis: 1000 })
 * const first = TokenBucket.step(c, TokenBucket.initial(c, 0), 0, 1) // allowed
 * const second = TokenBucket.step(c, first.state, 500, 1) // denied, retryAfter 500
 * ```
 *
 * @since 0.1.0
 */
export const step = (c: Config, s: State, now: number, cost: number): Outcome<State> => {
  const level = levelAt(c, s, now)
  const need = cost * c.periodMillis
  // a surplus (a forced add) never lets a cost above capacity through
  if (level >= need && need <= c.full) {
    const next = level - need
    return {
      allowed: true,
      state: { level: next, at: anchorAt(c, s, now) },
      remaining: Math.floor(next / c.periodMillis),
      retryAfter: 0,
      resetAfter: millisFor(c, s, now, c.full - next),
      limit: c.capacity
    }
  }
  // Denied: the state is left as it was (refill is path-independent, so
  // materialising it would change nothing) and nothing is taken. In debt
  // the level is below zero: nothing remains.
  return {
    allowed: false,
    state: s,
    remaining: level > 0 ? Math.floor(level / c.periodMillis) : 0,
    retryAfter: need > c.full ? Infinity : millisFor(c, s, now, need - level),
    resetAfter: millisFor(c, s, now, c.full - level),
    limit: c.capacity
  }
}

/**
 * Admits `cost` at `now` by updating `s` in place (`step`'s new state, without
 * the figures and without allocating), or returns `false` and leaves `s` as it
 * was. `s` must belong to the caller alone.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const c = TokenBucket.config({ capacity: 1, tokens: 1, periodMillis: 1000 })
 * const s = TokenBucket.initial(c, 0)
 * TokenBucket.takeInPlace(c, s, 0, 1) // true; s is now { level: 0, at: 0 }
 * TokenBucket.takeInPlace(c, s, 500, 1) // false; s is unchanged
 * ```
 *
 * @since 0.1.0
 */
export const takeInPlace = (c: Config, s: State, now: number, cost: number): boolean => {
  const level = levelAt(c, s, now)
  const need = cost * c.periodMillis
  if (level < need) return false
  const owned = s as Mutable<State>
  owned.at = anchorAt(c, s, now)
  owned.level = level - need
  return true
}

type Mutable<A> = { -readonly [K in keyof A]: A[K] }

/**
 * The state of a key never seen before. With adaptive initial tokens (a
 * first refill still to come), Bucket4j's rule: what the refill would have
 * brought by the first refill, on top of `capacity − tokens`, at most
 * `capacity`.
 *
 * @since 0.1.0
 */
export const initial = (c: Config, now: number): State => ({
  level: c.adaptive && now < c.origin
    ? Math.min(
      c.full,
      Math.max(0, c.capacity - c.tokens) * c.periodMillis + (c.origin - now) * c.tokens
    )
    : c.initialTokens * c.periodMillis,
  at: now
})

/**
 * Milliseconds until a request of `cost` behind `queued` waiting tokens is
 * admitted. While anyone waits the level stays below the head's cost, so the
 * cap never bites and the time is exact: waiters are served in order as the
 * refill reaches each running total.
 *
 * @since 0.1.0
 */
export const waitTime = (c: Config, s: State, now: number, queued: number, cost: number): number =>
  cost > c.capacity ? Infinity : millisFor(c, s, now, (queued + cost) * c.periodMillis - levelAt(c, s, now))

/**
 * The moment the bucket is full again; from then on a forgotten bucket (which
 * restarts at `initialTokens`) is never more permissive than the kept one, and
 * identical to it when the bucket starts full. Never, while it holds more
 * than its capacity.
 *
 * @since 0.1.0
 */
export const settledAt = (c: Config, s: State): number =>
  s.level > c.full ? Infinity : s.at + millisFor(c, s, s.at, c.full - s.level)

/**
 * Gives `amount` tokens back, capped at capacity (a refund: Bucket4j's
 * `addTokens`).
 *
 * @example
 * ```ts
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const c = TokenBucket.config({ capacity: 5, tokens: 1, periodMillis: 1000 })
 * const spent = TokenBucket.step(c, TokenBucket.initial(c, 0), 0, 3).state
 * const refunded = TokenBucket.release(c, spent, 0, 2) // 4 tokens
 * ```
 *
 * @since 0.1.0
 */
export const release = (c: Config, s: State, now: number, amount: number): State => {
  const level = levelAt(c, s, now)
  // capped at capacity; a surplus above it (a forced add) is kept
  return { level: level >= c.full ? level : Math.min(c.full, level + amount * c.periodMillis), at: anchorAt(c, s, now) }
}

/**
 * Takes `cost` tokens whatever the level (Bucket4j's
 * `consumeIgnoringRateLimits`): the level may go below zero, a debt the
 * refill pays back before anything else is admitted.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const c = TokenBucket.config({ capacity: 100, tokens: 100, periodMillis: 100, initialTokens: 0 })
 * TokenBucket.force(c, TokenBucket.initial(c, 0), 50, 52) // { level: -200, at: 50 }: 2 tokens owed
 * ```
 *
 * @since 0.2.0
 */
export const force = (c: Config, s: State, now: number, cost: number): State => ({
  level: levelAt(c, s, now) - cost * c.periodMillis,
  at: anchorAt(c, s, now)
})

/**
 * Adds `amount` tokens with no cap (Bucket4j's `forceAddTokens`): tokens
 * above capacity stay until requests spend them.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const c = TokenBucket.config({ capacity: 100, tokens: 100, periodMillis: 100, initialTokens: 0 })
 * TokenBucket.forceAdd(c, TokenBucket.initial(c, 0), 110, 120) // 220 tokens: refilled to 100, then 120 more
 * ```
 *
 * @since 0.2.0
 */
export const forceAdd = (c: Config, s: State, now: number, amount: number): State => ({
  level: levelAt(c, s, now) + amount * c.periodMillis,
  at: anchorAt(c, s, now)
})

/**
 * A full bucket (Bucket4j's `reset`), whatever `initialTokens` says.
 *
 * @since 0.2.0
 */
export const full = (c: Config, now: number): State => ({ level: c.full, at: now })

/**
 * The rate change of x/time/rate's `SetLimit`: the configuration at
 * `tokens` per `periodMillis`, and the bucket carried over with the tokens
 * it holds now (refilled at the old rate up to now, then at the new one).
 *
 * @since 0.2.0
 */
export const rate: NonNullable<Algorithm<Config, State>["rate"]> = {
  rateOf: (c) => [c.tokens, c.periodMillis],
  withRate: (c, tokens, periodMillis) =>
    config({
      capacity: c.capacity,
      tokens,
      periodMillis,
      initialTokens: c.initialTokens,
      interval: c.interval,
      aligned: c.aligned && c.floor === -Infinity,
      firstRefill: c.floor === -Infinity ? undefined : c.origin,
      adaptive: c.adaptive
    }),
  carryRate: (to, [tokens, periodMillis], s, now) =>
    reconfigure(
      {
        ...to,
        tokens,
        periodMillis,
        full: to.capacity * periodMillis,
        floor: to.floor === -Infinity ? -Infinity : to.origin - periodMillis
      },
      s,
      to,
      now,
      "as-is"
    )
}

/**
 * Carries a bucket over to a new configuration: `"as-is"` keeps the tokens
 * (capped by the new capacity), `"proportional"` keeps the same fraction of
 * capacity, `"reset"` starts the new bucket as a new key would.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const small = TokenBucket.config({ capacity: 10, tokens: 1, periodMillis: 1000 })
 * const large = TokenBucket.config({ capacity: 100, tokens: 10, periodMillis: 1000 })
 * const half = TokenBucket.step(small, TokenBucket.initial(small, 0), 0, 5).state
 * TokenBucket.reconfigure(small, half, large, 0, "proportional") // 50 tokens
 * ```
 *
 * @since 0.1.0
 */
export const reconfigure = (from: Config, s: State, to: Config, now: number, carry: Carry): State => {
  if (carry === "reset") return initial(to, now)
  const level = levelAt(from, s, now)
  const kept = carriedLevel(level, from, to, carry)
  // a surplus above the old capacity (a forced add) is capped at the new one
  return { level: Math.min(to.full, kept), at: now > s.at ? now : s.at }
}

/**
 * The token bucket as an {@link Algorithm}.
 *
 * @since 0.1.0
 */
export const algorithm: Algorithm<Config, State> = {
  name: "token-bucket",
  initial,
  step,
  waitTime,
  settledAt,
  maxCost: (c) => c.capacity,
  takeInPlace,
  release,
  reconfigure,
  force,
  forceAdd,
  full,
  rate
}
