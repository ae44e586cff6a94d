/**
 * The service's core, below HTTP: picks each request's policy (named in the
 * request, else by key prefix rule, else the default), and serves it from
 * one `RateLimiter` whose buckets are kept apart per policy (the same key
 * under two policies is two limits). The limiter keeps keys' state
 * in-process, or in Redis when one is configured (see `ServiceStore`);
 * decisions its fallback made while Redis did not answer say `degraded`.
 *
 * @since 0.1.0
 */
import { Clock, Context, Duration, Effect, Layer, Option, Schema, type Scope } from "effect"
import type { HttpServerRequest } from "effect/http"
import type { Decision } from "../Decision.ts"
import * as RlsConfig from "../envoy/RlsConfig.ts"
import type { InvalidPolicy } from "../Errors.ts"
import * as RateLimitHeaders from "../http/RateLimitHeaders.ts"
import * as Policy from "../Policy.ts"
import { RateLimiter } from "../RateLimiter.ts"
import { CurrentStore } from "../Store.ts"
import type * as ForwardAuth from "./ForwardAuth.ts"
import * as ServiceConfig from "./ServiceConfig.ts"
import * as ServiceStore from "./ServiceStore.ts"

/**
 * A request named a policy the configuration does not have.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Tollgate } from "tollgate/server"
 *
 * const program = Effect.gen(function*() {
 *   const tollgate = yield* Tollgate.Tollgate
 *   return yield* tollgate.consume({ key: "user:42", policy: "nope" })
 * }).pipe(Effect.catchTag("UnknownPolicy", (e) => Effect.succeed(e.known)))
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export class UnknownPolicy extends Schema.TaggedError<UnknownPolicy>()("UnknownPolicy", {
  policy: Schema.String,
  known: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `policy = ${JSON.stringify(this.policy)}: no such policy (known policies: ${this.known.join(", ")})`
  }
}

/**
 * A request for a key.
 *
 * @example
 * ```ts
 * import type { Tollgate } from "tollgate/server"
 *
 * const request: Tollgate.Request = { key: "user:42", cost: 2, policy: "default" }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Request {
  readonly key: string
  readonly cost?: number | undefined
  /** A configured policy's name; by default the key's rule or the default policy. */
  readonly policy?: string | undefined
}

/**
 * A waiter's place in line: `priority` (higher first), and a `tenant` with
 * its `weight` for a fair share of the key.
 *
 * @example
 * ```ts
 * import type { Tollgate } from "tollgate/server"
 *
 * const order: Tollgate.WaitOrder = { priority: 1, tenant: "acme", weight: 2 }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface WaitOrder {
  readonly priority?: number | undefined
  readonly tenant?: string | undefined
  readonly weight?: number | undefined
}

/**
 * A request over several keys, all or nothing: each key's policy is found
 * by the rules, as for one key.
 *
 * @example
 * ```ts
 * import type { Tollgate } from "tollgate/server"
 *
 * const request: Tollgate.AllRequest = { keys: ["user:42", "org:7", "global"], cost: 1 }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface AllRequest {
  readonly keys: ReadonlyArray<string>
  readonly cost?: number | undefined
}

/**
 * The decision over several keys: the most restrictive, and each key's own.
 *
 * @example
 * ```ts
 * import type { Tollgate } from "tollgate/server"
 *
 * const result: Tollgate.AllResult = {
 *   allowed: false, remaining: 0, retryAfter: 1000, resetAfter: 5000, limit: 5,
 *   keys: [{ key: "user:42", allowed: false, remaining: 0, retryAfter: 1000, resetAfter: 5000, limit: 5, policy: "users" }]
 * }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface AllResult {
  readonly allowed: boolean
  readonly remaining: number
  readonly retryAfter: number | null
  readonly resetAfter: number | null
  readonly limit: number
  readonly keys: ReadonlyArray<Result & { readonly key: string }>
  readonly degraded?: true
}

/**
 * What an upstream said, for a key with an adaptive policy: `"ok"`,
 * `"throttled"` (with `retryAfter` in ms when it said so), or a `latency`
 * in ms.
 *
 * @example
 * ```ts
 * import type { Tollgate } from "tollgate/server"
 *
 * const request: Tollgate.FeedbackRequest = { key: "upstream", signal: "throttled", retryAfter: 5000 }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface FeedbackRequest {
  readonly key: string
  readonly policy?: string | undefined
  readonly signal: "ok" | "throttled" | "latency"
  readonly retryAfter?: number | undefined
  readonly latency?: number | undefined
}

/**
 * A decision as the API reports it: durations in whole milliseconds (rounded
 * up), `null` for "never"; `degraded: true` when Redis did not answer and the
 * configured fallback decided (absent otherwise).
 *
 * @example
 * ```ts
 * import type { Tollgate } from "tollgate/server"
 *
 * const result: Tollgate.Result = {
 *   allowed: true, remaining: 99, retryAfter: 0, resetAfter: 100, limit: 100, policy: "default"
 * }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Result {
  readonly allowed: boolean
  readonly remaining: number
  readonly retryAfter: number | null
  readonly resetAfter: number | null
  readonly limit: number
  readonly policy: string
  readonly degraded?: true
  /** Set when the policy runs dry and would have refused the request: it was let through. */
  readonly dryRun?: true
  /** `penalty`: how long (ms) until the key is within its limit again; absent when it is. */
  readonly delay?: number
  /** `take`: the units taken (0 up to the cost asked for). */
  readonly taken?: number
}

