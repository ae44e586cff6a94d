/**
 * The supervisor: maps key -> bucket, looks up a new key's policy, keeps the
 * table under its cap, reaps buckets whose forgetting cannot change a
 * decision, and stops them all when its scope closes. Everything about one
 * key (the fast path, the mailbox, the actor, its defect guard) is the
 * bucket's: the supervisor only hands each request to it.
 *
 * A hand-written `Map` rather than `RcMap`: a lookup is on every request and
 * `Effect.scoped(RcMap.get)` costs about 3.4 µs more per call here, plus a
 * sleeping expiry fiber (about 2.8 KB) per idle entry; reaping is one sweep
 * fiber for all buckets instead (docs/architecture.md has the figures).
 *
 * @since 0.1.0
 */
import { Context, Effect } from "effect"
import { InvalidPolicy, type InvalidRequest, LimiterShutdown, Overloaded } from "../../Errors.ts"
import * as Bucket from "../actor/Bucket.ts"
import type { Engine } from "../actor/Engine.ts"
import * as Limiter from "../actor/Limiter.ts"
import * as Operations from "../actor/Operations.ts"
import type * as Remote from "../actor/Remote.ts"
import * as Request from "../actor/Request.ts"
import * as Block from "../algorithm/Block.ts"
import type { Limit } from "../Limit.ts"

/** What the supervisor needs; `RateLimiter` validates it. @since 0.1.0 */
export interface Options {
  /** The policy of a key; resolved once, when the key's bucket starts. */
  readonly policyFor: (key: string) => Limit | InvalidPolicy
  readonly limits: Bucket.Limits
  readonly idleTimeoutMillis: number
  /** Most live buckets, and most reconfigured keys (default 1,000,000). */
  readonly maxBuckets?: number | undefined
  /** Decide a quiet key's requests on the caller's fiber (default true); see `Bucket.submit`. */
  readonly fastPath?: boolean | undefined
  /** The `limiter` label of the metrics (default "default"). */
  readonly name?: string | undefined
  /** Where keys' state lives: in each bucket (undefined, the default) or in a shared store. */
  readonly store?: Engine | undefined
  readonly fallback?: Remote.Fallback | undefined
  /**
   * The work one step of the sweep does before it yields (default 5,000):
   * looking at a bucket costs 1, reaping one 10 (an idle bucket's actor, if
   * it had one, has hibernated: no fiber to end).
   */
  readonly sweepSlice?: number | undefined
}

/** Counts of what the limiter has done (see `Limiter.Stats`). @since 0.1.0 */
export type Stats = Limiter.Stats

/** The failures a request can end with before it reaches a bucket. @since 0.1.0 */
export type SubmitError = InvalidPolicy | LimiterShutdown | Overloaded

/** Hands a request to the key's bucket (starting it if needed); the reply's type follows from the kind. @since 0.2.0 */
export type Submit = <K extends Request.Kind>(
  key: string,
  kind: K,
  cost: number,
  maxWait: number,
  payload?: Request.Payload
) => Effect.Effect<Request.Reply<K>, Request.FailureOf<K> | SubmitError>

/** The supervisor's interface. @since 0.1.0 */
export interface Supervisor {
  /** Acts each time it runs. */
  readonly submit: Submit
  /** Acts at once: for callers already inside a suspended effect (one allocation less per call). */
  readonly submitUnsafe: Submit
  /** The live bucket of a key, if any (for inspection and tests). */
  readonly bucket: (key: string) => Bucket.Bucket | undefined
  /**
   * The key's bucket, started if need be (through the same door as
   * `submit`), for a call over several keys that goes to them all at once;
   * `cost` is checked against what the key's policy can ever grant.
   */
  readonly bucketFor: (key: string, cost: number) => Bucket.Bucket | Effect.Effect<never, SubmitError | InvalidRequest>
  /** What the limiter's buckets share (its clock, metrics and backend). */
  readonly limiter: Bucket.Limiter
  /** The policy a key runs now: the one it was reconfigured to, or its own. */
  readonly policyOf: (key: string) => Limit | InvalidPolicy
  /** One full pass of the sweep, now (it also runs by itself). */
  readonly sweep: Effect.Effect<number>
  readonly stats: Effect.Effect<Stats>
  /**
   * For a cluster's hand-off (`tollgate/cluster`): every key whose state is
   * worth keeping (not settled), with how long it stays blocked (ms, 0: not).
   * Read it only while nothing is queued, waiting or held.
   */
  readonly snapshot: () => Array<Handover>
  /** For a cluster's hand-off: `key` starts from a handed-over state (before any request for it). */
  readonly restore: (key: string, state: unknown) => InvalidPolicy | undefined
}

/** A key's state, handed from one owner to the next (see `Supervisor.snapshot`). @since 0.3.0 */
export interface Handover {
  readonly key: string
  readonly state: unknown
  readonly blockedFor: number
}

