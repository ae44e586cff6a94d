/**
 * The contract every rate-limiting algorithm fulfils. Algorithms are pure:
 * no Effect, no clock, no mutation. The bucket actor owns the state and the
 * clock and calls these functions; the same functions are what the property
 * tests check against each formal model.
 *
 * Times are milliseconds on the limiter's clock; durations are milliseconds.
 *
 * @since 0.1.0
 */

/**
 * What one `step` decided, with the figures a caller (or an HTTP header)
 * needs to act on it.
 *
 * @since 0.1.0
 */
export interface Outcome<S> {
  /** Whether the request was admitted. */
  readonly allowed: boolean
  /** The state after the request (unchanged when denied). */
  readonly state: S
  /** Whole units that a later request could still take right now. */
  readonly remaining: number
  /** Milliseconds until this request could succeed: 0 when allowed, Infinity when never. */
  readonly retryAfter: number
  /** Milliseconds until the state is back to fresh (a full bucket). */
  readonly resetAfter: number
  /** The policy's headline limit (the capacity of a token bucket). */
  readonly limit: number
  /** For shapers (the leaky bucket): milliseconds an admitted request waits before it proceeds. */
  readonly delay?: number | undefined
}

/**
 * A rate-limiting algorithm over its configuration `C` and its state `S`.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const config = TokenBucket.config({ capacity: 2, tokens: 1, periodMillis: 1000 })
 * const s0 = TokenBucket.algorithm.initial(config, 0)
 * const { allowed } = TokenBucket.algorithm.step(config, s0, 0, 1)
 * ```
 *
 * Its functions take no receiver (`@noSelf`, read by the compiler of the
 * Redis scripts, which otherwise passes one to a function-valued field).
 *
 * @noSelf
 * @since 0.1.0
 */
export interface Algorithm<C, S> {
  readonly name: string
  /** The state of a key that has never been seen (or has been forgotten). */
  readonly initial: (config: C, now: number) => S
  /** Decide one request of `cost` at `now`. Pure and total: never throws, never NaN. */
  readonly step: (config: C, state: S, now: number, cost: number) => Outcome<S>
  /**
   * Milliseconds, from `now`, until a request of `cost` standing behind
   * `queued` units of earlier waiters would be admitted (0 when it could be
   * admitted now and nothing is queued; Infinity when never).
   */
  readonly waitTime: (config: C, state: S, now: number, queued: number, cost: number) => number
  /**
   * The earliest time from which forgetting the state cannot change any later
   * decision (invariant 2 of docs/architecture.md): for a token bucket, the moment it is full.
   */
  readonly settledAt: (config: C, state: S) => number
  /** The largest cost that can ever succeed. */
  readonly maxCost: (config: C) => number
  /**
   * Optional shortcut for `acquire`, which needs no figures: admits `cost` by
   * writing `step(...).state` into `state` itself and returns `true`, or
   * returns `false` and leaves `state` as it was. Only for a caller that owns
   * `state` alone (a bucket's own state): no allocation per admission, so a
   * hot bucket makes no garbage and an old bucket's state never points at a
   * young object. Must agree with `step` exactly (a law test checks it).
   */
  readonly takeInPlace?: ((config: C, state: S, now: number, cost: number) => boolean) | undefined
  /**
   * Gives `amount` units back (a refund, or a permit returned), never above
   * what the policy holds when fresh. Algorithms without it cannot release.
   */
  readonly release?: ((config: C, state: S, now: number, amount: number) => S) | undefined
  /**
   * Carries a state over to a new configuration of the same algorithm.
   * Without it, a reconfigured key starts afresh.
   */
  readonly reconfigure?: ((from: C, state: S, to: C, now: number, carry: Carry) => S) | undefined
  /**
   * For an adaptive rate: the state after a signal from upstream (`millis`
   * is the wait it asked for, or the latency it showed). Algorithms without
   * it have a fixed rate.
   */
  readonly adapt?: ((config: C, state: S, now: number, signal: Signal, millis: number) => S) | undefined
  /**
   * Takes `cost` units now whatever the limit (Bucket4j's
   * `consumeIgnoringRateLimits`, rate-limiter-flexible's `penalty`): the
   * state after, which may be over the limit (in debt). A request decided
   * afterwards is refused until the debt is paid.
   */
  readonly force: (config: C, state: S, now: number, cost: number) => S
  /**
   * Adds `amount` units with no cap (Bucket4j's `forceAddTokens`): the key
   * may then hold more than a fresh one. Absent: the algorithm has no
   * meaning for units above its limit, and refuses.
   */
  readonly forceAdd?: ((config: C, state: S, now: number, amount: number) => S) | undefined
  /**
   * The state of a key with nothing used (Bucket4j's `reset`: a full
   * bucket, whatever it starts with). Absent: `initial`.
   */
  readonly full?: ((config: C, now: number) => S) | undefined
  /**
   * The configuration with windows of `millis` (a window opened by a call
   * that gives its own duration, rate-limiter-flexible's `customDuration`);
   * absent, or `undefined`: the algorithm has no window of its own to set.
   */
  readonly withWindow?: ((config: C, millis: number) => C | undefined) | undefined
  /**
   * A change of rate only (Guava's `setRate`, x/time/rate's `SetLimit`):
   * the numbers that identify this configuration's rate (`rateOf`), the
   * configuration at a rate of `count` units per `periodMillis`
   * (`withRate`), and the state carried over from the rate `from` (two
   * numbers from `rateOf`) to `to` by the peer's own rule (`carryRate`).
   */
  readonly rate?: {
    readonly rateOf: (config: C) => readonly [number, number]
    readonly withRate: (config: C, count: number, periodMillis: number) => C
    readonly carryRate: (to: C, from: readonly [number, number], state: S, now: number) => S
  } | undefined
}

