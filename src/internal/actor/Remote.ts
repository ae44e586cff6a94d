/**
 * The bucket actor in front of a shared store. The key's state lives in the
 * store (Redis); the actor keeps the key's mailbox and line of waiters, and
 * sends each batch of decide-now requests in one call (coalescing): a hot key
 * costs one round trip per batch, not one per request.
 *
 * When the store does not answer within the timeout, the configured fallback
 * decides: a local bucket with a share of the limit, allow, deny, or a typed
 * `StoreUnavailable` error. Decisions taken by the fallback are flagged
 * `degraded`. After a failure the store is skipped for `retryAfter`, then
 * tried again: recovery is automatic.
 *
 * A key with nothing queued, nobody waiting and no store call in flight is
 * decided on the caller's fiber ({@link direct}): the caller sends its one
 * operation through the store itself (which batches calls for different keys
 * made at the same moment), as the in-process fast path decides on the
 * caller's fiber. While that call is out, the key's other requests queue in
 * its mailbox and the actor sends them together once it is back, so a key's
 * operations stay in order and a hot key still costs one call per batch.
 *
 * @since 0.1.0
 */
import { Cause, Deferred, Duration, Effect, Exit, Latch, Queue, Result } from "effect"
import type * as Decision from "../../Decision.ts"
import { BucketFailed, Overloaded, RateLimitExceeded } from "../../Errors.ts"
import { applyOps } from "../../MemoryStore.ts"
import type * as Policy from "../../Policy.ts"
import { type Op, OpKind, type Reply, type Store, StoreUnavailable } from "../../Store.ts"
import * as Bucket from "./Bucket.ts"

/**
 * What a store-backed limiter does when its store does not answer.
 *
 * @since 0.1.0
 */
export interface Fallback {
  /**
   * `"local"`: decide in-process with `share` of each key's limit (the
   * default); `"allow"`: fail open; `"deny"`: fail closed; `"error"`: fail
   * the call with `StoreUnavailable`.
   */
  readonly mode: "local" | "allow" | "deny" | "error"
  /** For `"local"`: the fraction of the limit each process grants on its own (0 < share <= 1). */
  readonly share: number
  /** How long one store call may take before the fallback decides. */
  readonly timeoutMillis: number
  /** After a failure, how long calls go straight to the fallback before the store is tried again. */
  readonly retryMillis: number
}

/**
 * The store's health, shared by every bucket of a limiter.
 *
 * @since 0.1.0
 */
export class Health {
  /** Until when calls skip the store. */
  downUntil = 0
  failures = 0
  degraded = 0
  calls = 0
  ops = 0
}

/**
 * What a store-backed bucket needs.
 *
 * @since 0.1.0
 */
export interface Link {
  readonly store: Store
  readonly fallback: Fallback
  readonly health: Health
  /** The local policy the `"local"` fallback uses (a share of the key's). */
  readonly localPolicy: Policy.Valid
  /** The local fallback's state for this key. */
  localState: unknown
  /** Whether a caller-side call ({@link direct}) for this key is out. */
  busy: boolean
  /** Completed when that call is back, for an actor that waits for it. */
  idle: Deferred.Deferred<void> | undefined
  /** When that call started (an actor waits for it at most the store timeout). */
  busySince: number
  /** Ends that call: frees the key and wakes an actor waiting for it. */
  readonly settled: () => Effect.Effect<void>
}

/**
 * The link of a store-backed bucket.
 *
 * @since 0.1.0
 */
export const makeLink = (store: Store, fallback: Fallback, health: Health, localPolicy: Policy.Valid): Link => {
  const link: Link = {
    store,
    fallback,
    health,
    localPolicy,
    localState: undefined,
    busy: false,
    idle: undefined,
    busySince: 0,
    settled: () => settledEffect
  }
  const settledEffect = Effect.sync(() => settle(link))
  return link
}

// How often the head of a line that waits for a release (a concurrency limit
// with every unit out) asks the store again: another process's release
// wakes nobody here.
const releasePollMillis = 100

// Waiters whose callers left go; if the head went, the new head asks at once.
const dropCancelled = (bucket: Bucket.Bucket): void => {
  const head = bucket.line[0]
  Bucket.removeCancelled(bucket)
  if (bucket.line[0] !== head) bucket.wakeAt = 0
}

const isWait = (kind: Bucket.Kind): boolean => kind === Bucket.Kind.Wait || kind === Bucket.Kind.Reserve

