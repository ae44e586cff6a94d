/**
 * Several limits on one key, checked atomically, as Bucket4j checks the
 * bandwidths of one bucket (say 100 per minute and 1000 per hour). A request
 * is admitted only if every limit admits it; its cost is then taken from all
 * of them, and otherwise from none.
 *
 * The outcome reports the most restrictive limit: `remaining` is the smallest
 * of the parts', `retryAfter` and `resetAfter` the largest, and `limit` is the
 * limit of the binding part (also given as `binding`, its index): the part
 * with the longest `retryAfter` when denied, the one with the smallest
 * `remaining` when admitted (ties go to the earlier part).
 *
 * `retryAfter` is exact because every algorithm here is monotone in time: a
 * request that one part admits at `t` it still admits later if nothing else
 * happens, so all parts admit at the latest of their own `retryAfter`s.
 * `waitTime` with no waiters ahead is exact for the same reason; behind
 * waiters it is the largest of the parts' figures, a lower bound (the parts
 * interact: a waiter held back by one part takes from the others later).
 *
 * Edge cases:
 *
 * - A new key is every part's new key; `settledAt` is the latest part's.
 * - A denial takes nothing from any part. A part that itself denied keeps the
 *   state its own denial produced, which differs only for a sliding log with
 *   `countBlocked` (the attempt is logged there, as it would be alone). The
 *   figures of a part that would have admitted are then read from its
 *   unchanged state with a step of cost 0 (the contract has no `peek`).
 * - `maxCost` is the smallest part's; above it `retryAfter` is `Infinity`.
 * - Backwards clocks and huge jumps are handled by each part.
 * - `release` gives the units back to every part that can release (a part
 *   without `release`, such as the warm-up limiter, keeps its state).
 * - With no parts everything is admitted (`limit` and `remaining` are
 *   `Infinity`, `binding` is -1); the caller should not build that.
 * - `force` takes the units from every part; `forceAdd` adds them to every
 *   part that can hold more than its limit (the others keep their state, as
 *   with `release`); `full` is every part full.
 *
 * @since 0.1.0
 */
import type { Algorithm, Outcome } from "./Algorithm.ts"

/**
 * One limit of a composite: an algorithm with its configuration.
 *
 * @since 0.1.0
 */
export interface Part {
  // The states of different parts have different types; the composite only
  // hands each part's own state and configuration back to it.
  readonly algorithm: Algorithm<any, any>
  readonly config: unknown
}

/**
 * A validated composite configuration.
 *
 * @since 0.1.0
 */
export interface Config {
  readonly parts: ReadonlyArray<Part>
}

/**
 * The state of one key: each part's state, in order.
 *
 * @since 0.1.0
 */
export type State = ReadonlyArray<unknown>

/**
 * An outcome that also names the binding part.
 *
 * @since 0.1.0
 */
export interface Bound<S> extends Outcome<S> {
  /** The index of the most restrictive part (-1 with no parts). */
  readonly binding: number
}

/**
 * Pairs an algorithm with its configuration, keeping the two in step.
 *
 * @example
 * ```ts
 * import * as Composite from "./Composite.ts"
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const perMinute = Composite.part(TokenBucket.algorithm, TokenBucket.config({ capacity: 100, tokens: 100, periodMillis: 60_000 }))
 * ```
 *
 * @since 0.1.0
 */
export const part = <C, S>(algorithm: Algorithm<C, S>, config: C): Part => ({ algorithm, config })

/**
 * Builds a configuration from its parts; the caller has validated them.
 *
 * @example
 * ```ts
 * import * as Composite from "./Composite.ts"
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * // 100 per minute and 1000 per hour
 * const config = Composite.config([
 *   Composite.part(TokenBucket.algorithm, TokenBucket.config({ capacity: 100, tokens: 100, periodMillis: 60_000 })),
 *   Composite.part(TokenBucket.algorithm, TokenBucket.config({ capacity: 1000, tokens: 1000, periodMillis: 3_600_000 }))
 * ])
 * ```
 *
 * @since 0.1.0
 */
export const config = (parts: ReadonlyArray<Part>): Config => ({ parts })

