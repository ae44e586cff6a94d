/**
 * The HTTP header fields that tell a client about its rate limit, in the
 * syntax of the IETF draft (draft-ietf-httpapi-ratelimit-headers):
 *
 * - `RateLimit-Policy: "default";q=100;w=10`: the policy's quota `q` (a token
 *   bucket's capacity) and window `w` in seconds (the time a token bucket
 *   takes to refill from empty to full);
 * - `RateLimit: "default";r=42;t=3`: the units `r` the client has left now and
 *   the seconds `t` until its quota is back to full;
 * - `Retry-After: 2` on a denial: whole seconds until the request could succeed.
 *
 * The draft's fields are structured fields (RFC 9651). Clients written against
 * earlier drafts (including effect's `HttpClient.withRateLimiter`) read the
 * separate `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`
 * fields instead; {@link make} writes them too when `legacy` is on.
 *
 * @since 0.1.0
 */
import { Duration, Predicate } from "effect"
import type { Decision } from "../Decision.ts"
import { InvalidPolicy } from "../Errors.ts"
import type * as Policy from "../Policy.ts"

/**
 * What `RateLimit-Policy` says about a policy.
 *
 * @example
 * ```ts
 * import type { RateLimitHeaders } from "tollgate/http"
 *
 * const quota: RateLimitHeaders.Quota = { name: "api", limit: 100, windowSeconds: 10 }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Quota {
  /** The policy's name, written as a structured-field string. */
  readonly name: string
  /** The quota `q`: the most units a client can spend at once. */
  readonly limit: number
  /** The window `w` in seconds, when the policy has one. */
  readonly windowSeconds?: number | undefined
}

/**
 * The header names tollgate writes, lower-cased as effect's `Headers` keep them.
 *
 * @example
 * ```ts
 * import { RateLimitHeaders } from "tollgate/http"
 *
 * RateLimitHeaders.names.rateLimit // "ratelimit"
 * ```
 *
 * @category constants
 * @since 0.1.0
 */
export const names = {
  rateLimit: "ratelimit",
  rateLimitPolicy: "ratelimit-policy",
  retryAfter: "retry-after",
  legacyLimit: "ratelimit-limit",
  legacyRemaining: "ratelimit-remaining",
  legacyReset: "ratelimit-reset"
} as const

const isPrintableAscii = (s: string): boolean => /^[\x20-\x7e]*$/.test(s)

/**
 * Checks that a policy name can be written as a structured-field string
 * (printable ASCII, at most 64 characters, not empty).
 *
 * @example
 * ```ts
 * import { RateLimitHeaders } from "tollgate/http"
 *
 * RateLimitHeaders.checkName("per-ip") // undefined: fine
 * RateLimitHeaders.checkName("naïve") // InvalidPolicy { field: "name", ... }
 * ```
 *
 * @category validation
 * @since 0.1.0
 */
export const checkName = (name: unknown, field = "name"): InvalidPolicy | undefined =>
  Predicate.isString(name) && name.length > 0 && name.length <= 64 && isPrintableAscii(name)
    ? undefined
    : new InvalidPolicy({
      field,
      value: Predicate.isString(name) ? JSON.stringify(name.slice(0, 64)) : typeof name,
      reason: "must be 1 to 64 printable ASCII characters"
    })

/**
 * Writes a structured-field string: double quotes, with `\` and `"` escaped.
 *
 * @example
 * ```ts
 * import { RateLimitHeaders } from "tollgate/http"
 *
 * RateLimitHeaders.sfString("default") // "\"default\""
 * ```
 *
 * @category formatting
 * @since 0.1.0
 */
export const sfString = (s: string): string =>
  s.includes("\\") || s.includes("\"") ? `"${s.replace(/[\\"]/g, (c) => `\\${c}`)}"` : `"${s}"`

const MAX_SF_INTEGER = 999_999_999_999_999

const sfInteger = (n: number): number =>
  Number.isFinite(n) ? Math.min(MAX_SF_INTEGER, Math.max(0, Math.floor(n))) : MAX_SF_INTEGER

const ceilSeconds = (d: Duration.Duration): number => {
  const millis = Duration.toMillis(d)
  return Number.isFinite(millis) ? sfInteger(Math.ceil(Math.max(0, millis) / 1000)) : MAX_SF_INTEGER
}

/**
 * The quota a policy advertises, its headline limit and window
 * (`policy.quota`): a token bucket's capacity, and the seconds it takes to
 * refill from empty (`capacity / rate`, rounded up); a window's limit and
 * length; for a policy with no window of its own, its rate's period (at
 * least a second).
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import { RateLimitHeaders } from "tollgate/http"
 *
 * const policy = Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
 * if (policy._tag !== "Invalid") RateLimitHeaders.quotaOf("api", policy) // { name: "api", limit: 100, windowSeconds: 10 }
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const quotaOf = (name: string, policy: Policy.Valid): Quota => ({
  name,
  limit: sfInteger(policy.quota.limit),
  windowSeconds: Math.max(1, sfInteger(Math.ceil(policy.quota.windowMillis / 1000)))
})

/**
 * The `RateLimit-Policy` field value.
 *
 * @example
 * ```ts
 * import { RateLimitHeaders } from "tollgate/http"
 *
 * RateLimitHeaders.policyValue({ name: "default", limit: 100, windowSeconds: 60 }) // "\"default\";q=100;w=60"
 * ```
 *
 * @category formatting
 * @since 0.1.0
 */
