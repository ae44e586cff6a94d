/**
 * What a limiter counts, as plain mutable fields its buckets write, and how
 * those counts are published as the metrics of `Metrics` (the registry reads
 * the fields when it is read, so a decision costs a field increment, not a
 * registry lookup).
 *
 * @since 0.2.0
 */
import { Effect, Metric, type Scope } from "effect"
import {
  actors,
  buckets,
  decisions,
  degraded,
  dryRun,
  lifecycle,
  mailboxDepth,
  overloaded,
  storeCalls,
  storeFailures,
  waiting
} from "../Metrics.ts"

/**
 * What a limiter on a shared store counts.
 *
 * @since 0.2.0
 */
export interface StoreCounts {
  readonly calls: number
  readonly failures: number
  readonly degraded: number
}

/**
 * The counts of one limiter: plain mutable fields, written by its buckets.
 *
 * @since 0.2.0
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
  dryRun = 0
}

/**
 * Publishes a recorder's counts in the current `MetricRegistry` under
 * `limiter=<name>`, for as long as the scope is open; with `store`, a shared
 * store's calls and the fallback's decisions too.
 *
 * @since 0.2.0
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
        counter(dryRun, {}, () => recorder.dryRun),
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
