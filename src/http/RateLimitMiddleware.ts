/**
 * Rate limiting for an effect/http app: middleware that takes a key's cost
 * from a limiter before the handler runs, answers `429 Too Many Requests`
 * (with `Retry-After`, `RateLimit` and `RateLimit-Policy`) when the key is
 * over its limit, and adds `RateLimit` and `RateLimit-Policy` to every
 * response it lets through.
 *
 * - The key is the client's address by default (the socket's peer; forwarding
 *   headers only from trusted proxies, see `ClientAddress`), a header (for an
 *   authenticated API key), or any function of the request.
 * - Cost and policy are per middleware, so per route: provide the middleware's
 *   layer to the routes it guards.
 *
 * @since 0.1.0
 */
import { Effect, type Layer, Predicate, Result, type Scope, type Types } from "effect"
import { HttpEffect, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { Decision } from "../Decision.ts"
import { InvalidPolicy } from "../Errors.ts"
import * as Trace from "../internal/Trace.ts"
import * as Policy from "../Policy.ts"
import { RateLimiter } from "../RateLimiter.ts"
import * as ClientAddress from "./ClientAddress.ts"
import * as Problem from "./Problem.ts"
import * as RateLimitHeaders from "./RateLimitHeaders.ts"

/**
 * Where a request's key comes from.
 *
 * - `"address"`: the client address, as `ip:<address>` (IPv6 by /64 network).
 * - `{ header }`: that header's value, as `<header>:<value>`; requests without
 *   it fall back to the client address. Use it only for a header your app
 *   authenticates (an API key checked before this middleware, or by a proxy
 *   that strips it from clients): a client can put anything in a header.
 * - a function: its result is the key; `undefined` lets the request through
 *   unlimited (health checks, internal callers). It may return several keys
 *   (a user, its organisation, a global key): the request takes its cost
 *   from every key or from none, and the headers report the most
 *   restrictive key.
 *
 * @example
 * ```ts
 * import type { RateLimitMiddleware } from "tollgate/http"
 *
 * const byApiKey: RateLimitMiddleware.KeySource = { header: "x-api-key" }
 * const byPath: RateLimitMiddleware.KeySource = (request) => `path:${request.url}`
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type KeySource =
  | "address"
  | { readonly header: string }
  | ((
    request: HttpServerRequest.HttpServerRequest
  ) => string | ReadonlyArray<string> | undefined | Effect.Effect<string | ReadonlyArray<string> | undefined>)

// One key, or several taken all or nothing.
type Keys = string | ReadonlyArray<string>

/**
 * Options of the middleware.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import type { RateLimitMiddleware } from "tollgate/http"
 *
 * const options: RateLimitMiddleware.Options = {
 *   name: "search",
 *   policy: Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } }),
 *   cost: 2
 * }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** Where the key comes from. Default `"address"`. */
  readonly key?: KeySource | undefined
  /** Prepended to every key, so routes that share a limiter keep separate buckets (`"search:"`). Default `""`. */
  readonly prefix?: string | undefined
  /** Units a request takes: a positive integer or a function of the request. Default 1. */
  readonly cost?: number | ((request: HttpServerRequest.HttpServerRequest) => number) | undefined
  /**
   * The policy of these routes. With a policy, `layer` and `layerGlobal` run
   * a limiter of their own (started with the layer, stopped with it); without
   * one, they use the `RateLimiter` service, whose policy function may look at
   * the key. `make` decides on the limiter it is given: there the policy only
   * names the quota its headers advertise.
   */
  readonly policy?: Policy.Policy | undefined
  /** The policy's name in `RateLimit` and `RateLimit-Policy` (printable ASCII). Default `"default"`. */
  readonly name?: string | undefined
  /** How the client address is found (trusted proxies, IPv6 grouping). */
  readonly clientAddress?: ClientAddress.Options | undefined
  /**
   * Also write `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`,
   * the fields of earlier drafts, which some clients (effect's
   * `HttpClient.withRateLimiter` among them) read to pace themselves. Default false.
   */
  readonly legacyHeaders?: boolean | undefined
}

