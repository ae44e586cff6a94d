/**
 * The service's HTTP API:
 *
 * | route | does |
 * | --- | --- |
 * | `POST /v1/consume` `{key, cost?, policy?}` | decides now: `{allowed, remaining, retryAfter, resetAfter, limit, policy, degraded?}` (ms) |
 * | `POST /v1/acquire` `{key, cost?, policy?}` | decides now: `{allowed, policy, degraded?}` |
 * | `POST /v1/wait` `{key, cost?, maxWait?, priority?, tenant?, weight?, policy?}` | waits its turn (in arrival order, higher `priority` first, `tenant`s by `weight`), up to `maxWait` ms |
 * | `GET /v1/peek?key=&cost=&policy=`, `POST /v1/peek` | what `consume` would decide, taking nothing |
 * | `POST /v1/reset` `{key, policy?}` | admin (bearer token): forgets the key's usage |
 * | `POST /v1/penalty` `{key, cost?, policy?}` | takes `cost` whatever the limit: the key after it, `delay` (ms) while in debt |
 * | `POST /v1/reward` `{key, cost?, policy?}` | gives `cost` units back, capped at the limit: the key after it |
 * | `POST /v1/take` `{key, cost?, policy?}` | takes what there is, at most `cost`: the key after it and `taken` |
 * | `GET /v1/get?key=&policy=`, `POST /v1/get` | how the key stands, or `{found: false}` for a key with no state |
 * | `POST /v1/set` `{key, used, policy?}` | admin: the key as if `used` units had been used from full |
 * | `POST /v1/delete` `{key, policy?}` | admin: forgets the key and a block: `{deleted}`, whether it had state |
 * | `POST /v1/block` `{key, duration, policy?}` | admin: refuses the key for `duration` ms (`null`: until reset) |
 * | `POST /v1/fill` `{key, policy?}` | admin: the key full, a block ended |
 * | `POST /v1/batch` `{requests: [{key, cost?, policy?, op?}]}` | many independent decisions: `{results: [...]}` |
 * | `POST /v1/consume-all` `{keys, cost?}` | one decision over several keys, all or nothing |
 * | `POST /v1/feedback` `{key, signal, retryAfter?, latency?, policy?}` | an adaptive key told how upstream answered: `{applied, policy}` |
 * | any method `/v1/check[/original/path]` | forward authentication for a gateway: 200, or 429 with `Retry-After` |
 * | `GET /healthz`, `GET /readyz` | liveness, readiness |
 * | `GET /metrics` | Prometheus text format |
 *
 * A denial is a normal `200` with `allowed: false`; `degraded: true` marks a
 * decision made by the Redis fallback, `dryRun: true` a refusal that a
 * dry-run policy let through. Errors are `application/problem+json`
 * (RFC 9457) whose `detail` names the field.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Layer, Metric, Schema } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import type { Decision } from "../Decision.ts"
import * as Problem from "../http/Problem.ts"
import * as RateLimitHeaders from "../http/RateLimitHeaders.ts"
import * as AdminAuth from "./internal/AdminAuth.ts"
import * as Body from "./internal/Body.ts"
import * as FieldErrors from "./internal/FieldErrors.ts"
import * as HttpMetrics from "./internal/HttpMetrics.ts"
import * as Query from "./internal/Query.ts"
import * as Lifecycle from "./Lifecycle.ts"
import * as ServiceConfig from "./ServiceConfig.ts"
import * as Tollgate from "./Tollgate.ts"

/**
 * Every error a route can end with.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Routes } from "tollgate/server"
 *
 * declare const error: Routes.RouteError
 * const response = Routes.problemOf(error)
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type RouteError =
  | Body.BodyError
  | Tollgate.CallError
  | AdminAuth.Unauthorized
  | AdminAuth.AdminDisabled
  | Lifecycle.ShuttingDown

const retryShortly = { "retry-after": "1" }

/**
 * The problem response for an error.
 *
 * @example
 * ```ts
 * import { Lifecycle, Routes } from "tollgate/server"
 *
 * const response = Routes.problemOf(new Lifecycle.ShuttingDown()) // 503 with Retry-After
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export const problemOf = (error: RouteError): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  switch (error._tag) {
    case "InvalidBody":
      return Effect.succeed(Problem.response("invalid-request", error.message, {
        extensions: { errors: error.errors }
      }))
    case "MalformedJson":
      return Effect.succeed(Problem.response("malformed-json", error.message))
    case "BodyTooLarge":
      return Effect.succeed(Problem.response("body-too-large", error.message, { extensions: { limit: error.limit } }))
    case "UnknownPolicy":
      return Effect.succeed(Problem.response("invalid-request", error.message, {
        extensions: { errors: [{ field: "policy", value: JSON.stringify(error.policy), reason: "no such policy" }] }
      }))
    case "InvalidRequest": {
      const field = { field: error.field, value: error.value, reason: error.reason }
      return Effect.succeed(Problem.response("invalid-request", FieldErrors.format(field), {
        extensions: { errors: [field] }
      }))
    }
    case "Overloaded":
      return Effect.succeed(
        Problem.response("overloaded", "too many requests are queued for this key; retry shortly", {
          headers: retryShortly
        })
      )
    case "LimiterShutdown":
    case "ShuttingDown":
      return Effect.succeed(Problem.response("shutting-down", "the service is shutting down; retry", {
        headers: retryShortly
      }))
    case "StoreUnavailable":
      // Only with `fallback.mode: "error"`: the other modes answer for Redis. The reason stays in the metrics.
      return Effect.succeed(
        Problem.response("store-unavailable", "the shared store (Redis) did not answer; retry shortly", {
          headers: retryShortly
        })
      )
    case "Unauthorized":
      return Effect.succeed(Problem.response("unauthorized", `admin operation: ${error.reason}`, {
        headers: { "www-authenticate": "Bearer realm=\"tollgate\"" }
      }))
    case "AdminDisabled":
      return Effect.succeed(Problem.response("admin-disabled", error.message))
    default:
      return Effect.logError("tollgate internal error", error).pipe(
        Effect.as(Problem.response("internal", "internal error"))
      )
  }
}

// A key with a lone surrogate (a JSON escape such as "\ud800") is refused: stored as UTF-8 (in Redis) every
// lone surrogate becomes U+FFFD, so different keys would share one bucket.
const wellFormed = Schema.makeFilter((key: string) => !/\p{Surrogate}/u.test(key), {
  expected: "a key of whole Unicode characters (not a lone surrogate)"
})

const Cost = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000_000 }))

// The paths the API serves, with their methods, for 405s.
const allowed: Record<string, string> = {
  "/v1/consume": "POST",
  "/v1/acquire": "POST",
  "/v1/wait": "POST",
  "/v1/peek": "GET, HEAD, POST",
  "/v1/reset": "POST",
  "/v1/penalty": "POST",
  "/v1/reward": "POST",
  "/v1/take": "POST",
  "/v1/get": "GET, HEAD, POST",
  "/v1/set": "POST",
  "/v1/delete": "POST",
  "/v1/block": "POST",
  "/v1/fill": "POST",
  "/v1/batch": "POST",
  "/v1/consume-all": "POST",
  "/v1/feedback": "POST",
  "/healthz": "GET, HEAD",
  "/readyz": "GET, HEAD",
  "/metrics": "GET, HEAD"
}

// One item's error in a batch answer: the problem it would have been on its own.
const itemError = (error: Body.InvalidBody | Tollgate.CallError): Readonly<Record<string, unknown>> => {
  switch (error._tag) {
    case "InvalidBody":
      return { type: Problem.typeOf("invalid-request"), status: 400, detail: error.message, errors: error.errors }
    case "UnknownPolicy":
      return { type: Problem.typeOf("invalid-request"), status: 400, detail: error.message }
    case "InvalidRequest":
      return {
        type: Problem.typeOf("invalid-request"),
        status: 400,
        detail: FieldErrors.format({ field: error.field, value: error.value, reason: error.reason })
      }
    case "Overloaded":
      return { type: Problem.typeOf("overloaded"), status: 503, detail: "too many requests are queued for this key" }
    case "StoreUnavailable":
      return {
        type: Problem.typeOf("store-unavailable"),
        status: 503,
        detail: "the shared store (Redis) did not answer"
      }
    case "LimiterShutdown":
      return { type: Problem.typeOf("shutting-down"), status: 503, detail: "the service is shutting down" }
    default:
      return { type: Problem.typeOf("internal"), status: 500, detail: "internal error" }
  }
}

const toCheckBody = (rule: string, policy: string, decision: Decision) => ({
  allowed: decision.allowed,
  remaining: decision.remaining,
  retryAfter: millis(decision.retryAfter),
  resetAfter: millis(decision.resetAfter),
  limit: decision.limit,
  rule,
  policy
})

const millis = (d: Duration.Duration): number | null => {
  const ms = Duration.toMillis(d)
  return Number.isFinite(ms) ? Math.ceil(ms) : null
}

// The methods the not-found/405 fallback takes: all but HEAD (see below). Others are a bare 404.
const fallbackMethods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "QUERY"] as const

// Set after the body rather than passed as an option: the option's headers are
// copied into a record whose prototype is then swapped, about 1 µs more per answer.
const json = (body: unknown) =>
  HttpServerResponse.setHeader(HttpServerResponse.jsonUnsafe(body), "cache-control", "no-store")

/**
 * The routes, as a layer for `HttpRouter.serve`.
 *
 * @example
 * ```ts
 * import { HttpRouter } from "effect/http"
 * import { Routes } from "tollgate/server"
 *
 * const Http = HttpRouter.serve(Routes.layer)
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layer: Layer.Layer<
  never,
  never,
  HttpRouter.HttpRouter | ServiceConfig.ServiceConfig | Tollgate.Tollgate | Lifecycle.Lifecycle
> = Layer.mergeAll(
  HttpRouter.use((router) =>
    Effect.gen(function*() {
      const settings = yield* ServiceConfig.ServiceConfig
      const tollgate = yield* Tollgate.Tollgate
      const lifecycle = yield* Lifecycle.Lifecycle
      const { maxBodyBytes, maxKeyLength, maxWaitMillis } = settings.limits
      const authorize = AdminAuth.make(settings.adminToken)

      const Key = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(maxKeyLength), wellFormed)
      const Request = Schema.Struct({
        key: Key,
        cost: Schema.optionalKey(Cost),
        policy: Schema.optionalKey(ServiceConfig.PolicyName)
      })
      const WaitRequest = Schema.Struct({
        ...Request.fields,
        maxWait: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: maxWaitMillis }))),
        priority: Schema.optionalKey(Schema.Int),
        tenant: Schema.optionalKey(Key),
        weight: Schema.optionalKey(Schema.Finite.check(Schema.isGreaterThan(0)))
      })
      const ConsumeAllRequest = Schema.Struct({
        keys: Schema.Array(Key).check(Schema.isMinLength(1), Schema.isMaxLength(64)),
        cost: Schema.optionalKey(Cost)
      })
      const FeedbackRequest = Schema.Struct({
        key: Key,
        policy: Schema.optionalKey(ServiceConfig.PolicyName),
        signal: Schema.Literals(["ok", "throttled", "latency"]),
        retryAfter: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
        latency: Schema.optionalKey(Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0)))
      })
      const ResetRequest = Schema.Struct({ key: Key, policy: Schema.optionalKey(ServiceConfig.PolicyName) })
      const SetRequest = Schema.Struct({
        ...ResetRequest.fields,
        used: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1_000_000_000 }))
      })
      const BlockRequest = Schema.Struct({
        ...ResetRequest.fields,
        duration: Schema.NullOr(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })))
      })
      const GetQuery = Schema.Struct({ key: Key, policy: Schema.optionalKey(ServiceConfig.PolicyName) })
      const validateGet = Body.validate(GetQuery)
      const PeekQuery = Schema.Struct({
        key: Key,
        cost: Schema.optionalKey(Schema.FiniteFromString.pipe(Schema.decodeTo(Cost))),
        policy: Schema.optionalKey(ServiceConfig.PolicyName)
      })
      const readRequest = Body.json(Request, maxBodyBytes)
      const BatchItem = Schema.Struct({
        ...Request.fields,
        op: Schema.optionalKey(Schema.Literals(["consume", "peek"]))
      })
      const validateItem = Body.validateExit(BatchItem)
      const readBatch = Body.json(
        Schema.Struct({
          requests: Schema.Array(Schema.Unknown).check(
            Schema.isMinLength(1),
            Schema.isMaxLength(settings.limits.maxBatch)
          )
        }),
        settings.limits.maxBatchBodyBytes
      )
      // The gauges show from the start, at zero.
      yield* Metric.update(HttpMetrics.inFlight, 0)
      yield* Metric.update(HttpMetrics.waiting, 0)
      const validateQuery = Body.validate(PeekQuery)

      const context = yield* Effect.context<never>()
      // The wrapper of every API route: answers errors as problems, counts
      // the answer and the requests in flight. Metrics are updated in place
      // (no fiber step per update): this runs on every request, and its cost
      // shows next to a bare route's. While draining, the HTTP server itself
      // (Server.layerHttp) closes each connection after its answer.
      const handle = <R>(
        route: string,
        effect: Effect.Effect<HttpServerResponse.HttpServerResponse, RouteError, R>
      ): Effect.Effect<HttpServerResponse.HttpServerResponse, never, R> => {
        const count = HttpMetrics.routeCounter(route)
        const answered = (response: HttpServerResponse.HttpServerResponse) => {
          count(response.status, context)
          return response
        }
        const done = () => {
          HttpMetrics.inFlight.modifyUnsafe(-1, context)
          return Effect.void
        }
        const run = Effect.onExit(
          Effect.matchEffect(effect, {
            onFailure: (error) => Effect.map(problemOf(error), answered),
            onSuccess: (response) => Effect.succeed(answered(response))
          }),
          done
        )
        return Effect.suspend(() => {
          HttpMetrics.inFlight.modifyUnsafe(1, context)
          return run
        })
      }

      yield* router.add(
        "POST",
        "/v1/consume",
        handle("/v1/consume", Effect.flatMap(readRequest, (request) => Effect.map(tollgate.consume(request), json)))
      )
      yield* router.add(
        "POST",
        "/v1/acquire",
        handle("/v1/acquire", Effect.flatMap(readRequest, (request) => Effect.map(tollgate.acquire(request), json)))
      )
      yield* router.add(
        "POST",
        "/v1/peek",
        handle("/v1/peek", Effect.flatMap(readRequest, (request) => Effect.map(tollgate.peek(request), json)))
      )
      yield* router.add(
        "GET",
        "/v1/peek",
        handle(
          "/v1/peek",
          Effect.gen(function*() {
            const query = yield* Query.parse(
              (yield* HttpServerRequest.HttpServerRequest).url,
              yield* HttpServerRequest.ParsedSearchParams
            )
            const request = yield* validateQuery(query)
            return json(yield* tollgate.peek(request))
          })
        )
      )
      yield* router.add(
        "POST",
        "/v1/wait",
        handle(
          "/v1/wait",
          Effect.gen(function*() {
            const request = yield* Body.json(WaitRequest, maxBodyBytes)
            if (yield* lifecycle.isDraining) return yield* new Lifecycle.ShuttingDown()
            const result = yield* HttpMetrics.whileWaiting(
              Effect.raceFirst(
                tollgate.wait({ ...request, maxWaitMillis: request.maxWait ?? maxWaitMillis }),
                Effect.andThen(lifecycle.draining, Effect.fail(new Lifecycle.ShuttingDown()))
              )
            )
            return json(result)
          })
        )
      )
      yield* router.add(
        "POST",
        "/v1/reset",
        handle(
          "/v1/reset",
          Effect.gen(function*() {
            yield* authorize
            const request = yield* Body.json(ResetRequest, maxBodyBytes)
            const { policy } = yield* tollgate.reset(request)
            return json({ reset: true, policy })
          })
        )
      )
      // One decision-like operation on a key: read, call, answer.
      const keyRoute = <A extends { readonly key: string }, B>(
        path: `/v1/${string}`,
        read: Effect.Effect<A, RouteError, HttpServerRequest.HttpServerRequest>,
        f: (request: A) => Effect.Effect<B, Tollgate.CallError>,
        admin = false
      ) =>
        router.add(
          "POST",
          path,
          handle(
            path,
            Effect.gen(function*() {
              if (admin) yield* authorize
              return json(yield* f(yield* read))
            })
          )
        )
      yield* keyRoute("/v1/penalty", readRequest, tollgate.penalty)
      yield* keyRoute("/v1/reward", readRequest, tollgate.reward)
      yield* keyRoute("/v1/take", readRequest, tollgate.take)
      yield* keyRoute("/v1/get", Body.json(ResetRequest, maxBodyBytes), tollgate.get)
      yield* router.add(
        "GET",
        "/v1/get",
        handle(
          "/v1/get",
          Effect.gen(function*() {
            const query = yield* Query.parse(
              (yield* HttpServerRequest.HttpServerRequest).url,
              yield* HttpServerRequest.ParsedSearchParams
            )
            return json(yield* tollgate.get(yield* validateGet(query)))
          })
        )
      )
      yield* keyRoute(
        "/v1/set",
        Body.json(SetRequest, maxBodyBytes),
        (r) => tollgate.set({ key: r.key, cost: r.used, policy: r.policy }),
        true
      )
      yield* keyRoute("/v1/delete", Body.json(ResetRequest, maxBodyBytes), tollgate.delete, true)
      yield* keyRoute(
        "/v1/block",
        Body.json(BlockRequest, maxBodyBytes),
        (r) => tollgate.block({ key: r.key, policy: r.policy, durationMillis: r.duration }),
        true
      )
      yield* keyRoute("/v1/fill", Body.json(ResetRequest, maxBodyBytes), tollgate.fill, true)
      yield* router.add(
        "POST",
        "/v1/consume-all",
        handle(
          "/v1/consume-all",
          Effect.flatMap(Body.json(ConsumeAllRequest, maxBodyBytes), (request) =>
            Effect.map(tollgate.consumeAll(request), json))
        )
      )
      yield* router.add(
        "POST",
        "/v1/feedback",
        handle(
          "/v1/feedback",
          Effect.flatMap(Body.json(FeedbackRequest, maxBodyBytes), (request) =>
            Effect.map(tollgate.feedback(request), ({ policy }) =>
              json({ applied: true, policy })))
        )
      )
      yield* router.add(
        "POST",
        "/v1/batch",
        handle(
          "/v1/batch",
          Effect.flatMap(readBatch, ({ requests }) =>
            Effect.map(
              Effect.forEach(requests, (item) => {
                const request = validateItem(item)
                const decided = Effect.flatMap(request, (r) =>
                  r.op === "peek" ? tollgate.peek(r) : tollgate.consume(r))
                return Effect.catch(decided, (error) =>
                  Effect.succeed({ error: itemError(error) }))
              }),
              (results) => json({ results })
            ))
        )
      )
      const check = handle(
        "/v1/check",
        HttpServerRequest.HttpServerRequest.use((request) =>
          Effect.map(tollgate.check(request, "/v1/check"), (result) => {
            if (result._tag === "NoRule") return json({ allowed: true })
            const { decision, quota } = result
            const headers = RateLimitHeaders.make(quota, decision) // a fresh record
            headers["cache-control"] = "no-store"
            const body = toCheckBody(result.rule, result.policy, decision)
            return decision.allowed
              ? HttpServerResponse.setHeaders(HttpServerResponse.jsonUnsafe(body), headers)
              : Problem.response("rate-limited", `rate limit exceeded; retry in ${headers["retry-after"]} s`, {
                extensions: body,
                headers
              })
          })
        )
      )
      yield* router.add("*", "/v1/check/*", check)
      yield* router.add("GET", "/healthz", handle("/healthz", Effect.succeed(json({ status: "ok" }))))
      yield* router.add(
        "GET",
        "/readyz",
        handle(
          "/readyz",
          Effect.gen(function*() {
            const draining = yield* lifecycle.isDraining
            const ready = !draining && (yield* tollgate.ready)
            return HttpServerResponse.jsonUnsafe(
              { status: ready ? "ready" : draining ? "draining" : "not ready" },
              { status: ready ? 200 : 503, headers: { "cache-control": "no-store" } }
            )
          })
        )
      )
      const fallback = HttpServerRequest.HttpServerRequest.use((request) => {
        const path = request.url.split("?")[0]
        const allow = allowed[path]
        return Effect.succeed(
          allow === undefined
            ? Problem.response("not-found", `no route for ${request.method} ${path.slice(0, 128)}`)
            : Problem.response("method-not-allowed", `${path} accepts ${allow}`, { headers: { allow } })
        )
      })
      // Every method but HEAD: the router tries a HEAD it finds no route for as a GET, so HEAD
      // is answered wherever GET is (Node sends no body), and by this fallback elsewhere.
      yield* router.addAll(fallbackMethods.map((method) => HttpRouter.route(method, "/*", fallback)))
    })
  ),
  PrometheusMetrics.layerHttp({ path: "/metrics" }),
  // The router finds no route for a path it cannot percent-decode, and answers an empty 404; such a path
  // (`/v1/check/a%FF` from a gateway) is a request the service cannot read, answered as one.
  HttpRouter.middleware(
    (httpEffect) =>
      Effect.catch(httpEffect, (error) => {
        const path = undecodablePath(error)
        if (path === undefined) return Effect.fail(error)
        const field = { field: "path", value: FieldErrors.show(path), reason: "is not valid percent-encoded UTF-8" }
        return Effect.succeed(Problem.response("invalid-request", FieldErrors.format(field), {
          extensions: { errors: [field] }
        }))
      }),
    { global: true }
  )
)

// The path of a request the router found no route for because it could not decode the path.
const undecodablePath = (error: unknown): string | undefined => {
  if (!HttpServerError.isHttpServerError(error) || error.reason._tag !== "RouteNotFound") return undefined
  const path = error.reason.request.url.split("?")[0]
  try {
    decodeURI(path)
    return undefined
  } catch {
    return path
  }
}
