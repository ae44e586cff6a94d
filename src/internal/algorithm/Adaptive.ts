/**
 * An adaptive rate: a token bucket whose refill rate moves with what the
 * upstream it protects says, by additive increase and multiplicative
 * decrease (AIMD, as TCP's congestion window), between a floor and a
 * ceiling.
 *
 * The rate is part of the key's state, so each key adapts on its own, and a
 * signal is one more request in the key's order (in-band): the requests
 * before it are decided at the old rate, those after it at the new one, and
 * the waiters in line are re-timed at once.
 *
 * - `"ok"`: `rate = min(ceiling, rate + increase)`.
 * - `"throttled"`: `rate = max(floor, rate * decrease)`, at most once per
 *   period (`periodMillis`): the calls already in flight when upstream
 *   pushed back all come back throttled, and count as one event, as TCP
 *   cuts its window once per loss event. With `millis` (upstream's
 *   `Retry-After`), nothing is admitted before `now + millis`: the level is
 *   lowered (below zero if need be: a debt the refill pays off) so that one
 *   unit is there exactly then.
 * - `"latency"`: above the target, as `"throttled"` without a wait; at or
 *   below it, as `"ok"`.
 *
 * Everything else is the greedy token bucket at the current rate: a scaled
 * level (`tokens * periodMillis`), a refill anchor that only moves forwards
 * (time that goes back adds nothing), `min(full, level + rate * elapsed)`.
 *
 * Forgetting a key restarts it at the initial rate, so a key whose rate is
 * below the initial one never settles (it is not reaped: it would come back
 * faster than upstream allowed); one at or above it settles once full, as a
 * token bucket does (it comes back no faster than it was).
 *
 * @since 0.2.0
 */
import { type Algorithm, carriedLevel, type Carry, type Outcome, type Signal } from "./Algorithm.ts"

/**
 * A validated adaptive configuration; rates are tokens per `periodMillis`.
 *
 * @since 0.2.0
 */
export interface Config {
  readonly capacity: number
  readonly periodMillis: number
  /** The rate a new key starts at. */
  readonly initial: number
  readonly floor: number
  readonly ceiling: number
  /** Added to the rate on `"ok"`. */
  readonly increase: number
  /** The rate is multiplied by it on `"throttled"` (0 < decrease < 1). */
  readonly decrease: number
  /** A latency above it counts as `"throttled"` (Infinity: none). */
  readonly latencyMillis: number
  /** `capacity * periodMillis`: the scaled level of a full bucket. */
  readonly full: number
}

/**
 * The state of one key: the scaled level as of `at`, the current `rate`,
 * and when the rate was last cut (`-Infinity`: never).
 *
 * @since 0.2.0
 */
export interface State {
  readonly level: number
  readonly at: number
  readonly rate: number
  readonly cut: number
}

/**
 * Builds a configuration; the caller has validated the numbers.
 *
 * @example
 * ```ts
 * import * as Adaptive from "./Adaptive.ts"
 *
 * const c = Adaptive.config({ capacity: 10, periodMillis: 1000, initial: 100, floor: 10, ceiling: 1000 })
 * ```
 *
 * @since 0.2.0
 */
export const config = (options: {
  readonly capacity: number
  readonly periodMillis: number
  readonly initial: number
  readonly floor: number
  readonly ceiling: number
  readonly increase?: number | undefined
  readonly decrease?: number | undefined
  readonly latencyMillis?: number | undefined
}): Config => ({
  capacity: options.capacity,
  periodMillis: options.periodMillis,
  initial: options.initial,
  floor: options.floor,
  ceiling: options.ceiling,
  increase: options.increase ?? options.floor,
  decrease: options.decrease ?? 0.5,
  latencyMillis: options.latencyMillis ?? Infinity,
  full: options.capacity * options.periodMillis
})

/**
 * The scaled level at `now`; backwards or repeated time adds nothing.
 *
 * @since 0.2.0
 */
export const levelAt = (c: Config, s: State, now: number): number =>
  now <= s.at ? s.level : Math.min(c.full, s.level + (now - s.at) * s.rate)

// Milliseconds from `now` until the level has grown by `deficit`.
const millisFor = (s: State, now: number, deficit: number): number =>
  deficit <= 0 ? 0 : Math.ceil(deficit / s.rate) + (s.at > now ? s.at - now : 0)

/**
 * The state of a key never seen before: full, at the initial rate.
 *
 * @since 0.2.0
 */
export const initial = (c: Config, now: number): State => ({
  level: c.full,
  at: now,
  rate: c.initial,
  cut: -Infinity
})

/**
 * Decides one request at the key's current rate.
 *
 * @example
 * ```ts
 * import * as Adaptive from "./Adaptive.ts"
 *
 * const c = Adaptive.config({ capacity: 1, periodMillis: 1000, initial: 1, floor: 1, ceiling: 10 })
 * Adaptive.step(c, Adaptive.initial(c, 0), 0, 1).allowed // true
 * ```
 *
 * @since 0.2.0
 */
