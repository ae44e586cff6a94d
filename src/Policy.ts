/**
 * Policies: what limit applies to a key. Constructors validate eagerly and
 * return immutable values. An invalid policy is still a value (so it can be
 * written inline in layer options); it carries its `InvalidPolicy` error,
 * which `RateLimiter.make` raises in the Effect error channel before any
 * bucket exists, and `Policy.validate` raises on demand.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Predicate } from "effect"
import { InvalidPolicy } from "./Errors.ts"
import type { Algorithm } from "./internal/algorithm/Algorithm.ts"
import * as CompositeAlgorithm from "./internal/algorithm/Composite.ts"
import * as ConcurrencyAlgorithm from "./internal/algorithm/Concurrency.ts"
import * as FixedWindowAlgorithm from "./internal/algorithm/FixedWindow.ts"
import * as GcraAlgorithm from "./internal/algorithm/Gcra.ts"
import * as LeakyBucketAlgorithm from "./internal/algorithm/LeakyBucket.ts"
import * as SlidingLogAlgorithm from "./internal/algorithm/SlidingLog.ts"
import * as SlidingWindowAlgorithm from "./internal/algorithm/SlidingWindow.ts"
import * as TokenBucketAlgorithm from "./internal/algorithm/TokenBucket.ts"
import * as WarmUpAlgorithm from "./internal/algorithm/WarmUp.ts"

/**
 * A policy's headline quota, as HTTP's `RateLimit-Policy` advertises it:
 * `limit` units per `windowMillis`.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
 * if (policy._tag !== "Invalid") {
 *   const { limit, windowMillis } = policy.quota // 100 per 10000 ms
 * }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Quota {
  readonly limit: number
  readonly windowMillis: number
}

/**
 * What every valid policy carries: which algorithm, its validated
 * configuration, and its quota.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const describe = (policy: Policy.Valid): string => `${policy._tag}: ${policy.quota.limit} per ${policy.quota.windowMillis} ms`
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Base<Tag extends string, C, S> {
  readonly _tag: Tag
  readonly algorithm: Algorithm<C, S>
  readonly config: C
  readonly quota: Quota
  readonly error: undefined
}

/**
 * A token bucket policy: `capacity` tokens, refilled at `refill.tokens` per
 * `refill.per`, continuously (greedy) or in whole periods (interval).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
 * if (policy._tag === "TokenBucket") {
 *   const { capacity, initialTokens } = policy // 100, 100
 * }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface TokenBucket extends Base<"TokenBucket", TokenBucketAlgorithm.Config, TokenBucketAlgorithm.State> {
  readonly capacity: number
  readonly refill: { readonly tokens: number; readonly per: Duration.Duration }
  readonly initialTokens: number
}

/**
 * A GCRA policy (redis-cell's `CL.THROTTLE`).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.gcra({ rate: { count: 30, per: "1 minute" }, maxBurst: 15 })
 * const isGcra = policy._tag === "Gcra"
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Gcra extends Base<"Gcra", GcraAlgorithm.Config, GcraAlgorithm.State> {}

/**
 * A leaky bucket shaper (nginx `limit_req`).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.leakyBucket({ rate: { tokens: 10, per: "1 second" }, burst: 20 })
 * const isLeakyBucket = policy._tag === "LeakyBucket"
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface LeakyBucket extends Base<"LeakyBucket", LeakyBucketAlgorithm.Config, LeakyBucketAlgorithm.State> {}

/**
 * A fixed window counter.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.fixedWindow({ limit: 100, window: "1 minute", aligned: true })
 * const isFixedWindow = policy._tag === "FixedWindow"
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface FixedWindow extends Base<"FixedWindow", FixedWindowAlgorithm.Config, FixedWindowAlgorithm.State> {}

/**
 * A sliding window counter (the previous window weighted).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.slidingWindow({ limit: 100, window: "1 minute" })
 * const isSlidingWindow = policy._tag === "SlidingWindow"
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface SlidingWindow
  extends Base<"SlidingWindow", SlidingWindowAlgorithm.Config, SlidingWindowAlgorithm.State>
{}

/**
 * An exact sliding log.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.slidingLog({ limit: 5, window: "15 minutes" })
 * const isSlidingLog = policy._tag === "SlidingLog"
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface SlidingLog extends Base<"SlidingLog", SlidingLogAlgorithm.Config, SlidingLogAlgorithm.State> {}

/**
 * A smooth rate, with or without warm-up (Guava's SmoothWarmingUp / SmoothBursty).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.smooth({ permits: 100, per: "1 second", warmup: "10 seconds" })
 * const isSmooth = policy._tag === "Smooth"
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Smooth extends Base<"Smooth", WarmUpAlgorithm.Config, WarmUpAlgorithm.State> {}

/**
 * Several limits on one key, all of which must admit (Bucket4j's bandwidths).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.all(
 *   Policy.tokenBucket({ capacity: 10, refill: { tokens: 10, per: "1 second" } }),
 *   Policy.fixedWindow({ limit: 1000, window: "1 hour" })
 * )
 * const parts = policy._tag === "All" ? policy.parts.length : 0 // 2
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface All extends Base<"All", CompositeAlgorithm.Config, CompositeAlgorithm.State> {
  readonly parts: ReadonlyArray<Valid>
}

/**
 * A concurrency limit: units come back through `release` (capped release).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.concurrency({ capacity: 10 })
 * const isConcurrency = policy._tag === "Concurrency"
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Concurrency extends Base<"Concurrency", ConcurrencyAlgorithm.Config, ConcurrencyAlgorithm.State> {}

/**
 * A policy whose options did not validate.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.tokenBucket({ capacity: 0, refill: { tokens: 1, per: "1 second" } })
 * if (policy._tag === "Invalid") {
 *   console.log(policy.error.message) // invalid policy: capacity = 0: must be a positive finite number
 * }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Invalid {
  readonly _tag: "Invalid"
  readonly error: InvalidPolicy
}

/**
 * A policy that validated.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Policy } from "tollgate"
 *
 * const checked: Effect.Effect<Policy.Valid, unknown> = Policy.validate(Policy.slidingWindow({ limit: 100, window: "1 minute" }))
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type Valid =
  | TokenBucket
  | Gcra
  | LeakyBucket
  | FixedWindow
  | SlidingWindow
  | SlidingLog
  | Smooth
  | All
  | Concurrency

/**
 * Any policy.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const free: Policy.Policy = Policy.tokenBucket({ capacity: 5, refill: { tokens: 2, per: "1 second" } })
 * const pro: Policy.Policy = Policy.tokenBucket({ capacity: 20, refill: { tokens: 10, per: "1 second" } })
 * const forKey = (key: string): Policy.Policy => key.startsWith("pro:") ? pro : free
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type Policy = Valid | Invalid

/**
 * Options of {@link tokenBucket}.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const options: Policy.TokenBucketOptions = {
 *   capacity: 60,
 *   refill: { tokens: 60, per: "1 minute" },
 *   mode: "interval", // all 60 at once, every whole minute
 *   aligned: true
 * }
 * const policy = Policy.tokenBucket(options)
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface TokenBucketOptions {
  /** Most tokens the bucket holds: the largest burst. A positive finite number. */
  readonly capacity: number
  /** `tokens` are added every `per` (0.5 per second and 1000 per hour both work). */
  readonly refill: { readonly tokens: number; readonly per: Duration.Input }
  /** Tokens a new key starts with; defaults to `capacity` (the bucket starts full). */
  readonly initialTokens?: number | undefined
  /**
   * `"greedy"` (the default) adds tokens continuously; `"interval"` adds
   * `refill.tokens` at once at the end of each whole period (Bucket4j's
   * `refillIntervally`).
   */
  readonly mode?: "greedy" | "interval" | undefined
  /** With `mode: "interval"`: periods start at multiples of `per` on the clock, not at the key's first request. */
  readonly aligned?: boolean | undefined
}

