/**
 * Envoy's rate limit service (RateLimitService v3, `ShouldRateLimit`) over a
 * tollgate limiter: each descriptor of a request is matched against the
 * configuration (see `RlsConfig`), decided by its limit's policy, and
 * answered with a status; the request is over the limit when any descriptor
 * is (shadow-mode descriptors never are; quota-mode descriptors only when all
 * of them are).
 *
 * As in envoyproxy/ratelimit: a descriptor that matches no limit is `OK`; an
 * `unlimited` one is `OK` with `limit_remaining` 4294967295; a limit of 0 is
 * always over; `hits_addend` (the descriptor's, else the request's, 0 meaning
 * 1) is the cost, and a descriptor's explicit `hits_addend: 0` checks without
 * counting; every descriptor is counted, whatever the others decide; a
 * descriptor's `limit` override is a fixed window of its own; `replaces`
 * drops the limits it names.
 *
 * @since 0.2.0
 */
import { Context, Duration, Effect, Metric, Schema, type Scope } from "effect"
import { createHash } from "node:crypto"
import type { Decision } from "../Decision.ts"
import type { InvalidPolicy } from "../Errors.ts"
import * as RateLimitHeaders from "../http/RateLimitHeaders.ts"
import * as Policy from "../Policy.ts"
import { RateLimiter } from "../RateLimiter.ts"
import * as RlsConfig from "./RlsConfig.ts"

/**
 * A `RateLimitRequest`, as the gRPC layer decodes it (field names as in the
 * proto, 64-bit integers as numbers).
 *
 * @example
 * ```ts
 * import type { RlsService } from "tollgate/envoy"
 *
 * const request: RlsService.RateLimitRequest = {
 *   domain: "edge",
 *   descriptors: [{ entries: [{ key: "remote_address", value: "203.0.113.7" }] }],
 *   hits_addend: 1
 * }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface RateLimitRequest {
  readonly domain: string
  readonly descriptors: ReadonlyArray<{
    readonly entries: ReadonlyArray<RlsConfig.Entry>
    readonly limit?: { readonly requests_per_unit: number; readonly unit: string } | null | undefined
    readonly hits_addend?: { readonly value: number } | null | undefined
  }>
  readonly hits_addend?: number | undefined
}

/**
 * A `RateLimitResponse.DescriptorStatus`.
 *
 * @example
 * ```ts
 * import type { RlsService } from "tollgate/envoy"
 *
 * const over = (status: RlsService.DescriptorStatus): boolean => status.code === "OVER_LIMIT"
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface DescriptorStatus {
  readonly code: "OK" | "OVER_LIMIT"
  readonly current_limit: {
    readonly name: string
    readonly requests_per_unit: number
    readonly unit: string
  } | null
  readonly limit_remaining: number
  readonly duration_until_reset: { readonly seconds: number; readonly nanos: number } | null
}

/**
 * A `RateLimitResponse`.
 *
 * @example
 * ```ts
 * import type { RlsService } from "tollgate/envoy"
 *
 * const allowed = (response: RlsService.RateLimitResponse): boolean => response.overall_code === "OK"
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface RateLimitResponse {
  readonly overall_code: "OK" | "OVER_LIMIT"
  readonly statuses: ReadonlyArray<DescriptorStatus>
  readonly response_headers_to_add: ReadonlyArray<{ readonly key: string; readonly value: string }>
}

/**
 * The request is malformed (no domain, no descriptor, an empty key): gRPC
 * `INVALID_ARGUMENT`.
 *
 * @example
 * ```ts
 * import { RlsService } from "tollgate/envoy"
 *
 * new RlsService.InvalidArgument({ reason: "domain must not be empty" }).message
 * ```
 *
 * @category errors
 * @since 0.2.0
 */
