/**
 * Policies as configuration: a JSON object per policy, told apart by `kind`.
 * Each kind is one member of the {@link PolicySpec} union, with its own
 * schema and its own constructor; a new algorithm is a new member.
 *
 * ```json
 * { "kind": "tokenBucket", "capacity": 100, "refill": { "tokens": 10, "per": "1 second" } }
 * ```
 *
 * @since 0.1.0
 */
import { type Duration, Schema } from "effect"
import * as Policy from "../Policy.ts"

const Positive = Schema.Finite.check(Schema.isGreaterThan(0))
const NonNegative = Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0))

/**
 * A duration: a string such as `"1 second"`, `"500 millis"`, `"1 hour"`, or a
 * number of milliseconds. Checked for sense by the policy constructors.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { PolicySpec } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(PolicySpec.DurationInput)("1 second")
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const DurationInput = Schema.Union([Schema.NonEmptyString, Positive]).annotate({
  expected: "a duration such as \"1 second\" or a number of milliseconds"
})

/**
 * A token bucket: `capacity` tokens, refilled continuously at `refill.tokens`
 * per `refill.per`; starts full unless `initialTokens` says otherwise.
 *
 * @example
 * ```ts
 * import { type Duration, Schema } from "effect"
 * import { PolicySpec } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(PolicySpec.TokenBucket)({
 *   kind: "tokenBucket", capacity: 100, refill: { tokens: 10, per: "1 second" }
 * })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const TokenBucket = Schema.Struct({
  kind: Schema.Literal("tokenBucket"),
  capacity: Positive,
  refill: Schema.Struct({ tokens: Positive, per: DurationInput }),
  initialTokens: Schema.optionalKey(NonNegative),
  mode: Schema.optionalKey(Schema.Literals(["greedy", "interval"])),
  aligned: Schema.optionalKey(Schema.Boolean)
})

/**
 * GCRA (redis-cell): `rate.count` per `rate.per`, bursts of `maxBurst`.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { PolicySpec } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(PolicySpec.Gcra)({ kind: "gcra", rate: { count: 30, per: "1 minute" }, maxBurst: 15 })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const Gcra = Schema.Struct({
  kind: Schema.Literal("gcra"),
  rate: Schema.Struct({ count: Positive, per: DurationInput }),
  maxBurst: Schema.optionalKey(NonNegative)
})

/**
 * A leaky bucket shaper (nginx `limit_req`).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { PolicySpec } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(PolicySpec.LeakyBucket)({ kind: "leakyBucket", rate: { tokens: 10, per: "1 second" }, burst: 20 })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const LeakyBucket = Schema.Struct({
  kind: Schema.Literal("leakyBucket"),
  rate: Schema.Struct({ tokens: Positive, per: DurationInput }),
  burst: Schema.optionalKey(NonNegative),
  delay: Schema.optionalKey(NonNegative),
  nodelay: Schema.optionalKey(Schema.Boolean)
})

/**
 * A fixed window counter.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { PolicySpec } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(PolicySpec.FixedWindow)({ kind: "fixedWindow", limit: 100, window: "1 minute" })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const FixedWindow = Schema.Struct({
  kind: Schema.Literal("fixedWindow"),
  limit: Positive,
  window: DurationInput,
  aligned: Schema.optionalKey(Schema.Boolean)
})

/**
 * A sliding window counter.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { PolicySpec } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(PolicySpec.SlidingWindow)({ kind: "slidingWindow", limit: 100, window: "1 minute" })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const SlidingWindow = Schema.Struct({
  kind: Schema.Literal("slidingWindow"),
  limit: Positive,
  window: DurationInput
})

/**
 * An exact sliding log.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { PolicySpec } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(PolicySpec.SlidingLog)({ kind: "slidingLog", limit: 5, window: "15 minutes", countBlocked: true })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const SlidingLog = Schema.Struct({
  kind: Schema.Literal("slidingLog"),
  limit: Positive,
  window: DurationInput,
  minGap: Schema.optionalKey(DurationInput),
  countBlocked: Schema.optionalKey(Schema.Boolean)
})

/**
 * A smooth rate with or without warm-up (Guava).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { PolicySpec } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(PolicySpec.Smooth)({ kind: "smooth", permits: 100, per: "1 second", warmup: "10 seconds" })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const Smooth = Schema.Struct({
  kind: Schema.Literal("smooth"),
  permits: Positive,
  per: DurationInput,
  warmup: Schema.optionalKey(DurationInput),
  coldFactor: Schema.optionalKey(Positive),
  maxBurst: Schema.optionalKey(DurationInput),
  initialPermits: Schema.optionalKey(NonNegative)
})

/**
 * A concurrency limit (units come back through release).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { PolicySpec } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(PolicySpec.Concurrency)({ kind: "concurrency", capacity: 10 })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const Concurrency = Schema.Struct({
  kind: Schema.Literal("concurrency"),
  capacity: Positive,
  replenish: Schema.optionalKey(Schema.Struct({ tokens: Positive, per: DurationInput }))
})

/**
 * Several limits on one key, all of which must admit.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { PolicySpec } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(PolicySpec.All)({
 *   kind: "all",
 *   parts: [
 *     { kind: "tokenBucket", capacity: 100, refill: { tokens: 100, per: "1 minute" } },
 *     { kind: "tokenBucket", capacity: 1000, refill: { tokens: 1000, per: "1 hour" } }
 *   ]
 * })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const All = Schema.Struct({
  kind: Schema.Literal("all"),
  parts: Schema.Array(Schema.Union([TokenBucket, Gcra, LeakyBucket, FixedWindow, SlidingWindow, SlidingLog, Smooth]))
    .check(Schema.isMinLength(1))
})

/**
 * The kinds of policy a configuration can name.
 *
 * @example
 * ```ts
 * import { PolicySpec } from "tollgate/server"
 *
 * PolicySpec.kinds.includes("gcra") // true
 * ```
 *
 * @category constants
 * @since 0.1.0
 */