/**
 * What upstream said about the last calls: `"ok"`, `"throttled"` (with the
 * wait it asked for), or a `"latency"` to compare with a target.
 *
 * @since 0.2.0
 */
export type Signal = "ok" | "throttled" | "latency"

/**
 * How a reconfigured key keeps its usage (as Bucket4j's `TokensInheritanceStrategy`):
 * `"reset"` starts afresh under the new policy; `"proportional"` keeps the
 * same fraction of the limit available; `"as-is"` keeps the same number of
 * units available, capped by the new limit.
 *
 * @since 0.1.0
 */
export type Carry = "reset" | "proportional" | "as-is"

/**
 * The level a key keeps when it is carried to another rate or capacity, for
 * the algorithms that count a scaled level (units × `periodMillis`, so that
 * refills stay whole): `"as-is"` keeps the same units, `"proportional"` the
 * same fraction of the limit. One rounding, multiplying first: units
 * (level ÷ period) would round, and a key carried to its own policy must
 * keep its level exactly. The caller caps it by the new limit (a surplus from
 * a forced add is kept only up to it).
 *
 * @example
 * ```ts
 * import * as Algorithm from "./Algorithm.ts"
 *
 * const from = { periodMillis: 1000, full: 10_000 } // 10 units
 * const to = { periodMillis: 1000, full: 100_000 } // 100 units
 * Algorithm.carriedLevel(5_000, from, to, "proportional") // 50_000: half full
 * Algorithm.carriedLevel(5_000, from, to, "as-is") // 5_000: 5 units
 * ```
 *
 * @since 0.3.0
 */
export const carriedLevel = (
  level: number,
  from: { readonly periodMillis: number; readonly full: number },
  to: { readonly periodMillis: number; readonly full: number },
  carry: Exclude<Carry, "reset">
): number =>
  carry === "as-is"
    ? (from.periodMillis === to.periodMillis ? level : (level * to.periodMillis) / from.periodMillis)
    : from.full === to.full
    ? level
    : (level * to.full) / from.full

/**
 * The outcome `peek` reports: whether a request of `cost` would be admitted
 * and when it could be (from a step with the cost), with `remaining` and
 * `resetAfter` as they stand now (from a step that takes nothing).
 *
 * @example
 * ```ts
 * import { peekOutcome } from "./Algorithm.ts"
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const c = TokenBucket.config({ capacity: 5, tokens: 1, periodMillis: 1000 })
 * const s = TokenBucket.initial(c, 0)
 * const o = peekOutcome(TokenBucket.algorithm, c, s, 0, 2) // remaining 5
 * ```
 *
 * @since 0.1.0
 */
export const peekOutcome = <C, S>(
  algorithm: Algorithm<C, S>,
  config: C,
  state: S,
  now: number,
  cost: number
): Outcome<S> => {
  const withCost = algorithm.step(config, state, now, cost)
  const asIs = algorithm.step(config, state, now, 0)
  return {
    allowed: withCost.allowed,
    state,
    remaining: asIs.remaining,
    retryAfter: withCost.retryAfter,
    resetAfter: asIs.resetAfter,
    limit: withCost.limit
  }
}

