/**
 * A concurrency limit with capped release, after Seastar's shared token
 * bucket in `capped_release` mode: at most `capacity` units are out at once.
 * A request takes `cost` units if that many are available; units come back
 * only when the holder gives them back with {@link release}, never above
 * `capacity`. Time alone returns nothing.
 *
 * With `replenish`, released units do not come back at once but flow back at
 * most at `replenish.tokens` per `replenish.periodMillis` (Seastar's bucket
 * replenishes at its rate but never beyond what was released): a limit on
 * both how many are out and how fast they can be handed out again. Without
 * it they are available as soon as they are released. The replenishing
 * arithmetic is scaled as in the token bucket (levels times `periodMillis`),
 * exact for integer configurations.
 *
 * Edge cases:
 *
 * - A new key has all `capacity` units available.
 * - A denial takes nothing and leaves the state as it was.
 * - A cost above `capacity` can never succeed: `retryAfter` is `Infinity`,
 *   `maxCost` is `capacity`. A cost that needs units nobody has released yet
 *   has no time-based answer either: `retryAfter` (and `waitTime`) is
 *   `Infinity` until enough is released; with `replenish`, a deficit covered
 *   by released units gets its exact time.
 * - `release` of more than is out is capped (a double release cannot mint
 *   units); `release` of 0 or less changes nothing. With `replenish`, a
 *   refund flows back at the rate like any release.
 * - `resetAfter` and `settledAt` are `Infinity` while anything is out: a key
 *   with holders must never be forgotten, or the units they hold would be
 *   handed out twice. Once all is back (and replenished), the key is exactly
 *   a new one.
 * - Time that goes backwards stands still at the anchor `at` (the latest
 *   time the state changed): nothing is replenished.
 * - Beyond the limit: `force` takes units that are not there (more out than
 *   `capacity`: releases pay the debt first). There is no `forceAdd`: units
 *   nobody took cannot be given back, and a permit is never minted.
 * - A huge jump just completes any replenishing: no overflow, no NaN.
 *
 * @since 0.1.0
 */
import type { Algorithm, Outcome } from "./Algorithm.ts"

/**
 * A validated concurrency configuration.
 *
 * @since 0.1.0
 */
export interface Config {
  /** Most units out at once. */
  readonly capacity: number
  /** Whether released units flow back at a rate (`true`) or at once. */
  readonly gradual: boolean
  /** Released units that flow back per period (when `gradual`). */
  readonly tokens: number
  /** The replenishing period in milliseconds (1 when not `gradual`). */
  readonly periodMillis: number
  /** `capacity * periodMillis`: the scaled level when all is available. */
  readonly full: number
}

/**
 * The state of one key: the scaled units available (`level`) and released
 * but not yet back (`pending`), as of time `at`. The units out are
 * `full − level − pending`.
 *
 * @since 0.1.0
 */
export interface State {
  readonly level: number
  readonly pending: number
  readonly at: number
}

/**
 * Builds a configuration; the caller has validated the numbers.
 *
 * @example
 * ```ts
 * import * as Concurrency from "./Concurrency.ts"
 *
 * // at most 10 in flight
 * const config = Concurrency.config({ capacity: 10 })
 * // at most 10 in flight, handed out again at most 5 per second
 * const paced = Concurrency.config({ capacity: 10, replenish: { tokens: 5, periodMillis: 1000 } })
 * ```
 *
 * @since 0.1.0
 */
export const config = (options: {
  readonly capacity: number
  readonly replenish?: { readonly tokens: number; readonly periodMillis: number } | undefined
}): Config => {
  const periodMillis = options.replenish?.periodMillis ?? 1
  return {
    capacity: options.capacity,
    gradual: options.replenish !== undefined,
    tokens: options.replenish?.tokens ?? 0,
    periodMillis,
    full: options.capacity * periodMillis
  }
}

/**
 * The state of a key never seen before: everything available.
 *
 * @example
 * ```ts
 * import * as Concurrency from "./Concurrency.ts"
 *
 * const c = Concurrency.config({ capacity: 3 })
 * Concurrency.initial(c, 0) // { level: 3, pending: 0, at: 0 }
 * ```
 *
 * @since 0.1.0
 */
export const initial = (c: Config, now: number): State => ({ level: c.full, pending: 0, at: now })

/**
 * The state at `now`, with what has flowed back since `at` moved from
 * `pending` to `level` (`at` becomes the effective time).
 *
 * @example
 * ```ts
 * import * as Concurrency from "./Concurrency.ts"
 *
 * const c = Concurrency.config({ capacity: 4, replenish: { tokens: 1, periodMillis: 1000 } })
 * Concurrency.stateAt(c, { level: 0, pending: 3000, at: 0 }, 1500) // { level: 1500, pending: 1500, at: 1500 }
 * ```
 *
 * @since 0.1.0
 */
export const stateAt = (c: Config, s: State, now: number): State => {
  if (now <= s.at) return s
  if (!c.gradual || s.pending <= 0) return { level: s.level, pending: s.pending, at: now }
  const back = Math.min(s.pending, (now - s.at) * c.tokens)
  return { level: s.level + back, pending: s.pending - back, at: now }
}

/**
 * Units out (taken and not released) in state `s`.
 *
 * @example
 * ```ts
 * import * as Concurrency from "./Concurrency.ts"
 *
 * const c = Concurrency.config({ capacity: 3 })
 * Concurrency.inUse(c, { level: 1, pending: 0, at: 0 }) // 2
 * ```
 *
 * @since 0.1.0
 */