export const kinds = [
  "tokenBucket",
  "gcra",
  "leakyBucket",
  "fixedWindow",
  "slidingWindow",
  "slidingLog",
  "smooth",
  "concurrency",
  "all"
] as const

/**
 * Any policy, as configuration.
 *
 * @example
 * ```ts
 * import { type Duration, Schema } from "effect"
 * import { PolicySpec } from "tollgate/server"
 *
 * const spec = Schema.decodeUnknownSync(PolicySpec.PolicySpec)({
 *   kind: "tokenBucket", capacity: 5, refill: { tokens: 1, per: "2 seconds" }
 * })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const PolicySpec = Schema.Union([
  TokenBucket,
  Gcra,
  LeakyBucket,
  FixedWindow,
  SlidingWindow,
  SlidingLog,
  Smooth,
  Concurrency,
  All
]).annotate({
  expected: `a policy object whose "kind" is one of ${kinds.map((k) => JSON.stringify(k)).join(", ")}`
})

/**
 * Any policy, as configuration.
 *
 * @example
 * ```ts
 * import type { PolicySpec } from "tollgate/server"
 *
 * const spec: PolicySpec.PolicySpec = { kind: "tokenBucket", capacity: 5, refill: { tokens: 1, per: "1 second" } }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type PolicySpec = typeof PolicySpec.Type

/**
 * The policy a spec describes, validated by the policy's own constructor (an
 * `Invalid` policy names the field inside the spec that is wrong).
 *
 * @example
 * ```ts
 * import { PolicySpec } from "tollgate/server"
 *
 * const policy = PolicySpec.toPolicy({ kind: "tokenBucket", capacity: 5, refill: { tokens: 1, per: "2 seconds" } })
 * ```
 *
 * @category conversions
 * @since 0.1.0
 */
export const toPolicy = (spec: PolicySpec): Policy.Policy => {
  const d = (input: string | number): Duration.Input => input as Duration.Input
  const opt = (input: string | number | undefined): Duration.Input | undefined =>
    input === undefined ? undefined : d(input)
  switch (spec.kind) {
    case "tokenBucket":
      return Policy.tokenBucket({
        capacity: spec.capacity,
        refill: { tokens: spec.refill.tokens, per: d(spec.refill.per) },
        initialTokens: spec.initialTokens,
        mode: spec.mode,
        aligned: spec.aligned
      })
    case "gcra":
      return Policy.gcra({ rate: { count: spec.rate.count, per: d(spec.rate.per) }, maxBurst: spec.maxBurst })
    case "leakyBucket":
      return Policy.leakyBucket({
        rate: { tokens: spec.rate.tokens, per: d(spec.rate.per) },
        burst: spec.burst,
        delay: spec.delay,
        nodelay: spec.nodelay
      })
    case "fixedWindow":
      return Policy.fixedWindow({ limit: spec.limit, window: d(spec.window), aligned: spec.aligned })
    case "slidingWindow":
      return Policy.slidingWindow({ limit: spec.limit, window: d(spec.window) })
    case "slidingLog":
      return Policy.slidingLog({
        limit: spec.limit,
        window: d(spec.window),
        minGap: opt(spec.minGap),
        countBlocked: spec.countBlocked
      })
    case "smooth":
      return Policy.smooth({
        permits: spec.permits,
        per: d(spec.per),
        warmup: opt(spec.warmup),
        coldFactor: spec.coldFactor,
        maxBurst: opt(spec.maxBurst),
        initialPermits: spec.initialPermits
      })
    case "concurrency":
      return Policy.concurrency({
        capacity: spec.capacity,
        replenish: spec.replenish === undefined
          ? undefined
          : { tokens: spec.replenish.tokens, per: d(spec.replenish.per) }
      })
    case "all":
      return Policy.all(...spec.parts.map((part) => toPolicy(part)))
  }
}
