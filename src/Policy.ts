/**
 * Policies: what limit applies to a key. Each policy's options are one
 * `Schema` (`TokenBucketOptions`, `GcraOptions`, ...): the constructors
 * validate with it, and so does the service's JSON configuration, so every
 * rule and its message exist once. Constructors validate eagerly and return
 * immutable values. An invalid policy is still a value (so it can be written
 * inline in layer options); it carries its `InvalidPolicy` error (the first
 * bad field, its value and the rule it breaks), which `RateLimiter.make`
 * raises in the Effect error channel before any bucket exists, and
 * `Policy.validate` raises on demand.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Predicate, Result, Schema } from "effect"
import { InvalidPolicy } from "./Errors.ts"
import * as AdaptiveAlgorithm from "./internal/algorithm/Adaptive.ts"
import { type Algorithm, bind, type Rule } from "./internal/algorithm/Algorithm.ts"
import * as BurstAlgorithm from "./internal/algorithm/Burst.ts"
import * as CompositeAlgorithm from "./internal/algorithm/Composite.ts"
import * as ConcurrencyAlgorithm from "./internal/algorithm/Concurrency.ts"
import * as FixedWindowAlgorithm from "./internal/algorithm/FixedWindow.ts"
import * as GcraAlgorithm from "./internal/algorithm/Gcra.ts"
import * as SlidingLogAlgorithm from "./internal/algorithm/SlidingLog.ts"
import * as SlidingWindowAlgorithm from "./internal/algorithm/SlidingWindow.ts"
import * as TokenBucketAlgorithm from "./internal/algorithm/TokenBucket.ts"
import * as UnlimitedAlgorithm from "./internal/algorithm/Unlimited.ts"
import * as WarmUpAlgorithm from "./internal/algorithm/WarmUp.ts"
import * as Rules from "./internal/Rules.ts"

/**
 * A policy's headline quota, as HTTP's `RateLimit-Policy` advertises it:
 * `limit` units per `windowMillis`.
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const quota: Policy.Quota = { limit: 100, windowMillis: 10_000 }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Quota {
  readonly limit: number
  readonly windowMillis: number
}

/**
 * What every valid policy carries: which algorithm, its validated
 * configuration, its quota, and the two bound together (`rule`, what a
 * bucket runs; its `maxCost` is the largest cost that can ever succeed).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
 * if (policy._tag !== "Invalid") policy.rule.maxCost // 100
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Base<Tag extends string, C, S> {
  readonly _tag: Tag
  readonly algorithm: Algorithm<C, S>
  readonly config: C
  readonly quota: Quota
  readonly rule: Rule
  readonly error: undefined
  /**
   * nginx's `limit_req_dry_run`: requests are decided and counted as usual,
   * but one the policy would refuse is let through, flagged `dryRun`.
   */
  readonly dryRun: boolean
  /**
   * rate-limiter-flexible's `blockDuration`, in milliseconds (0: none): a
   * request the policy refuses blocks the key for this long, and every
   * request until then is refused.
   */
  readonly blockMillis: number
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
 * if (policy._tag === "TokenBucket") policy.capacity // 100
 * ```
 *
 * @since 0.1.0
 * @category models
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
 * ```
 *
 * @since 0.1.0
 * @category models
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
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface LeakyBucket extends Base<"LeakyBucket", GcraAlgorithm.Config, GcraAlgorithm.State> {}

/**
 * A fixed window counter.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.fixedWindow({ limit: 100, window: "1 minute" })
 * ```
 *
 * @since 0.1.0
 * @category models
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
 * ```
 *
 * @since 0.1.0
 * @category models
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
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface SlidingLog extends Base<"SlidingLog", SlidingLogAlgorithm.Config, SlidingLogAlgorithm.State> {}

/**
 * A smooth rate, with or without warm-up (Guava's SmoothWarmingUp / SmoothBursty).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.smooth({ permits: 100, per: "1 second" })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Smooth extends Base<"Smooth", WarmUpAlgorithm.Config, WarmUpAlgorithm.State> {}

/**
 * Several limits on one key, all of which must admit (Bucket4j's bandwidths).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const perMinute = Policy.tokenBucket({ capacity: 100, refill: { tokens: 100, per: "1 minute" } })
 * const policy = Policy.all(perMinute, Policy.fixedWindow({ limit: 1000, window: "1 hour" }))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface All extends Base<"All", CompositeAlgorithm.Config, CompositeAlgorithm.State> {
  readonly parts: ReadonlyArray<Valid>
}

/**
 * A base limit with a burst allowance (rate-limiter-flexible's
 * `BurstyRateLimiter`): the base admits if it can, else the burst.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.burst(
 *   Policy.fixedWindow({ limit: 10, window: "1 second" }),
 *   Policy.fixedWindow({ limit: 20, window: "1 minute" })
 * )
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface Burst extends Base<"Burst", BurstAlgorithm.Config, BurstAlgorithm.State> {
  readonly base: Valid
  readonly burst: Valid
}

/**
 * No limit at all (x/time/rate's `rate.Inf`).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.unlimited()
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface Unlimited extends Base<"Unlimited", UnlimitedAlgorithm.Config, UnlimitedAlgorithm.State> {}

/**
 * A concurrency limit: units come back through `release` (capped release).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.concurrency({ capacity: 10 })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Concurrency extends Base<"Concurrency", ConcurrencyAlgorithm.Config, ConcurrencyAlgorithm.State> {}

/**
 * An adaptive rate (AIMD): a token bucket whose refill rate each key moves
 * between `floor` and `ceiling` with upstream's feedback
 * (`RateLimiter.feedback`).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.adaptive({ capacity: 10, rate: { tokens: 100, per: "1 second" }, floor: 5, ceiling: 500 })
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface Adaptive extends Base<"Adaptive", AdaptiveAlgorithm.Config, AdaptiveAlgorithm.State> {}

/**
 * A policy whose options did not validate.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.tokenBucket({ capacity: -1, refill: { tokens: 1, per: "1 second" } })
 * if (policy._tag === "Invalid") policy.error.field // "capacity"
 * ```
 *
 * @since 0.1.0
 * @category models
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
 * import { Policy } from "tollgate"
 *
 * const valid = (policy: Policy.Policy): policy is Policy.Valid => policy._tag !== "Invalid"
 * ```
 *
 * @since 0.1.0
 * @category models
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
  | Adaptive
  | Burst
  | Unlimited

/**
 * Any policy.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const policy: Policy.Policy = Policy.fixedWindow({ limit: 100, window: "1 minute" })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Policy = Valid | Invalid

// ---------------------------------------------------------------------------
// The rules (each check and its message, once: see internal/Rules.ts).

const { AtLeastOne, Flag, NonNegative, PositiveInteger, PositiveNumber, optional } = Rules

/**
 * Parses a duration input (`"1 second"`, millis, a `Duration`) into
 * positive, finite milliseconds, or `undefined`.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * Policy.positiveMillis("1 minute") // 60000
 * Policy.positiveMillis("0 seconds") // undefined
 * ```
 *
 * @since 0.1.0
 * @category durations
 */
