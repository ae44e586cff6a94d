/**
 * The supervisor: maps key -> bucket, starts a bucket on first use, reaps
 * buckets whose forgetting cannot change a decision, and stops them all when
 * its scope closes.
 *
 * A hand-written `Map` rather than `RcMap`: a lookup is on every request and
 * `Effect.scoped(RcMap.get)` costs about 3.4 µs more per call here, plus a
 * sleeping expiry fiber (about 2.8 KB) per idle entry; reaping is one sweep
 * fiber for all buckets instead (docs/performance.md has the figures).
 *
 * @since 0.1.0
 */
import { Clock, Deferred, Effect, type Exit, Fiber, FiberSet, Predicate, Queue } from "effect"
import { type BucketFailed, type InvalidPolicy, InvalidRequest, LimiterShutdown, Overloaded } from "../../Errors.ts"
import * as Metrics from "../../Metrics.ts"
import * as Policy from "../../Policy.ts"
import type { Store, StoreUnavailable } from "../../Store.ts"
import * as Bucket from "../actor/Bucket.ts"
import * as Remote from "../actor/Remote.ts"
import { type Algorithm, peekOutcome } from "../algorithm/Algorithm.ts"

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
  /**
   * Decide uncontended requests on the caller's fiber (default true); with a
   * store, send an idle key's request through the store from the caller's
   * fiber. Off, every request goes through the actor's mailbox and every
   * live bucket keeps its fiber.
   */
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
 * The failures a submitted request can end with, besides its own.
 *
 * @since 0.1.0
 */
export type SubmitError =
  | InvalidPolicy
  | InvalidRequest
  | Overloaded
  | LimiterShutdown
  | BucketFailed
  | StoreUnavailable

/**
 * The supervisor's interface.
 *
 * @since 0.1.0
 */
export interface Supervisor {
  /** Routes a request to the key's bucket (starting it if needed) and awaits the reply; acts each time it runs. */
  readonly submit: <A, E = never>(
    key: string,
    kind: Bucket.Kind,
    cost: number,
    maxWait: number,
    payload?: Bucket.Reconfiguration
  ) => Effect.Effect<A, E | SubmitError>
  /**
   * `submit`, acting at once: the request is decided or queued when this is
   * called, and the returned effect yields the reply. For callers that are
   * already inside a suspended effect (it saves one allocation per call).
   */
  readonly submitUnsafe: <A, E = never>(
    key: string,
    kind: Bucket.Kind,
    cost: number,
    maxWait: number,
    payload?: Bucket.Reconfiguration
  ) => Effect.Effect<A, E | SubmitError>
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
 * `LimiterShutdown`, and waits for every bucket fiber to end.
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
  // One monotone clock for every decision, reap and new bucket: a step back
  // freezes the limiter's time rather than handing out fresh buckets below it.
  const clock: Bucket.Now = new Bucket.Monotone(yield* Clock.Clock)
  const store = options.store
  const fallback = options.fallback ?? defaultFallback
  const health = new Remote.Health()
  // A shared store's state is not here to decide on: an idle store-backed key
  // goes by the caller's own store call instead (Remote.direct).
  const fastPath = (options.fastPath ?? true) && store === undefined
  const storeDirect = (options.fastPath ?? true) && store !== undefined
  const maxBuckets = options.maxBuckets ?? 1_000_000
  const recorder = new Metrics.Recorder()
  yield* Metrics.register(recorder, options.name ?? "default", store === undefined ? undefined : health)
  const buckets = new Map<string, Bucket.Bucket>()
  const fork = yield* FiberSet.makeRuntime<never, void, never>()
  let closed = false

  // Out of the map first, then retired: a caller holding the old bucket finds
  // it retired and looks the key up again. A running actor drains and stops.
  const retire = (bucket: Bucket.Bucket, reaped: boolean) => {
    if (buckets.get(bucket.key) === bucket) {
      buckets.delete(bucket.key)
      recorder.live--
      if (reaped) recorder.reaped++
    }
    bucket.retired = true
    if (bucket.mailbox !== undefined) Queue.endUnsafe(bucket.mailbox)
  }

  const startActor = (bucket: Bucket.Bucket, mailbox: Bucket.Bucket["mailbox"] & {}) => {
    recorder.actors++
    const fiber = fork(bucket.remote === undefined ? Bucket.run(bucket, mailbox) : Remote.run(bucket, mailbox))
    if (bucket.mailbox === mailbox) bucket.fiber = fiber
    fiber.addObserver((exit) => {
      recorder.actors--
      // An actor that stopped by failure or interruption takes its bucket with it.
      if (!isHibernation(exit)) retire(bucket, false)
    })
  }

