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
import type { Algorithm } from "./algorithm/Algorithm.ts"
import * as TokenBucketAlgorithm from "./algorithm/TokenBucket.ts"
import { InvalidPolicy } from "./Errors.ts"

/**
 * A token bucket policy: `capacity` tokens, refilled continuously at
 * `refill.tokens` per `refill.per`.
 *
 * @since 0.1.0
 */
export interface TokenBucket {
  readonly _tag: "TokenBucket"
  readonly capacity: number
  readonly refill: { readonly tokens: number; readonly per: Duration.Duration }
  readonly initialTokens: number
  readonly algorithm: Algorithm<TokenBucketAlgorithm.Config, TokenBucketAlgorithm.State>
  readonly config: TokenBucketAlgorithm.Config
  readonly error: undefined
}

/**
 * A policy whose options did not validate.
 *
 * @since 0.1.0
 */
export interface Invalid {
  readonly _tag: "Invalid"
  readonly error: InvalidPolicy
}

/**
 * Any policy.
 *
 * @since 0.1.0
 */
export type Policy = TokenBucket | Invalid

/**
 * A policy that validated.
 *
 * @since 0.1.0
 */
export type Valid = Exclude<Policy, Invalid>

/**
 * Options of {@link tokenBucket}.
 *
 * @since 0.1.0
 */
export interface TokenBucketOptions {
  /** Most tokens the bucket holds: the largest burst. A positive finite number. */
  readonly capacity: number
  /** `tokens` are added every `per`, continuously (0.5 per second and 1000 per hour both work). */
  readonly refill: { readonly tokens: number; readonly per: Duration.Input }
  /** Tokens a new key starts with; defaults to `capacity` (the bucket starts full). */
  readonly initialTokens?: number | undefined
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
 * @since 0.1.0
 */
export const tokenBucket = (options: TokenBucketOptions): Policy => {
  const { capacity, initialTokens, refill } = options ?? {}
  if (!isPositiveFinite(capacity)) return invalid("capacity", capacity, "must be a positive finite number")
  if (refill === undefined || refill === null) return invalid("refill", refill, "is required")
  if (!isPositiveFinite(refill.tokens)) {
    return invalid("refill.tokens", refill.tokens, "must be a positive finite number")
  }
  const periodMillis = positiveMillis(refill.per)
  if (periodMillis === undefined) {
    return invalid("refill.per", refill.per, "must be a positive finite duration such as \"1 second\"")
  }
  if (
    initialTokens !== undefined &&
    !(Predicate.isNumber(initialTokens) && Number.isFinite(initialTokens) && initialTokens >= 0)
  ) {
    return invalid("initialTokens", initialTokens, "must be a finite number >= 0")
  }
  if (initialTokens !== undefined && initialTokens > capacity) {
    return invalid("initialTokens", initialTokens, `must not exceed capacity (${capacity})`)
  }
  if (!Number.isFinite(capacity * periodMillis)) {
    return invalid("capacity", capacity, "capacity * refill.per overflows")
  }
  const config = TokenBucketAlgorithm.config({ capacity, tokens: refill.tokens, periodMillis, initialTokens })
  return Object.freeze({
    _tag: "TokenBucket",
    capacity,
    refill: Object.freeze({ tokens: refill.tokens, per: Duration.millis(periodMillis) }),
    initialTokens: config.initialTokens,
    algorithm: TokenBucketAlgorithm.algorithm,
    config,
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
 * @since 0.1.0
 */
export const share = (policy: Valid, fraction: number): Valid => {
  if (fraction === 1) return policy
  switch (policy._tag) {
    case "TokenBucket": {
      const shared = tokenBucket({
        capacity: policy.capacity * fraction,
        refill: { tokens: policy.refill.tokens * fraction, per: policy.refill.per },
        initialTokens: policy.initialTokens * fraction
      })
      return shared._tag === "Invalid" ? policy : shared
    }
  }
}

/**
 * Whether the value is a `Policy` (valid or not).
 *
 * @since 0.1.0
 */
export const isPolicy = (u: unknown): u is Policy =>
  Predicate.hasProperty(u, "_tag") && (u._tag === "TokenBucket" || u._tag === "Invalid")