/**
 * An algorithm with its configuration applied: what a bucket runs. A key's
 * state is opaque here (`unknown`): it only ever comes from this rule's own
 * `initial`, `step`, `release` or `reconfigure`, so the rule hands it back to
 * its algorithm as the algorithm's own state type. Built once per policy, so
 * `maxCost` is computed once.
 *
 * @example
 * ```ts
 * import { bind } from "./Algorithm.ts"
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const rule = bind(TokenBucket.algorithm, TokenBucket.config({ capacity: 2, tokens: 1, periodMillis: 1000 }))
 * const { allowed } = rule.step(rule.initial(0), 0, 1)
 * rule.maxCost // 2
 * ```
 *
 * @since 0.2.0
 */
export interface Rule {
  readonly name: string
  /** The largest cost that can ever succeed. */
  readonly maxCost: number
  readonly initial: (now: number) => unknown
  readonly step: (state: unknown, now: number, cost: number) => Outcome<unknown>
  readonly waitTime: (state: unknown, now: number, queued: number, cost: number) => number
  readonly settledAt: (state: unknown) => number
  /** What `peek` reports (see {@link peekOutcome}). */
  readonly peek: (state: unknown, now: number, cost: number) => Outcome<unknown>
  /** The algorithm's in-place `acquire`, if it has one (see {@link Algorithm}). */
  readonly takeInPlace: ((state: unknown, now: number, cost: number) => boolean) | undefined
  /** Gives units back, if the algorithm can. */
  readonly release: ((state: unknown, now: number, amount: number) => unknown) | undefined
  /**
   * The state carried over to `next` by the algorithm's own rule, or
   * `undefined` when `next` runs another algorithm or this one has no rule
   * of its own (the caller then carries whole units).
   */
  readonly reconfigure: (state: unknown, next: Rule, now: number, carry: Carry) => unknown
  /** The algorithm's adaptive rate, if it has one (see {@link Algorithm}). */
  readonly adapt: ((state: unknown, now: number, signal: Signal, millis: number) => unknown) | undefined
  /** Takes `cost` whatever the limit (see {@link Algorithm}): the state after, maybe in debt. */
  readonly force: (state: unknown, now: number, cost: number) => unknown
  /** Adds units with no cap, if the algorithm can hold more than its limit. */
  readonly forceAdd: ((state: unknown, now: number, amount: number) => unknown) | undefined
  /** The state of a key with nothing used (see {@link Algorithm}). */
  readonly full: (now: number) => unknown
  /**
   * Takes as many units as it can now, at most `most` (Bucket4j's
   * `tryConsumeAsMuchAsPossible`): see {@link takeUpTo}.
   */
  readonly takeUpTo: (state: unknown, now: number, most: number) => Partial
  /** The rule with windows of `millis`, or `undefined` when it has no window of its own to set. */
  readonly withWindow: (millis: number) => Rule | undefined
  /**
   * For a rate change only (see {@link Algorithm}): this rule's rate as two
   * numbers, and the state carried over from another rate to this one.
   */
  readonly rate:
    | {
      readonly of: readonly [number, number]
      readonly carry: (from: readonly [number, number], state: unknown, now: number) => unknown
    }
    | undefined
}

/**
 * What a partial take answers: the units taken (0 to `most`), and the
 * outcome: the step that took them, or, when none could be taken, the key as
 * it stands (`allowed: false`, `retryAfter` until one unit could be).
 *
 * @since 0.2.0
 */
export interface Partial {
  readonly taken: number
  readonly outcome: Outcome<unknown>
}

/**
 * Takes as many whole units as the key admits now, at most `most`: the
 * largest cost, up to what `remaining` says is there, that one step admits
 * (the first try, `min(most, remaining)`, is it for every algorithm but a
 * burst policy, whose `remaining` adds up two limits a single request cannot
 * both use; a sliding log with a `minGap` to run admits none). Taking none
 * takes nothing, logs nothing, and answers with the figures of a unit
 * request.
 *
 * @example
 * ```ts
 * import { takeUpTo } from "./Algorithm.ts"
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const c = TokenBucket.config({ capacity: 10, tokens: 1, periodMillis: 1000, initialTokens: 4 })
 * takeUpTo(TokenBucket.algorithm, c, TokenBucket.initial(c, 0), 0, 5).taken // 4
 * ```
 *
 * @since 0.2.0
 */