  // Synchronous from the map check to the insert, so concurrent first calls
  // for one key start exactly one bucket.
  const startBucket = (key: string, policy: Policy.Valid): Bucket.Bucket => {
    const bucket = new Bucket.Bucket(key, policy, options.limits, clock, recorder, fastPath || store !== undefined)
    if (store !== undefined) {
      bucket.remote = Remote.makeLink(store, fallback, health, Policy.share(policy, fallback.share))
    }
    buckets.set(key, bucket)
    recorder.live++
    recorder.started++
    return bucket
  }

  const costError = (policy: Policy.Valid, cost: number, kind: Bucket.Kind): InvalidRequest | undefined => {
    if (kind === Bucket.Kind.Release || kind === Bucket.Kind.Reconfigure || kind === Bucket.Kind.Reset) return undefined
    const max = policy.algorithm.maxCost(policy.config as never)
    return cost > max
      ? new InvalidRequest({
        field: "cost",
        value: String(cost),
        reason: `exceeds the limit ${max}: it can never succeed`
      })
      : undefined
  }

  // Keys reconfigured at runtime keep their policy across reaps.
  const overrides = new Map<string, Policy.Valid>()
  const policyOf = (key: string): Policy.Valid | InvalidPolicy => overrides.get(key) ?? options.policyFor(key)

  const submit = <A, E = never>(
    key: string,
    kind: Bucket.Kind,
    cost: number,
    maxWait: number,
    payload?: Bucket.Reconfiguration
  ): Effect.Effect<A, E | SubmitError> => {
    while (true) {
      if (closed) return shutdownExit
      let bucket = buckets.get(key)
      if (kind === Bucket.Kind.Reconfigure) overrides.set(key, payload!.policy)
      if (bucket === undefined) {
        const policy = policyOf(key)
        if (policy._tag === "InvalidPolicy") return Effect.fail(policy)
        const invalid = costError(policy, cost, kind)
        if (invalid !== undefined) return Effect.fail(invalid)
        if (isStateless(kind) && store === undefined) return withoutBucket(policy, kind, cost)
        if (buckets.size >= maxBuckets && !evictOne()) {
          recorder.overloaded++
          return Effect.fail(new Overloaded({ key, reason: "buckets", capacity: maxBuckets }))
        }
        bucket = startBucket(key, policy)
      } else if (cost > bucket.maxCost) {
        const invalid = costError(bucket.policy, cost, kind)
        if (invalid !== undefined) return Effect.fail(invalid)
      }
      // The fast path: nothing queued, nobody waiting, so deciding here is
      // the actor serving this request at once.
      if (fastPath && bucket.pending === 0 && bucket.line.length === 0) {
        const now = clock.currentTimeMillisUnsafe()
        if (kind === Bucket.Kind.Wait || kind === Bucket.Kind.Reserve) {
          const b = bucket
          const delay = Bucket.guard(b, now, () => Bucket.admitNow(b, cost, now))
          if (!Predicate.isNumber(delay)) return delay
          if (delay >= 0) {
            return (kind === Bucket.Kind.Wait
              ? Bucket.admittedAfter(delay)
              : delay > 0
              ? Effect.succeed<Bucket.Reserved>({ delay, entry: undefined, bucket: undefined })
              : reservedNow) as Effect.Effect<A>
          }
        } else {
          // Inline rather than through `guard`: this is the hot path, and a
          // closure per call shows in the profile.
          try {
            return Bucket.decide(bucket, kind, cost, now, payload) as Effect.Effect<A>
          } catch (defect) {
            return Bucket.fail(bucket, now, defect)
          }
        }
      }
      // A store-backed key that is idle: the caller sends its op itself.
      if (storeDirect) {
        const reply = Remote.direct(bucket, kind, cost)
        if (reply !== undefined) return reply as Effect.Effect<A>
      }
      const request = new Bucket.Request(kind, cost, maxWait, Deferred.makeUnsafe(), payload)
      switch (Bucket.offer(bucket, request)) {
        case Bucket.Offered.Queued:
          return Bucket.await_(bucket, request)
        case Bucket.Offered.Full:
          recorder.overloaded++
          return Effect.fail(new Overloaded({ key, reason: "mailbox", capacity: options.limits.mailboxCapacity }))
        case Bucket.Offered.Stopped:
          return startActorThenSubmit(bucket, kind, cost, maxWait, payload)
        case Bucket.Offered.Retired:
          // Reaped between lookup and offer, or died: look the key up afresh.
          retire(bucket, false)
      }
    }
  }