// One store call, with the timeout and the fallback.
const call = (bucket: Bucket.Bucket, link: Link, ops: ReadonlyArray<Op>) => {
  const now = bucket.clock.currentTimeMillisUnsafe()
  const health = link.health
  if (now < health.downUntil) return Effect.succeed(fallback(bucket, link, ops, now))
  health.calls++
  health.ops += ops.length
  const store = link.store
  const timeout = link.fallback.timeoutMillis
  const applied = store.timesOut === true
    ? store.apply(bucket.key, bucket.policy, ops, timeout)
    : Effect.timeoutOrElse(store.apply(bucket.key, bucket.policy, ops), {
      duration: Duration.millis(timeout),
      orElse: () => Effect.fail(new StoreUnavailable({ store: store.name, reason: `timed out after ${timeout} ms` }))
    })
  // One handler for every outcome (a combinator per case costs on every call).
  return Effect.matchCauseEffect(applied, {
    onSuccess: (replies) => {
      // the store is back: what the local fallback counted meanwhile is moot,
      // and a later outage starts from a whole share
      if (link.localState !== undefined) link.localState = undefined
      return Effect.succeed<Answer>({ replies, degraded: false, error: undefined })
    },
    onFailure: (cause) => {
      // interrupted: the caller leaves (no answer is owed to it)
      if (Cause.hasInterrupts(cause)) return Effect.failCause(cause) as Effect.Effect<never>
      // A store that dies is a store that failed: the fallback answers, and
      // nobody is left waiting on a batch the defect would have dropped.
      const found = Cause.findError(cause)
      const error = Result.isSuccess(found)
        ? found.success
        : new StoreUnavailable({ store: store.name, reason: `it died: ${String(Cause.squash(cause))}` })
      health.failures++
      const at = bucket.clock.currentTimeMillisUnsafe()
      health.downUntil = at + link.fallback.retryMillis
      return Effect.succeed(fallback(bucket, link, ops, at, error))
    }
  })
}

interface Answer {
  readonly replies: ReadonlyArray<Reply>
  readonly degraded: boolean
  readonly error: StoreUnavailable | undefined
}

const fallback = (
  bucket: Bucket.Bucket,
  link: Link,
  ops: ReadonlyArray<Op>,
  now: number,
  error?: StoreUnavailable
): Answer => {
  link.health.degraded += ops.length
  const limit = bucket.policy.algorithm.maxCost(bucket.policy.config as never)
  switch (link.fallback.mode) {
    case "local": {
      const [replies, state] = applyOps(link.localPolicy, link.localState, now, ops)
      link.localState = state
      return { replies, degraded: true, error: undefined }
    }
    case "allow":
    case "deny": {
      const allowed = link.fallback.mode === "allow"
      const retryAfter = allowed ? 0 : link.fallback.retryMillis
      return {
        replies: ops.map(() => ({
          allowed,
          remaining: allowed ? limit : 0,
          retryAfter,
          resetAfter: retryAfter,
          limit
        })),
        degraded: true,
        error: undefined
      }
    }
    case "error":
      return {
        replies: [],
        degraded: true,
        error: error ?? new StoreUnavailable({ store: link.store.name, reason: "down; retrying shortly" })
      }
  }
}

// The op a decide-now request becomes. While anyone waits, acquire/consume/
// peek are denied behind the line: the store answers how long that is.
const opFor = (bucket: Bucket.Bucket, kind: Bucket.Kind, cost: number): Op => {
  const behind = bucket.line.length > 0
  switch (kind) {
    case Bucket.Kind.Reset:
    case Bucket.Kind.Reconfigure:
      // A shared store keeps no carry-over: a reconfigured key starts afresh.
      return resetOp
    case Bucket.Kind.Release:
      return { kind: OpKind.Release, cost, queued: 0 }
    case Bucket.Kind.Peek:
      return behind
        ? { kind: OpKind.WaitTime, cost, queued: bucket.lineCost }
        : { kind: OpKind.Peek, cost, queued: 0 }
    default:
      return behind
        ? { kind: OpKind.WaitTime, cost, queued: bucket.lineCost }
        : cost === 1
        ? takeOne
        : { kind: OpKind.Take, cost, queued: 0 }
  }
}

// The most common operations, shared (ops are never mutated).
const takeOne: Op = { kind: OpKind.Take, cost: 1, queued: 0 }
const takeOneOps: ReadonlyArray<Op> = [takeOne]
const resetOp: Op = { kind: OpKind.Reset, cost: 0, queued: 0 }

