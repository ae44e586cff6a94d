/**
 * The supervisor: maps key -> bucket, looks up a new key's policy, keeps the
 * number of live buckets under its cap, reaps buckets whose forgetting
 * cannot change a decision, and stops them all when its scope closes.
 * Everything about one key (the fast path, the mailbox, the actor, its defect
 * guard) is the bucket's: the supervisor only hands each request to it.
 *
 * A hand-written `Map` rather than `RcMap`: a lookup is on every request and
 * `Effect.scoped(RcMap.get)` costs about 3.4 µs more per call here, plus a
 * sleeping expiry fiber (about 2.8 KB) per idle entry; reaping is one sweep
 * fiber for all buckets instead (docs/architecture.md has the figures).
 *
 * @since 0.1.0
 */
import { Clock, Effect, FiberSet, Queue } from "effect"
import { type InvalidPolicy, LimiterShutdown, Overloaded } from "../../Errors.ts"
import * as Metrics from "../../Metrics.ts"
import type * as Policy from "../../Policy.ts"
import type { Store } from "../../Store.ts"
import * as Bucket from "../actor/Bucket.ts"
import * as Local from "../actor/Local.ts"
import * as Monotone from "../actor/Monotone.ts"
import * as Remote from "../actor/Remote.ts"
import * as Request from "../actor/Request.ts"

/**
 * What the supervisor needs; `RateLimiter` validates it.
 *
 * @since 0.1.0
 */
export interface Options {
  /** The policy of a key; resolved once, when the key's bucket starts. */
  readonly policyFor: (key: string) => Policy.Valid | InvalidPolicy
  readonly limits: Bucket.Limits
  readonly idleTimeoutMillis: number
  /** Most live buckets; a new key past it takes the place of a settled bucket, or fails with `Overloaded`. */
  readonly maxBuckets?: number | undefined
  /** Decide a quiet key's requests on the caller's fiber (default true); see `Bucket.submit`. */
  readonly fastPath?: boolean | undefined
  /** The `limiter` label of the metrics. */
  readonly name?: string | undefined
  /** Where keys' state lives: in each bucket (undefined, the default) or in a shared store. */
  readonly store?: Store | undefined
  /** What a store-backed limiter does when the store does not answer. */
  readonly fallback?: Remote.Fallback | undefined
}

const defaultFallback: Remote.Fallback = { mode: "local", share: 1, timeoutMillis: 250, retryMillis: 1000 }

/**
 * Counts of what the supervisor has done.
 *
 * @since 0.1.0
 */
export interface Stats {
  /** Live buckets. */
  readonly buckets: number
  /** Buckets whose actor fiber is running. */
  readonly actors: number
  readonly started: number
  readonly reaped: number
  readonly allowed: number
  readonly denied: number
  readonly overloaded: number
  /** Requests in mailboxes now. */
  readonly queued: number
  /** Callers waiting in line now. */
  readonly waiting: number
  /** Calls made to the shared store, and the operations they carried (ops / calls is the coalescing factor). */
  readonly storeCalls: number
  readonly storeOps: number
  /** Store calls that failed or timed out. */
  readonly storeFailures: number
  /** Operations decided by the fallback instead of the store. */
  readonly degraded: number
}

/**
 * The failures a request can end with before it reaches a bucket.
 *
 * @since 0.1.0
 */
export type SubmitError = InvalidPolicy | LimiterShutdown | Overloaded

/**
 * The supervisor's interface.
 *
 * @since 0.1.0
 */
export interface Supervisor {
  /** Hands a request to the key's bucket (starting it if needed); acts each time it runs. */
  readonly submit: <K extends Request.Kind>(
    key: string,
    kind: K,
    cost: number,
    maxWait: number,
    payload?: Request.Reconfiguration
  ) => Effect.Effect<Request.Reply<K>, Request.FailureOf<K> | SubmitError>
  /** `submit`, acting at once: for callers already inside a suspended effect (one allocation less per call). */
  readonly submitUnsafe: <K extends Request.Kind>(
    key: string,
    kind: K,
    cost: number,
    maxWait: number,
    payload?: Request.Reconfiguration
  ) => Effect.Effect<Request.Reply<K>, Request.FailureOf<K> | SubmitError>
  /** The live bucket of a key, if any (for inspection and tests). */
  readonly bucket: (key: string) => Bucket.Bucket | undefined
  /** Reaps now every bucket that may be reaped (the sweep also runs by itself). */
  readonly sweep: Effect.Effect<number>
  readonly stats: Effect.Effect<Stats>
}

const shutdownExit = Effect.fail(new LimiterShutdown())