  const startActorThenSubmit = <A, E>(
    bucket: Bucket.Bucket,
    kind: Bucket.Kind,
    cost: number,
    maxWait: number,
    payload: Bucket.Reconfiguration | undefined
  ): Effect.Effect<A, E | SubmitError> =>
    Effect.flatMap(Bucket.makeMailbox(options.limits), (mailbox) =>
      Effect.suspend(() => {
        // Offer first, then fork: the fork runs the actor at once, and an
        // actor that finds nothing to do hibernates straight away.
        if (!closed && !bucket.retired && bucket.mailbox === undefined) bucket.mailbox = mailbox
        const reply = submit<A, E>(bucket.key, kind, cost, maxWait, payload)
        if (bucket.mailbox === mailbox && bucket.fiber === undefined) startActor(bucket, mailbox)
        return reply
      }))

  // A key with no bucket is in its initial state: peek reads it; reset,
  // release and reconfigure have nothing to change; none starts a bucket.
  const withoutBucket = (policy: Policy.Valid, kind: Bucket.Kind, cost: number): Effect.Effect<any, InvalidRequest> => {
    if (kind === Bucket.Kind.Release && policy.algorithm.release === undefined) {
      return Effect.fail(
        new InvalidRequest({
          field: "key",
          value: "(new key)",
          reason: `its policy (${policy.algorithm.name}) has no release: units come back by themselves`
        })
      )
    }
    if (kind !== Bucket.Kind.Peek) return Effect.void
    const { algorithm, config } = policy
    const now = clock.currentTimeMillisUnsafe()
    const alg = algorithm as Algorithm<unknown, unknown>
    return Effect.succeed(
      Bucket.decision(peekOutcome(alg, config, alg.initial(config, now), now, cost), clock.behind)
    )
  }

  // At maxBuckets, a new key may take the place of a bucket that is safe to
  // forget: settled (forgetting it changes no decision), with nothing queued
  // and nobody waiting, however recently it was used. The scan looks at a
  // few buckets from the oldest, moving those it passes over to the back, so
  // successive scans go round the whole table.
  const evictOne = (): boolean => {
    const now = clock.currentTimeMillisUnsafe()
    let scanned = 0
    for (const bucket of buckets.values()) {
      if (scanned++ >= 64) break
      if (isForgettable(bucket, now)) {
        retire(bucket, true)
        return true
      }
      buckets.delete(bucket.key)
      buckets.set(bucket.key, bucket)
    }
    return false
  }

  const isForgettable = (bucket: Bucket.Bucket, now: number): boolean =>
    bucket.pending === 0 &&
    bucket.line.length === 0 &&
    now >= bucket.policy.algorithm.settledAt(bucket.policy.config as never, bucket.cell.current as never)

  const sweepNow = (): number => {
    const now = clock.currentTimeMillisUnsafe()
    let reaped = 0
    for (const bucket of buckets.values()) {
      if (now - bucket.lastActive >= options.idleTimeoutMillis && isForgettable(bucket, now)) {
        retire(bucket, true)
        reaped++
      }
    }
    return reaped
  }
  const sweep = Effect.sync(sweepNow)

  const interval = Math.max(1, Math.floor(options.idleTimeoutMillis / 2))
  yield* Effect.sleep(interval).pipe(Effect.andThen(sweep), Effect.forever, Effect.forkScoped)

  // Added last, so it runs first: before FiberSet interrupts anything.
  yield* Effect.addFinalizer(() =>
    Effect.suspend(() => {
      closed = true
      const fibers: Array<Fiber.Fiber<void>> = []
      for (const bucket of buckets.values()) {
        if (bucket.fiber !== undefined) fibers.push(bucket.fiber)
        retire(bucket, false)
      }
      return Fiber.awaitAll(fibers)
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

const reservedNow = Effect.succeed<Bucket.Reserved>({ delay: 0, entry: undefined, bucket: undefined })

const isStateless = (kind: Bucket.Kind): boolean =>
  kind === Bucket.Kind.Peek || kind === Bucket.Kind.Reset || kind === Bucket.Kind.Release ||
  kind === Bucket.Kind.Reconfigure

// The actor returns normally, without being retired, only when it hibernates.
const isHibernation = (exit: Exit.Exit<void>): boolean => exit._tag === "Success"