const answer = (bucket: Bucket.Bucket, kind: Bucket.Kind, op: Op, r: Reply, degraded: boolean) => {
  switch (kind) {
    case Bucket.Kind.Reset:
    case Bucket.Kind.Release:
    case Bucket.Kind.Reconfigure:
      return Exit.void
  }
  const behind = op.kind === OpKind.WaitTime
  const allowed = !behind && r.allowed
  if (kind !== Bucket.Kind.Peek) {
    if (allowed) bucket.recorder.allowed++
    else bucket.recorder.denied++
  }
  if (kind === Bucket.Kind.Acquire) return allowed ? Bucket.exitTrue : Bucket.exitFalse
  const decision: Decision.Decision = {
    allowed,
    remaining: behind ? 0 : r.remaining,
    retryAfter: r.retryAfter === Infinity ? Duration.infinity : Duration.millis(r.retryAfter),
    resetAfter: Duration.millis(r.resetAfter),
    limit: r.limit,
    ...(degraded ? { degraded: true } : {})
  }
  return Exit.succeed(decision)
}

// Decide-now requests between two waits see the same line: one call for all.
const serveSegment = Effect.fnUntraced(function*(
  bucket: Bucket.Bucket,
  link: Link,
  requests: ReadonlyArray<Bucket.Request>
) {
  const ops = requests.map((r) => opFor(bucket, r.kind, r.cost))
  for (const r of requests) {
    if (r.kind === Bucket.Kind.Reconfigure) {
      bucket.policy = r.payload!.policy
      bucket.maxCost = bucket.policy.algorithm.maxCost(bucket.policy.config as never)
    }
    // The key's state changes under the line: the head asks again now.
    if (r.kind === Bucket.Kind.Reconfigure || r.kind === Bucket.Kind.Reset || r.kind === Bucket.Kind.Release) {
      bucket.wakeAt = 0
    }
  }
  const result = yield* call(bucket, link, ops)
  bucket.lastActive = bucket.clock.currentTimeMillisUnsafe()
  for (let i = 0; i < requests.length; i++) {
    Deferred.doneUnsafe(
      requests[i].reply,
      result.error !== undefined
        ? Exit.fail(result.error)
        : answer(bucket, requests[i].kind, ops[i], result.replies[i], result.degraded)
    )
  }
})

const serveWait = Effect.fnUntraced(function*(bucket: Bucket.Bucket, link: Link, request: Bucket.Request) {
  const reserving = request.kind === Bucket.Kind.Reserve
  const empty = bucket.line.length === 0
  // With nobody in line: take it only if admitted (a refused try changes
  // nothing, as in-process), and how long it would wait if not.
  const result = yield* call(
    bucket,
    link,
    empty
      ? [{ kind: OpKind.Admit, cost: request.cost, queued: 0 }, {
        kind: OpKind.WaitTime,
        cost: request.cost,
        queued: 0
      }]
      : [{ kind: OpKind.WaitTime, cost: request.cost, queued: bucket.lineCost }]
  )
  const now = bucket.clock.currentTimeMillisUnsafe()
  bucket.lastActive = now
  if (result.error !== undefined) return Deferred.doneUnsafe(request.reply, Exit.fail(result.error))
  if (empty && result.replies[0].allowed) {
    bucket.recorder.allowed++
    return Deferred.doneUnsafe(request.reply, reserving ? Bucket.exitReservedNow : Exit.void)
  }
  const wait = result.replies[empty ? 1 : 0].retryAfter
  // Infinity with a release: the turn comes when units come back, not with
  // time; such a waiter may wait up to its maxWait for it (as in-process).
  const onRelease = wait === Infinity && bucket.policy.algorithm.release !== undefined &&
    request.kind === Bucket.Kind.Wait
  if (wait > request.maxWait && !onRelease) {
    bucket.recorder.denied++
    return Deferred.doneUnsafe(
      request.reply,
      Exit.fail(new RateLimitExceeded({ key: bucket.key, retryAfter: Duration.millis(wait) }))
    )
  }
  if (bucket.line.length >= bucket.limits.maxWaiters) {
    bucket.recorder.overloaded++
    return Deferred.doneUnsafe(
      request.reply,
      Exit.fail(new Overloaded({ key: bucket.key, reason: "waiters", capacity: bucket.limits.maxWaiters }))
    )
  }
  const entry = reserving
    ? new Bucket.Request(Bucket.Kind.Wait, request.cost, request.maxWait, Deferred.makeUnsafe())
    : request
  if (onRelease && request.maxWait !== Infinity) {
    entry.deadline = now + request.maxWait
    if (entry.deadline < bucket.nextDeadline) bucket.nextDeadline = entry.deadline
  }
  bucket.line.push(entry)
  bucket.lineCost += request.cost
  bucket.recorder.waiting++
  if (empty) bucket.wakeAt = now + (wait === Infinity ? releasePollMillis : wait)
  if (reserving) Deferred.doneUnsafe(request.reply, Exit.succeed<Bucket.Reserved>({ delay: wait, entry, bucket }))
})