/**
 * Told of each supervisor made in its context: how a cluster's owner reaches
 * the limiter it runs (`RateLimiter.make`) for its hand-off.
 *
 * @since 0.3.0
 */
export const OnMake = Context.Reference<((supervisor: Supervisor) => void) | undefined>(
  "tollgate/internal/Supervisor/OnMake",
  { defaultValue: () => undefined }
)

const shutdownExit = Effect.fail(new LimiterShutdown())

/**
 * Starts a supervisor in the current scope. Closing the scope stops intake,
 * lets every bucket answer what it has queued, fails its waiters with
 * `LimiterShutdown`, and waits for every actor to stop.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import * as Supervisor from "./Supervisor.ts"
 *
 * const policy = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * const make = Supervisor.make({ policyFor: () => policy, limits: { mailboxCapacity: 64, maxWaiters: 64 }, idleTimeoutMillis: 60_000 })
 * ```
 *
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options: Options) {
  const { idleTimeoutMillis } = options
  const maxBuckets = options.maxBuckets ?? 1_000_000
  const slice = options.sweepSlice ?? 5_000
  const reapCost = 10
  const buckets = new Map<string, Bucket.Bucket>()
  // Keys reconfigured at runtime keep their policy across reaps.
  const overrides = new Map<string, Limit>()
  let closed = false
  const forget = (key: string, bucket: Bucket.Bucket): boolean => {
    if (buckets.get(key) !== bucket) return false
    buckets.delete(key)
    Bucket.forgotten(limiter, bucket)
    limiter.recorder.live--
    return true
  }
  const { limiter, snapshot } = yield* Limiter.make({
    limits: options.limits,
    fastPath: options.fastPath ?? true,
    name: options.name ?? "default",
    store: options.store,
    fallback: options.fallback ??
      { mode: "local", share: 1, local: (policy) => policy, timeoutMillis: 250, retryMillis: 1000 },
    forget
  })
  const { recorder } = limiter

  // Out of the table first, then retired: a running actor serves what was queued and ends.
  const reap = (key: string, bucket: Bucket.Bucket): void => {
    if (forget(key, bucket)) recorder.reaped++
    Bucket.retire(bucket)
  }

  // At the cap, a new key takes the place of a bucket that is safe to forget,
  // however recently it was used. A cursor goes round the activity slots (one
  // per live bucket; an index pins nothing, where a kept Map iterator pins
  // every table the Map has outgrown), a few slots per new key: the work per
  // new key stays the same however many came before it.
  const { activity } = limiter
  let cursor = 0
  const evictOne = (): boolean => {
    const now = limiter.clock.currentTimeMillisUnsafe()
    const end = activity.end
    for (let looked = 0; looked < 64 && looked < end; looked++) {
      if (cursor >= end) cursor = 0
      const bucket = activity.owners[cursor++]
      if (bucket !== undefined && Bucket.settled(limiter, bucket, now)) {
        reap(bucket.key, bucket)
        return true
      }
    }
    return false
  }

  // A reconfigured key keeps its policy, for at most maxBuckets keys; one
  // reconfigured back to the policy it would get anyway gives its entry up.
  const override = (key: string, payload: Request.Payload | undefined): Overloaded | undefined => {
    if (payload === undefined || !("policy" in payload) || payload.policy === options.policyFor(key)) {
      overrides.delete(key)
    } else if (overrides.has(key) || overrides.size < maxBuckets) {
      overrides.set(key, payload.policy)
    } else {
      recorder.overloaded++
      return new Overloaded({ key, reason: "buckets", capacity: maxBuckets })
    }
  }

  // The one way into the table: a key with no bucket gets its policy (the
  // one it was reconfigured to, or its own), is refused what that policy
  // can never grant, is answered at once when the request needs no state
  // (a peek of a fresh key), and otherwise gets a bucket, within the cap.
  // Synchronous from the lookup to the insert: concurrent first calls
  // start one bucket.
  const start = (
    key: string,
    kind: Request.Kind,
    cost: number,
    payload: Request.Payload | undefined
  ): Bucket.Bucket | Request.Answer | Effect.Effect<never, SubmitError> => {
    const policy = overrides.get(key) ?? options.policyFor(key)
    if (policy instanceof InvalidPolicy) return Effect.fail(policy)
    const refused = Operations.refuse(policy, key, kind, cost, payload)
    if (refused !== undefined) return Effect.fail(refused)
    const answer = limiter.backend.unstarted(limiter, key, policy, kind, cost)
    if (answer !== undefined) return answer
    if (buckets.size >= maxBuckets && !evictOne()) {
      recorder.overloaded++
      return Effect.fail(new Overloaded({ key, reason: "buckets", capacity: maxBuckets }))
    }
    const bucket = Bucket.make(limiter, key, policy)
    buckets.set(key, bucket)
    recorder.live++
    recorder.started++
    return bucket
  }

  // A deleted key is forgotten with the policy it was given: it goes back to
  // its own, carried to its bucket by the delete (if it still has one).
  const forgetOverride = (key: string): Request.Reconfiguration | undefined => {
    if (!overrides.delete(key)) return undefined
    const policy = options.policyFor(key)
    return policy instanceof InvalidPolicy ? undefined : { policy, carry: "reset" }
  }

  const submit: Submit = <K extends Request.Kind>(
    key: string,
    kind: K,
    cost: number,
    maxWait: number,
    payload?: Request.Payload
  ) => {
    if (kind === Request.Kind.Delete && overrides.size > 0) payload = forgetOverride(key) ?? payload
    while (true) {
      if (closed) return shutdownExit
      const full = kind === Request.Kind.Reconfigure ? override(key, payload) : undefined
      if (full !== undefined) return Effect.fail(full)
      let bucket = buckets.get(key)
      if (bucket === undefined) {
        const started = start(key, kind, cost, payload)
        if (!(started instanceof Bucket.Bucket)) return started as Request.Answer<K>
        bucket = started
      }
      const answer = Bucket.submit(limiter, bucket, kind, cost, maxWait, payload)
      if (answer !== undefined) return answer
      forget(key, bucket) // it retired under us (its actor died): look the key up afresh
    }
  }

  const bucketFor = (key: string, cost: number): Bucket.Bucket | Effect.Effect<never, SubmitError | InvalidRequest> => {
    if (closed) return shutdownExit
    let bucket = buckets.get(key)
    if (bucket !== undefined && Bucket.retired(bucket)) {
      forget(key, bucket)
      bucket = undefined
    }
    if (bucket === undefined) {
      const started = start(key, Request.Kind.Hold, cost, undefined)
      // (a hold always starts a bucket: it needs one to hold in)
      return started instanceof Bucket.Bucket ? started : (started as Effect.Effect<never, SubmitError>)
    }
    const refused = Operations.refuse(bucket.policy, key, Request.Kind.Hold, cost)
    return refused === undefined ? bucket : Effect.fail(refused)
  }

  // One pass over the buckets (their activity slots), a slice at a time:
  // other fibers and the event loop run between slices, so no pause grows
  // with the number of buckets. A slice is bounded by the work it sets off,
  // not by the buckets it looks at: looking costs 1, a reap `reapCost` (an
  // idle bucket has no fiber to end: its actor, if it had one, hibernated).
  const sweep = Effect.suspend(() => {
    let slot = 0
    let reaped = 0
    const step: Effect.Effect<number> = Effect.suspend(() => {
      const now = limiter.clock.currentTimeMillisUnsafe()
      let work = 0
      while (work < slice) {
        if (slot >= activity.end) return Effect.succeed(reaped)
        const bucket = activity.owners[slot++]
        work++
        if (bucket !== undefined && Bucket.idle(limiter, bucket, now, idleTimeoutMillis)) {
          work += reapCost
          reap(bucket.key, bucket)
          reaped++
        }
      }
      return Effect.andThen(Effect.yieldNow, step)
    })
    return step
  })
  const interval = Math.max(1, Math.floor(idleTimeoutMillis / 2))
  yield* Effect.sleep(interval).pipe(Effect.andThen(sweep), Effect.forever, Effect.forkScoped)

  // Added last, so it runs first: before the actors' scope interrupts anything.
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

  const stats = Effect.sync(() => snapshot(buckets.size, overrides.size))

  const handovers = (): Array<Handover> => {
    const now = limiter.clock.currentTimeMillisUnsafe()
    const out: Array<Handover> = []
    for (const [key, bucket] of buckets) {
      if (Bucket.settled(limiter, bucket, now)) continue
      // a block is handed over as its time left, beside the state under it
      const state = Bucket.read(bucket)
      out.push(
        state instanceof Block.Stored
          ? { key, state: state.state, blockedFor: Math.max(0, state.until - now) }
          : { key, state, blockedFor: 0 }
      )
    }
    return out
  }
  const restore = (key: string, state: unknown): InvalidPolicy | undefined => {
    let bucket = buckets.get(key)
    if (bucket === undefined) {
      const policy = overrides.get(key) ?? options.policyFor(key)
      if (policy instanceof InvalidPolicy) return policy
      buckets.set(key, bucket = Bucket.make(limiter, key, policy))
      recorder.live++
      recorder.started++
    }
    Bucket.write(bucket, state)
  }

  const supervisor: Supervisor = {
    submit: (key, kind, cost, maxWait, payload) => Effect.suspend(() => submit(key, kind, cost, maxWait, payload)),
    submitUnsafe: submit,
    bucket: (key: string) => buckets.get(key),
    bucketFor,
    limiter,
    policyOf: (key: string) => overrides.get(key) ?? options.policyFor(key),
    sweep,
    stats,
    snapshot: handovers,
    restore
  }
  const onMake = yield* OnMake
  onMake?.(supervisor)
  return supervisor
})
