/**
 * The service's own HTTP metrics, beside the limiter's: requests by route and
 * status, and requests waiting in `/v1/wait` now. Labels are bounded (route
 * templates and status codes, never keys).
 *
 * @since 0.1.0
 */
import { type Context, Effect, Metric } from "effect"

/**
 * Requests answered, labelled `route` and `status`.
 *
 * @example
 * ```ts
 * import { Metric } from "effect"
 * import * as HttpMetrics from "./HttpMetrics.ts"
 *
 * const effect = Metric.update(Metric.withAttributes(HttpMetrics.requests, { route: "/v1/consume", status: "200" }), 1)
 * ```
 *
 * @since 0.1.0
 */
export const requests = Metric.counter("tollgate_http_requests_total", {
  description: "HTTP requests answered by the tollgate service, by route and status",
  incremental: true
})

/**
 * Requests waiting in `/v1/wait` now.
 *
 * @example
 * ```ts
 * import { Metric } from "effect"
 * import * as HttpMetrics from "./HttpMetrics.ts"
 *
 * const effect = Metric.value(HttpMetrics.waiting)
 * ```
 *
 * @since 0.1.0
 */
export const waiting = Metric.gauge("tollgate_http_waiting", {
  description: "Requests waiting their turn in /v1/wait"
})

/**
 * API requests being handled now (their body read, their decision awaited).
 *
 * @example
 * ```ts
 * import { Metric } from "effect"
 * import * as HttpMetrics from "./HttpMetrics.ts"
 *
 * const effect = Metric.value(HttpMetrics.inFlight)
 * ```
 *
 * @since 0.1.0
 */
export const inFlight = Metric.gauge("tollgate_http_in_flight", {
  description: "API requests being handled now"
})

const counters = new Map<string, Metric.Metric<number, unknown>>()

const counterOf = (route: string, status: number): Metric.Metric<number, unknown> => {
  const id = `${route} ${status}`
  let counter = counters.get(id)
  if (counter === undefined) {
    counter = Metric.withAttributes(requests, { route, status: String(status) })
    counters.set(id, counter)
  }
  return counter
}

/**
 * Counts one answered request.
 *
 * @example
 * ```ts
 * import * as HttpMetrics from "./HttpMetrics.ts"
 *
 * const effect = HttpMetrics.count("/v1/consume", 200)
 * ```
 *
 * @since 0.1.0
 */
export const count = (route: string, status: number): Effect.Effect<void> => Metric.update(counterOf(route, status), 1)

/**
 * Counts one answered request now, in the registry of the given context (the
 * request path's way: no fiber step).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as HttpMetrics from "./HttpMetrics.ts"
 *
 * const effect = Effect.contextWith((context) => HttpMetrics.countUnsafe("/v1/consume", 200, context))
 * ```
 *
 * @since 0.2.0
 */
export const countUnsafe = (route: string, status: number, context: Context.Context<never>): void =>
  counterOf(route, status).updateUnsafe(1, context)

/**
 * A counter of one route's answers, by status, kept at hand for the request
 * path (no lookup by name per request).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as HttpMetrics from "./HttpMetrics.ts"
 *
 * const count = HttpMetrics.routeCounter("/v1/consume")
 * const effect = Effect.contextWith((context) => count(200, context))
 * ```
 *
 * @since 0.2.0
 */
export const routeCounter = (route: string): (status: number, context: Context.Context<never>) => void => {
  const byStatus: Array<Metric.Metric<number, unknown> | undefined> = []
  return (status, context) => {
    let counter = byStatus[status]
    if (counter === undefined) byStatus[status] = counter = counterOf(route, status)
    counter.updateUnsafe(1, context)
  }
}

/**
 * Runs an effect counted in {@link waiting}.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as HttpMetrics from "./HttpMetrics.ts"
 *
 * const effect = HttpMetrics.whileWaiting(Effect.void)
 * ```
 *
 * @since 0.1.0
 */
export const whileWaiting = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.acquireUseRelease(Metric.modify(waiting, 1), () => effect, () => Metric.modify(waiting, -1))

/**
 * Runs an effect counted in {@link inFlight}.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as HttpMetrics from "./HttpMetrics.ts"
 *
 * const effect = HttpMetrics.whileInFlight(Effect.void)
 * ```
 *
 * @since 0.1.0
 */
export const whileInFlight = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.acquireUseRelease(Metric.modify(inFlight, 1), () => effect, () => Metric.modify(inFlight, -1))