/**
 * The outcome of `acquire`: the decision without its figures.
 *
 * @example
 * ```ts
 * import type { Tollgate } from "tollgate/server"
 *
 * const acquired: Tollgate.AcquireResult = { allowed: false, policy: "default", degraded: true }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface AcquireResult {
  readonly allowed: boolean
  readonly policy: string
  readonly degraded?: true
  /** Set when the policy runs dry and would have refused the request: it was let through. */
  readonly dryRun?: true
}

/**
 * The outcome of `wait`: admitted after `waited` ms, or not admissible within
 * `maxWait` (then `retryAfter` says when it would be).
 *
 * @example
 * ```ts
 * import type { Tollgate } from "tollgate/server"
 *
 * const waited: Tollgate.WaitResult = { allowed: true, waited: 120, policy: "default" }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type WaitResult =
  | { readonly allowed: true; readonly waited: number; readonly policy: string }
  | { readonly allowed: false; readonly retryAfter: number | null; readonly policy: string }

/**
 * The errors of a call.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import type { Tollgate } from "tollgate/server"
 *
 * declare const call: Effect.Effect<void, Tollgate.CallError>
 * const handled = call.pipe(Effect.catchTag("UnknownPolicy", () => Effect.void))
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type CallError = RateLimiter.CallError | UnknownPolicy

const millis = (d: Duration.Duration): number | null => {
  const ms = Duration.toMillis(d)
  return Number.isFinite(ms) ? Math.ceil(ms) : null
}

const toResult = (decision: Decision, policy: string): Result => {
  const result: Result = {
    allowed: decision.allowed,
    remaining: decision.remaining,
    retryAfter: millis(decision.retryAfter),
    resetAfter: millis(decision.resetAfter),
    limit: decision.limit,
    policy
  }
  const flagged = decision.degraded === true ? { ...result, degraded: true as const } : result
  const dry = decision.dryRun === true ? { ...flagged, dryRun: true as const } : flagged
  return decision.delay === undefined ? dry : { ...dry, delay: millis(decision.delay) ?? 0 }
}

// Buckets are kept apart per policy, and per version of a policy: the
// limiter's key is "<policy>~<fingerprint>|<key>" (policy names have neither
// "~" nor "|"). A policy that a reload leaves as it was keeps its fingerprint,
// so its keys keep their state; one that changes starts its keys afresh.
const SEPARATOR = "|"

// The key of a decision over several keys that binds it: the first that
// refused, or the one with the least left.
const binding = (decision: Decision): number => {
  const keys = decision.keys
  if (keys === undefined) return 0
  let best = 0
  for (let i = 0; i < keys.length; i++) {
    const d = keys[i].decision
    if (!decision.allowed) {
      if (!d.allowed) return i
    } else if (d.remaining < keys[best].decision.remaining) best = i
  }
  return best
}

const idOf = (name: string, policy: Policy.Valid): string => `${name}~${RlsConfig.fingerprint(policy)}`

/**
 * What a forward-auth check resolved to: no rule (let through), or a rule's
 * decision with the policy's quota for the `RateLimit-Policy` header.
 *
 * @example
 * ```ts
 * import type { Tollgate } from "tollgate/server"
 *
 * const through: Tollgate.CheckResult = { _tag: "NoRule" }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export type CheckResult =
  | { readonly _tag: "NoRule" }
  | {
    readonly _tag: "Decided"
    readonly rule: string
    readonly policy: string
    readonly decision: Decision
    readonly quota: RateLimitHeaders.Quota
  }

/**
 * What a reload changed.
 *
 * @example
 * ```ts
 * import type { Tollgate } from "tollgate/server"
 *
 * const summary: Tollgate.ReloadSummary = { added: ["uploads"], changed: [], unchanged: ["default"], removed: [] }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface ReloadSummary {
  readonly added: ReadonlyArray<string>
  readonly changed: ReadonlyArray<string>
  readonly unchanged: ReadonlyArray<string>
  readonly removed: ReadonlyArray<string>
}

/**
 * The service core.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Tollgate } from "tollgate/server"
 *
 * const program = Effect.gen(function*() {
 *   const tollgate = yield* Tollgate.Tollgate
 *   const result = yield* tollgate.consume({ key: "ip:203.0.113.7", cost: 1 })
 *   return result.allowed
 * })
 * ```
 *
 * @category services
 * @since 0.1.0
 */