export const positiveMillis: (input: unknown) => number | undefined = Rules.positiveMillis

/**
 * A duration option: `"1 second"`, a number of milliseconds or a `Duration`,
 * positive and finite; decodes to milliseconds.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Policy } from "tollgate"
 *
 * Schema.decodeSync(Policy.PositiveDuration)("2 seconds") // 2000
 * ```
 *
 * @since 0.2.0
 * @category schemas
 */
export const PositiveDuration = Rules.PositiveDuration

// A rate: `units` per `per`, or one every `every` (x/time/rate's `Every`).
// The constructors read it with `perRate`.
const oneRate = (units: string) =>
  Schema.makeFilter((o: Readonly<Record<string, unknown>>) =>
    o.every !== undefined
      ? (o[units] === undefined && o.per === undefined
        ? undefined
        : { path: ["every"], issue: `must not be given with ${units} and per` })
      : o[units] === undefined
      ? { path: [units], issue: "is required" }
      : o.per === undefined
      ? { path: ["per"], issue: "is required" }
      : undefined
  )

// A decoded rate as a count per period in milliseconds.
const perRate = (
  rate: { readonly per?: number | undefined; readonly every?: number | undefined },
  count: number | undefined
): { readonly count: number; readonly per: number } =>
  rate.every !== undefined ? { count: 1, per: rate.every } : { count: count ?? 0, per: rate.per ?? 1 }

const TokensPer = Schema.Struct({
  tokens: optional(PositiveNumber),
  per: optional(PositiveDuration),
  every: optional(PositiveDuration)
}).annotate({ message: "must be { tokens, per } or { every }" }).check(oneRate("tokens"))
const CountPer = Schema.Struct({
  count: optional(PositiveNumber),
  per: optional(PositiveDuration),
  every: optional(PositiveDuration)
}).annotate({ message: "must be { count, per } or { every }" }).check(oneRate("count"))
// A token bucket may refill at 0 (x/time/rate's NewLimiter(0, b)).
const Refill = Schema.Struct({
  tokens: optional(NonNegative),
  per: optional(PositiveDuration),
  every: optional(PositiveDuration)
}).annotate({ message: "must be { tokens, per } or { every }" }).check(oneRate("tokens"))

/**
 * The options every policy takes: `dryRun` (nginx's `limit_req_dry_run`:
 * decide and count, but let a refused request through, flagged `dryRun`)
 * and `blockDuration` (rate-limiter-flexible's: a refused request blocks the
 * key for this long).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.CommonOptions = { dryRun: true, blockDuration: "15 minutes" }
 * ```
 *
 * @since 0.2.0
 * @category schemas
 */
export const CommonOptions = Schema.Struct({
  dryRun: optional(Flag),
  blockDuration: optional(PositiveDuration)
})

/**
 * Options every policy takes (see {@link CommonOptions}).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.CommonOptions = { blockDuration: 60_000 }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type CommonOptions = typeof CommonOptions.Encoded

const { fields: common } = CommonOptions

// ---------------------------------------------------------------------------
// Each policy's options.

/**
 * The options of {@link tokenBucket}: `capacity` (the largest burst, a
 * positive finite number), `refill` (`tokens` added every `per`; 0.5 per
 * second and 1000 per hour both work), `initialTokens` (a new key's tokens;
 * `capacity` by default), `mode` (`"greedy"`, the default, adds tokens
 * continuously; `"interval"` adds `refill.tokens` at once at the end of each
 * whole period, as Bucket4j's `refillIntervally`), `aligned` (with
 * `"interval"`: periods start at multiples of `per` on the clock),
 * `firstRefill` (with `"interval"`: the instant of the first refill, then
 * every `per` after it, none before it, as Bucket4j's
 * `refillIntervallyAligned`) and `adaptiveInitialTokens` (with
 * `firstRefill`: a key first seen before it starts with what the refill
 * would have brought by then, Bucket4j's `useAdaptiveInitialTokens`).
 * `refill` may be `{ every }` (one token per interval, x/time/rate's
 * `Every`), and its `tokens` may be 0 (x/time/rate's `NewLimiter(0, b)`:
 * `capacity` requests, then none ever again). And the {@link CommonOptions}.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Policy } from "tollgate"
 *
 * const options = Schema.decodeSync(Policy.TokenBucketOptions)({
 *   capacity: 100,
 *   refill: { tokens: 10, per: "1 second" }
 * })
 * options.refill.per // 1000
 * ```
 *
 * @since 0.2.0
 * @category schemas
 */
