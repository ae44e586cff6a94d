/**
 * The service's HTTP API:
 *
 * | route | does |
 * | --- | --- |
 * | `POST /v1/consume` `{key, cost?, policy?}` | decides now: `{allowed, remaining, retryAfter, resetAfter, limit, policy, degraded?}` (ms) |
 * | `POST /v1/acquire` `{key, cost?, policy?}` | decides now: `{allowed, policy, degraded?}` |
 * | `POST /v1/wait` `{key, cost?, maxWait?, policy?}` | waits its turn (FIFO), up to `maxWait` ms |
 * | `GET /v1/peek?key=&cost=&policy=`, `POST /v1/peek` | what `consume` would decide, taking nothing |
 * | `POST /v1/reset` `{key, policy?}` | admin (bearer token): forgets the key's usage |
 * | `GET /healthz`, `GET /readyz` | liveness, readiness |
 * | `GET /metrics` | Prometheus text format |
 *
 * A denial is a normal `200` with `allowed: false`; `degraded: true` marks a
 * decision made by the Redis fallback. Errors are `application/problem+json`
 * (RFC 9457) whose `detail` names the field.
 *
 * @since 0.1.0
 */
import { Effect, Layer, Metric, Schema } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import * as Problem from "../http/Problem.ts"
import * as AdminAuth from "./AdminAuth.ts"
import * as Body from "./Body.ts"
import * as FieldErrors from "./FieldErrors.ts"
import * as HttpMetrics from "./HttpMetrics.ts"
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

const Cost = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000_000 }))

// The paths the API serves, with their methods, for 405s.
const allowed: Record<string, string> = {
  "/v1/consume": "POST",
  "/v1/acquire": "POST",
  "/v1/wait": "POST",
  "/v1/peek": "GET, HEAD, POST",
  "/v1/reset": "POST",
  "/healthz": "GET, HEAD",
  "/readyz": "GET, HEAD",
  "/metrics": "GET, HEAD"
}

// The methods the not-found/405 fallback takes: all but HEAD (see below). Others are a bare 404.
const fallbackMethods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "QUERY"] as const

const json = (body: unknown) => HttpServerResponse.jsonUnsafe(body, { headers: { "cache-control": "no-store" } })

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

      const Key = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(maxKeyLength))
      const Request = Schema.Struct({
        key: Key,
        cost: Schema.optionalKey(Cost),
        policy: Schema.optionalKey(ServiceConfig.PolicyName)
      })
      const WaitRequest = Schema.Struct({
        ...Request.fields,
        maxWait: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: maxWaitMillis })))
      })
      const ResetRequest = Schema.Struct({ key: Key, policy: Schema.optionalKey(ServiceConfig.PolicyName) })
      const PeekQuery = Schema.Struct({
        key: Key,
        cost: Schema.optionalKey(Schema.FiniteFromString.pipe(Schema.decodeTo(Cost))),
        policy: Schema.optionalKey(ServiceConfig.PolicyName)
      })
      const readRequest = Body.json(Request, maxBodyBytes)
      // The gauges show from the start, at zero.
      yield* Metric.update(HttpMetrics.inFlight, 0)
      yield* Metric.update(HttpMetrics.waiting, 0)
      const validateQuery = Body.validate(PeekQuery)

      const handle = <R>(
        route: string,
        effect: Effect.Effect<HttpServerResponse.HttpServerResponse, RouteError, R>
      ) =>
        effect.pipe(
          Effect.catch(problemOf),
          // While draining, connections are closed after their response instead of kept alive,
          // so that the server's close does not wait for clients to drop idle connections.
          Effect.flatMap((response) =>
            Effect.map(
              lifecycle.isDraining,
              (draining) => draining ? HttpServerResponse.setHeader(response, "connection", "close") : response
            )
          ),
          Effect.tap((response) => HttpMetrics.count(route, response.status)),
          HttpMetrics.whileInFlight
        )

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
            const query = yield* HttpServerRequest.ParsedSearchParams
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
  PrometheusMetrics.layerHttp({ path: "/metrics" })
)
