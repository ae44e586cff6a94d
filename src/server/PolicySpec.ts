/**
 * Policies as configuration: a JSON object per policy, told apart by `kind`.
 * Each kind is one member of the {@link PolicySpec} union: the policy's own
 * options schema (`Policy.TokenBucketOptions`, ...) with its `kind` added, so
 * a configuration is checked by exactly the rules, and with the messages, of
 * the `Policy.*` constructor it is built with. A new algorithm is a new
 * member.
 *
 * ```json
 * { "kind": "tokenBucket", "capacity": 100, "refill": { "tokens": 10, "per": "1 second" } }
 * ```
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import * as Policy from "../Policy.ts"

// A policy's options schema with its `kind` added: the policy's own checks
// read only its own fields, so they hold for the larger struct as well.
const withKind = <const Kind extends string, Fields extends Schema.Struct.Fields>(
  kind: Kind,
  options: Schema.Struct<Fields>
) => options.mapFields((fields) => ({ kind: Schema.Literal(kind), ...fields }), { unsafePreserveChecks: true })

/**
 * A duration in the service's own settings (not in a policy, whose durations
 * are `Policy.PositiveDuration`): a string such as `"1 second"`, `"500
 * millis"`, `"1 hour"`, or a number of milliseconds, checked for sense where
 * it is read.
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
export const DurationInput = Schema.Union([
  Schema.NonEmptyString,
  Schema.Finite.check(Schema.isGreaterThan(0))
]).annotate({
  expected: "a duration such as \"1 second\" or a number of milliseconds"
})

/**
 * A token bucket: `capacity` tokens, refilled continuously at `refill.tokens`
 * per `refill.per`; starts full unless `initialTokens` says otherwise.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
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
export const TokenBucket = withKind("tokenBucket", Policy.TokenBucketOptions)

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
export const Gcra = withKind("gcra", Policy.GcraOptions)

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
export const LeakyBucket = withKind("leakyBucket", Policy.LeakyBucketOptions)

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
export const FixedWindow = withKind("fixedWindow", Policy.FixedWindowOptions)

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
export const SlidingWindow = withKind("slidingWindow", Policy.SlidingWindowOptions)

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
export const SlidingLog = withKind("slidingLog", Policy.SlidingLogOptions)

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
export const Smooth = withKind("smooth", Policy.SmoothOptions)

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
export const Concurrency = withKind("concurrency", Policy.ConcurrencyOptions)

/**
 * An adaptive rate (AIMD between a floor and a ceiling), moved by
 * `POST /v1/feedback`.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { PolicySpec } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(PolicySpec.Adaptive)({
 *   kind: "adaptive", capacity: 10, rate: { tokens: 100, per: "1 second" }, floor: 5, ceiling: 1000
 * })
 * ```
 *
 * @category schemas
 * @since 0.2.0
 */
export const Adaptive = withKind("adaptive", Policy.AdaptiveOptions)

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
    .check(Policy.atLeastOnePart)
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
  "all",
  "adaptive"
] as const

/**
 * Any policy, as configuration.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
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
  All,
  Adaptive
]).annotate({
  expected: `a policy object whose "kind" is one of ${kinds.map((k) => JSON.stringify(k)).join(", ")}`
})

/**
 * Any policy, as configuration (as written: durations as strings or milliseconds).
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
export type PolicySpec = typeof PolicySpec.Encoded

/**
 * The policy a spec describes, built by the policy's own constructor (with
 * the same schema, so a spec that decoded builds a valid policy; an
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
  switch (spec.kind) {
    case "tokenBucket":
      return Policy.tokenBucket(spec)
    case "gcra":
      return Policy.gcra(spec)
    case "leakyBucket":
      return Policy.leakyBucket(spec)
    case "fixedWindow":
      return Policy.fixedWindow(spec)
    case "slidingWindow":
      return Policy.slidingWindow(spec)
    case "slidingLog":
      return Policy.slidingLog(spec)
    case "smooth":
      return Policy.smooth(spec)
    case "concurrency":
      return Policy.concurrency(spec)
    case "all":
      return Policy.all(...spec.parts.map(toPolicy))
    case "adaptive":
      return Policy.adaptive(spec)
  }
}