/**
 * The state of a key never seen before: every part's initial state.
 *
 * @example
 * ```ts
 * import * as Composite from "./Composite.ts"
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const w = FixedWindow.config({ limit: 10, windowMillis: 1000 })
 * const c = Composite.config([Composite.part(FixedWindow.algorithm, w)])
 * Composite.initial(c, 0) // [{ start: 0, count: 0 }]
 * ```
 *
 * @since 0.1.0
 */
export const initial = (c: Config, now: number): State => c.parts.map((p) => p.algorithm.initial(p.config, now))

/**
 * Decides one request against every part: all or none.
 *
 * @example
 * ```ts
 * import * as Composite from "./Composite.ts"
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const c = Composite.config([
 *   Composite.part(TokenBucket.algorithm, TokenBucket.config({ capacity: 2, tokens: 2, periodMillis: 1000 })),
 *   Composite.part(TokenBucket.algorithm, TokenBucket.config({ capacity: 3, tokens: 3, periodMillis: 60_000 }))
 * ])
 * const d = Composite.step(c, Composite.initial(c, 0), 0, 2) // allowed, remaining 0, binding 0
 * ```
 *
 * @since 0.1.0
 */
export const step = (c: Config, s: State, now: number, cost: number): Bound<State> => {
  const n = c.parts.length
  const outcomes: Array<Outcome<unknown>> = []
  let allowed = true
  for (let i = 0; i < n; i++) {
    const p = c.parts[i]
    const o: Outcome<unknown> = p.algorithm.step(p.config, s[i], now, cost)
    outcomes.push(o)
    if (!o.allowed) allowed = false
  }
  if (!allowed) {
    // The parts that would have admitted keep their state, so their figures
    // must describe it, not the admission: a step of cost 0 reads them.
    for (let i = 0; i < n; i++) {
      if (!outcomes[i].allowed) continue
      const p = c.parts[i]
      const probe: Outcome<unknown> = p.algorithm.step(p.config, s[i], now, 0)
      outcomes[i] = { ...probe, allowed: true, state: s[i], retryAfter: 0 }
    }
  }
  let remaining = Infinity
  let retryAfter = 0
  let resetAfter = 0
  let binding = -1
  for (let i = 0; i < n; i++) {
    const o = outcomes[i]
    if (o.remaining < remaining) remaining = o.remaining
    if (o.resetAfter > resetAfter) resetAfter = o.resetAfter
    if (binding < 0) binding = i
    else {
      const b = outcomes[binding]
      if (
        allowed
          ? o.remaining < b.remaining
          : !o.allowed && (b.allowed || o.retryAfter > b.retryAfter)
      ) binding = i
    }
    if (o.retryAfter > retryAfter) retryAfter = o.retryAfter
  }
  let state: State = s
  if (allowed) state = outcomes.map((o) => o.state)
  else if (outcomes.some((o, i) => o.state !== s[i])) {
    // Only a part's own denial may leave a trace (a blocked attempt logged).
    state = outcomes.map((o) => o.state)
  }
  return {
    allowed,
    state,
    remaining,
    retryAfter: allowed ? 0 : retryAfter,
    resetAfter,
    limit: binding < 0 ? Infinity : outcomes[binding].limit,
    binding
  }
}

/**
 * Milliseconds until a request of `cost` behind `queued` waiting units is
 * admitted by every part: the largest of the parts' waits.
 *
 * @example
 * ```ts
 * import * as Composite from "./Composite.ts"
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const c = Composite.config([
 *   Composite.part(TokenBucket.algorithm, TokenBucket.config({ capacity: 1, tokens: 1, periodMillis: 1000 })),
 *   Composite.part(TokenBucket.algorithm, TokenBucket.config({ capacity: 1, tokens: 1, periodMillis: 5000 }))
 * ])
 * Composite.waitTime(c, [{ level: 0, at: 0 }, { level: 0, at: 0 }], 0, 0, 1) // 5000
 * ```
 *
 * @since 0.1.0
 */
export const waitTime = (c: Config, s: State, now: number, queued: number, cost: number): number => {
  let wait = 0
  for (let i = 0; i < c.parts.length; i++) {
    const p = c.parts[i]
    const w: number = p.algorithm.waitTime(p.config, s[i], now, queued, cost)
    if (w > wait) wait = w
  }
  return wait
}

