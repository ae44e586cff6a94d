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
 * @since 0.1.0
 */
import { type Cause, Deferred, Duration, Effect, Exit, Latch, Queue } from "effect"
import * as Decision from "../Decision.ts"
import { Overloaded, RateLimitExceeded } from "../Errors.ts"
import type * as Policy from "../Policy.ts"
import { applyOps } from "../store/MemoryStore.ts"
import { type Op, OpKind, type Reply, type Store, StoreUnavailable } from "../store/Store.ts"
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
}

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
  return link.store.apply(bucket.key, bucket.policy, ops).pipe(
    Effect.timeoutOrElse({
      duration: Duration.millis(link.fallback.timeoutMillis),
      orElse: () =>
        Effect.fail(
          new StoreUnavailable({ store: link.store.name, reason: `timed out after ${link.fallback.timeoutMillis} ms` })
        )
    }),
    Effect.map((replies): Answer => ({ replies, degraded: false, error: undefined })),
    Effect.catchTag("StoreUnavailable", (error) =>
      Effect.sync(() => {
        health.failures++
        const at = bucket.clock.currentTimeMillisUnsafe()
        health.downUntil = at + link.fallback.retryMillis
        return fallback(bucket, link, ops, at, error)
      }))
  )
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
const opFor = (bucket: Bucket.Bucket, request: Bucket.Request): Op => {
  const behind = bucket.line.length > 0
  switch (request.kind) {
    case Bucket.Kind.Reset:
      return { kind: OpKind.Reset, cost: 0, queued: 0 }
    case Bucket.Kind.Release:
      return { kind: OpKind.Release, cost: request.cost, queued: 0 }
    case Bucket.Kind.Reconfigure:
      // A shared store keeps no carry-over: a reconfigured key starts afresh.
      return { kind: OpKind.Reset, cost: 0, queued: 0 }
    case Bucket.Kind.Peek:
      return behind
        ? { kind: OpKind.WaitTime, cost: request.cost, queued: bucket.lineCost }
        : { kind: OpKind.Peek, cost: request.cost, queued: 0 }
    default:
      return behind
        ? { kind: OpKind.WaitTime, cost: request.cost, queued: bucket.lineCost }
        : { kind: OpKind.Take, cost: request.cost, queued: 0 }
  }
}

const answer = (bucket: Bucket.Bucket, request: Bucket.Request, op: Op, r: Reply, degraded: boolean) => {
  switch (request.kind) {
    case Bucket.Kind.Reset:
    case Bucket.Kind.Release:
    case Bucket.Kind.Reconfigure:
      return Exit.void
  }
  const behind = op.kind === OpKind.WaitTime
  const allowed = !behind && r.allowed
  if (request.kind !== Bucket.Kind.Peek) {
    if (allowed) bucket.recorder.allowed++
    else bucket.recorder.denied++
  }
  if (request.kind === Bucket.Kind.Acquire) return allowed ? Bucket.exitTrue : Bucket.exitFalse
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
  const ops = requests.map((r) => opFor(bucket, r))
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
        : answer(bucket, requests[i], ops[i], result.replies[i], result.degraded)
    )
  }
})

const serveWait = Effect.fnUntraced(function*(bucket: Bucket.Bucket, link: Link, request: Bucket.Request) {
  const reserving = request.kind === Bucket.Kind.Reserve
  const empty = bucket.line.length === 0
  const op: Op = empty
    ? { kind: OpKind.Take, cost: request.cost, queued: 0 }
    : { kind: OpKind.WaitTime, cost: request.cost, queued: bucket.lineCost }
  const result = yield* call(bucket, link, [op])
  const now = bucket.clock.currentTimeMillisUnsafe()
  bucket.lastActive = now
  if (result.error !== undefined) return Deferred.doneUnsafe(request.reply, Exit.fail(result.error))
  const reply = result.replies[0]
  if (empty && reply.allowed) {
    bucket.recorder.allowed++
    return Deferred.doneUnsafe(request.reply, reserving ? Bucket.exitReservedNow : Exit.void)
  }
  const wait = reply.retryAfter
  if (wait > request.maxWait) {
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
  bucket.line.push(entry)
  bucket.lineCost += request.cost
  bucket.recorder.waiting++
  if (empty) bucket.wakeAt = now + wait
  if (reserving) Deferred.doneUnsafe(request.reply, Exit.succeed<Bucket.Reserved>({ delay: wait, entry, bucket }))
})

// Admits the head of the line while the store admits it; other processes
// share the store, so the head asks rather than assumes.
const admitLine = Effect.fnUntraced(function*(bucket: Bucket.Bucket, link: Link) {
  while (bucket.line.length > 0) {
    dropCancelled(bucket)
    if (bucket.line.length === 0) return
    const now = bucket.clock.currentTimeMillisUnsafe()
    if (now < bucket.wakeAt) return
    const head = bucket.line[0]
    const result = yield* call(bucket, link, [{ kind: OpKind.Take, cost: head.cost, queued: 0 }])
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
      bucket.wakeAt = bucket.clock.currentTimeMillisUnsafe() + Math.max(1, reply.retryAfter)
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
          yield* serve(bucket, link, yield* Queue.takeAll(mailbox))
        } else {
          const delay = Math.max(1, Bucket.millisUntil(bucket.clock, bucket.wakeAt))
          const batch = yield* Effect.timeoutOption(Queue.takeAll(mailbox), Duration.millis(delay))
          yield* serve(bucket, link, batch._tag === "Some" ? batch.value : empty)
        }
      }
    },
    Effect.catchTag("Done", () => Effect.void),
    (effect, bucket) =>
      Effect.onExit(effect, (exit) => Exit.isSuccess(exit) && !bucket.retired ? Effect.void : Bucket.close(bucket))
  )
