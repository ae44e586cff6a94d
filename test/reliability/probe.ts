/**
 * Probes for the reliability tests: they watch a limiter from the outside,
 * without touching src/.
 *
 * - `Probe.fibers` counts the fibers the limiter starts (bucket actors, the
 *   sweep, timeouts) through Effect's `FiberRuntimeMetrics` hook: every fiber
 *   forked from the limiter's context reports its start and its end.
 * - `Probe.sleeps` counts the sleeps the limiter has pending on its clock: the
 *   limiter is built with a `Clock` that forwards to the `TestClock` and
 *   counts each `sleep` until it ends (woken, or interrupted).
 */
import { Clock, Effect, Exit, Fiber, Metric } from "effect"
import type { Duration } from "effect"

export class Probe {
  /** Fibers started in the limiter's context. */
  fibersStarted = 0
  /** Of those, fibers that have ended. */
  fibersEnded = 0
  /** Sleeps the limiter has pending on its clock now. */
  sleeps = 0
  /** Sleeps the limiter has started in all. */
  sleepsStarted = 0
  /** Fibers started in the limiter's context and still running. */
  get fibers(): number {
    return this.fibersStarted - this.fibersEnded
  }
  readonly metrics: Metric.FiberRuntimeMetricsService = {
    recordFiberStart: () => {
      this.fibersStarted++
    },
    recordFiberEnd: () => {
      this.fibersEnded++
    }
  }
}

/**
 * Runs `make` (which builds a limiter) with a counting clock and the fiber
 * hook, so everything the limiter forks and every sleep it takes is seen by
 * `probe`.
 */
export const probed = <A, E, R>(probe: Probe, make: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Clock.clockWith(Effect.succeed), (clock) => {
    const counting: Clock.Clock = {
      currentTimeMillisUnsafe: () => clock.currentTimeMillisUnsafe(),
      currentTimeMillis: clock.currentTimeMillis,
      currentTimeNanosUnsafe: () => clock.currentTimeNanosUnsafe(),
      currentTimeNanos: clock.currentTimeNanos,
      monotonicTimeNanosUnsafe: () => clock.monotonicTimeNanosUnsafe(),
      monotonicTimeNanos: clock.monotonicTimeNanos,
      sleep: (duration: Duration.Duration) =>
        Effect.suspend(() => {
          probe.sleeps++
          probe.sleepsStarted++
          return Effect.ensuring(
            clock.sleep(duration),
            Effect.sync(() => {
              probe.sleeps--
            })
          )
        })
    }
    return make.pipe(
      Effect.provideService(Clock.Clock, counting),
      Effect.provideService(Metric.FiberRuntimeMetrics, probe.metrics)
    )
  })

/** Lets forked fibers and bucket actors run until they park. */
export const settle = (times = 10): Effect.Effect<void> => Effect.repeat(Effect.yieldNow, { times })

/** The typed error a failed exit carries, or the cause's first reason tag. */
export const failureOf = (exit: Exit.Exit<unknown, unknown>): any => {
  if (Exit.isSuccess(exit)) return undefined
  for (const reason of exit.cause.reasons) {
    if (reason._tag === "Fail") return reason.error
  }
  return { _tag: exit.cause.reasons.map((r) => r._tag).join("+") || "Empty" }
}

/** Whether a fiber has ended, without waiting. */
export const isDone = (fiber: Fiber.Fiber<unknown, unknown>): boolean => fiber.pollUnsafe() !== undefined
