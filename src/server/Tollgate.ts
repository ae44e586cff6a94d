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
import type { Decision } from "../Decision.ts"
import type { InvalidPolicy } from "../Errors.ts"
import { RateLimiter } from "../RateLimiter.ts"
import { CurrentStore } from "../Store.ts"
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
  return decision.degraded === true ? { ...result, degraded: true } : result
}

// Buckets are kept apart per policy: the limiter's key is "<policy>|<key>"; policy names have no "|".
const SEPARATOR = "|"

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
  readonly consume: (request: Request) => Effect.Effect<Result, CallError>
  readonly acquire: (request: Request) => Effect.Effect<AcquireResult, CallError>
  readonly peek: (request: Request) => Effect.Effect<Result, CallError>
  readonly wait: (request: Request & { readonly maxWaitMillis: number }) => Effect.Effect<WaitResult, CallError>
  readonly reset: (request: Request) => Effect.Effect<{ readonly policy: string }, CallError>
  /** Whether the limiter answers (false once it has shut down). */
  readonly ready: Effect.Effect<boolean>
}>()("tollgate/server/Tollgate") {
  /**
   * Starts the limiter in the current scope, on the `Store.CurrentStore` of
   * the context (none: in-process).
   *
   * @since 0.1.0
   */
  static readonly make: Effect.Effect<Tollgate["Service"], InvalidPolicy, ServiceConfig.ServiceConfig | Scope.Scope> =
    Effect.gen(function*() {
      const settings = yield* ServiceConfig.ServiceConfig
      const { policies } = settings
      const fallback = policies.get(settings.defaultPolicy)!
      const limiter = yield* RateLimiter.make({
        policy: (key) => policies.get(key.slice(0, key.indexOf(SEPARATOR))) ?? fallback,
        idleTimeout: settings.limiter.idleTimeout,
        mailboxCapacity: settings.limiter.mailboxCapacity,
        maxWaiters: settings.limiter.maxWaiters,
        // room for "<policy>|" in front of the longest key the API accepts
        maxKeyLength: settings.limits.maxKeyLength + 65,
        name: "service",
        fallback: Option.match(settings.redis, {
          onNone: () => undefined,
          onSome: (redis) => redis.fallback
        })
      })
      const known = [...policies.keys()]
      // A shared store's fallback flags its decisions, and only `consume`
      // carries the flag; in-process, `acquire` keeps its faster path.
      const shared = (yield* CurrentStore) !== undefined

      const route = <A, E>(
        request: Request,
        f: (key: string, policy: string) => Effect.Effect<A, E>
      ): Effect.Effect<A, E | UnknownPolicy> => {
        const policy = ServiceConfig.policyName(settings, request.key, request.policy)
        if (policy === undefined) return Effect.fail(new UnknownPolicy({ policy: request.policy ?? "", known }))
        return f(policy + SEPARATOR + request.key, policy)
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
              shared
                ? Effect.map(
                  limiter.consume(key, { cost: request.cost }),
                  (d) =>
                    d.degraded === true
                      ? { allowed: d.allowed, policy, degraded: true }
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
              return yield* limiter.wait(key, { cost: request.cost, maxWait: request.maxWaitMillis }).pipe(
                Effect.flatMap(() => Clock.currentTimeMillis),
                Effect.map((end): WaitResult => ({ allowed: true, waited: Math.max(0, end - start), policy })),
                Effect.catchTag(
                  "RateLimitExceeded",
                  (e) => Effect.succeed<WaitResult>({ allowed: false, retryAfter: millis(e.retryAfter), policy })
                )
              )
            })),
        reset: (request) => route(request, (key, policy) => Effect.as(limiter.reset(key), { policy })),
        ready: limiter.peek(settings.defaultPolicy + SEPARATOR + "tollgate:readyz").pipe(
          Effect.as(true),
          Effect.orElseSucceed(() => false)
        )
      })
    })

  /**
   * The service core as a layer, on the configured store (`ServiceStore.layer`).
   *
   * @since 0.1.0
   */
  static readonly layer: Layer.Layer<
    Tollgate,
    InvalidPolicy | ServiceConfig.InvalidConfig | ServiceStore.RedisUnavailable,
    ServiceConfig.ServiceConfig
  > = Layer.effect(Tollgate, Tollgate.make).pipe(Layer.provide(ServiceStore.layer))
}