/**
 * Starts a supervisor in the current scope. Closing the scope stops intake,
 * lets every bucket answer what it has queued, fails its waiters with
 * `LimiterShutdown`, and waits for every actor to stop.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as Supervisor from "./Supervisor.ts"
 * import { Policy } from "tollgate"
 *
 * const policy = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } })
 * const program = Effect.gen(function*() {
 *   const supervisor = yield* Supervisor.make({
 *     policyFor: () => policy as Policy.Valid,
 *     limits: { mailboxCapacity: 1024, maxWaiters: 1024 },
 *     idleTimeoutMillis: 60_000
 *   })
 *   return yield* supervisor.stats
 * })
 * ```
 *
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options: Options) {
  const { idleTimeoutMillis, limits, store } = options
  const fastPath = options.fastPath ?? true
  const maxBuckets = options.maxBuckets ?? 1_000_000
  const recorder = new Metrics.Recorder()
  const health = new Remote.Health()
  yield* Metrics.register(recorder, options.name ?? "default", store === undefined ? undefined : health)
  const buckets = new Map<string, Bucket.Bucket>()
  // Keys reconfigured at runtime keep their policy across reaps.
  const overrides = new Map<string, Policy.Valid>()
  const context = yield* Effect.context<never>()
  const fork = yield* FiberSet.makeRuntime<never, void, never>()
  let closed = false

  const forget = (key: string, bucket: Bucket.Bucket): boolean => {
    if (buckets.get(key) !== bucket) return false
    buckets.delete(key)
    recorder.live--
    return true
  }
  const limiter: Bucket.Limiter = {
    // One monotone clock for every decision, reap and new bucket: a step back
    // freezes the limiter's time rather than handing out fresh buckets below it.
    clock: new Monotone.Monotone(yield* Clock.Clock),
    recorder,
    limits,
    fastPath,
    hibernates: fastPath || store !== undefined,
    backend: store === undefined ? Local.backend : Remote.backend(store, options.fallback ?? defaultFallback, health),
    mailbox: () => Effect.runSyncWith(context)(Queue.make({ capacity: limits.mailboxCapacity, strategy: "dropping" })),
    fork: (actor) => fork(actor),
    forget
  }

  // Out of the map first, then retired: a running actor serves what was queued and ends.
  const reap = (key: string, bucket: Bucket.Bucket): void => {
    if (forget(key, bucket)) recorder.reaped++
    Bucket.retire(bucket)
  }

  // At maxBuckets, a new key may take the place of a bucket that is safe to
  // forget: settled (forgetting it changes no decision), with nothing queued
  // and nobody waiting, however recently it was used. The scan looks at a
  // few buckets from the oldest, moving those it passes over to the back, so
  // successive scans go round the whole table.
  const evictOne = (): boolean => {
    const now = limiter.clock.currentTimeMillisUnsafe()
    let scanned = 0
    for (const [key, bucket] of buckets.entries()) {
      if (scanned++ >= 64) break
      if (Bucket.settled(limiter, bucket, now)) {
        reap(key, bucket)
        return true
      }
      buckets.delete(key)
      buckets.set(key, bucket)
    }
    return false
  }

  const submit = <K extends Request.Kind>(
    key: string,
    kind: K,
    cost: number,
    maxWait: number,
    payload?: Request.Reconfiguration
  ): Effect.Effect<Request.Reply<K>, Request.FailureOf<K> | SubmitError> => {
    while (true) {
      if (closed) return shutdownExit
      if (kind === Request.Kind.Reconfigure && payload !== undefined) overrides.set(key, payload.policy)
      let bucket = buckets.get(key)
      if (bucket === undefined) {
        const policy = overrides.get(key) ?? options.policyFor(key)
        if (policy._tag === "InvalidPolicy") return Effect.fail(policy)
        const refused = Bucket.refuse(policy, kind, cost)
        if (refused !== undefined) return Effect.fail(refused)
        const answer = limiter.backend.unstarted(limiter, key, policy, kind, cost)
        if (answer !== undefined) return answer
        if (buckets.size >= maxBuckets && !evictOne()) {
          recorder.overloaded++
          return Effect.fail(new Overloaded({ key, reason: "buckets", capacity: maxBuckets }))
        }
        // Synchronous from the map check to the insert, so concurrent first
        // calls for one key start exactly one bucket.
        bucket = Bucket.make(limiter, key, policy)
        buckets.set(key, bucket)
        recorder.live++
        recorder.started++
      }
      const answer = Bucket.submit(limiter, bucket, kind, cost, maxWait, payload)
      if (answer !== undefined) return answer
      // It retired under us (its actor died): look the key up afresh.
      forget(key, bucket)
    }
  }

  const sweep = Effect.sync(() => {
    const now = limiter.clock.currentTimeMillisUnsafe()
    let reaped = 0
    for (const [key, bucket] of buckets.entries()) {
      if (Bucket.idle(limiter, bucket, now, idleTimeoutMillis)) {
        reap(key, bucket)
        reaped++
      }
    }
    return reaped
  })

  const interval = Math.max(1, Math.floor(idleTimeoutMillis / 2))
  yield* Effect.sleep(interval).pipe(Effect.andThen(sweep), Effect.forever, Effect.forkScoped)

  // Added last, so it runs first: before FiberSet interrupts anything.
  yield* Effect.addFinalizer(() =>
    Effect.suspend(() => {
      closed = true
      const stopping: Array<Effect.Effect<void>> = []
      for (const bucket of buckets.values()) {
        Bucket.retire(bucket)
        const stopped = Bucket.stopped(bucket)
        if (stopped !== undefined) stopping.push(stopped)
      }
      buckets.clear()
      recorder.live = 0
      return Effect.all(stopping, { discard: true })
    })
  )

  const stats = Effect.sync((): Stats => ({
    storeCalls: health.calls,
    storeOps: health.ops,
    storeFailures: health.failures,
    degraded: health.degraded,
    buckets: buckets.size,
    actors: recorder.actors,
    started: recorder.started,
    reaped: recorder.reaped,
    allowed: recorder.allowed,
    denied: recorder.denied,
    overloaded: recorder.overloaded,
    queued: recorder.queued,
    waiting: recorder.waiting
  }))

  return {
    submit: (key, kind, cost, maxWait, payload) => Effect.suspend(() => submit(key, kind, cost, maxWait, payload)),
    submitUnsafe: submit,
    bucket: (key: string) => buckets.get(key),
    sweep,
    stats
  } satisfies Supervisor as Supervisor
})