// Waiters for a release whose maxWait has passed give up: they took nothing.
const expire = (bucket: Bucket.Bucket, now: number): void => {
  if (Bucket.expireWaiters(bucket, now, Deferred.doneUnsafe)) dropCancelled(bucket)
}

// Admits the head of the line while the store admits it; other processes
// share the store, so the head asks rather than assumes.
const admitLine = Effect.fnUntraced(function*(bucket: Bucket.Bucket, link: Link) {
  while (bucket.line.length > 0) {
    dropCancelled(bucket)
    expire(bucket, bucket.clock.currentTimeMillisUnsafe())
    if (bucket.line.length === 0) return
    const now = bucket.clock.currentTimeMillisUnsafe()
    if (now < bucket.wakeAt) return
    const head = bucket.line[0]
    // Only an admission changes the key: a head that is refused logs nothing.
    const result = yield* call(bucket, link, [{ kind: OpKind.Admit, cost: head.cost, queued: 0 }])
    if (head.cancelled) {
      // The caller left while we asked: give the units back if they were taken.
      if (result.error === undefined && result.replies[0].allowed) {
        yield* call(bucket, link, [{ kind: OpKind.Release, cost: head.cost, queued: 0 }])
      }
      continue
    }
    if (result.error !== undefined) {
      bucket.line.shift()
      bucket.lineCost -= head.cost
      bucket.recorder.waiting--
      Deferred.doneUnsafe(head.reply, Exit.fail(result.error))
      continue
    }
    const reply = result.replies[0]
    if (!reply.allowed) {
      // Waiting for a release: ask again now and then (another process's
      // release wakes nobody here; this process's own wakes the head at once).
      const retry = reply.retryAfter === Infinity ? releasePollMillis : reply.retryAfter
      bucket.wakeAt = bucket.clock.currentTimeMillisUnsafe() + Math.max(1, retry)
      return
    }
    bucket.line.shift()
    bucket.lineCost -= head.cost
    bucket.recorder.waiting--
    bucket.recorder.allowed++
    Deferred.doneUnsafe(head.reply, Exit.void)
    bucket.wakeAt = 0
  }
})

const serve = Effect.fnUntraced(function*(bucket: Bucket.Bucket, link: Link, batch: ReadonlyArray<Bucket.Request>) {
  bucket.pending -= batch.length
  bucket.recorder.queued -= batch.length
  if (bucket.line.length > 0) dropCancelled(bucket)
  let segment: Array<Bucket.Request> = []
  for (const request of batch) {
    if (request.cancelled || request.kind === Bucket.Kind.Poke) continue
    if (!isWait(request.kind)) {
      segment.push(request)
      continue
    }
    if (segment.length > 0) {
      yield* serveSegment(bucket, link, segment)
      segment = []
    }
    yield* serveWait(bucket, link, request)
  }
  if (segment.length > 0) yield* serveSegment(bucket, link, segment)
  if (bucket.line.length > 0) yield* admitLine(bucket, link)
})

// A defect in serving a batch (a bug, never a store failure: `call` answers
// those) hurts only this key: the batch and the line get BucketFailed, and
// the actor goes on.
const guarded = (bucket: Bucket.Bucket, link: Link, batch: ReadonlyArray<Bucket.Request>) =>
  Effect.catchDefect(serve(bucket, link, batch), (defect) =>
    Effect.sync(() => {
      const exit = Exit.fail(new BucketFailed({ key: bucket.key, defect: String(defect) }))
      for (const request of batch) if (request.kind !== Bucket.Kind.Poke) Deferred.doneUnsafe(request.reply, exit)
      for (const w of bucket.line) Deferred.doneUnsafe(w.reply, exit)
      bucket.recorder.waiting -= bucket.line.length
      bucket.line.length = 0
      bucket.lineCost = 0
      bucket.nextDeadline = Infinity
    }))

