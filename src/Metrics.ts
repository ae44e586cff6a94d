/**
 * The limiter's metrics, in Effect's `Metric` registry (so any exporter, for
 * example Prometheus, sees them). Labels are bounded: no per-key labels.
 *
 * @since 0.1.0
 */
import type { Context } from "effect"
import { Metric } from "effect"

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
 * Buckets alive now.
 *
 * @since 0.1.0
 */
export const buckets = Metric.gauge("tollgate_buckets", { description: "Live buckets (one fiber each)" })

/**
 * Buckets started and reaped since the limiter started.
 *
 * @since 0.1.0
 */
export const lifecycle = Metric.counter("tollgate_bucket_events_total", {
  description: "Bucket lifecycle events, by event (started, reaped)",
  incremental: true
})

const allowedCounter = Metric.withAttributes(decisions, { outcome: "allowed" })
const deniedCounter = Metric.withAttributes(decisions, { outcome: "denied" })
const startedCounter = Metric.withAttributes(lifecycle, { event: "started" })
const reapedCounter = Metric.withAttributes(lifecycle, { event: "reaped" })

/**
 * Records into the metrics from synchronous code (a bucket's batch), with the
 * context the limiter was built in. Counts are kept locally too, for `stats`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Metrics } from "tollgate"
 *
 * const program = Effect.gen(function*() {
 *   const recorder = new Metrics.Recorder(yield* Effect.context<never>())
 *   recorder.decided(3, 1)
 * })
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
  readonly context: Context.Context<never>
  constructor(context: Context.Context<never>) {
    this.context = context
  }
  decided(allowed: number, denied: number): void {
    if (allowed > 0) {
      this.allowed += allowed
      allowedCounter.updateUnsafe(allowed, this.context)
    }
    if (denied > 0) {
      this.denied += denied
      deniedCounter.updateUnsafe(denied, this.context)
    }
  }
  overload(): void {
    this.overloaded++
    overloaded.updateUnsafe(1, this.context)
  }
  start(): void {
    this.started++
    this.live++
    startedCounter.updateUnsafe(1, this.context)
    buckets.updateUnsafe(this.live, this.context)
  }
  stop(reaped: boolean): void {
    this.live--
    if (reaped) {
      this.reaped++
      reapedCounter.updateUnsafe(1, this.context)
    }
    buckets.updateUnsafe(this.live, this.context)
  }
}