export const step = (c: Config, s: State, now: number, cost: number): Outcome<State> => {
  const level = levelAt(c, s, now)
  const need = cost * c.periodMillis
  if (level >= need) {
    const next = level - need
    return {
      allowed: true,
      state: { level: next, at: now > s.at ? now : s.at, rate: s.rate, cut: s.cut },
      remaining: Math.floor(next / c.periodMillis),
      retryAfter: 0,
      resetAfter: millisFor(s, now, c.full - next),
      limit: c.capacity
    }
  }
  return {
    allowed: false,
    state: s,
    remaining: Math.max(0, Math.floor(level / c.periodMillis)),
    retryAfter: need > c.full ? Infinity : millisFor(s, now, need - level),
    resetAfter: millisFor(s, now, c.full - level),
    limit: c.capacity
  }
}

/**
 * `step`'s admission written into `s` itself (no allocation), or `false`.
 *
 * @since 0.2.0
 */
export const takeInPlace = (c: Config, s: State, now: number, cost: number): boolean => {
  const level = levelAt(c, s, now)
  const need = cost * c.periodMillis
  if (level < need) return false
  const owned = s as { -readonly [K in keyof State]: State[K] }
  if (now > s.at) owned.at = now
  owned.level = level - need
  return true
}

/**
 * Milliseconds until `cost` behind `queued` units is admitted at the
 * current rate.
 *
 * @since 0.2.0
 */
export const waitTime = (c: Config, s: State, now: number, queued: number, cost: number): number =>
  cost > c.capacity ? Infinity : millisFor(s, now, (queued + cost) * c.periodMillis - levelAt(c, s, now))

/**
 * When forgetting the key changes nothing: once full, if its rate is not
 * below the initial one (a forgotten key restarts at the initial rate).
 *
 * @since 0.2.0
 */
export const settledAt = (c: Config, s: State): number =>
  s.rate < c.initial ? Infinity : s.at + millisFor(s, s.at, c.full - s.level)

/**
 * Gives `amount` units back, capped at capacity.
 *
 * @since 0.2.0
 */
export const release = (c: Config, s: State, now: number, amount: number): State => ({
  level: Math.min(c.full, levelAt(c, s, now) + amount * c.periodMillis),
  at: now > s.at ? now : s.at,
  rate: s.rate,
  cut: s.cut
})

/**
 * Takes `cost` whatever the level: the level may go below zero (a debt the
 * refill pays off before anything else is admitted).
 *
 * @since 0.2.0
 */
export const force = (c: Config, s: State, now: number, cost: number): State => ({
  level: levelAt(c, s, now) - cost * c.periodMillis,
  at: now > s.at ? now : s.at,
  rate: s.rate,
  cut: s.cut
})

/**
 * The state after a signal from upstream (see the module's description).
 *
 * @example
 * ```ts
 * import * as Adaptive from "./Adaptive.ts"
 *
 * const c = Adaptive.config({ capacity: 10, periodMillis: 1000, initial: 100, floor: 10, ceiling: 1000, increase: 5 })
 * const s = Adaptive.initial(c, 0)
 * Adaptive.adapt(c, s, 0, "ok", 0).rate // 105
 * Adaptive.adapt(c, s, 0, "throttled", 0).rate // 50
 * ```
 *
 * @since 0.2.0
 */
export const adapt = (c: Config, s: State, now: number, signal: Signal, millis: number): State => {
  let level = levelAt(c, s, now)
  const at = now > s.at ? now : s.at
  const throttled = signal === "throttled" || (signal === "latency" && millis > c.latencyMillis)
  if (!throttled) return { level, at, rate: Math.min(c.ceiling, s.rate + c.increase), cut: s.cut }
  let rate = s.rate
  let cut = s.cut
  if (!(at - s.cut < c.periodMillis)) {
    rate = Math.max(c.floor, s.rate * c.decrease)
    cut = at
  }
  // upstream's Retry-After: one unit is there exactly then, not before
  const wait = signal === "throttled" ? millis : 0
  if (wait > 0) level = Math.min(level, c.periodMillis - wait * rate)
  return { level, at, rate, cut }
}

/**
 * Carries a key over to a new adaptive configuration: `"reset"` starts
 * afresh; otherwise the level is kept (capped by the new capacity) and the
 * rate too, within the new floor and ceiling.
 *
 * @since 0.2.0
 */
export const reconfigure = (from: Config, s: State, to: Config, now: number, carry: Carry): State => {
  if (carry === "reset") return initial(to, now)
  const level = levelAt(from, s, now)
  const kept = carriedLevel(level, from, to, carry)
  return {
    level: Math.min(to.full, kept),
    at: now > s.at ? now : s.at,
    rate: Math.min(to.ceiling, Math.max(to.floor, s.rate)),
    cut: s.cut
  }
}

/**
 * The adaptive rate as an {@link Algorithm}.
 *
 * @since 0.2.0
 */
export const algorithm: Algorithm<Config, State> = {
  name: "adaptive",
  initial,
  step,
  waitTime,
  settledAt,
  maxCost: (c) => c.capacity,
  takeInPlace,
  release,
  reconfigure,
  adapt,
  force
}