// Waits until the key's caller-side call is back, so the batch goes after
// it (in order) and takes everything queued meanwhile (coalescing). That
// call ends within the store timeout; should its caller never have run it
// (interrupted before it started), the wait ends after twice that.
const awaitIdle = (bucket: Bucket.Bucket, link: Link): Effect.Effect<void> => {
  const left = link.busySince + 2 * link.fallback.timeoutMillis - bucket.clock.currentTimeMillisUnsafe()
  if (left <= 0) {
    settle(link)
    return Effect.void
  }
  link.idle ??= Deferred.makeUnsafe<void>()
  return Effect.timeoutOption(Deferred.await(link.idle), Duration.millis(left)).pipe(
    Effect.andThen(Effect.sync(() => settle(link)))
  )
}

const settle = (link: Link): void => {
  link.busy = false
  const idle = link.idle
  if (idle !== undefined) {
    link.idle = undefined
    Deferred.doneUnsafe(idle, Exit.void)
  }
}

/**
 * The caller-side path of a store-backed key: when the key has nothing
 * queued, nobody waiting, no actor running and no call of this kind in
 * flight, a decide-now request (`acquire`, `consume`, `peek`, `reset`,
 * `release`) is sent through the store from the caller's fiber, with the
 * same timeout, fallback, metrics and replies as the actor's batch of one.
 * Returns `undefined` when the request must go through the actor.
 *
 * Interruption is as on the actor's path: an operation not yet sent is
 * dropped; one already sent is applied by the store (its units taken) and
 * its answer is lost, as for a caller that leaves while its batch is out.
 *
 * @example
 * ```ts
 * import type * as Bucket from "./Bucket.ts"
 * import * as Remote from "./Remote.ts"
 *
 * declare const bucket: Bucket.Bucket
 * const reply = Remote.direct(bucket, 0, 1) // an acquire of 1, or undefined: queue it
 * ```
 *
 * @since 0.1.0
 */
export const direct = (
  bucket: Bucket.Bucket,
  kind: Bucket.Kind,
  cost: number
): Effect.Effect<any, StoreUnavailable> | undefined => {
  const link = bucket.remote
  if (
    link === undefined || link.busy || bucket.retired || bucket.mailbox !== undefined || bucket.pending > 0 ||
    bucket.line.length > 0 || isWait(kind) || kind === Bucket.Kind.Reconfigure || kind === Bucket.Kind.Poke
  ) return undefined
  const now = bucket.clock.currentTimeMillisUnsafe()
  link.busy = true
  link.busySince = now
  bucket.lastActive = now
  const op = opFor(bucket, kind, cost)
  return Effect.onExit(
    Effect.flatMap(call(bucket, link, op === takeOne ? takeOneOps : [op]), (result) => {
      bucket.lastActive = bucket.clock.currentTimeMillisUnsafe()
      return result.error !== undefined
        ? Exit.fail(result.error)
        : answer(bucket, kind, op, result.replies[0], result.degraded)
    }),
    link.settled
  )
}

const empty: ReadonlyArray<Bucket.Request> = []

/**
 * The store-backed actor's loop over `mailbox`: like `Bucket.run`, but each
 * batch is decided by the store.
 *
 * @since 0.1.0
 */
export const run: (bucket: Bucket.Bucket, mailbox: Queue.Queue<Bucket.Request, Cause.Done>) => Effect.Effect<void> =
  Effect.fnUntraced(
    function*(bucket: Bucket.Bucket, mailbox: Queue.Queue<Bucket.Request, Cause.Done>) {
      const link = bucket.remote!
      Latch.openUnsafe(bucket.ready)
      while (true) {
        if (bucket.line.length === 0) {
          // Let callers that are running now join this batch: one store call
          // for all of them (a store call costs a round trip; a yield does not).
          yield* Effect.yieldNow
          if (Bucket.hibernate(bucket, mailbox)) return
          if (link.busy) yield* awaitIdle(bucket, link)
          yield* guarded(bucket, link, yield* Queue.takeAll(mailbox))
        } else {
          const delay = Math.max(1, Bucket.millisUntil(bucket.clock, Math.min(bucket.wakeAt, bucket.nextDeadline)))
          const batch = yield* Effect.timeoutOption(Queue.takeAll(mailbox), Duration.millis(delay))
          yield* guarded(bucket, link, batch._tag === "Some" ? batch.value : empty)
        }
      }
    },
    Effect.catchTag("Done", () => Effect.void),
    (effect, bucket) =>
      Effect.onExit(effect, (exit) => Exit.isSuccess(exit) && !bucket.retired ? Effect.void : Bucket.close(bucket))
  )