export const TokenBucketOptions = Schema.Struct({
  capacity: PositiveNumber,
  refill: Refill,
  initialTokens: optional(NonNegative),
  mode: optional(Schema.Literals(["greedy", "interval"]).annotate({ message: "must be \"greedy\" or \"interval\"" })),
  aligned: optional(Flag),
  firstRefill: optional(Rules.Instant),
  adaptiveInitialTokens: optional(Flag),
  ...common
}).check(Schema.makeFilter((o) =>
  o.initialTokens !== undefined && o.initialTokens > o.capacity
    ? { path: ["initialTokens"], issue: `must not exceed capacity (${o.capacity})` }
    : !Number.isFinite(o.capacity * perRate(o.refill, o.refill.tokens).per)
    ? { path: ["capacity"], issue: "capacity * refill.per overflows" }
    : o.firstRefill !== undefined && o.mode !== "interval"
    ? { path: ["firstRefill"], issue: "needs mode \"interval\" (refills at whole periods)" }
    : o.adaptiveInitialTokens === true && o.firstRefill === undefined
    ? { path: ["adaptiveInitialTokens"], issue: "needs firstRefill" }
    : o.adaptiveInitialTokens === true && o.initialTokens !== undefined
    ? { path: ["initialTokens"], issue: "must be left out with adaptiveInitialTokens (Bucket4j refuses both)" }
    : undefined
))

/**
 * Options of {@link tokenBucket} (see {@link TokenBucketOptions}).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.TokenBucketOptions = { capacity: 10, refill: { tokens: 1, per: "1 second" }, initialTokens: 0 }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type TokenBucketOptions = typeof TokenBucketOptions.Encoded

/**
 * The options of {@link gcra}: `rate` (`count` per `per`) and `maxBurst`
 * (requests allowed at once beyond the one in progress; 0 by default).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.GcraOptions = { rate: { count: 30, per: "1 minute" }, maxBurst: 15 }
 * ```
 *
 * @since 0.2.0
 * @category schemas
 */
export const GcraOptions = Schema.Struct({
  rate: CountPer,
  maxBurst: optional(NonNegative),
  ...common
})

/**
 * Options of {@link gcra} (see {@link GcraOptions}).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.GcraOptions = { rate: { count: 10, per: "1 second" } }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type GcraOptions = typeof GcraOptions.Encoded

/**
 * The options of {@link leakyBucket}: `rate` (`tokens` per `per`), `burst`
 * (how many more may queue), `delay` (how many of those are not delayed) and
 * `nodelay` (none are), as nginx `limit_req`.
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.LeakyBucketOptions = { rate: { tokens: 10, per: "1 second" }, burst: 20, delay: 8 }
 * ```
 *
 * @since 0.2.0
 * @category schemas
 */
export const LeakyBucketOptions = Schema.Struct({
  rate: TokensPer,
  burst: optional(NonNegative),
  delay: optional(NonNegative),
  nodelay: optional(Flag),
  ...common
})

/**
 * Options of {@link leakyBucket} (see {@link LeakyBucketOptions}).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.LeakyBucketOptions = { rate: { tokens: 10, per: "1 second" }, nodelay: true }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type LeakyBucketOptions = typeof LeakyBucketOptions.Encoded

/**
 * The options of {@link fixedWindow}: `limit` (a positive integer) per
 * `window`, `aligned` (windows start at multiples of `window` on the clock),
 * and rate-limiter-flexible's `countBlocked` (refused requests are counted
 * too), `execEvenly` (admitted requests are spread over the window: each is
 * told a `delay`) and `execEvenlyMinDelay` (the least delay; `window / limit`
 * by default). And the {@link CommonOptions}.
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.FixedWindowOptions = { limit: 100, window: "1 minute", aligned: true }
 * ```
 *
 * @since 0.2.0
 * @category schemas
 */
export const FixedWindowOptions = Schema.Struct({
  limit: PositiveInteger,
  window: PositiveDuration,
  aligned: optional(Flag),
  countBlocked: optional(Flag),
  execEvenly: optional(Flag),
  execEvenlyMinDelay: optional(PositiveDuration),
  ...common
}).check(Schema.makeFilter((o) =>
  o.execEvenlyMinDelay !== undefined && o.execEvenly !== true
    ? { path: ["execEvenlyMinDelay"], issue: "needs execEvenly" }
    : undefined
))

/**
 * Options of {@link fixedWindow} (see {@link FixedWindowOptions}).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.FixedWindowOptions = { limit: 100, window: 60_000 }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type FixedWindowOptions = typeof FixedWindowOptions.Encoded

/**
 * The options of {@link slidingWindow}: `limit` (a positive integer) per `window`.
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.SlidingWindowOptions = { limit: 100, window: "1 minute" }
 * ```
 *
 * @since 0.2.0
 * @category schemas
 */
