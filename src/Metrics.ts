/**
 * The limiter's metrics, in Effect's `Metric` registry (so any exporter, for
 * example Prometheus, sees them). Labels are bounded: one `limiter` label
 * (the limiter's name) and a fixed set of outcomes; no per-key labels.
 *
 * The counts live in a plain {@link Recorder} and the registry reads them when
 * it is read (`Metric.registerUnsafe`), so deciding a request costs a field
 * increment, not a registry lookup.
 *
 * @since 0.1.0
 */
import { Effect, Metric, type Scope } from "effect"

/**
 * Decisions made, labelled `outcome=allowed|denied`.
 *
 * @since 0.1.0
 */
export const decisions = Metric.counter("tollgate_decisions_total", {
  description: "Rate-limit decisions, by outcome",
  incremental: true
})

/**
 * Requests refused because a bucket's mailbox or line of waiters was full.
 *
 * @since 0.1.0
 */
export const overloaded = Metric.counter("tollgate_overloaded_total", {
  description: "Requests refused with Overloaded (mailbox or waiter line full)",
  incremental: true
})

/**
 * Buckets alive now (a key's state, with or without a running actor fiber).
 *
 * @since 0.1.0
 */
export const buckets = Metric.gauge("tollgate_buckets", { description: "Live buckets" })

/**
 * Bucket actors whose fiber is running now (they have queued requests or waiters).
 *
 * @since 0.1.0
 */
export const actors = Metric.gauge("tollgate_actors", { description: "Bucket actor fibers running" })

/**
 * Requests queued in mailboxes now, over all buckets.
 *
 * @since 0.1.0
 */
export const mailboxDepth = Metric.gauge("tollgate_mailbox_depth", { description: "Requests queued in mailboxes" })

/**
 * Callers waiting in line now, over all buckets.
 *
 * @since 0.1.0
 */
export const waiting = Metric.gauge("tollgate_waiting", { description: "Callers waiting in line (wait)" })

/**
 * Buckets started and reaped since the limiter started.
 *
 * @since 0.1.0
 */
export const lifecycle = Metric.counter("tollgate_bucket_events_total", {
  description: "Bucket lifecycle events, by event (started, reaped)",
  incremental: true
})

/**
 * Calls made to a shared store (a key's batch of operations per call).
 *
 * @example
 * ```ts
 * import { Metric } from "effect"
 * import { Metrics } from "tollgate"
 *
 * const calls = Metric.value(Metric.withAttributes(Metrics.storeCalls, { limiter: "default" }))
 * ```
 *
 * @since 0.1.0
 */
export const storeCalls = Metric.counter("tollgate_store_calls_total", {
  description: "Calls to the shared store",
  incremental: true
})

/**
 * Calls to a shared store that failed or timed out.
 *
 * @example
 * ```ts
 * import { Metric } from "effect"
 * import { Metrics } from "tollgate"
 *
 * const failures = Metric.value(Metric.withAttributes(Metrics.storeFailures, { limiter: "default" }))
 * ```
 *
 * @since 0.1.0
 */
export const storeFailures = Metric.counter("tollgate_store_failures_total", {
  description: "Calls to the shared store that failed or timed out",
  incremental: true
})

/**
 * Operations (requests) decided by the fallback because the shared store did
 * not answer: the decisions that carry `degraded: true`.
 *
 * @example
 * ```ts
 * import { Metric } from "effect"
 * import { Metrics } from "tollgate"
 *
 * const degraded = Metric.value(Metric.withAttributes(Metrics.degraded, { limiter: "default" }))
 * ```
 *
 * @since 0.1.0
 */
export const degraded = Metric.counter("tollgate_degraded_total", {
  description: "Operations decided by the fallback while the shared store did not answer",
  incremental: true
})

/**
 * What a limiter on a shared store counts (`Remote.Health` is one).
 *
 * @example
 * ```ts
 * import type { Metrics } from "tollgate"
 *
 * const counts: Metrics.StoreCounts = { calls: 10, failures: 1, degraded: 3 }
 * ```
 *
 * @since 0.1.0
 */
export interface StoreCounts {
  readonly calls: number
  readonly failures: number
  readonly degraded: number
}

/**
 * The counts of one limiter.
 *
 * @example
 * ```ts
 * import { Metrics } from "tollgate"
 *
 * const recorder = new Metrics.Recorder()
 * recorder.allowed += 3
 * ```
 *
 * @since 0.1.0
 */
export class Recorder {
  allowed = 0
  denied = 0
  overloaded = 0
  started = 0
  reaped = 0
  live = 0
  actors = 0
  queued = 0
  waiting = 0
}

/**
 * Publishes a recorder's counts in the current `MetricRegistry` under
 * `limiter=<name>`, for as long as the scope is open; with `store`, a shared
 * store's calls and the fallback's decisions too.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Metrics } from "tollgate"
 *
 * const program = Effect.scoped(Metrics.register(new Metrics.Recorder(), "default"))
 * ```
 *
 * @since 0.1.0
 */
export const register = (
  recorder: Recorder,
  name: string,
  store?: StoreCounts
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.contextWith((context) => {
      const counter = (metric: Metric.Counter<number>, attributes: Record<string, string>, get: () => number) =>
        Metric.registerUnsafe(Metric.withAttributes(metric, { limiter: name, ...attributes }), context, {
          get: () => ({ count: get(), incremental: true }),
          update: () => {},
          modify: () => {}
        })
      const gauge = (metric: Metric.Gauge<number>, get: () => number) =>
        Metric.registerUnsafe(Metric.withAttributes(metric, { limiter: name }), context, {
          get: () => ({ value: get() }),
          update: () => {},
          modify: () => {}
        })
      const shared = store === undefined ? [] : [
        counter(storeCalls, {}, () => store.calls),
        counter(storeFailures, {}, () => store.failures),
        counter(degraded, {}, () => store.degraded)
      ]
      return Effect.succeed([
        ...shared,
        counter(decisions, { outcome: "allowed" }, () => recorder.allowed),
        counter(decisions, { outcome: "denied" }, () => recorder.denied),
        counter(overloaded, {}, () => recorder.overloaded),
        counter(lifecycle, { event: "started" }, () => recorder.started),
        counter(lifecycle, { event: "reaped" }, () => recorder.reaped),
        gauge(buckets, () => recorder.live),
        gauge(actors, () => recorder.actors),
        gauge(mailboxDepth, () => recorder.queued),
        gauge(waiting, () => recorder.waiting)
      ])
    }),
    (registrations) => Effect.sync(() => registrations.forEach((r) => r.remove()))
  )