const show = (value: unknown): string => {
  if (Predicate.isString(value)) return JSON.stringify(value.length > 64 ? value.slice(0, 64) + "…" : value)
  if (Predicate.isNumber(value) || Predicate.isBigInt(value) || value === undefined || value === null) {
    return String(value)
  }
  return Duration.isDuration(value) ? String(value) : typeof value
}

const invalid = (field: string, value: unknown, reason: string): Invalid => ({
  _tag: "Invalid",
  error: new InvalidPolicy({ field, value: show(value), reason })
})

const isPositiveFinite = (n: unknown): n is number => Predicate.isNumber(n) && Number.isFinite(n) && n > 0

/**
 * Parses a duration input (`"1 second"`, millis, a `Duration`) into
 * positive, finite milliseconds, or `undefined`.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * Policy.positiveMillis("1 second") // 1000
 * Policy.positiveMillis(0) // undefined
 * ```
 *
 * @category validation
 * @since 0.1.0
 */
export const positiveMillis = (input: unknown): number | undefined => {
  if (!(Predicate.isString(input) || Predicate.isNumber(input) || Duration.isDuration(input))) return undefined
  const millis = Duration.fromInput(input as Duration.Input).pipe((o) =>
    o._tag === "Some" ? Duration.toMillis(o.value) : NaN
  )
  return isPositiveFinite(millis) ? millis : undefined
}