export class InvalidArgument extends Schema.TaggedError<InvalidArgument>()("InvalidArgument", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/**
 * The limiter could not decide (overloaded, shutting down, or its shared
 * store did not answer with fallback mode `error`): gRPC `UNAVAILABLE`, so
 * that Envoy applies its `failure_mode_deny`.
 *
 * @example
 * ```ts
 * import { RlsService } from "tollgate/envoy"
 *
 * new RlsService.Unavailable({ reason: "the service is shutting down" }).message
 * ```
 *
 * @category errors
 * @since 0.2.0
 */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", { reason: Schema.String }) {
  override get message(): string {
    return this.reason
  }
}

/**
 * Descriptors decided, by domain and outcome (`ok`, `over_limit`, `shadow`:
 * over the limit in shadow mode, `unlimited`, `no_limit`). Domains that are
 * not configured count as `(unknown)`, so the labels stay bounded.
 *
 * @example
 * ```ts
 * import { Metric } from "effect"
 * import { RlsService } from "tollgate/envoy"
 *
 * const effect = Metric.value(RlsService.descriptors)
 * ```
 *
 * @category metrics
 * @since 0.2.0
 */
export const descriptors = Metric.counter("tollgate_rls_descriptors_total", {
  description: "Descriptors decided by the Envoy rate limit service, by domain and outcome",
  incremental: true
})

const MAX_UINT32 = 4_294_967_295

const units: Record<string, RlsConfig.Unit> = {
  SECOND: "second",
  MINUTE: "minute",
  HOUR: "hour",
  DAY: "day",
  WEEK: "week",
  MONTH: "month",
  YEAR: "year"
}

const escaped = /[%|=]/
const escape = (s: string): string =>
  escaped.test(s) ? s.replace(/[%|=]/g, (c) => (c === "%" ? "%25" : c === "|" ? "%7C" : "%3D")) : s

const toDuration = (millis: number): { seconds: number; nanos: number } | null => {
  if (!Number.isFinite(millis)) return null
  const ms = Math.max(0, Math.ceil(millis))
  return { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1_000_000 }
}

// A header item's name: printable ASCII, at most 64 characters.
const headerName = (s: string): string => s.replace(/[^\x20-\x7e]/g, "_").slice(0, 64) || "default"

const uint32 = (
  n: number
): number => (Number.isFinite(n) ? Math.min(MAX_UINT32, Math.max(0, Math.floor(n))) : MAX_UINT32)

/**
 * Options of {@link RlsService.make}.
 *
 * @example
 * ```ts
 * import type { RlsConfig, RlsService } from "tollgate/envoy"
 *
 * declare const config: RlsConfig.Config
 * const options: RlsService.Options = { config, responseHeaders: true, limiter: { idleTimeout: "1 minute" } }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface Options {
  readonly config: RlsConfig.Config
  /** Send `RateLimit`, `RateLimit-Policy` and `Retry-After` in `response_headers_to_add`. Default true. */
  readonly responseHeaders?: boolean | undefined
  /** Options of the limiter behind the service (its policy comes from the configuration). */
  readonly limiter?: Omit<RateLimiter.Options, "policy" | "name" | "maxKeyLength"> | undefined
  /**
   * Makes that limiter (default `RateLimiter.make`): the service passes one
   * that makes it on its cluster when it runs on one.
   */
  readonly makeLimiter?:
    | ((options: RateLimiter.Options) => Effect.Effect<RateLimiter["Service"], InvalidPolicy, Scope.Scope>)
    | undefined
}

interface Outcome {
  readonly status: DescriptorStatus
  readonly over: boolean
  readonly quotaMode: boolean
  readonly name: string
  readonly decision: Decision | undefined
  readonly quota: RateLimitHeaders.Quota | undefined
  /** The `RateLimit-Policy` value of `quota`. */
  readonly policyHeader: string
}

// What a limit reports on every call.
interface Info {
  readonly name: string
  readonly currentLimit: NonNullable<DescriptorStatus["current_limit"]>
  readonly quota: RateLimitHeaders.Quota | undefined
  readonly policyHeader: string
}