export const SlidingWindowOptions = Schema.Struct({
  limit: PositiveInteger,
  window: PositiveDuration,
  ...common
})

/**
 * Options of {@link slidingWindow} (see {@link SlidingWindowOptions}).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.SlidingWindowOptions = { limit: 10, window: "1 second" }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type SlidingWindowOptions = typeof SlidingWindowOptions.Encoded

/**
 * The options of {@link slidingLog}: `limit` (a positive integer) per
 * `window`, `minGap` (the least time between two admissions) and
 * `countBlocked` (refused attempts are logged too).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.SlidingLogOptions = { limit: 5, window: "15 minutes", countBlocked: true }
 * ```
 *
 * @since 0.2.0
 * @category schemas
 */
export const SlidingLogOptions = Schema.Struct({
  limit: PositiveInteger,
  window: PositiveDuration,
  minGap: optional(PositiveDuration),
  countBlocked: optional(Flag),
  ...common
})

/**
 * Options of {@link slidingLog} (see {@link SlidingLogOptions}).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.SlidingLogOptions = { limit: 5, window: "1 minute", minGap: "2 seconds" }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type SlidingLogOptions = typeof SlidingLogOptions.Encoded

const smoothConfig = (o: SmoothDecoded) =>
  WarmUpAlgorithm.config({
    permits: o.permits,
    periodMillis: o.per,
    warmupMillis: o.warmup,
    coldFactor: o.coldFactor,
    maxBurstMillis: o.maxBurst,
    initialPermits: o.initialPermits
  })

interface SmoothDecoded {
  readonly permits: number
  readonly per: number
  readonly warmup?: number | undefined
  readonly coldFactor?: number | undefined
  readonly maxBurst?: number | undefined
  readonly initialPermits?: number | undefined
}

/**
 * The options of {@link smooth}: `permits` per `per`; `warmup` (a cold key
 * ramps up over it), `coldFactor` (3 by default), `maxBurst` (idle time
 * stored without warm-up; 1 second by default), `initialPermits`.
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.SmoothOptions = { permits: 100, per: "1 second", warmup: "10 seconds" }
 * ```
 *
 * @since 0.2.0
 * @category schemas
 */
export const SmoothOptions = Schema.Struct({
  permits: PositiveNumber,
  per: PositiveDuration,
  warmup: optional(PositiveDuration),
  coldFactor: optional(AtLeastOne),
  maxBurst: optional(PositiveDuration),
  initialPermits: optional(NonNegative),
  ...common
}).check(Schema.makeFilter((o) => {
  if (o.initialPermits === undefined) return undefined
  const { maxPermits } = smoothConfig(o)
  return o.initialPermits > maxPermits
    ? { path: ["initialPermits"], issue: `must not exceed the most permits stored (${maxPermits})` }
    : undefined
}))

/**
 * Options of {@link smooth} (see {@link SmoothOptions}).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.SmoothOptions = { permits: 5, per: "1 second" }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type SmoothOptions = typeof SmoothOptions.Encoded

/**
 * The options of {@link concurrency}: `capacity` (most units out at once)
 * and `replenish` (released units flow back at `tokens` per `per` instead
 * of at once).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.ConcurrencyOptions = { capacity: 10, replenish: { tokens: 5, per: "1 second" } }
 * ```
 *
 * @since 0.2.0
 * @category schemas
 */
export const ConcurrencyOptions = Schema.Struct({
  capacity: PositiveNumber,
  replenish: optional(TokensPer.annotate({ message: "must be { tokens, per }, { every } or left out" })),
  ...common
})

/**
 * Options of {@link concurrency} (see {@link ConcurrencyOptions}).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.ConcurrencyOptions = { capacity: 10 }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type ConcurrencyOptions = typeof ConcurrencyOptions.Encoded

/**
 * The options of {@link adaptive}: `capacity` (the largest burst), `rate`
 * (where a key's rate starts, `tokens` per `per`), `floor` and `ceiling`
 * (the least and the most tokens per `per` it may move to), `increase`
 * (tokens per `per` added on each `"ok"`; `floor` by default), `decrease`
 * (the factor applied on `"throttled"`, between 0 and 1; 0.5 by default) and
 * `latency` (a target: a latency reported above it counts as throttled).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.AdaptiveOptions = {
 *   capacity: 20,
 *   rate: { tokens: 100, per: "1 second" },
 *   floor: 10,
 *   ceiling: 1000,
 *   increase: 10,
 *   decrease: 0.7,
 *   latency: "300 millis"
 * }
 * ```
 *
 * @since 0.2.0
 * @category schemas
 */
export const AdaptiveOptions = Schema.Struct({
  capacity: PositiveNumber,
  rate: TokensPer,
  floor: PositiveNumber,
  ceiling: PositiveNumber,
  increase: optional(PositiveNumber),
  decrease: optional(Rules.number("must be a number between 0 and 1 (excluded)", (n) => n > 0 && n < 1)),
  latency: optional(PositiveDuration),
  ...common
}).check(Schema.makeFilter((o) => {
  const rate = perRate(o.rate, o.rate.tokens)
  return o.floor > o.ceiling
    ? { path: ["ceiling"], issue: `must be at least the floor (${o.floor})` }
    : rate.count < o.floor || rate.count > o.ceiling
    ? { path: ["rate", "tokens"], issue: `must be between the floor (${o.floor}) and the ceiling (${o.ceiling})` }
    : Number.isFinite(o.capacity * rate.per)
    ? undefined
    : { path: ["capacity"], issue: "capacity * rate.per overflows" }
}))