/**
 * When every part has settled.
 *
 * @example
 * ```ts
 * import * as Composite from "./Composite.ts"
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const w = FixedWindow.config({ limit: 10, windowMillis: 1000 })
 * const c = Composite.config([Composite.part(FixedWindow.algorithm, w)])
 * Composite.settledAt(c, [{ start: 0, count: 3 }]) // 1000
 * ```
 *
 * @since 0.1.0
 */
export const settledAt = (c: Config, s: State): number => {
  let at = -Infinity
  for (let i = 0; i < c.parts.length; i++) {
    const p = c.parts[i]
    const t: number = p.algorithm.settledAt(p.config, s[i])
    if (t > at) at = t
  }
  return at
}

/**
 * The largest cost every part can admit.
 *
 * @example
 * ```ts
 * import * as Composite from "./Composite.ts"
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = Composite.config([
 *   Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 10, windowMillis: 1000 })),
 *   Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 50, windowMillis: 60_000 }))
 * ])
 * Composite.maxCost(c) // 10
 * ```
 *
 * @since 0.1.0
 */
export const maxCost = (c: Config): number => {
  let max = Infinity
  for (const p of c.parts) {
    const m: number = p.algorithm.maxCost(p.config)
    if (m < max) max = m
  }
  return max
}

/**
 * Gives `amount` units back to every part that can release.
 *
 * @example
 * ```ts
 * import * as Composite from "./Composite.ts"
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = Composite.config([Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 10, windowMillis: 1000 }))])
 * Composite.release(c, [{ start: 0, count: 3 }], 10, 1) // [{ start: 0, count: 2 }]
 * ```
 *
 * @since 0.1.0
 */
export const release = (c: Config, s: State, now: number, amount: number): State => {
  if (!(amount > 0)) return s
  return c.parts.map((p, i) =>
    p.algorithm.release === undefined ? s[i] : p.algorithm.release(p.config, s[i], now, amount) as unknown
  )
}

/**
 * Takes `cost` from every part whatever their limits.
 *
 * @example
 * ```ts
 * import * as Composite from "./Composite.ts"
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = Composite.config([Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 1, windowMillis: 1000 }))])
 * Composite.force(c, Composite.initial(c, 0), 0, 3) // [{ start: 0, count: 3, end: 1000 }]
 * ```
 *
 * @since 0.2.0
 */
export const force = (c: Config, s: State, now: number, cost: number): State =>
  c.parts.map((p, i) => p.algorithm.force(p.config, s[i], now, cost) as unknown)

/**
 * Adds `amount` with no cap to every part that can hold more than its limit.
 *
 * @example
 * ```ts
 * import * as Composite from "./Composite.ts"
 * import * as Gcra from "./Gcra.ts"
 *
 * const c = Composite.config([Composite.part(Gcra.algorithm, Gcra.config({ maxBurst: 0, count: 1, periodMillis: 1000 }))])
 * Composite.forceAdd(c, Composite.initial(c, 0), 0, 2) // [{ ahead: -2000, at: 0 }]
 * ```
 *
 * @since 0.2.0
 */
export const forceAdd = (c: Config, s: State, now: number, amount: number): State =>
  c.parts.map((p, i) =>
    p.algorithm.forceAdd === undefined ? s[i] : p.algorithm.forceAdd(p.config, s[i], now, amount) as unknown
  )

/**
 * Every part full.
 *
 * @since 0.2.0
 */
export const full = (c: Config, now: number): State =>
  c.parts.map((p) =>
    (p.algorithm.full === undefined ? p.algorithm.initial(p.config, now) : p.algorithm.full(p.config, now)) as unknown
  )

/**
 * The composite as an {@link Algorithm}; its `step` returns {@link Bound}
 * outcomes.
 *
 * @example
 * ```ts
 * import * as Composite from "./Composite.ts"
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const c = Composite.config([Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 10, windowMillis: 1000 }))])
 * Composite.algorithm.maxCost(c) // 10
 * ```
 *
 * @since 0.1.0
 */
export const algorithm: Algorithm<Config, State> = {
  name: "composite",
  initial,
  step,
  waitTime,
  settledAt,
  maxCost,
  release,
  force,
  forceAdd,
  full
}