/**
 * A token bucket: starts full (unless `initialTokens` says otherwise), refills
 * continuously by `min(capacity, tokens + rate * elapsed)`; a request that
 * finds too few tokens is denied and takes nothing; a cost above `capacity`
 * can never succeed and is refused with `InvalidRequest`.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * // bursts of 100, then 10 per second
 * const api = Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
 * // one every two seconds, starting empty
 * const slow = Policy.tokenBucket({ capacity: 1, refill: { tokens: 0.5, per: "1 second" }, initialTokens: 0 })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const tokenBucket = (options: TokenBucketOptions): Policy => {
  const { aligned, capacity, initialTokens, mode, refill } = options ?? {}
  if (!isPositiveFinite(capacity)) return invalid("capacity", capacity, "must be a positive finite number")
  if (refill === undefined || refill === null) return invalid("refill", refill, "is required")
  if (!isPositiveFinite(refill.tokens)) {
    return invalid("refill.tokens", refill.tokens, "must be a positive finite number")
  }
  const periodMillis = positiveMillis(refill.per)
  if (periodMillis === undefined) return invalid("refill.per", refill.per, durationReason)
  if (
    initialTokens !== undefined &&
    !(Predicate.isNumber(initialTokens) && Number.isFinite(initialTokens) && initialTokens >= 0)
  ) {
    return invalid("initialTokens", initialTokens, "must be a finite number >= 0")
  }
  if (initialTokens !== undefined && initialTokens > capacity) {
    return invalid("initialTokens", initialTokens, `must not exceed capacity (${capacity})`)
  }
  if (mode !== undefined && mode !== "greedy" && mode !== "interval") {
    return invalid("mode", mode, "must be \"greedy\" or \"interval\"")
  }
  if (aligned !== undefined && !Predicate.isBoolean(aligned)) return invalid("aligned", aligned, "must be a boolean")
  if (!Number.isFinite(capacity * periodMillis)) {
    return invalid("capacity", capacity, "capacity * refill.per overflows")
  }
  const config = TokenBucketAlgorithm.config({
    capacity,
    tokens: refill.tokens,
    periodMillis,
    initialTokens,
    interval: mode === "interval",
    aligned
  })
  return Object.freeze({
    _tag: "TokenBucket",
    capacity,
    refill: Object.freeze({ tokens: refill.tokens, per: Duration.millis(periodMillis) }),
    initialTokens: config.initialTokens,
    algorithm: TokenBucketAlgorithm.algorithm,
    config,
    quota: { limit: capacity, windowMillis: (capacity / refill.tokens) * periodMillis },
    error: undefined
  })
}

const durationReason = "must be a positive finite duration such as \"1 second\""

const checkPositive = (field: string, value: unknown): Invalid | undefined =>
  isPositiveFinite(value) ? undefined : invalid(field, value, "must be a positive finite number")

const checkCount = (field: string, value: unknown): Invalid | undefined =>
  Predicate.isNumber(value) && Number.isSafeInteger(value) && value > 0
    ? undefined
    : invalid(field, value, "must be a positive integer")

const checkNonNegative = (field: string, value: unknown): Invalid | undefined =>
  value === undefined || (Predicate.isNumber(value) && Number.isFinite(value) && value >= 0)
    ? undefined
    : invalid(field, value, "must be a finite number >= 0")

const checkBoolean = (field: string, value: unknown): Invalid | undefined =>
  value === undefined || Predicate.isBoolean(value) ? undefined : invalid(field, value, "must be a boolean")

const millisOf = (field: string, value: unknown): number | Invalid => {
  const millis = positiveMillis(value)
  return millis === undefined ? invalid(field, value, durationReason) : millis
}

const make = <P extends Valid>(policy: P): P => Object.freeze(policy)

/**
 * GCRA, the generic cell rate algorithm (redis-cell's `CL.THROTTLE`):
 * `rate.count` per `rate.per`, with bursts of `maxBurst` beyond the request in
 * progress (so `maxBurst + 1` at once, the reported `limit`). Exact above one
 * request per millisecond.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * // 30 per minute, bursts of 15 (redis-cell's CL.THROTTLE key 15 30 60)
 * const policy = Policy.gcra({ rate: { count: 30, per: "1 minute" }, maxBurst: 15 })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const gcra = (options: {
  readonly rate: { readonly count: number; readonly per: Duration.Input }
  readonly maxBurst?: number | undefined
}): Policy => {
  const count = options?.rate?.count
  const maxBurst = options?.maxBurst ?? 0
  const bad = checkPositive("rate.count", count) ?? checkNonNegative("maxBurst", maxBurst)
  if (bad !== undefined) return bad
  const periodMillis = millisOf("rate.per", options.rate.per)
  if (!Predicate.isNumber(periodMillis)) return periodMillis
  const config = GcraAlgorithm.config({ maxBurst, count: count!, periodMillis })
  return make<Gcra>({
    _tag: "Gcra",
    algorithm: GcraAlgorithm.algorithm,
    config,
    quota: { limit: config.limit, windowMillis: (config.limit / count!) * periodMillis },
    error: undefined
  })
}

/**
 * A leaky bucket shaper, as nginx `limit_req`: requests are let through at
 * `rate`; up to `burst` more may queue (a request that finds the queue full is
 * refused at once); the first `delay` of those are not delayed, and with
 * `nodelay` none are (the accounting stays the same). `wait`/`limit` sleep the
 * delay an admitted request is given; `consume` reports it as `delay`.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * // limit_req zone=one rate=10r/s burst=20 delay=8
 * const policy = Policy.leakyBucket({ rate: { tokens: 10, per: "1 second" }, burst: 20, delay: 8 })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const leakyBucket = (options: {
  readonly rate: { readonly tokens: number; readonly per: Duration.Input }
  readonly burst?: number | undefined
  readonly delay?: number | undefined
  readonly nodelay?: boolean | undefined
}): Policy => {
  const tokens = options?.rate?.tokens
  const bad = checkPositive("rate.tokens", tokens) ?? checkNonNegative("burst", options.burst) ??
    checkNonNegative("delay", options.delay) ?? checkBoolean("nodelay", options.nodelay)
  if (bad !== undefined) return bad
  const periodMillis = millisOf("rate.per", options.rate.per)
  if (!Predicate.isNumber(periodMillis)) return periodMillis
  const config = LeakyBucketAlgorithm.config({
    tokens: tokens!,
    periodMillis,
    burst: options.burst,
    delay: options.delay,
    nodelay: options.nodelay
  })
  return make<LeakyBucket>({
    _tag: "LeakyBucket",
    algorithm: LeakyBucketAlgorithm.algorithm,
    config,
    quota: { limit: config.capacity, windowMillis: (config.capacity / tokens!) * periodMillis },
    error: undefined
  })
}

/**
 * A fixed window: at most `limit` units per `window`. The window starts at
 * the key's first hit, or, `aligned`, at multiples of `window` on the clock
 * (bursts of up to twice the limit are possible across a boundary).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.fixedWindow({ limit: 100, window: "1 minute", aligned: true })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const fixedWindow = (options: {
  readonly limit: number
  readonly window: Duration.Input
  readonly aligned?: boolean | undefined
}): Policy => {
  const bad = checkCount("limit", options?.limit) ?? checkBoolean("aligned", options.aligned)
  if (bad !== undefined) return bad
  const windowMillis = millisOf("window", options.window)
  if (!Predicate.isNumber(windowMillis)) return windowMillis
  return make<FixedWindow>({
    _tag: "FixedWindow",
    algorithm: FixedWindowAlgorithm.algorithm,
    config: FixedWindowAlgorithm.config({ limit: options.limit, windowMillis, align: options.aligned }),
    quota: { limit: options.limit, windowMillis },
    error: undefined
  })
}

/**
 * A sliding window counter (Cloudflare's): the previous window's count,
 * weighted by how much of it the sliding window still covers, plus the
 * current one, at most `limit`.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.slidingWindow({ limit: 100, window: "1 minute" })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const slidingWindow = (options: { readonly limit: number; readonly window: Duration.Input }): Policy => {
  const bad = checkCount("limit", options?.limit)
  if (bad !== undefined) return bad
  const windowMillis = millisOf("window", options.window)
  if (!Predicate.isNumber(windowMillis)) return windowMillis
  return make<SlidingWindow>({
    _tag: "SlidingWindow",
    algorithm: SlidingWindowAlgorithm.algorithm,
    config: SlidingWindowAlgorithm.config({ limit: options.limit, windowMillis }),
    quota: { limit: options.limit, windowMillis },
    error: undefined
  })
}

/**
 * An exact sliding log: at most `limit` units in any window of length
 * `window`, remembering at most `limit` timestamps. `minGap` spaces admitted
 * requests; `countBlocked` logs refused attempts too, so a caller who keeps
 * hammering stays blocked.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const logins = Policy.slidingLog({ limit: 5, window: "15 minutes", minGap: "2 seconds", countBlocked: true })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const slidingLog = (options: {
  readonly limit: number
  readonly window: Duration.Input
  readonly minGap?: Duration.Input | undefined
  readonly countBlocked?: boolean | undefined
}): Policy => {
  const bad = checkCount("limit", options?.limit) ?? checkBoolean("countBlocked", options.countBlocked)
  if (bad !== undefined) return bad
  const windowMillis = millisOf("window", options.window)
  if (!Predicate.isNumber(windowMillis)) return windowMillis
  const minGap = options.minGap === undefined ? 0 : millisOf("minGap", options.minGap)
  if (!Predicate.isNumber(minGap)) return minGap
  return make<SlidingLog>({
    _tag: "SlidingLog",
    algorithm: SlidingLogAlgorithm.algorithm,
    config: SlidingLogAlgorithm.config({
      limit: options.limit,
      windowMillis,
      minGap,
      countBlocked: options.countBlocked
    }),
    quota: { limit: options.limit, windowMillis },
    error: undefined
  })
}

/**
 * A smooth rate, as Guava's `RateLimiter`: `permits` per `per`, evenly spaced.
 * With `warmup`, a cold key ramps up to the stable rate over that period
 * (SmoothWarmingUp, `coldFactor` 3 by default); without, idle time is stored
 * up to `maxBurst` worth of permits (SmoothBursty, 1 second by default).
 * "Pay later": a request goes at once when the limiter is free and its cost
 * delays the next one, so any cost can succeed.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const warm = Policy.smooth({ permits: 100, per: "1 second", warmup: "10 seconds" })
 * const bursty = Policy.smooth({ permits: 5, per: "1 second" })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const smooth = (options: {
  readonly permits: number
  readonly per: Duration.Input
  readonly warmup?: Duration.Input | undefined
  readonly coldFactor?: number | undefined
  readonly maxBurst?: Duration.Input | undefined
  readonly initialPermits?: number | undefined
}): Policy => {
  const bad = checkPositive("permits", options?.permits) ?? checkNonNegative("initialPermits", options.initialPermits)
  if (bad !== undefined) return bad
  if (options.coldFactor !== undefined && !(isPositiveFinite(options.coldFactor) && options.coldFactor >= 1)) {
    return invalid("coldFactor", options.coldFactor, "must be a finite number >= 1")
  }
  const periodMillis = millisOf("per", options.per)
  if (!Predicate.isNumber(periodMillis)) return periodMillis
  const warmupMillis = options.warmup === undefined ? undefined : millisOf("warmup", options.warmup)
  if (warmupMillis !== undefined && !Predicate.isNumber(warmupMillis)) return warmupMillis
  const maxBurstMillis = options.maxBurst === undefined ? undefined : millisOf("maxBurst", options.maxBurst)
  if (maxBurstMillis !== undefined && !Predicate.isNumber(maxBurstMillis)) return maxBurstMillis
  const config = WarmUpAlgorithm.config({
    permits: options.permits,
    periodMillis,
    warmupMillis,
    coldFactor: options.coldFactor,
    maxBurstMillis,
    initialPermits: options.initialPermits
  })
  if (options.initialPermits !== undefined && options.initialPermits > config.maxPermits) {
    return invalid(
      "initialPermits",
      options.initialPermits,
      `must not exceed the most permits stored (${config.maxPermits})`
    )
  }
  return make<Smooth>({
    _tag: "Smooth",
    algorithm: WarmUpAlgorithm.algorithm,
    config,
    quota: { limit: options.permits, windowMillis: periodMillis },
    error: undefined
  })
}

/**
 * Several limits on one key, checked atomically (Bucket4j's bandwidths): a
 * request is admitted only if every limit admits it, and takes from all or
 * none; the decision reports the most restrictive limit.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.all(
 *   Policy.tokenBucket({ capacity: 100, refill: { tokens: 100, per: "1 minute" } }),
 *   Policy.tokenBucket({ capacity: 1000, refill: { tokens: 1000, per: "1 hour" } })
 * )
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const all = (...parts: ReadonlyArray<Policy>): Policy => {
  if (parts.length === 0) return invalid("all", "[]", "needs at least one policy")
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]
    if (!isPolicy(part)) return invalid(`all[${i}]`, typeof part, "must be a Policy")
    if (part._tag === "Invalid") {
      return {
        _tag: "Invalid",
        error: new InvalidPolicy({ ...part.error, field: `all[${i}].${part.error.field}` })
      }
    }
  }
  const valid = parts as ReadonlyArray<Valid>
  const config = CompositeAlgorithm.config(
    valid.map((p) => CompositeAlgorithm.part(p.algorithm as Algorithm<any, any>, p.config))
  )
  // The headline quota is the one that allows the least per unit of time.
  const quota = valid.map((p) => p.quota).reduce((a, b) => a.limit / a.windowMillis <= b.limit / b.windowMillis ? a : b)
  return make<All>({
    _tag: "All",
    algorithm: CompositeAlgorithm.algorithm,
    config,
    parts: valid,
    quota,
    error: undefined
  })
}

/**
 * A concurrency limit (Seastar's shared bucket): at most `capacity` units out
 * at once; units come back only through `release` (or `withPermit`, which
 * releases on success, failure and interruption). With `replenish`, released
 * units flow back at that rate instead of at once (capped release).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.concurrency({ capacity: 10 })
 * const capped = Policy.concurrency({ capacity: 10, replenish: { tokens: 5, per: "1 second" } })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const concurrency = (options: {
  readonly capacity: number
  readonly replenish?: { readonly tokens: number; readonly per: Duration.Input } | undefined
}): Policy => {
  const bad = checkPositive("capacity", options?.capacity)
  if (bad !== undefined) return bad
  let replenish: { tokens: number; periodMillis: number } | undefined
  if (options.replenish !== undefined) {
    if (!Predicate.isObject(options.replenish)) {
      return invalid("replenish", options.replenish, "must be { tokens, per } or left out")
    }
    const tokens = options.replenish.tokens
    const badTokens = checkPositive("replenish.tokens", tokens)
    if (badTokens !== undefined) return badTokens
    const periodMillis = millisOf("replenish.per", options.replenish.per)
    if (!Predicate.isNumber(periodMillis)) return periodMillis
    replenish = { tokens, periodMillis }
  }
  return make<Concurrency>({
    _tag: "Concurrency",
    algorithm: ConcurrencyAlgorithm.algorithm,
    config: ConcurrencyAlgorithm.config({ capacity: options.capacity, replenish }),
    quota: { limit: options.capacity, windowMillis: replenish === undefined ? 1000 : replenish.periodMillis },
    error: undefined
  })
}

/**
 * Succeeds with the policy when it is valid, fails with its `InvalidPolicy`
 * otherwise.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Policy } from "tollgate"
 *
 * const program = Policy.validate(Policy.tokenBucket({ capacity: -1, refill: { tokens: 1, per: "1 second" } }))
 * // fails with InvalidPolicy { field: "capacity", value: "-1" }
 * ```
 *
 * @category validation
 * @since 0.1.0
 */