export class Tollgate extends Context.Service<Tollgate, {
  /**
   * Decides a request (`RateLimiter.consume` on the key's policy: the request's `policy`, else its key's rule, else the default), with the figures.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { Tollgate } from "tollgate/server"
   *
   * const allowed = Tollgate.Tollgate.use((t) => t.consume({ key: "user:42", cost: 1 })).pipe(Effect.map((r) => r.allowed))
   * ```
   */
  readonly consume: (request: Request) => Effect.Effect<Result, CallError>
  /**
   * Takes the request's cost if the key has it (`RateLimiter.acquire`): allowed or not, with the policy that decided.
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const result = Tollgate.Tollgate.use((t) => t.acquire({ key: "user:42", policy: "free" }))
   * ```
   */
  readonly acquire: (request: Request) => Effect.Effect<AcquireResult, CallError>
  /**
   * What `consume` would decide now, taking nothing (`RateLimiter.peek`).
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const now = Tollgate.Tollgate.use((t) => t.peek({ key: "user:42" }))
   * ```
   */
  readonly peek: (request: Request) => Effect.Effect<Result, CallError>
  /**
   * Waits the key's turn, at most `maxWaitMillis`, in order of `priority` and by `tenant` share (`RateLimiter.wait`).
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const turn = Tollgate.Tollgate.use((t) => t.wait({ key: "user:42", maxWaitMillis: 2000, priority: 1 }))
   * ```
   */
  readonly wait: (
    request: Request & WaitOrder & { readonly maxWaitMillis: number }
  ) => Effect.Effect<WaitResult, CallError>
  /**
   * Takes from every key or from none (each key's policy by the rules).
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const both = Tollgate.Tollgate.use((t) => t.consumeAll({ keys: ["user:42", "org:7"], cost: 1 }))
   * ```
   */
  readonly consumeAll: (request: AllRequest) => Effect.Effect<AllResult, CallError>
  /**
   * Tells a key with an adaptive policy how its upstream coped.
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const slower = Tollgate.Tollgate.use((t) => t.feedback({ key: "upstream", signal: "throttled", retryAfter: 30 }))
   * ```
   */
  readonly feedback: (request: FeedbackRequest) => Effect.Effect<{ readonly policy: string }, CallError>
  /**
   * Forgets the key's usage (`RateLimiter.reset`); the admin API's reset.
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const forgotten = Tollgate.Tollgate.use((t) => t.reset({ key: "user:42" }))
   * ```
   */
  readonly reset: (request: Request) => Effect.Effect<{ readonly policy: string }, CallError>
  /**
   * rate-limiter-flexible's `penalty`: takes `cost` whatever the limit (`RateLimiter.force`).
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const failedLogin = Tollgate.Tollgate.use((t) => t.penalty({ key: "login:alice", cost: 2 }))
   * ```
   */
  readonly penalty: (request: Request) => Effect.Effect<Result, CallError>
  /**
   * rate-limiter-flexible's `reward`: gives `cost` units back, capped (`RateLimiter.reward`).
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const goodLogin = Tollgate.Tollgate.use((t) => t.reward({ key: "login:alice", cost: 1 }))
   * ```
   */
  readonly reward: (request: Request) => Effect.Effect<Result, CallError>
  /**
   * Takes what there is, at most `cost` (`RateLimiter.consumeUpTo`): the result says `taken`.
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const asMuchAsThereIs = Tollgate.Tollgate.use((t) => t.take({ key: "user:42", cost: 10 }))
   * ```
   */
  readonly take: (request: Request) => Effect.Effect<Result, CallError>
  /**
   * How the key stands, or `{ found: false }` for a key with no state (`RateLimiter.get`).
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const state = Tollgate.Tollgate.use((t) => t.get({ key: "user:42" }))
   * ```
   */
  readonly get: (
    request: Request
  ) => Effect.Effect<Result | { readonly found: false; readonly policy: string }, CallError>
  /**
   * The key as if `cost` units had been used from full (`RateLimiter.set`).
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const restored = Tollgate.Tollgate.use((t) => t.set({ key: "user:42", cost: 4 }))
   * ```
   */
  readonly set: (request: Request) => Effect.Effect<Result, CallError>
  /**
   * Forgets the key; says whether it had state (`RateLimiter.delete`).
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const deleted = Tollgate.Tollgate.use((t) => t.delete({ key: "user:42" }))
   * ```
   */
  readonly delete: (
    request: Request
  ) => Effect.Effect<{ readonly deleted: boolean; readonly policy: string }, CallError>
  /**
   * Refuses every request for the key for `durationMillis` (`RateLimiter.block`; `null`: until reset).
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const banned = Tollgate.Tollgate.use((t) => t.block({ key: "ip:203.0.113.7", durationMillis: 900_000 }))
   * ```
   */
  readonly block: (request: Request & { readonly durationMillis: number | null }) => Effect.Effect<Result, CallError>
  /**
   * The key full, a block ended (`RateLimiter.fill`).
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const full = Tollgate.Tollgate.use((t) => t.fill({ key: "user:42" }))
   * ```
   */
  readonly fill: (request: Request) => Effect.Effect<Result, CallError>
  /**
   * Forward authentication: decides for a gateway's sub-request by the
   * forward-auth rules (`prefix` is the route's path, before the original
   * path that Envoy appends).
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { HttpServerRequest } from "effect/http"
   * import { Tollgate } from "tollgate/server"
   *
   * // in a route: decide for the gateway's sub-request
   * const decision = Effect.gen(function*() {
   *   const request = yield* HttpServerRequest.HttpServerRequest
   *   return yield* Tollgate.Tollgate.use((t) => t.check(request, "/v1/check"))
   * })
   * ```
   */
  readonly check: (
    request: HttpServerRequest.HttpServerRequest,
    prefix: string
  ) => Effect.Effect<CheckResult, RateLimiter.CallError>
  /**
   * Whether the limiter answers (false once it has shut down).
   *
   * @example
   * ```ts
   * import { Tollgate } from "tollgate/server"
   *
   * const ready = Tollgate.Tollgate.use((t) => t.ready)
   * ```
   */
  readonly ready: Effect.Effect<boolean>
  /**
   * The settings in force (policies, rules, forward-auth rules change on reload).
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { Tollgate } from "tollgate/server"
   *
   * const policies = Tollgate.Tollgate.use((t) => Effect.sync(() => [...t.settings().policies.keys()]))
   * ```
   */
  readonly settings: () => ServiceConfig.Settings
  /**
   * Puts new policies, rules and forward-auth rules in force. Policies whose
   * validated options did not change keep their keys' state.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { ServiceConfig, Tollgate } from "tollgate/server"
   *
   * const reload = Effect.gen(function*() {
   *   const next = yield* ServiceConfig.load
   *   return yield* Tollgate.Tollgate.use((t) => t.reload(next))
   * })
   * ```
   */
  readonly reload: (settings: ServiceConfig.Settings) => Effect.Effect<ReloadSummary>
}>()("tollgate/server/Tollgate") {
  /**
   * Starts the limiter in the current scope, on the `Store.CurrentStore` of
   * the context (none: in-process).
   *
   * @example
   * ```ts
   * import { Effect, Layer } from "effect"
   * import { ServiceConfig, Tollgate } from "tollgate/server"
   *
   * const core = Layer.effect(Tollgate.Tollgate, Tollgate.Tollgate.make).pipe(
   *   Layer.provide(ServiceConfig.ServiceConfig.layerFrom({ env: {} }))
   * )
   * ```
   *
   * @since 0.1.0
   */
  static readonly make: Effect.Effect<Tollgate["Service"], InvalidPolicy, ServiceConfig.ServiceConfig | Scope.Scope> =
    Effect.gen(function*() {
      const initial = yield* ServiceConfig.ServiceConfig
      // Every policy version ever put in force: a key routed just before a reload
      // still finds its policy. Grows by the policies a reload changes, only.
      const versions = new Map<string, Policy.Valid>()
      interface InForce {
        readonly settings: ServiceConfig.Settings
        readonly ids: ReadonlyMap<string, string>
        readonly known: ReadonlyArray<string>
      }
      const inForce = (settings: ServiceConfig.Settings): InForce => {
        const ids = new Map<string, string>()
        for (const [name, policy] of settings.policies) {
          const id = idOf(name, policy)
          versions.set(id, policy)
          ids.set(name, id)
        }
        return { settings, ids, known: [...settings.policies.keys()] }
      }
      let current = inForce(initial)
      const missing = Policy.tokenBucket({ capacity: 1, refill: { tokens: -1, per: "1 second" } })
      const limiter = yield* ServiceStore.makeLimiter({
        policy: (key) => versions.get(key.slice(0, key.indexOf(SEPARATOR))) ?? missing,
        idleTimeout: initial.limiter.idleTimeout,
        mailboxCapacity: initial.limiter.mailboxCapacity,
        maxWaiters: initial.limiter.maxWaiters,
        // room for "<policy>~<fingerprint>|" in front of the longest key the API accepts,
        // and for the forward-auth keys (a rule's name and a SHA-256 when longer)
        maxKeyLength: Math.max(initial.limits.maxKeyLength, 140) + 80,
        name: "service",
        fallback: Option.match(initial.redis, {
          onNone: () => Option.getOrUndefined(Option.map(initial.cluster, (cluster) => cluster.fallback)),
          onSome: (redis) => redis.fallback
        }),
        handoffTimeout: Option.getOrUndefined(Option.map(initial.cluster, (cluster) => cluster.handoffTimeout))
      })
      // A shared store's (or a cluster's) fallback flags its decisions, and
      // only `consume` carries the flag; in-process, `acquire` keeps its
      // faster path.
      const shared = Option.isSome(yield* Effect.serviceOption(CurrentStore)) ||
        (yield* ServiceStore.CurrentCluster) !== undefined

      const route = <A, E>(
        request: Request,
        f: (key: string, policy: string) => Effect.Effect<A, E>
      ): Effect.Effect<A, E | UnknownPolicy> => {
        const { ids, known, settings } = current
        const policy = ServiceConfig.policyName(settings, request.key, request.policy)
        if (policy === undefined) return Effect.fail(new UnknownPolicy({ policy: request.policy ?? "", known }))
        return f(ids.get(policy)! + SEPARATOR + request.key, policy)
      }

      return Tollgate.of({
        consume: (request) =>
          route(
            request,
            (key, policy) => Effect.map(limiter.consume(key, { cost: request.cost }), (d) => toResult(d, policy))
          ),
        acquire: (request) =>
          route(
            request,
            (key, policy): Effect.Effect<AcquireResult, CallError> =>
              shared || current.settings.policies.get(policy)?.dryRun === true
                ? Effect.map(
                  limiter.consume(key, { cost: request.cost }),
                  (d) =>
                    d.degraded === true
                      ? { allowed: d.allowed, policy, degraded: true }
                      : d.dryRun === true
                      ? { allowed: d.allowed, policy, dryRun: true }
                      : { allowed: d.allowed, policy }
                )
                : Effect.map(limiter.acquire(key, { cost: request.cost }), (allowed) => ({ allowed, policy }))
          ),
        peek: (request) =>
          route(
            request,
            (key, policy) => Effect.map(limiter.peek(key, { cost: request.cost }), (d) => toResult(d, policy))
          ),
        wait: (request) =>
          route(request, (key, policy) =>
            Effect.gen(function*() {
              const start = yield* Clock.currentTimeMillis
              return yield* limiter.wait(key, {
                cost: request.cost,
                maxWait: request.maxWaitMillis,
                priority: request.priority,
                tenant: request.tenant,
                weight: request.weight
              }).pipe(
                Effect.flatMap(() => Clock.currentTimeMillis),
                Effect.map((end): WaitResult => ({ allowed: true, waited: Math.max(0, end - start), policy })),
                Effect.catchTag(
                  "RateLimitExceeded",
                  (e) => Effect.succeed<WaitResult>({ allowed: false, retryAfter: millis(e.retryAfter), policy })
                )
              )
            })),
        reset: (request) => route(request, (key, policy) => Effect.as(limiter.reset(key), { policy })),
        consumeAll: (request) =>
          Effect.suspend((): Effect.Effect<AllResult, CallError> => {
            const routed: Array<readonly [string, string, string]> = []
            for (const key of request.keys) {
              const { ids, known, settings } = current
              const policy = ServiceConfig.policyName(settings, key, undefined)
              if (policy === undefined) return Effect.fail(new UnknownPolicy({ policy: "", known }))
              routed.push([key, ids.get(policy)! + SEPARATOR + key, policy])
            }
            return Effect.map(
              limiter.consume(routed.map(([, id]) => id), { cost: request.cost }),
              (d): AllResult => {
                const all: AllResult = {
                  allowed: d.allowed,
                  remaining: d.remaining,
                  retryAfter: millis(d.retryAfter),
                  resetAfter: millis(d.resetAfter),
                  limit: d.limit,
                  keys: routed.map(([key, , policy], i) => ({ key, ...toResult(d.keys![i].decision, policy) }))
                }
                return d.degraded === true ? { ...all, degraded: true } : all
              }
            )
          }),
        feedback: (request) =>
          route(request, (key, policy) =>
            Effect.as(
              limiter.feedback(
                key,
                request.signal === "latency" ? { latency: request.latency ?? 0 } : request.signal,
                request.signal === "throttled" && request.retryAfter !== undefined
                  ? { retryAfter: request.retryAfter }
                  : undefined
              ),
              { policy }
            )),
        penalty: (request) =>
          route(
            request,
            (key, policy) => Effect.map(limiter.force(key, { cost: request.cost }), (d) => toResult(d, policy))
          ),
        reward: (request) =>
          route(request, (key, policy) => Effect.map(limiter.reward(key, request.cost), (d) => toResult(d, policy))),
        take: (request) =>
          route(
            request,
            (key, policy) =>
              Effect.map(
                limiter.consumeUpTo(key, { cost: request.cost }),
                (t) => ({ ...toResult(t, policy), taken: t.taken })
              )
          ),
        get: (request) =>
          route(request, (key, policy) =>
            Effect.map(
              limiter.get(key),
              Option.match({ onNone: () => ({ found: false as const, policy }), onSome: (d) => toResult(d, policy) })
            )),
        set: (request) =>
          route(request, (key, policy) => Effect.map(limiter.set(key, request.cost ?? 0), (d) => toResult(d, policy))),
        delete: (request) =>
          route(request, (key, policy) => Effect.map(limiter.delete(key), (deleted) => ({ deleted, policy }))),
        block: (request) =>
          route(
            request,
            (key, policy) =>
              Effect.map(
                limiter.block(key, request.durationMillis === null ? Duration.infinity : request.durationMillis),
                (d) => toResult(d, policy)
              )
          ),
        fill: (request) => route(request, (key, policy) => Effect.map(limiter.fill(key), (d) => toResult(d, policy))),
        check: (request, prefix) =>
          Effect.suspend(() => {
            const { ids, settings } = current
            const decided = (match: ForwardAuth.Match, decision: Decision): CheckResult => ({
              _tag: "Decided",
              rule: match.rule,
              policy: match.policy,
              decision,
              quota: RateLimitHeaders.quotaOf(match.rule, settings.policies.get(match.policy)!)
            })
            if (settings.forwardAuth.mode === "first") {
              const match = settings.forwardAuth.match(request, prefix)
              if (match === undefined) return Effect.succeed<CheckResult>({ _tag: "NoRule" })
              return Effect.map(
                limiter.consume(ids.get(match.policy)! + SEPARATOR + match.key, { cost: match.cost }),
                (decision) => decided(match, decision)
              )
            }
            // Every matching rule (nginx's zones): all or nothing, and the
            // headers name the binding rule (the one that refused, or the one
            // with the least left).
            const matches = settings.forwardAuth.matchAll(request, prefix)
            if (matches.length === 0) return Effect.succeed<CheckResult>({ _tag: "NoRule" })
            const keys = matches.map((m) => ids.get(m.policy)! + SEPARATOR + m.key)
            return Effect.map(
              limiter.consume(keys.length === 1 ? keys[0] : keys, { cost: matches[0].cost }),
              (decision) => decided(matches[binding(decision)] ?? matches[0], decision)
            )
          }),
        ready: Effect.suspend(() =>
          limiter.peek(current.ids.get(current.settings.defaultPolicy)! + SEPARATOR + "tollgate:readyz")
        ).pipe(
          Effect.as(true),
          Effect.orElseSucceed(() => false)
        ),
        settings: () => current.settings,
        reload: (settings) =>
          Effect.sync(() => {
            const before = current
            current = inForce(settings)
            const added: Array<string> = []
            const changed: Array<string> = []
            const unchanged: Array<string> = []
            for (const [name, id] of current.ids) {
              const old = before.ids.get(name)
              if (old === undefined) added.push(name)
              else if (old === id) unchanged.push(name)
              else changed.push(name)
            }
            const removed = [...before.ids.keys()].filter((name) => !current.ids.has(name))
            return { added, changed, unchanged, removed }
          })
      })
    })
  /**
   * The service core as a layer, on the configured store (`ServiceStore.layer`).
   *
   * @example
   * ```ts
   * import { Layer } from "effect"
   * import { ServiceConfig, Tollgate } from "tollgate/server"
   *
   * const core = Tollgate.Tollgate.layer.pipe(Layer.provide(ServiceConfig.ServiceConfig.layerFrom({ env: {} })))
   * ```
   *
   * @since 0.1.0
   */
  static readonly layer: Layer.Layer<
    Tollgate,
    InvalidPolicy | ServiceConfig.InvalidConfig | ServiceStore.RedisUnavailable | ServiceStore.ClusterUnavailable,
    ServiceConfig.ServiceConfig
  > = Layer.effect(Tollgate, Tollgate.make).pipe(Layer.provide(ServiceStore.layer))
}
