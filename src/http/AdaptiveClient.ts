/**
 * A client-side helper for effect's `HttpClient`: each request waits its
 * turn in a tollgate key (`limiter.wait`), and each response tells that
 * key's adaptive policy (`Policy.adaptive`) how the upstream coped, through
 * `limiter.feedback`:
 *
 * - a status that means "slow down" (429 and 503 by default) is
 *   `"throttled"`, with the response's `Retry-After` (seconds or an HTTP
 *   date): the key's rate is cut and nothing more goes out before then;
 * - any other response below 500 is `"ok"` (the rate creeps up), or, with
 *   `latency: true`, the time it took (compared with the policy's target);
 * - other 5xx responses and transport errors say nothing about the rate.
 *
 * Requests that wait in line are re-timed at once when the rate changes,
 * since every signal is applied in the key's order.
 *
 * @since 0.2.0
 */
import { Clock, Duration, Effect, Result } from "effect"
import { Headers, HttpClient, type HttpClientRequest } from "effect/http"
import type { RateLimitExceeded } from "../Errors.ts"
import type { CallError, RateLimiter } from "../RateLimiter.ts"

/**
 * Options of {@link make}.
 *
 * @example
 * ```ts
 * import type { AdaptiveClient } from "tollgate/http"
 *
 * const options: AdaptiveClient.Options = {
 *   key: (request) => `upstream:${new URL(request.url).host}`,
 *   maxWait: "30 seconds",
 *   throttled: [429]
 * }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface Options {
  /** The key whose adaptive policy paces the requests: fixed, or from the request. */
  readonly key: string | ((request: HttpClientRequest.HttpClientRequest) => string)
  /** Units per request (default 1). */
  readonly cost?: number | undefined
  /** Longest wait for a turn; past it the request fails with `RateLimitExceeded` unsent (default: no bound). */
  readonly maxWait?: Duration.Input | undefined
  /** Statuses that mean "slow down" (default `[429, 503]`). */
  readonly throttled?: ReadonlyArray<number> | undefined
  /** Report each other response's latency instead of `"ok"` (default `false`). */
  readonly latency?: boolean | undefined
}

/**
 * Wraps a client so that every request waits for the key and feeds its
 * response back into the key's adaptive rate.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { HttpClient } from "effect/http"
 * import { Policy, RateLimiter } from "tollgate"
 * import { AdaptiveClient } from "tollgate/http"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   const client = (yield* HttpClient.HttpClient).pipe(AdaptiveClient.make(limiter, { key: "upstream" }))
 *   return yield* client.get("https://api.example.com/items")
 * }).pipe(Effect.provide(RateLimiter.layer({
 *   policy: Policy.adaptive({ capacity: 10, rate: { tokens: 50, per: "1 second" }, floor: 1, ceiling: 200 })
 * })))
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = (limiter: RateLimiter["Service"], options: Options) =>
<E, R>(
  client: HttpClient.HttpClient.With<E, R>
): HttpClient.HttpClient.With<E | CallError | RateLimitExceeded, R> => {
  const throttled = new Set(options.throttled ?? [429, 503])
  const waitOptions = { cost: options.cost, maxWait: options.maxWait }
  return HttpClient.transform(client, (send, request) =>
    Effect.gen(function*() {
      const key = typeof options.key === "string" ? options.key : options.key(request)
      yield* limiter.wait(key, waitOptions)
      const start = yield* Clock.currentTimeMillis
      const response = yield* send
      if (throttled.has(response.status)) {
        const header = response.headers["retry-after"]
        const parsed = header === undefined ? undefined : Headers.parseRetryAfter(header)
        const retryAfter = parsed !== undefined && Result.isSuccess(parsed)
          ? Headers.retryAfterDelay(parsed.success, yield* Clock.currentTimeMillis)
          : undefined
        yield* limiter.feedback(key, "throttled", retryAfter === undefined ? undefined : { retryAfter })
      } else if (response.status < 500) {
        if (options.latency === true) {
          yield* limiter.feedback(key, { latency: Duration.millis((yield* Clock.currentTimeMillis) - start) })
        } else {
          yield* limiter.feedback(key, "ok")
        }
      }
      return response
    }))
}
