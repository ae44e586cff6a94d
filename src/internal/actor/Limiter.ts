/**
 * What the buckets of one limiter share (a `Bucket.Limiter`): the limiter's
 * clock, its metrics, where keys' state lives (in each bucket, or in a shared
 * store with its fallback), and how an actor's mailbox and fiber are made.
 *
 * @since 0.2.0
 */
import { Clock, Effect, FiberSet, Queue, type Scope } from "effect"
import * as Recorder from "../Recorder.ts"
import { Activity } from "./Activity.ts"
import type * as Bucket from "./Bucket.ts"
import type { Engine } from "./Engine.ts"
import * as Local from "./Local.ts"
import * as Monotone from "./Monotone.ts"
import * as Remote from "./Remote.ts"

/**
 * What {@link make} needs.
 *
 * @since 0.2.0
 */
export interface Options {
  readonly limits: Bucket.Limits
  /** Decide a quiet key's requests on the caller's fiber (see `Bucket.submit`). */
  readonly fastPath: boolean
  /** The `limiter` label of the metrics. */
  readonly name: string
  /** Where keys' state lives: in each bucket (undefined) or in a shared store. */
  readonly store: Engine | undefined
  /** What a store-backed limiter does when the store does not answer. */
  readonly fallback: Remote.Fallback
  /** How the owner of the key table forgets a bucket whose actor died. */
  readonly forget: (key: string, bucket: Bucket.Bucket) => void
}

/**
 * Counts of what a limiter has done. `buckets` are live buckets, `actors`
 * those whose fiber runs; `queued` requests are in mailboxes, `waiting`
 * callers in lines; `overrides` keys reconfigured to a policy of their own;
 * `dryRun` requests that dry-run policies let through;
 * `storeOps / storeCalls` is the coalescing factor of a shared store,
 * `storeFailures` its calls that failed or timed out, and `degraded` the
 * operations its fallback decided.
 *
 * @since 0.2.0
 */
export interface Stats {
  readonly buckets: number
  readonly actors: number
  readonly started: number
  readonly reaped: number
  readonly allowed: number
  readonly denied: number
  readonly overloaded: number
  readonly queued: number
  readonly waiting: number
  readonly overrides: number
  readonly dryRun: number
  readonly storeCalls: number
  readonly storeOps: number
  readonly storeFailures: number
  readonly degraded: number
}

/**
 * Makes what a limiter's buckets share, for as long as the scope is open: its
 * metrics are published meanwhile, and its actors run in it.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as Limiter from "./Limiter.ts"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const { limiter } = yield* Limiter.make({
 *     limits: { mailboxCapacity: 1024, maxWaiters: 1024 },
 *     fastPath: true,
 *     name: "default",
 *     store: undefined,
 *     fallback: { mode: "local", share: 1, timeoutMillis: 250, retryMillis: 1000 },
 *     forget: () => {}
 *   })
 * }))
 * ```
 *
 * @since 0.2.0
 */
export const make = (
  options: Options
): Effect.Effect<
  {
    readonly limiter: Bucket.Limiter
    /** The counts, with the table's own (live buckets, reconfigured keys). */
    readonly snapshot: (buckets: number, overrides: number) => Stats
  },
  never,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const { fastPath, limits, store } = options
    const recorder = new Recorder.Recorder()
    const health = new Remote.Health()
    yield* Recorder.register(recorder, options.name, store === undefined ? undefined : health)
    const context = yield* Effect.context<never>()
    const fork = yield* FiberSet.makeRuntime<never, void, never>()
    const limiter: Bucket.Limiter = {
      // One monotone clock for every decision, reap and new bucket: a step back
      // freezes the limiter's time rather than handing out fresh buckets below it.
      clock: new Monotone.Monotone(yield* Clock.Clock),
      activity: new Activity(),
      recorder,
      limits,
      fastPath,
      backend: store === undefined ? Local.backend : Remote.backend(store, options.fallback, health),
      // Made synchronously by whoever starts an actor, so its request is in the
      // mailbox before the actor runs.
      mailbox: () =>
        Effect.runSyncWith(context)(Queue.make({ capacity: limits.mailboxCapacity, strategy: "dropping" })),
      fork: (actor) => fork(actor),
      forget: options.forget
    }
    const snapshot = (buckets: number, overrides: number): Stats => ({
      buckets,
      actors: recorder.actors,
      started: recorder.started,
      reaped: recorder.reaped,
      allowed: recorder.allowed,
      denied: recorder.denied,
      overloaded: recorder.overloaded,
      queued: recorder.queued,
      waiting: recorder.waiting,
      overrides,
      dryRun: recorder.dryRun,
      storeCalls: health.calls,
      storeOps: health.ops,
      storeFailures: health.failures,
      degraded: health.degraded
    })
    return { limiter, snapshot }
  })