/**
 * The middleware: wraps an HTTP handler.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { HttpServerResponse } from "effect/http"
 * import type { RateLimitMiddleware } from "tollgate/http"
 *
 * declare const limit: RateLimitMiddleware.Middleware
 * const app = limit(Effect.succeed(HttpServerResponse.text("hello")))
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type Middleware = <E, R>(
  httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest>

const invalid = (field: string, value: unknown, reason: string) =>
  new InvalidPolicy({ field, value: Predicate.isString(value) ? JSON.stringify(value) : String(value), reason })

const isCost = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) > 0

const limiterErrorResponse = (
  error: RateLimiter.CallError,
  keyField: string
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  if (error._tag === "Overloaded") {
    return Effect.succeed(
      Problem.response("overloaded", "too many requests are queued for this client; retry shortly", {
        headers: { "retry-after": "1" }
      })
    )
  }
  if (error._tag === "LimiterShutdown") {
    return Effect.succeed(
      Problem.response("shutting-down", "the server is shutting down; retry shortly", {
        headers: { "retry-after": "1" }
      })
    )
  }
  if (error._tag === "StoreUnavailable") {
    // Only with the limiter's `fallback.mode: "error"` (the other modes answer
    // for the store): the client may retry shortly, the app is not at fault.
    return Effect.succeed(
      Problem.response("store-unavailable", "the shared rate limit store did not answer; retry shortly", {
        headers: { "retry-after": "1" }
      })
    )
  }
  if (error._tag === "InvalidRequest" && error.field === "key") {
    return Effect.succeed(
      Problem.response("invalid-request", `${keyField}: ${error.reason}`, { extensions: { field: keyField } })
    )
  }
  // Any other invalid input (a cost above capacity, a bad policy) is the app's configuration, not the client's
  // doing; a failed bucket is the limiter's.
  return Effect.logError("rate limit middleware misconfigured", error).pipe(
    Effect.as(Problem.response("internal", "the rate limiter is misconfigured"))
  )
}

/**
 * Builds the middleware around a limiter. The building block of
 * {@link layer}; use it directly to wrap a plain `HttpServer.serve` app.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { HttpServerResponse } from "effect/http"
 * import { RateLimiter } from "tollgate"
 * import { RateLimitMiddleware } from "tollgate/http"
 *
 * const app = Effect.gen(function*() {
 *   const limit = yield* RateLimitMiddleware.make(yield* RateLimiter, { cost: 2 })
 *   return limit(Effect.succeed(HttpServerResponse.text("hello")))
 * })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (limiter: RateLimiter["Service"], options?: Options): Effect.Effect<Middleware, InvalidPolicy> =>
  Effect.suspend(() => {
    const name = options?.name ?? "default"
    const badName = RateLimitHeaders.checkName(name)
    if (badName !== undefined) return Effect.fail(badName)
    const prefix = options?.prefix ?? ""
    if (!Predicate.isString(prefix)) return Effect.fail(invalid("prefix", prefix, "must be a string"))
    const cost = options?.cost ?? 1
    if (!Predicate.isFunction(cost) && !isCost(cost)) {
      return Effect.fail(invalid("cost", cost, "must be a positive integer or a function"))
    }
    const resolved = ClientAddress.make(options?.clientAddress)
    if (Result.isFailure(resolved)) return Effect.fail(resolved.failure)
    const clientAddress = resolved.success
    const addressKey = (request: HttpServerRequest.HttpServerRequest) =>
      `${prefix}ip:${clientAddress(request) ?? "unknown"}`

    const source = options?.key ?? "address"
    const prefixed = (k: Keys | undefined): Keys | undefined =>
      k === undefined ? undefined : Predicate.isString(k) ? prefix + k : k.map((one) => prefix + one)
    let keyOf: (request: HttpServerRequest.HttpServerRequest) => Keys | undefined | Effect.Effect<Keys | undefined>
    let keyField = "client address"
    if (source === "address") {
      keyOf = addressKey
    } else if (Predicate.isFunction(source)) {
      keyOf = (request) => {
        const key = source(request)
        return Effect.isEffect(key) ? Effect.map(key, prefixed) : prefixed(key)
      }
      keyField = "key"
    } else if (Predicate.hasProperty(source, "header") && Predicate.isString(source.header) && source.header !== "") {
      const header = source.header.toLowerCase()
      keyOf = (request) => {
        const value = request.headers[header]
        return value === undefined || value === "" ? addressKey(request) : `${prefix}${header}:${value}`
      }
      keyField = `the ${header} header`
    } else {
      return Effect.fail(invalid("key", typeof source, "must be \"address\", { header } or a function"))
    }

    const policy = options?.policy
    const fixed = policy !== undefined && policy._tag !== "Invalid" ? RateLimitHeaders.quotaOf(name, policy) : undefined
    const quotaOf: (decision: Decision) => RateLimitHeaders.Quota = fixed !== undefined
      ? () => fixed
      : (decision) => ({ name, limit: decision.limit })
    const legacy = options?.legacyHeaders === true

    const check = <E, R>(
      httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
      request: HttpServerRequest.HttpServerRequest,
      key: Keys | undefined
    ): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> => {
      if (key === undefined) return httpEffect
      const units = Predicate.isFunction(cost) ? cost(request) : cost
      const consume = limiter.consume(key, { cost: units })
      // the decision as a span of its own, with the request's method and route (when a tracer is installed)
      const decided = Trace.enabled()
        ? Trace.span("RateLimitMiddleware.decide", () => ({
          "tollgate.middleware": name,
          "tollgate.cost": units,
          "http.request.method": request.method,
          "url.path": request.url.split("?")[0]
        }), consume)
        : consume
      return Effect.matchEffect(decided, {
        onFailure: (error) => limiterErrorResponse(error, keyField),
        onSuccess: (decision) => {
          const headers = RateLimitHeaders.make(quotaOf(decision), decision, { legacy })
          if (!decision.allowed) {
            return Effect.succeed(
              Problem.response("rate-limited", `rate limit exceeded; retry in ${headers["retry-after"]} s`, {
                headers
              })
            )
          }
          // Added just before the response is sent, so that a handler's error response carries them too.
          return HttpEffect.withPreResponseHandler(httpEffect, (_, response) =>
            Effect.succeed(
              response.status === 429 && response.headers["ratelimit"] !== undefined
                ? response
                : HttpServerResponse.setHeaders(response, headers)
            ))
        }
      })
    }

    const middleware: Middleware = (httpEffect) =>
      HttpServerRequest.HttpServerRequest.use((request) => {
        const key = keyOf(request)
        return Effect.isEffect(key)
          ? Effect.flatMap(key, (k) => check(httpEffect, request, k))
          : check(httpEffect, request, key)
      })
    return Effect.succeed(middleware)
  })

const build = (options: Options | undefined): Effect.Effect<Middleware, InvalidPolicy, RateLimiter | Scope.Scope> =>
  Effect.gen(function*() {
    const policy = options?.policy
    if (policy === undefined) return yield* make(yield* RateLimiter, options)
    yield* Policy.validate(policy)
    const limiter = yield* RateLimiter.make({ policy, name: `http:${options?.name ?? "default"}` })
    return yield* make(limiter, options)
  })

// HttpRouter's middleware signature: the handler it wraps has every error unhandled.
const forRouter = (options: Options | undefined) =>
  Effect.map(build(options), (middleware) =>
  (
    httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled, HttpServerRequest.HttpServerRequest> =>
    middleware(httpEffect))

/**
 * The middleware as a layer for `HttpRouter` routes: provide it to the routes
 * it guards. With a `policy` it runs its own limiter for them; without one it
 * needs the `RateLimiter` service.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { HttpRouter, HttpServerResponse } from "effect/http"
 * import { Policy } from "tollgate"
 * import { RateLimitMiddleware } from "tollgate/http"
 *
 * // a search costs 2 units of 10, refilled 1 every 2 seconds: 5 searches per client, then one every 4 seconds
 * const Search = HttpRouter.add("GET", "/search", HttpServerResponse.text("results")).pipe(
 *   Layer.provide(RateLimitMiddleware.layer({
 *     name: "search",
 *     policy: Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "2 seconds" } }),
 *     cost: 2
 *   }))
 * )
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export function layer(options: Options & { readonly policy: Policy.Policy }): Layer.Layer<never, InvalidPolicy>
export function layer(options?: Options): Layer.Layer<never, InvalidPolicy, RateLimiter>
export function layer(options?: Options): Layer.Layer<never, InvalidPolicy, RateLimiter> {
  return HttpRouter.middleware(forRouter(options)).layer
}

/**
 * The middleware for every route of the router (and for requests that match
 * no route).
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { HttpRouter, HttpServerResponse } from "effect/http"
 * import { Policy } from "tollgate"
 * import { RateLimitMiddleware } from "tollgate/http"
 *
 * const App = Layer.mergeAll(
 *   HttpRouter.add("GET", "/", HttpServerResponse.text("home")),
 *   RateLimitMiddleware.layerGlobal({
 *     policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } }),
 *     clientAddress: { trustedProxies: ["10.0.0.0/8"] }
 *   })
 * )
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export function layerGlobal(
  options: Options & { readonly policy: Policy.Policy }
): Layer.Layer<never, InvalidPolicy, HttpRouter.HttpRouter>
export function layerGlobal(options?: Options): Layer.Layer<never, InvalidPolicy, HttpRouter.HttpRouter | RateLimiter>
export function layerGlobal(options?: Options): Layer.Layer<never, InvalidPolicy, HttpRouter.HttpRouter | RateLimiter> {
  return HttpRouter.middleware(forRouter(options), { global: true })
}