/**
 * Options of {@link adaptive} (see {@link AdaptiveOptions}).
 *
 * @example
 * ```ts
 * import type { Policy } from "tollgate"
 *
 * const options: Policy.AdaptiveOptions = { capacity: 5, rate: { tokens: 50, per: "1 second" }, floor: 1, ceiling: 200 }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type AdaptiveOptions = typeof AdaptiveOptions.Encoded

/**
 * The check on the parts of {@link all} (a policy or a configuration): at
 * least one.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Policy } from "tollgate"
 *
 * const Parts = Schema.Array(Schema.String).check(Policy.atLeastOnePart)
 * ```
 *
 * @since 0.2.0
 * @category schemas
 */
export const atLeastOnePart = Schema.isMinLength(1, { message: "needs at least one policy" })

// ---------------------------------------------------------------------------
// Validation: the first bad field of the options, as an `Invalid` policy.

const show = (value: unknown): string => {
  if (Predicate.isString(value)) return JSON.stringify(value.length > 64 ? value.slice(0, 64) + "…" : value)
  if (Predicate.isNumber(value) || Predicate.isBigInt(value) || value === undefined || value === null) {
    return String(value)
  }
  if (Array.isArray(value) && value.length === 0) return "[]"
  return Duration.isDuration(value) ? String(value) : typeof value
}

const decode = <T, E>(schema: Schema.Codec<T, E>, input: unknown, root = ""): Result.Result<T, Invalid> =>
  Result.mapError(
    Rules.decode(schema, input, { root, show }),
    (bad): Invalid => ({ _tag: "Invalid", error: new InvalidPolicy(bad) })
  )

// Every valid policy: frozen, its rule bound once (by the constructor, which
// knows the algorithm's types).
const make = <P extends Valid>(
  policy: Omit<P, "error" | "dryRun" | "blockMillis">,
  options: { readonly dryRun?: boolean | undefined; readonly blockDuration?: number | undefined }
): P =>
  // `Omit<P, ...>` with the common fields added back is a P
  Object.freeze({
    ...policy,
    error: undefined,
    dryRun: options.dryRun === true,
    blockMillis: options.blockDuration ?? 0
  }) as P

// ---------------------------------------------------------------------------
// Constructors.

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
 * @since 0.1.0
 * @category constructors
 */
export const tokenBucket = (options: TokenBucketOptions): Policy => {
  const decoded = decode(TokenBucketOptions, options)
  if (Result.isFailure(decoded)) return decoded.failure
  const o = decoded.success
  const { count: tokens, per } = perRate(o.refill, o.refill.tokens)
  return tokenBucketOf(
    TokenBucketAlgorithm.config({
      capacity: o.capacity,
      tokens,
      periodMillis: per,
      initialTokens: o.initialTokens,
      interval: o.mode === "interval",
      aligned: o.aligned,
      firstRefill: o.firstRefill,
      adaptive: o.adaptiveInitialTokens
    }),
    o
  )
}

const tokenBucketOf = (config: TokenBucketAlgorithm.Config, options: Parameters<typeof make>[1]): TokenBucket =>
  make<TokenBucket>({
    _tag: "TokenBucket",
    capacity: config.capacity,
    refill: Object.freeze({ tokens: config.tokens, per: Duration.millis(config.periodMillis) }),
    initialTokens: config.initialTokens,
    algorithm: TokenBucketAlgorithm.algorithm,
    config,
    rule: bind(TokenBucketAlgorithm.algorithm, config),
    // a rate of 0 never refills: its window is infinite
    quota: { limit: config.capacity, windowMillis: (config.capacity / config.tokens) * config.periodMillis }
  }, options)

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
 * @since 0.1.0
 * @category constructors
 */