export const validate = (policy: Policy): Effect.Effect<Valid, InvalidPolicy> =>
  policy._tag === "Invalid" ? Effect.fail(policy.error) : Effect.succeed(policy)

/**
 * The same policy with `fraction` of its limit and rate: what one process may
 * grant on its own when a shared store is down and `fallback` is `"local"`.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } }) as Policy.Valid
 * const third = Policy.share(policy, 1 / 3) // capacity 33.3, 3.3 per second
 * ```
 *
 * @category combinators
 * @since 0.1.0
 */
export const share = (policy: Valid, fraction: number): Valid => {
  if (fraction === 1) return policy
  const scaled = scale(policy, fraction)
  return scaled._tag === "Invalid" ? policy : scaled
}

const scale = (p: Valid, f: number): Policy => {
  switch (p._tag) {
    case "TokenBucket":
      return tokenBucket({
        capacity: p.capacity * f,
        refill: { tokens: p.refill.tokens * f, per: p.refill.per },
        initialTokens: p.initialTokens * f,
        mode: p.config.interval ? "interval" : "greedy",
        aligned: p.config.aligned
      })
    case "Gcra":
      return gcra({
        rate: { count: p.config.count * f, per: p.config.periodMillis },
        maxBurst: Math.max(0, p.config.limit * f - 1)
      })
    case "LeakyBucket":
      return leakyBucket({
        rate: { tokens: p.config.tokens * f, per: p.config.periodMillis },
        burst: p.config.burst * f,
        delay: p.config.delay === Infinity ? undefined : p.config.delay * f,
        nodelay: p.config.delay === Infinity
      })
    case "FixedWindow":
      return fixedWindow({
        limit: Math.max(1, Math.floor(p.config.limit * f)),
        window: p.config.windowMillis,
        aligned: p.config.align
      })
    case "SlidingWindow":
      return slidingWindow({ limit: Math.max(1, Math.floor(p.config.limit * f)), window: p.config.windowMillis })
    case "SlidingLog":
      return slidingLog({
        limit: Math.max(1, Math.floor(p.config.limit * f)),
        window: p.config.windowMillis,
        minGap: p.config.minGap > 0 ? p.config.minGap : undefined,
        countBlocked: p.config.countBlocked
      })
    case "Concurrency":
      return concurrency({
        capacity: Math.max(1, Math.floor(p.config.capacity * f)),
        replenish: p.config.gradual ? { tokens: p.config.tokens * f, per: p.config.periodMillis } : undefined
      })
    case "All":
      return all(...p.parts.map((part) => share(part, f)))
    case "Smooth":
      return p
  }
}

/**
 * Whether the value is a `Policy` (valid or not).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * Policy.isPolicy(Policy.concurrency({ capacity: 1 })) // true
 * Policy.isPolicy({ capacity: 1 }) // false
 * ```
 *
 * @category guards
 * @since 0.1.0
 */
export const isPolicy = (u: unknown): u is Policy =>
  Predicate.hasProperty(u, "_tag") && Predicate.hasProperty(u, "error") &&
  (u._tag === "Invalid" || (Predicate.hasProperty(u, "algorithm") && Predicate.hasProperty(u, "config")))