export const takeUpTo = <C, S>(
  algorithm: Algorithm<C, S>,
  config: C,
  state: S,
  now: number,
  most: number
): Partial => {
  // A step of no units reads what is there; its state is not kept (a sliding
  // log's minGap clock would move).
  const there = algorithm.step(config, state, now, 0).remaining
  let hi = Math.floor(Math.min(most, there))
  if (hi >= 1) {
    const outcome = algorithm.step(config, state, now, hi)
    if (outcome.allowed) return { taken: hi, outcome }
    // Admitting a cost admits every smaller one: the largest that fits, by halves.
    let lo = 0
    let best: Outcome<S> | undefined = undefined
    while (lo + 1 < hi) {
      const mid = Math.floor((lo + hi) / 2)
      const o = algorithm.step(config, state, now, mid)
      if (o.allowed) {
        lo = mid
        best = o
      } else hi = mid
    }
    if (best !== undefined) return { taken: lo, outcome: best }
  }
  const probe = peekOutcome(algorithm, config, state, now, 1)
  return { taken: 0, outcome: { ...probe, allowed: false } }
}

class Bound<C, S> implements Rule {
  readonly name: string
  readonly maxCost: number
  readonly takeInPlace: Rule["takeInPlace"]
  readonly release: Rule["release"]
  readonly adapt: Rule["adapt"]
  readonly forceAdd: Rule["forceAdd"]
  readonly rate: Rule["rate"]
  readonly algorithm: Algorithm<C, S>
  readonly config: C
  constructor(algorithm: Algorithm<C, S>, config: C) {
    this.algorithm = algorithm
    this.config = config
    this.name = algorithm.name
    this.maxCost = algorithm.maxCost(config)
    const { adapt, forceAdd, rate, release, takeInPlace } = algorithm
    // Every `as S` below: a state only ever comes from this rule (see Rule).
    this.takeInPlace = takeInPlace === undefined
      ? undefined
      : (state, now, cost) => takeInPlace(config, state as S, now, cost)
    this.release = release === undefined ? undefined : (state, now, amount) => release(config, state as S, now, amount)
    this.adapt = adapt === undefined
      ? undefined
      : (state, now, signal, millis) => adapt(config, state as S, now, signal, millis)
    this.forceAdd = forceAdd === undefined
      ? undefined
      : (state, now, amount) => forceAdd(config, state as S, now, amount)
    this.rate = rate === undefined ? undefined : {
      of: rate.rateOf(config),
      carry: (from, state, now) => rate.carryRate(config, from, state as S, now)
    }
  }
  initial(now: number): unknown {
    return this.algorithm.initial(this.config, now)
  }
  step(state: unknown, now: number, cost: number): Outcome<unknown> {
    return this.algorithm.step(this.config, state as S, now, cost)
  }
  waitTime(state: unknown, now: number, queued: number, cost: number): number {
    return this.algorithm.waitTime(this.config, state as S, now, queued, cost)
  }
  settledAt(state: unknown): number {
    return this.algorithm.settledAt(this.config, state as S)
  }
  peek(state: unknown, now: number, cost: number): Outcome<unknown> {
    return peekOutcome(this.algorithm, this.config, state as S, now, cost)
  }
  reconfigure(state: unknown, next: Rule, now: number, carry: Carry): unknown {
    const own = this.algorithm.reconfigure
    if (own === undefined || !(next instanceof Bound) || next.algorithm !== this.algorithm) return undefined
    // The same algorithm object: its configuration is a C as well.
    return own(this.config, state as S, next.config as C, now, carry)
  }
  force(state: unknown, now: number, cost: number): unknown {
    return this.algorithm.force(this.config, state as S, now, cost)
  }
  full(now: number): unknown {
    const full = this.algorithm.full
    return full === undefined ? this.algorithm.initial(this.config, now) : full(this.config, now)
  }
  takeUpTo(state: unknown, now: number, most: number): Partial {
    return takeUpTo(this.algorithm, this.config, state as S, now, most)
  }
  withWindow(millis: number): Rule | undefined {
    const config = this.algorithm.withWindow?.(this.config, millis)
    return config === undefined ? undefined : new Bound(this.algorithm, config)
  }
}

/**
 * Applies an algorithm to its configuration (see {@link Rule}).
 *
 * @example
 * ```ts
 * import { bind } from "./Algorithm.ts"
 * import * as FixedWindow from "./FixedWindow.ts"
 *
 * const rule = bind(FixedWindow.algorithm, FixedWindow.config({ limit: 10, windowMillis: 1000 }))
 * ```
 *
 * @since 0.2.0
 */
export const bind = <C, S>(algorithm: Algorithm<C, S>, config: C): Rule => new Bound(algorithm, config)