export const inUse = (c: Config, s: State): number => (c.full - s.level - s.pending) / c.periodMillis

// Milliseconds from `now` until `deficit` more has flowed back, or Infinity
// if it is more than has been released. Flowing starts at `s.at`, later than
// `now` only when the clock went backwards.
const millisFor = (c: Config, s: State, m: State, now: number, deficit: number): number => {
  if (deficit <= 0) return 0
  if (!c.gradual || deficit > m.pending) return Infinity
  return Math.ceil(deficit / c.tokens) + (s.at > now ? s.at - now : 0)
}

const resetMillis = (c: Config, s: State, m: State, now: number): number =>
  m.level + m.pending < c.full ? Infinity : millisFor(c, s, m, now, m.pending)

/**
 * Decides one request: it takes `cost` units if they are available.
 *
 * @example
 * ```ts
 * import * as Concurrency from "./Concurrency.ts"
 *
 * const c = Concurrency.config({ capacity: 1 })
 * const first = Concurrency.step(c, Concurrency.initial(c, 0), 0, 1) // allowed
 * const second = Concurrency.step(c, first.state, 5, 1) // denied, retryAfter Infinity until a release
 * ```
 *
 * @since 0.1.0
 */
export const step = (c: Config, s: State, now: number, cost: number): Outcome<State> => {
  const m = stateAt(c, s, now)
  const need = cost * c.periodMillis
  if (m.level >= need) {
    const next: State = { level: m.level - need, pending: m.pending, at: m.at }
    return {
      allowed: true,
      state: next,
      remaining: Math.floor(next.level / c.periodMillis),
      retryAfter: 0,
      resetAfter: resetMillis(c, s, next, now),
      limit: c.capacity
    }
  }
  return {
    allowed: false,
    state: s,
    remaining: m.level > 0 ? Math.floor(m.level / c.periodMillis) : 0,
    retryAfter: cost > c.capacity ? Infinity : millisFor(c, s, m, now, need - m.level),
    resetAfter: resetMillis(c, s, m, now),
    limit: c.capacity
  }
}

/**
 * Gives `units` back. Capped: never more than is out, so the key never holds
 * more than `capacity`.
 *
 * @example
 * ```ts
 * import * as Concurrency from "./Concurrency.ts"
 *
 * const c = Concurrency.config({ capacity: 2 })
 * const taken = Concurrency.step(c, Concurrency.initial(c, 0), 0, 2).state
 * const back = Concurrency.release(c, taken, 10, 5) // { level: 2, pending: 0, at: 10 }: capped at 2
 * ```
 *
 * @since 0.1.0
 */
export const release = (c: Config, s: State, now: number, units: number): State => {
  if (!(units > 0)) return s
  const m = stateAt(c, s, now)
  const back = Math.min(c.full - m.level - m.pending, units * c.periodMillis)
  if (back <= 0) return m
  return c.gradual
    ? { level: m.level, pending: m.pending + back, at: m.at }
    : { level: m.level + back, pending: 0, at: m.at }
}

/**
 * Milliseconds until a request of `cost` behind `queued` waiting units is
 * admitted, if the units released so far cover it; `Infinity` if it needs
 * further releases.
 *
 * @example
 * ```ts
 * import * as Concurrency from "./Concurrency.ts"
 *
 * const c = Concurrency.config({ capacity: 2, replenish: { tokens: 1, periodMillis: 1000 } })
 * Concurrency.waitTime(c, { level: 0, pending: 2000, at: 0 }, 0, 1, 1) // 2000
 * ```
 *
 * @since 0.1.0
 */
export const waitTime = (c: Config, s: State, now: number, queued: number, cost: number): number => {
  if (cost > c.capacity) return Infinity
  const m = stateAt(c, s, now)
  return millisFor(c, s, m, now, (queued + cost) * c.periodMillis - m.level)
}

/**
 * When everything is back and available; `Infinity` while anything is out.
 *
 * @example
 * ```ts
 * import * as Concurrency from "./Concurrency.ts"
 *
 * const c = Concurrency.config({ capacity: 2 })
 * Concurrency.settledAt(c, { level: 1, pending: 0, at: 0 }) // Infinity
 * ```
 *
 * @since 0.1.0
 */
export const settledAt = (c: Config, s: State): number => s.at + resetMillis(c, s, s, s.at)

/**
 * Takes `cost` units whatever is available (more out than `capacity`).
 *
 * @example
 * ```ts
 * import * as Concurrency from "./Concurrency.ts"
 *
 * const c = Concurrency.config({ capacity: 2 })
 * Concurrency.force(c, Concurrency.initial(c, 0), 0, 3) // { level: -1, pending: 0, at: 0 }
 * ```
 *
 * @since 0.2.0
 */
export const force = (c: Config, s: State, now: number, cost: number): State => {
  const m = stateAt(c, s, now)
  return { level: m.level - cost * c.periodMillis, pending: m.pending, at: m.at }
}

/**
 * The concurrency limit as an {@link Algorithm}, with its {@link release}.
 *
 * @example
 * ```ts
 * import * as Concurrency from "./Concurrency.ts"
 *
 * const c = Concurrency.config({ capacity: 8 })
 * Concurrency.algorithm.maxCost(c) // 8
 * ```
 *
 * @since 0.1.0
 */
export const algorithm: Algorithm<Config, State> = {
  name: "concurrency",
  initial,
  step,
  waitTime,
  settledAt,
  maxCost: (c) => c.capacity,
  release,
  force
}