export const gcra = (options: GcraOptions): Policy => {
  const decoded = decode(GcraOptions, options)
  if (Result.isFailure(decoded)) return decoded.failure
  const o = decoded.success
  const rate = perRate(o.rate, o.rate.count)
  const config = GcraAlgorithm.config({ maxBurst: o.maxBurst ?? 0, count: rate.count, periodMillis: rate.per })
  return make<Gcra>({
    _tag: "Gcra",
    algorithm: GcraAlgorithm.algorithm,
    config,
    rule: bind(GcraAlgorithm.algorithm, config),
    quota: { limit: config.limit, windowMillis: (config.limit / rate.count) * rate.per }
  }, o)
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
 * @since 0.1.0
 * @category constructors
 */
export const leakyBucket = (options: LeakyBucketOptions): Policy => {
  const decoded = decode(LeakyBucketOptions, options)
  if (Result.isFailure(decoded)) return decoded.failure
  const o = decoded.success
  const rate = perRate(o.rate, o.rate.tokens)
  // GCRA as a shaper: the same meter, its admissions delayed beyond `delay` units
  const config = GcraAlgorithm.config({
    count: rate.count,
    periodMillis: rate.per,
    maxBurst: o.burst ?? 0,
    delay: o.nodelay === true ? Infinity : o.delay ?? 0
  })
  return make<LeakyBucket>({
    _tag: "LeakyBucket",
    algorithm: GcraAlgorithm.algorithm,
    config,
    rule: bind(GcraAlgorithm.algorithm, config),
    quota: { limit: config.limit, windowMillis: (config.limit / rate.count) * rate.per }
  }, o)
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
 * @since 0.1.0
 * @category constructors
 */
export const fixedWindow = (options: FixedWindowOptions): Policy => {
  const decoded = decode(FixedWindowOptions, options)
  if (Result.isFailure(decoded)) return decoded.failure
  const o = decoded.success
  const config = FixedWindowAlgorithm.config({
    limit: o.limit,
    windowMillis: o.window,
    align: o.aligned,
    countBlocked: o.countBlocked,
    execEvenly: o.execEvenly,
    minDelay: o.execEvenlyMinDelay
  })
  return make<FixedWindow>({
    _tag: "FixedWindow",
    algorithm: FixedWindowAlgorithm.algorithm,
    config,
    rule: bind(FixedWindowAlgorithm.algorithm, config),
    quota: { limit: o.limit, windowMillis: o.window }
  }, o)
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
 * @since 0.1.0
 * @category constructors
 */
export const slidingWindow = (options: SlidingWindowOptions): Policy => {
  const decoded = decode(SlidingWindowOptions, options)
  if (Result.isFailure(decoded)) return decoded.failure
  const o = decoded.success
  const config = SlidingWindowAlgorithm.config({ limit: o.limit, windowMillis: o.window })
  return make<SlidingWindow>({
    _tag: "SlidingWindow",
    algorithm: SlidingWindowAlgorithm.algorithm,
    config,
    rule: bind(SlidingWindowAlgorithm.algorithm, config),
    quota: { limit: o.limit, windowMillis: config.windowMillis }
  }, o)
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
 * @since 0.1.0
 * @category constructors
 */
export const slidingLog = (options: SlidingLogOptions): Policy => {
  const decoded = decode(SlidingLogOptions, options)
  if (Result.isFailure(decoded)) return decoded.failure
  const o = decoded.success
  const config = SlidingLogAlgorithm.config({
    limit: o.limit,
    windowMillis: o.window,
    minGap: o.minGap ?? 0,
    countBlocked: o.countBlocked
  })
  return make<SlidingLog>({
    _tag: "SlidingLog",
    algorithm: SlidingLogAlgorithm.algorithm,
    config,
    rule: bind(SlidingLogAlgorithm.algorithm, config),
    quota: { limit: o.limit, windowMillis: o.window }
  }, o)
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
 * @since 0.1.0
 * @category constructors
 */
export const smooth = (options: SmoothOptions): Policy => {
  const decoded = decode(SmoothOptions, options)
  if (Result.isFailure(decoded)) return decoded.failure
  const o = decoded.success
  return smoothOf(smoothConfig(o), o)
}

const smoothOf = (config: WarmUpAlgorithm.Config, options: Parameters<typeof make>[1]): Smooth =>
  make<Smooth>({
    _tag: "Smooth",
    algorithm: WarmUpAlgorithm.algorithm,
    config,
    rule: bind(WarmUpAlgorithm.algorithm, config),
    quota: { limit: config.permits, windowMillis: config.periodMillis }
  }, options)

/**
 * Whether the value is a `Policy` (valid or not).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * Policy.isPolicy(Policy.fixedWindow({ limit: 1, window: "1 second" })) // true
 * Policy.isPolicy({ capacity: 5 }) // false
 * ```
 *
 * @since 0.1.0
 * @category guards
 */
export const isPolicy = (u: unknown): u is Policy =>
  Predicate.hasProperty(u, "_tag") && Predicate.hasProperty(u, "error") &&
  (u._tag === "Invalid" || (Predicate.hasProperty(u, "algorithm") && Predicate.hasProperty(u, "config")))

const PolicyValue = Schema.declare(isPolicy, { message: "must be a Policy" })
const Parts = Schema.Array(PolicyValue).check(atLeastOnePart)

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
 * @since 0.1.0
 * @category constructors
 */
export const all = (...parts: ReadonlyArray<Policy>): Policy => {
  const decoded = decode(Parts, parts, "all")
  if (Result.isFailure(decoded)) return decoded.failure
  const valid: Array<Valid> = []
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]
    if (part._tag === "Invalid") {
      return {
        _tag: "Invalid",
        error: new InvalidPolicy({ ...part.error, field: `all[${i}].${part.error.field}` })
      }
    }
    valid.push(part)
  }
  const config = CompositeAlgorithm.config(valid.map((p) => ({ algorithm: p.algorithm, config: p.config })))
  // The headline quota is the one that allows the least per unit of time.
  const quota = valid.map((p) => p.quota).reduce((a, b) => a.limit / a.windowMillis <= b.limit / b.windowMillis ? a : b)
  return make<All>({
    _tag: "All",
    algorithm: CompositeAlgorithm.algorithm,
    config,
    rule: bind(CompositeAlgorithm.algorithm, config),
    parts: valid,
    quota
  }, {})
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
 * @since 0.1.0
 * @category constructors
 */
export const concurrency = (options: ConcurrencyOptions): Policy => {
  const decoded = decode(ConcurrencyOptions, options)
  if (Result.isFailure(decoded)) return decoded.failure
  const o = decoded.success
  const rate = o.replenish === undefined ? undefined : perRate(o.replenish, o.replenish.tokens)
  const refill = rate === undefined ? undefined : { tokens: rate.count, periodMillis: rate.per }
  const config = ConcurrencyAlgorithm.config({ capacity: o.capacity, replenish: refill })
  return make<Concurrency>({
    _tag: "Concurrency",
    algorithm: ConcurrencyAlgorithm.algorithm,
    config,
    rule: bind(ConcurrencyAlgorithm.algorithm, config),
    quota: { limit: o.capacity, windowMillis: refill === undefined ? 1000 : refill.periodMillis }
  }, o)
}

/**
 * A base limit with a burst allowance beside it, as rate-limiter-flexible's
 * `BurstyRateLimiter` (`RateLimiterBurst`): a request is admitted by `base`
 * if it can be, else by `burst`, else it is denied; only the limit that
 * admits it takes its cost. The decision counts both (`remaining` and
 * `limit` are the two added up).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * // 10 per second, and up to 20 more per minute when that is not enough
 * const policy = Policy.burst(
 *   Policy.fixedWindow({ limit: 10, window: "1 second" }),
 *   Policy.fixedWindow({ limit: 20, window: "1 minute" })
 * )
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const burst = (base: Policy, burst: Policy): Policy => {
  for (const [field, part] of [["base", base], ["burst", burst]] as const) {
    if (!isPolicy(part)) {
      return { _tag: "Invalid", error: new InvalidPolicy({ field, value: typeof part, reason: "must be a Policy" }) }
    }
    if (part._tag === "Invalid") {
      return { _tag: "Invalid", error: new InvalidPolicy({ ...part.error, field: `${field}.${part.error.field}` }) }
    }
  }
  const b = base as Valid
  const x = burst as Valid
  const config = BurstAlgorithm.config(
    { algorithm: b.algorithm, config: b.config },
    { algorithm: x.algorithm, config: x.config }
  )
  return make<Burst>({
    _tag: "Burst",
    algorithm: BurstAlgorithm.algorithm,
    config,
    rule: bind(BurstAlgorithm.algorithm, config),
    base: b,
    burst: x,
    quota: { limit: b.quota.limit + x.quota.limit, windowMillis: b.quota.windowMillis }
  }, {})
}

/**
 * No limit at all (x/time/rate's `rate.Inf`): every request is admitted at
 * once, whatever its cost; `remaining` and `limit` are `Infinity`.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const internal = Policy.unlimited()
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const unlimited = (): Policy =>
  make<Unlimited>({
    _tag: "Unlimited",
    algorithm: UnlimitedAlgorithm.algorithm,
    config: UnlimitedAlgorithm.config,
    rule: bind(UnlimitedAlgorithm.algorithm, UnlimitedAlgorithm.config),
    quota: { limit: Infinity, windowMillis: 1000 }
  }, {})

/**
 * The same policy with the {@link CommonOptions} set: the way to give
 * `dryRun` or `blockDuration` to `Policy.all` and `Policy.burst` (the
 * others take them among their own options). Only the options of the
 * policy a key runs count, not those of its parts.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const both = Policy.all(
 *   Policy.fixedWindow({ limit: 10, window: "1 second" }),
 *   Policy.fixedWindow({ limit: 100, window: "1 minute" })
 * )
 * const trial = Policy.withOptions(both, { dryRun: true })
 * ```
 *
 * @since 0.2.0
 * @category combinators
 */
export const withOptions = (policy: Policy, options: CommonOptions): Policy => {
  if (!isPolicy(policy)) {
    return {
      _tag: "Invalid",
      error: new InvalidPolicy({ field: "policy", value: typeof policy, reason: "must be a Policy" })
    }
  }
  if (policy._tag === "Invalid") return policy
  const decoded = decode(CommonOptions, options)
  if (Result.isFailure(decoded)) return decoded.failure
  const o = decoded.success
  return Object.freeze({
    ...policy,
    dryRun: o.dryRun ?? policy.dryRun,
    blockMillis: o.blockDuration ?? policy.blockMillis
  })
}

/**
 * An adaptive rate (AIMD): a token bucket of `capacity` whose refill rate
 * starts at `rate` and moves, for each key on its own, with what upstream
 * says (`RateLimiter.feedback`): `"ok"` adds `increase`, `"throttled"`
 * multiplies by `decrease` (at most once per `rate.per`; with a
 * `retryAfter`, nothing is admitted before it), always between `floor` and
 * `ceiling`. Each signal is applied in the key's order, as an in-band
 * reconfiguration: waiters are re-timed at the new rate.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * // start at 100 per second; back off by half on a 429, creep up by 10 per second on success
 * const upstream = Policy.adaptive({
 *   capacity: 10,
 *   rate: { tokens: 100, per: "1 second" },
 *   floor: 5,
 *   ceiling: 1000,
 *   increase: 10
 * })
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const adaptive = (options: AdaptiveOptions): Policy => {
  const decoded = decode(AdaptiveOptions, options)
  if (Result.isFailure(decoded)) return decoded.failure
  const o = decoded.success
  const rate = perRate(o.rate, o.rate.tokens)
  const config = AdaptiveAlgorithm.config({
    capacity: o.capacity,
    periodMillis: rate.per,
    initial: rate.count,
    floor: o.floor,
    ceiling: o.ceiling,
    increase: o.increase,
    decrease: o.decrease,
    latencyMillis: o.latency
  })
  return make<Adaptive>({
    _tag: "Adaptive",
    algorithm: AdaptiveAlgorithm.algorithm,
    config,
    rule: bind(AdaptiveAlgorithm.algorithm, config),
    quota: { limit: o.capacity, windowMillis: (o.capacity / rate.count) * rate.per }
  }, o)
}

/**
 * The policy at another rate, for `RateLimiter.setRate`: a smooth policy at
 * `perSecond` permits per second (Guava's `setRate`), or a token bucket
 * refilled at `perSecond` tokens per second, its capacity unchanged
 * (x/time/rate's `SetLimit`; 0 stops the refill). Every other policy has no
 * one rate to set, and answers `Invalid`.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 *
 * const slow = Policy.smooth({ permits: 5, per: "1 second", warmup: "4 seconds" })
 * if (slow._tag !== "Invalid") Policy.withRate(slow, 10) // 10 per second, the same warm-up
 * ```
 *
 * @since 0.2.0
 * @category combinators
 */
export const withRate = (policy: Valid, perSecond: number): Policy => {
  const bad = (reason: string): Invalid => ({
    _tag: "Invalid",
    error: new InvalidPolicy({ field: "rate", value: String(perSecond), reason })
  })
  const kept = { dryRun: policy.dryRun, blockDuration: policy.blockMillis > 0 ? policy.blockMillis : undefined }
  switch (policy._tag) {
    case "TokenBucket": {
      if (!(Number.isFinite(perSecond) && perSecond >= 0)) return bad("must be a finite number >= 0")
      return tokenBucketOf(TokenBucketAlgorithm.rate.withRate(policy.config, perSecond, 1000), kept)
    }
    case "Smooth": {
      if (!(Number.isFinite(perSecond) && perSecond > 0)) return bad("must be a positive finite number")
      return smoothOf(WarmUpAlgorithm.rate.withRate(policy.config, perSecond, 1000), kept)
    }
    default:
      return bad(
        `${policy.rule.name} has no one rate to set: setRate changes a smooth policy (Guava) or a token bucket (x/time/rate); reconfigure changes any policy`
      )
  }
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
 * @since 0.1.0
 * @category constructors
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
 * @since 0.1.0
 * @category combinators
 */
export const share = (policy: Valid, fraction: number): Valid => {
  if (fraction === 1) return policy
  const scaled = scale(policy, fraction)
  if (scaled._tag === "Invalid") return policy
  // the policy's own options go with it
  const kept = withOptions(scaled, {
    dryRun: policy.dryRun,
    blockDuration: policy.blockMillis > 0 ? policy.blockMillis : undefined
  })
  return kept._tag === "Invalid" ? scaled : kept
}

const scale = (p: Valid, f: number): Policy => {
  switch (p._tag) {
    case "TokenBucket":
      return tokenBucket({
        capacity: p.capacity * f,
        refill: { tokens: p.refill.tokens * f, per: p.refill.per },
        initialTokens: p.config.adaptive ? undefined : p.initialTokens * f,
        mode: p.config.interval ? "interval" : "greedy",
        aligned: p.config.aligned && p.config.floor === -Infinity,
        firstRefill: p.config.floor === -Infinity ? undefined : p.config.origin,
        adaptiveInitialTokens: p.config.adaptive
      })
    case "Gcra":
      return gcra({
        rate: { count: p.config.count * f, per: p.config.periodMillis },
        maxBurst: Math.max(0, p.config.limit * f - 1)
      })
    case "LeakyBucket":
      return leakyBucket({
        rate: { tokens: p.config.count * f, per: p.config.periodMillis },
        burst: p.config.maxBurst * f,
        delay: p.config.delay === Infinity ? undefined : p.config.delay * f,
        nodelay: p.config.delay === Infinity
      })
    case "FixedWindow":
      return fixedWindow({
        limit: Math.max(1, Math.floor(p.config.limit * f)),
        window: p.config.windowMillis,
        aligned: p.config.align,
        countBlocked: p.config.countBlocked,
        execEvenly: p.config.execEvenly,
        // a least delay of the policy's own is a time, kept as `minGap` is; the
        // default (`window / limit`) is the share's own. One given equal to the
        // default cannot be told from it, and goes with the share's limit.
        execEvenlyMinDelay: p.config.minDelay !== Math.ceil(p.config.windowMillis / p.config.limit)
          ? p.config.minDelay
          : undefined
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
    case "Adaptive":
      return adaptive({
        capacity: p.config.capacity * f,
        rate: { tokens: p.config.initial * f, per: p.config.periodMillis },
        floor: p.config.floor * f,
        ceiling: p.config.ceiling * f,
        increase: p.config.increase * f,
        decrease: p.config.decrease,
        latency: p.config.latencyMillis === Infinity ? undefined : p.config.latencyMillis
      })
    case "Burst":
      return burst(share(p.base, f), share(p.burst, f))
    case "Smooth": {
      // a fraction of the rate; the store (idle time, or the warm-up's
      // permits) scales with it, and so does an initialPermits of the
      // policy's own
      const c = p.config
      const next = WarmUpAlgorithm.rate.withRate(c, c.permits * f, c.periodMillis)
      const own = c.initialPermits !== (c.warmupMillis > 0 ? c.maxPermits : 0)
      return smoothOf(own ? { ...next, initialPermits: Math.min(c.initialPermits * f, next.maxPermits) } : next, {})
    }
    case "Unlimited":
      return p
  }
}
