/**
 * Spans for tollgate's operations, only when a tracer is installed to see
 * them: with Effect's native tracer (the default, which keeps spans nowhere)
 * the effect is left as it is, so a call costs nothing more. A span has no
 * stack trace (capturing one made a lone call measurably slower), and says
 * how the call ended: the decision, when to retry, or the error's tag.
 *
 * @since 0.3.0
 */
import { Cause, Duration, Effect, Exit, Fiber, Predicate, Tracer } from "effect"

/**
 * Whether a tracer other than Effect's native one is installed for `fiber`
 * (by default the running one). A caller that has its fiber at hand
 * (`Effect.withFiber`) passes it: finding the running fiber is a lookup on
 * the global object, which cost a lone `acquire` about 8 ns of its ~150.
 *
 * @since 0.3.0
 */
export const enabled = (fiber: Fiber.Fiber<unknown, unknown> | undefined = Fiber.getCurrent()): boolean => {
  // The fiber's cache holds the tracer it runs with (undefined for the native
  // one): a field read, where a lookup in its context cost a lone call ~15 %.
  const cache = fiber?.cache
  return cache !== undefined && cache.tracerEnabled && cache.tracer !== undefined &&
    cache.tracer !== Tracer.nativeTracer
}

/**
 * Whether `fiber` runs with no tracer of its own, so with Effect's native
 * one (the default, which keeps spans nowhere): one field of its cache.
 * The commonest call checks this and goes on; one that finds a tracer asks
 * {@link enabled}. With a thousand callers on one key, `enabled` in that
 * place cost 2–3 % of a call (bench/history.md, 2026-11-28, later still).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as Trace from "./Trace.ts"
 *
 * const untraced = Effect.withFiber((fiber) => Effect.succeed(Trace.none(fiber)))
 * ```
 *
 * @since 0.3.0
 */
export const none = (fiber: Fiber.Fiber<unknown, unknown>): boolean => fiber.cache.tracer === undefined

// What a span says of a call's end: the decision, and when to retry.
const outcomeOf = (exit: Exit.Exit<unknown, unknown>): Record<string, unknown> => {
  if (Exit.isFailure(exit)) {
    const error = Cause.squash(exit.cause)
    if (Predicate.hasProperty(error, "_tag") && error._tag === "RateLimitExceeded") {
      const retry = Predicate.hasProperty(error, "retryAfter") ? error.retryAfter : undefined
      return {
        "tollgate.allowed": false,
        "tollgate.retry_after_ms": Duration.isDuration(retry) ? Duration.toMillis(retry) : -1
      }
    }
    return { "tollgate.error": Predicate.hasProperty(error, "_tag") ? String(error._tag) : "defect" }
  }
  const value: unknown = exit.value
  if (typeof value === "boolean") return { "tollgate.allowed": value }
  if (Predicate.hasProperty(value, "allowed") && Predicate.hasProperty(value, "retryAfter")) {
    const retry = value.retryAfter
    return {
      "tollgate.allowed": value.allowed === true,
      "tollgate.retry_after_ms": Duration.isDuration(retry) ? Duration.toMillis(retry) : 0
    }
  }
  // a reservation, as its bucket answers it: when to act, in ms
  if (Predicate.hasProperty(value, "delay") && Predicate.isNumber(value.delay)) {
    return { "tollgate.allowed": true, "tollgate.delay_ms": value.delay }
  }
  return { "tollgate.allowed": true }
}

/**
 * `effect` in a span named `name` with `attributes` (made only when
 * {@link enabled}), its decision added when it ends.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as Trace from "./Trace.ts"
 *
 * const traced = Effect.suspend(() =>
 *   Trace.enabled() ? Trace.span("RateLimiter.acquire", () => ({ "tollgate.cost": 1 }), Effect.succeed(true)) : Effect.succeed(true)
 * )
 * ```
 *
 * @since 0.3.0
 */
export const span = <A, E, R>(
  name: string,
  attributes: () => Record<string, unknown>,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.withSpan(
    Effect.onExit(effect, (exit) => Effect.annotateCurrentSpan(outcomeOf(exit))),
    name,
    { attributes: attributes(), captureStackTrace: false }
  )