interface Found {
  readonly limit: RlsConfig.Limit
  readonly values: ReadonlyArray<string>
}

// A descriptor that matches no limit, and an `unlimited` one.
const NONE: Outcome = {
  status: { code: "OK", current_limit: null, limit_remaining: 0, duration_until_reset: null },
  over: false,
  quotaMode: false,
  name: "",
  decision: undefined,
  quota: undefined,
  policyHeader: ""
}
const UNLIMITED: Outcome = { ...NONE, status: { ...NONE.status, limit_remaining: MAX_UINT32 } }

/**
 * The service.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RlsService } from "tollgate/envoy"
 *
 * const program = Effect.gen(function*() {
 *   const rls = yield* RlsService.RlsService
 *   return yield* rls.shouldRateLimit({ domain: "edge", descriptors: [{ entries: [{ key: "remote_address", value: "203.0.113.7" }] }] })
 * })
 * ```
 *
 * @category services
 * @since 0.2.0
 */
export class RlsService extends Context.Service<RlsService, {
  /**
   * Envoy's `ShouldRateLimit`: each descriptor matched and decided, the request over the limit when one is (see the module's description).
   *
   * @example
   * ```ts
   * import { RlsService } from "tollgate/envoy"
   *
   * const answer = RlsService.RlsService.use((rls) =>
   *   rls.shouldRateLimit({ domain: "edge", descriptors: [{ entries: [{ key: "remote_address", value: "203.0.113.7" }] }] })
   * )
   * ```
   */
  readonly shouldRateLimit: (
    request: RateLimitRequest
  ) => Effect.Effect<RateLimitResponse, InvalidArgument | Unavailable>
  /**
   * Puts a new configuration in force; limits whose policy did not change keep their counters.
   *
   * @example
   * ```ts
   * import type { RlsConfig } from "tollgate/envoy"
   * import { RlsService } from "tollgate/envoy"
   *
   * declare const next: RlsConfig.Config
   * const reload = RlsService.RlsService.use((rls) => rls.reload(next))
   * ```
   */
  readonly reload: (config: RlsConfig.Config) => Effect.Effect<void>
}>()("tollgate/envoy/RlsService") {
  /**
   * Starts the service's limiter in the current scope (on the context's
   * `Store.CurrentStore`, if any: several instances on one Redis share each
   * descriptor's limit).
   *
   * @example
   * ```ts
   * import { Effect, Layer } from "effect"
   * import type { RlsConfig } from "tollgate/envoy"
   * import { RlsService } from "tollgate/envoy"
   *
   * declare const config: RlsConfig.Config
   * const service = Layer.effect(RlsService.RlsService, RlsService.RlsService.make({ config }))
   * ```
   *
   * @since 0.2.0
   */
  static readonly make = (options: Options): Effect.Effect<RlsService["Service"], InvalidPolicy, Scope.Scope> =>
    Effect.gen(function*() {
      let config = options.config
      const responseHeaders = options.responseHeaders ?? true
      // Every policy version ever in force, by id: a key routed just before a
      // reload still finds its policy.
      const versions = new Map<string, Policy.Valid>()
      const register = (c: RlsConfig.Config) => {
        for (const limit of c.limits) if (limit.policy !== undefined) versions.set(limit.id, limit.policy)
      }
      register(config)
      const missing = Policy.fixedWindow({ limit: 0, window: "1 second" })
      const limiter = yield* (options.makeLimiter ?? RateLimiter.make)({
        ...options.limiter,
        policy: (key) => versions.get(key.slice(0, key.indexOf("|"))) ?? missing,
        name: "envoy",
        maxKeyLength: 1200
      })
      // Metrics are updated in the service's context, as the request path does: no effect per update.
      const context = yield* Effect.context<never>()
      const counters = new Map<string, Metric.Metric<number, unknown>>()
      const count = (domain: string, outcome: string): void => {
        const label = config.domains.has(domain) ? domain : "(unknown)"
        const id = `${label}\u0000${outcome}`
        let counter = counters.get(id)
        if (counter === undefined) {
          counter = Metric.withAttributes(descriptors, { domain: label, outcome })
          counters.set(id, counter)
        }
        counter.updateUnsafe(1, context)
      }

      const keyOf = (
        id: string,
        domain: string,
        entries: ReadonlyArray<RlsConfig.Entry>,
        values: ReadonlyArray<string>
      ) => {
        let key = `${id}|${escape(domain)}`
        for (let i = 0; i < entries.length; i++) key += `|${escape(entries[i].key)}=${escape(values[i])}`
        return key.length <= 1200 ? key : `${id}|#${createHash("sha256").update(key).digest("hex")}`
      }

      // What a limit reports is the same on every call: made once per limit (per configured
      // limit for the life of the service; per request for a descriptor's own override).
      const infos = new WeakMap<RlsConfig.Limit, Info>()
      const infoOf = (limit: RlsConfig.Limit): Info => {
        let info = infos.get(limit)
        if (info === undefined) {
          const name = headerName(limit.name ?? limit.path)
          const quota = limit.policy === undefined ? undefined : RateLimitHeaders.quotaOf(name, limit.policy)
          info = {
            name,
            currentLimit: {
              name: limit.name ?? "",
              requests_per_unit: uint32(limit.requestsPerUnit),
              unit: limit.unit === undefined ? "UNKNOWN" : limit.unit.toUpperCase()
            },
            quota,
            policyHeader: quota === undefined ? "" : RateLimitHeaders.policyValue(quota)
          }
          infos.set(limit, info)
        }
        return info
      }

      // A limit of 0: over, until the end of the unit's window (as envoyproxy/ratelimit reports it).
      const blocked = (limit: RlsConfig.Limit, now: number): Outcome => {
        const unitMillis = RlsConfig.unitSeconds[limit.unit ?? "second"] * 1000
        const name = headerName(limit.name ?? limit.path)
        const quota = { name, limit: 0, windowSeconds: unitMillis / 1000 }
        return {
          status: {
            code: "OVER_LIMIT",
            current_limit: {
              name: limit.name ?? "",
              requests_per_unit: 0,
              unit: (limit.unit ?? "second").toUpperCase()
            },
            limit_remaining: 0,
            duration_until_reset: toDuration(unitMillis - (now % unitMillis))
          },
          over: !limit.shadowMode,
          quotaMode: limit.quotaMode,
          name,
          decision: {
            allowed: false,
            remaining: 0,
            limit: 0,
            retryAfter: Duration.millis(unitMillis - (now % unitMillis)),
            resetAfter: Duration.millis(unitMillis - (now % unitMillis))
          },
          quota,
          policyHeader: RateLimitHeaders.policyValue(quota)
        }
      }

      const outcomeOf = (limit: RlsConfig.Limit, info: Info, decision: Decision): Outcome => {
        const over = !decision.allowed
        return {
          status: {
            code: over && !limit.shadowMode ? "OVER_LIMIT" : "OK",
            current_limit: info.currentLimit,
            limit_remaining: uint32(decision.remaining),
            duration_until_reset: toDuration(Duration.toMillis(decision.resetAfter))
          },
          over: over && !limit.shadowMode,
          quotaMode: limit.quotaMode,
          name: info.name,
          decision,
          quota: info.quota,
          policyHeader: info.policyHeader
        }
      }

      // The limiter's call for one descriptor, and what follows it (`then`: the next descriptors, or
      // the answer), in one step.
      const decide = (
        domain: string,
        limit: RlsConfig.Limit,
        policy: Policy.Valid,
        key: string,
        hits: number,
        then: (outcome: Outcome) => Effect.Effect<RateLimitResponse, Unavailable>
      ): Effect.Effect<RateLimitResponse, Unavailable> =>
        Effect.matchEffect(hits === 0 ? limiter.peek(key) : limiter.consume(key, { cost: hits }), {
          onSuccess: (decision) => {
            count(domain, decision.allowed ? "ok" : limit.shadowMode ? "shadow" : "over_limit")
            return then(outcomeOf(limit, infoOf(limit), decision))
          },
          onFailure: (error) => {
            // More hits than the limit can ever admit: over the limit, as the reference counts it.
            if (error._tag === "InvalidRequest" && error.field === "cost") {
              count(domain, limit.shadowMode ? "shadow" : "over_limit")
              return then(outcomeOf(limit, infoOf(limit), {
                allowed: false,
                remaining: 0,
                limit: policy.quota.limit,
                retryAfter: Duration.infinity,
                resetAfter: Duration.zero
              }))
            }
            return Effect.fail(
              new Unavailable({
                reason: error._tag === "Overloaded"
                  ? "too many requests are queued for this descriptor"
                  : error._tag === "LimiterShutdown"
                  ? "the service is shutting down"
                  : error._tag === "StoreUnavailable"
                  ? "the shared store (Redis) did not answer"
                  : `cannot decide: ${error.message}`
              })
            )
          }
        })

      const headersOf = (outcomes: ReadonlyArray<Outcome>, over: boolean) => {
        // The descriptor closest to its limit speaks for the request (the one that refused, when one did).
        let pick: Outcome | undefined
        for (const o of outcomes) {
          if (o.decision === undefined || o.quota === undefined) continue
          if (over ? o.over : true) {
            if (pick === undefined || o.decision.remaining < pick.decision!.remaining) pick = o
          }
        }
        if (pick === undefined) return []
        const decision = pick.decision!
        // RateLimitHeaders.make's fields, in its order; the policy's value is made once per limit.
        const headers: Array<{ readonly key: string; readonly value: string }> = [
          {
            key: RateLimitHeaders.names.rateLimit,
            value: RateLimitHeaders.rateLimitValue(
              pick.quota!.name,
              pick.over ? decision : { ...decision, allowed: true }
            )
          },
          { key: RateLimitHeaders.names.rateLimitPolicy, value: pick.policyHeader }
        ]
        if (pick.over) {
          headers.push({
            key: RateLimitHeaders.names.retryAfter,
            value: RateLimitHeaders.retryAfterValue(decision.retryAfter)
          })
        }
        return headers
      }

      const respond = (outcomes: ReadonlyArray<Outcome>): RateLimitResponse => {
        let over = false
        let quotas = 0
        let quotasOver = 0
        const statuses: Array<DescriptorStatus> = []
        for (const o of outcomes) {
          statuses.push(o.status)
          if (o.quotaMode) {
            quotas++
            if (o.over) quotasOver++
          } else if (o.over) over = true
        }
        if (quotas > 0 && quotasOver === quotas) over = true
        return {
          overall_code: over ? "OVER_LIMIT" : "OK",
          statuses,
          response_headers_to_add: responseHeaders ? headersOf(outcomes, over) : []
        }
      }

      // A descriptor's own limit (Envoy's rate limit override): a fixed window of its own (0: always over).
      const overrideOf = (
        domain: string,
        d: RateLimitRequest["descriptors"][number],
        limit: NonNullable<RateLimitRequest["descriptors"][number]["limit"]>
      ): Found | undefined => {
        const unit = units[limit.unit]
        if (unit === undefined) return undefined
        const requests = limit.requests_per_unit
        const policy = requests === 0 ? undefined : RlsConfig.policyOf("fixedWindow", requests, unit)
        if (policy?._tag === "Invalid") return undefined
        const id = policy === undefined ? "blocked" : RlsConfig.fingerprint(policy)
        if (policy !== undefined) versions.set(id, policy)
        return {
          limit: {
            path: `${domain}.(override)`,
            name: undefined,
            replaces: [],
            unlimited: false,
            shadowMode: false,
            quotaMode: false,
            policy,
            id,
            unit,
            requestsPerUnit: requests
          },
          values: d.entries.map((e) => e.value)
        }
      }

      // Plain code up to the limiter's calls, which are the only effects: a request with one
      // descriptor is one call and a map (no generator, no fiber beyond the caller's).
      const shouldRateLimit = (request: RateLimitRequest) =>
        Effect.clockWith((clock): Effect.Effect<RateLimitResponse, InvalidArgument | Unavailable> => {
          const domain = request.domain
          const descriptors = request.descriptors
          if (domain === "") return Effect.fail(new InvalidArgument({ reason: "rate limit domain must not be empty" }))
          if (descriptors.length === 0) {
            return Effect.fail(new InvalidArgument({ reason: "rate limit descriptor list must not be empty" }))
          }
          const snapshot = config
          const n = descriptors.length
          const found: Array<Found | undefined> = []
          let invalid = -1
          let replaced: Set<string> | undefined
          for (let i = 0; i < n; i++) {
            const d = descriptors[i]
            let f: Found | undefined
            let bad = false
            for (const e of d.entries) if (e.key === "") bad = true
            if (!bad && d.limit !== undefined && d.limit !== null) {
              f = overrideOf(domain, d, d.limit)
              bad = f === undefined
            } else if (!bad) {
              f = RlsConfig.find(snapshot, domain, d.entries)
            }
            if (bad && invalid < 0) invalid = i
            found[i] = f
            if (f !== undefined && f.limit.replaces.length > 0) {
              replaced ??= new Set()
              for (const r of f.limit.replaces) replaced.add(r)
            }
          }
          if (invalid >= 0) {
            return Effect.fail(
              new InvalidArgument({
                reason: `descriptor ${invalid}: an entry has an empty key, or its limit override an unknown unit`
              })
            )
          }
          const requestHits = Math.max(1, request.hits_addend ?? 0)
          const outcomes: Array<Outcome> = []
          // In order, every descriptor counted whatever the others decide; each decision waits for
          // the one before it.
          const from = (start: number): Effect.Effect<RateLimitResponse, Unavailable> => {
            for (let i = start; i < n; i++) {
              const f = found[i]
              if (f === undefined || (f.limit.name !== undefined && replaced?.has(f.limit.name) === true)) {
                count(domain, "no_limit")
                outcomes[i] = NONE
                continue
              }
              const { limit, values } = f
              if (limit.unlimited) {
                count(domain, "unlimited")
                outcomes[i] = UNLIMITED
                continue
              }
              if (limit.policy === undefined) {
                count(domain, limit.shadowMode ? "shadow" : "over_limit")
                outcomes[i] = blocked(limit, clock.currentTimeMillisUnsafe())
                continue
              }
              const d = descriptors[i]
              const hits = d.hits_addend !== undefined && d.hits_addend !== null ? d.hits_addend.value : requestHits
              return decide(
                domain,
                limit,
                limit.policy,
                keyOf(limit.id, domain, d.entries, values),
                hits,
                (outcome) => {
                  outcomes[i] = outcome
                  return from(i + 1)
                }
              )
            }
            return Effect.succeed(respond(outcomes))
          }
          return from(0)
        })

      return RlsService.of({
        shouldRateLimit,
        reload: (next) =>
          Effect.sync(() => {
            register(next)
            config = next
          })
      })
    })
}

/**
 * What a configuration puts in force, in one line per domain (for logs).
 *
 * @example
 * ```ts
 * import { RlsService } from "tollgate/envoy"
 *
 * declare const config: Parameters<typeof RlsService.describe>[0]
 * RlsService.describe(config) // "messaging (2 limits)"
 * ```
 *
 * @category logging
 * @since 0.2.0
 */
export const describe = (config: RlsConfig.Config): string =>
  [...config.domains.keys()].map((domain) => {
    const n = config.limits.filter((l) => l.path === domain || l.path.startsWith(domain + ".")).length
    return `${domain} (${n} limit${n === 1 ? "" : "s"})`
  }).join(", ") || "no domains"
