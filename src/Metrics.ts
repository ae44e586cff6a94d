/**
 * The limiter's metrics, in Effect's `Metric` registry (so any exporter, for
 * example Prometheus, sees them). Labels are bounded: one `limiter` label
 * (the limiter's name) and a fixed set of outcomes; no per-key labels.
 *
 * The counts live in plain fields of the limiter and the registry reads them
 * when it is read (`Metric.registerUnsafe`), so deciding a request costs a
 * field increment, not a registry lookup. What this module exports are the
 * metric definitions, to read a limiter's series by name and attributes.
 *
 * @since 0.1.0
 */
import { Metric } from "effect"

/**
 * Decisions made, labelled `outcome=allowed|denied`.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { Metrics } from "tollgate"
 *
 * // the allowed decisions of the limiter named "api"
 * const allowed = Metric.value(Metric.withAttributes(Metrics.decisions, { limiter: "api", outcome: "allowed" }))
 * const program = Effect.map(allowed, (state) => state.count)
 * ```
 *
 * @category metrics
 * @since 0.1.0
 */
export const decisions: Metric.Counter<number> = Metric.counter("tollgate_decisions_total", {
  description: "Rate-limit decisions, by outcome",
  incremental: true
})

/**
 * Requests refused with `Overloaded`: a bucket's mailbox or line of waiters
 * was full, or the limiter had `maxBuckets` buckets and none to forget.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { Metrics } from "tollgate"
 *
 * const refused = Metric.value(Metric.withAttributes(Metrics.overloaded, { limiter: "api" }))
 * const program = Effect.map(refused, (state) => state.count)
 * ```
 *
 * @category metrics
 * @since 0.1.0
 */
export const overloaded: Metric.Counter<number> = Metric.counter("tollgate_overloaded_total", {
  description: "Requests refused with Overloaded (mailbox, waiter line or maxBuckets full)",
  incremental: true
})

/**
 * Buckets alive now (a key's state, with or without a running actor fiber).
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { Metrics } from "tollgate"
 *
 * const gauge = Metric.value(Metric.withAttributes(Metrics.buckets, { limiter: "api" }))
 * const program = Effect.map(gauge, (state) => state.value)
 * ```
 *
 * @category metrics
 * @since 0.1.0
 */
export const buckets: Metric.Gauge<number> = Metric.gauge("tollgate_buckets", { description: "Live buckets" })

/**
 * Bucket actors whose fiber is running now (they have queued requests or waiters).
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { Metrics } from "tollgate"
 *
 * const gauge = Metric.value(Metric.withAttributes(Metrics.actors, { limiter: "api" }))
 * const program = Effect.map(gauge, (state) => state.value)
 * ```
 *
 * @category metrics
 * @since 0.1.0
 */
export const actors: Metric.Gauge<number> = Metric.gauge("tollgate_actors", {
  description: "Bucket actor fibers running"
})

/**
 * Requests queued in mailboxes now, over all buckets.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { Metrics } from "tollgate"
 *
 * const gauge = Metric.value(Metric.withAttributes(Metrics.mailboxDepth, { limiter: "api" }))
 * const program = Effect.map(gauge, (state) => state.value)
 * ```
 *
 * @category metrics
 * @since 0.1.0
 */
export const mailboxDepth: Metric.Gauge<number> = Metric.gauge("tollgate_mailbox_depth", {
  description: "Requests queued in mailboxes"
})

/**
 * Callers waiting in line now, over all buckets.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { Metrics } from "tollgate"
 *
 * const gauge = Metric.value(Metric.withAttributes(Metrics.waiting, { limiter: "api" }))
 * const program = Effect.map(gauge, (state) => state.value)
 * ```
 *
 * @category metrics
 * @since 0.1.0
 */
export const waiting: Metric.Gauge<number> = Metric.gauge("tollgate_waiting", {
  description: "Callers waiting in line (wait)"
})

/**
 * Buckets started and reaped since the limiter started.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { Metrics } from "tollgate"
 *
 * const reaped = Metric.value(Metric.withAttributes(Metrics.lifecycle, { limiter: "api", event: "reaped" }))
 * const program = Effect.map(reaped, (state) => state.count)
 * ```
 *
 * @category metrics
 * @since 0.1.0
 */
export const lifecycle: Metric.Counter<number> = Metric.counter("tollgate_bucket_events_total", {
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
 * @category metrics
 * @since 0.1.0
 */
export const storeCalls: Metric.Counter<number> = Metric.counter("tollgate_store_calls_total", {
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
 * @category metrics
 * @since 0.1.0
 */
export const storeFailures: Metric.Counter<number> = Metric.counter("tollgate_store_failures_total", {
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
 * @category metrics
 * @since 0.1.0
 */
export const degraded: Metric.Counter<number> = Metric.counter("tollgate_degraded_total", {
  description: "Operations decided by the fallback while the shared store did not answer",
  incremental: true
})

/**
 * Requests a dry-run policy let through (nginx's `limit_req_dry_run`): ones
 * it would have refused (counted as denied as well) or kept waiting.
 *
 * @example
 * ```ts
 * import { Metric } from "effect"
 * import { Metrics } from "tollgate"
 *
 * const letThrough = Metric.value(Metric.withAttributes(Metrics.dryRun, { limiter: "default" }))
 * ```
 *
 * @category metrics
 * @since 0.2.0
 */
export const dryRun: Metric.Counter<number> = Metric.counter("tollgate_dry_run_total", {
  description: "Requests a dry-run policy let through that it would have refused or kept waiting",
  incremental: true
})
