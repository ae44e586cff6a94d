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
 * @since 0.1.0
 */
export const TokenBucket = Schema.Struct({
  kind: Schema.Literal("tokenBucket"),
  capacity: Positive,
  refill: Schema.Struct({ tokens: Positive, per: DurationInput }),
  initialTokens: Schema.optionalKey(Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0)))
})

/**
 * The kinds of policy a configuration can name.
 *
 * @example
 * ```ts
 * import { PolicySpec } from "tollgate/server"
 *
 * PolicySpec.kinds // ["tokenBucket"]
 * ```
 *
 * @since 0.1.0
 */
export const kinds = ["tokenBucket"] as const

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
 * @since 0.1.0
 */
export const PolicySpec = Schema.Union([TokenBucket]).annotate({
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
 * @since 0.1.0
 */
export const toPolicy = (spec: PolicySpec): Policy.Policy => {
  switch (spec.kind) {
    case "tokenBucket":
      return Policy.tokenBucket({
        capacity: spec.capacity,
        refill: { tokens: spec.refill.tokens, per: spec.refill.per as Duration.Input },
        initialTokens: spec.initialTokens
      })
  }
}