export const policyValue = (quota: Quota): string =>
  `${sfString(quota.name)};q=${sfInteger(quota.limit)}` +
  (quota.windowSeconds === undefined ? "" : `;w=${sfInteger(quota.windowSeconds)}`)

/**
 * The `RateLimit` field value for a decision: `r` is what is left now, `t` the
 * seconds until the quota is back to full.
 *
 * @example
 * ```ts
 * import { Duration } from "effect"
 * import { RateLimitHeaders } from "tollgate/http"
 *
 * RateLimitHeaders.rateLimitValue("default", {
 *   allowed: false, remaining: 0, limit: 100,
 *   retryAfter: Duration.millis(100), resetAfter: Duration.seconds(30)
 * }) // "\"default\";r=0;t=30"
 * ```
 *
 * @category formatting
 * @since 0.1.0
 */
export const rateLimitValue = (name: string, decision: Decision): string =>
  `${sfString(name)};r=${sfInteger(decision.remaining)};t=${ceilSeconds(decision.resetAfter)}`

/**
 * The `Retry-After` value for a denial: whole seconds, rounded up, at least 1
 * (so that a client never retries at once).
 *
 * @example
 * ```ts
 * import { Duration } from "effect"
 * import { RateLimitHeaders } from "tollgate/http"
 *
 * RateLimitHeaders.retryAfterValue(Duration.millis(1200)) // "2"
 * ```
 *
 * @category formatting
 * @since 0.1.0
 */
export const retryAfterValue = (retryAfter: Duration.Duration): string => String(Math.max(1, ceilSeconds(retryAfter)))

/**
 * Options of {@link make}.
 *
 * @example
 * ```ts
 * import type { RateLimitHeaders } from "tollgate/http"
 *
 * const options: RateLimitHeaders.Options = { legacy: true }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** Also write `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (earlier drafts). Default false. */
  readonly legacy?: boolean | undefined
}

/**
 * Every header for a decision: `RateLimit` and `RateLimit-Policy` always,
 * `Retry-After` when the request was denied, the legacy fields on request.
 *
 * @example
 * ```ts
 * import { Duration } from "effect"
 * import { RateLimitHeaders } from "tollgate/http"
 *
 * const headers = RateLimitHeaders.make(
 *   { name: "default", limit: 100, windowSeconds: 60 },
 *   { allowed: true, remaining: 99, limit: 100, retryAfter: Duration.zero, resetAfter: Duration.millis(600) }
 * )
 * // { ratelimit: "\"default\";r=99;t=1", "ratelimit-policy": "\"default\";q=100;w=60" }
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (quota: Quota, decision: Decision, options?: Options): Record<string, string> => {
  const headers: Record<string, string> = {
    [names.rateLimit]: rateLimitValue(quota.name, decision),
    [names.rateLimitPolicy]: policyValue(quota)
  }
  if (!decision.allowed) headers[names.retryAfter] = retryAfterValue(decision.retryAfter)
  if (options?.legacy === true) {
    headers[names.legacyLimit] = String(sfInteger(quota.limit))
    headers[names.legacyRemaining] = String(sfInteger(decision.remaining))
    headers[names.legacyReset] = String(ceilSeconds(decision.resetAfter))
  }
  return headers
}

/**
 * One item of a parsed `RateLimit` or `RateLimit-Policy` field: the policy's
 * name and its integer parameters.
 *
 * @example
 * ```ts
 * import type { RateLimitHeaders } from "tollgate/http"
 *
 * const item: RateLimitHeaders.Item = { name: "default", params: { r: 0, t: 30 } }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Item {
  readonly name: string
  readonly params: Readonly<Record<string, number>>
}

/**
 * Parses a `RateLimit` or `RateLimit-Policy` field value (a list of string
 * items with integer parameters), for clients and tests. It stops at the
 * first malformed member: the members before it are kept.
 *
 * @example
 * ```ts
 * import { RateLimitHeaders } from "tollgate/http"
 *
 * RateLimitHeaders.parse("\"default\";r=0;t=30") // [{ name: "default", params: { r: 0, t: 30 } }]
 * ```
 *
 * @category parsing
 * @since 0.1.0
 */
export const parse = (value: string): ReadonlyArray<Item> => {
  const items: Array<Item> = []
  const itemPattern = /\s*"((?:[^"\\]|\\.)*)"((?:;[a-z*][a-z0-9_.*-]*=-?\d{1,15})*)\s*(?:,|$)/gy
  let match: RegExpExecArray | null
  while ((match = itemPattern.exec(value)) !== null && match[0].length > 0) {
    const params: Record<string, number> = {}
    for (const param of match[2].split(";").slice(1)) {
      const [key, n] = param.split("=")
      params[key] = Number(n)
    }
    items.push({ name: match[1].replace(/\\(.)/g, "$1"), params })
  }
  return items
}
