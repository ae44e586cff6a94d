/**
 * Store-backed deciding: the key's state lives in a shared store (Redis);
 * the bucket's actor keeps the key's mailbox and line of waiters, and sends
 * each batch of decide-now requests in one call (coalescing): a hot key
 * costs one round trip per batch, not one per request.
 *
 * When the store does not answer within the timeout, the configured fallback
 * decides: a local bucket with a share of the limit (its state kept in the
 * bucket's own `Ref`), allow, deny, or a typed `StoreUnavailable` error.
 * Decisions taken by the fallback are flagged `degraded`. After a failure the
 * store is skipped for `retryAfter`, then tried again: recovery is automatic.
 *
 * A key with nothing queued, nobody waiting, no actor running and no store
 * call in flight is decided on the caller's fiber: the caller sends its one
 * operation through the store itself (which batches calls for different keys
 * made at the same moment), as the in-process fast path decides on the
 * caller's fiber. While that call is out, the key's other requests queue in
 * its mailbox and the actor sends them together once it is back, so a key's
 * operations stay in order and a hot key still costs one call per batch.
 *
 * @since 0.1.0
 */
import { Cause, Deferred, Duration, Effect, Exit, Result } from "effect"
import { BucketFailed, InvalidRequest, RateLimitExceeded, StoreUnavailable } from "../../Errors.ts"
import type { Limit } from "../Limit.ts"
import * as Interpreter from "../operation/Interpreter.ts"
import { Kind as OpKind, type Op, type Reply } from "../operation/Op.ts"
import * as Bucket from "./Bucket.ts"
import type { Engine } from "./Engine.ts"
import * as Line from "./Line.ts"
import * as Operations from "./Operations.ts"
import * as Request from "./Request.ts"

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
  /** For `"local"`: the policy that grants `share` of a key's (made by the limiter, once per policy). */
  readonly local: (policy: Limit) => Limit
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

// How often the head of a line that waits for a release (a concurrency limit
// with every unit out) asks the store again: another process's release
// wakes nobody here.
const releasePollMillis = 100

interface Answered {
  readonly replies: ReadonlyArray<Reply>
  readonly degraded: boolean
  readonly error: StoreUnavailable | undefined
}

const isWait = (kind: Request.Kind): boolean => kind === Request.Kind.Wait || kind === Request.Kind.Reserve

// Requests that change the key's state for whoever waits: the head asks again.
const changesUnderLine = (kind: Request.Kind): boolean =>
  kind === Request.Kind.Reconfigure || kind === Request.Kind.Reset || kind === Request.Kind.Release ||
  kind === Request.Kind.Add || kind === Request.Kind.ForceAdd || kind === Request.Kind.Fill ||
  kind === Request.Kind.Set || kind === Request.Kind.Delete || kind === Request.Kind.Block ||
  kind === Request.Kind.Force || kind === Request.Kind.Feedback

// The op a decide-now request becomes: its definition's, behind the line
// when anyone waits (the store answers how long that is).
const opFor = (line: Line.Line | undefined, kind: Request.Kind, cost: number, payload: Request.Payload | undefined) =>
  Operations.table[kind].op!(
    cost,
    payload,
    line === undefined || line.waiters.length === 0 ? Operations.quiet : { line: line.cost, held: 0, busy: true }
  )

// A reconfigure switches the key's policy; a delete forgets a policy the key
// was given (the supervisor sends the key's own). The local fallback then
// counts a share of that policy, afresh.
const adopt = (bucket: Bucket.Bucket, kind: Request.Kind, payload: Request.Payload | undefined): void => {
  if (
    (kind === Request.Kind.Reconfigure || kind === Request.Kind.Delete) && payload !== undefined && "policy" in payload
  ) {
    Bucket.adopt(bucket, payload.policy, undefined)
  }
}

// The caller's answer to a decide-now request, from the store's reply.
const answerOf = <K extends Request.Kind>(
  limiter: Bucket.Limiter,
  kind: K,
  op: Op,
  reply: Reply,
  degraded: boolean,
  policy: Limit
): Request.Answer<K> =>
  Operations.table[kind].answer({ recorder: limiter.recorder, policy, degraded, behind: 0 }, op, reply)

type AllReplyOf = import("../operation/Op.ts").AllReply

// A waiter refused by the fallback `deny`: told to try again once the store
// is tried again.
const deniedWaiterOf = (key: string, retryMillis: number) =>
  new RateLimitExceeded({ key, retryAfter: Duration.millis(retryMillis) })

// Holds are the in-process protocol of calls over several keys (a shared
// store decides those in one atomic call); transactions need the state in
// process. Neither is ever sent to a store-backed bucket by the limiter.
const inProcessOnly = (what: string) =>
  new InvalidRequest({ field: "kind", value: what, reason: "needs the key's state in process, not in a shared store" })

/**
 * The store-backed backend of a limiter: its buckets decide through `store`,
 * and `fallback` answers while the store does not.
 *
 * @since 0.2.0
 */
export const backend = (store: Engine, fallback: Fallback, health: Health): Bucket.Backend => {
  const deniedWaiter = (bucket: Bucket.Bucket) => deniedWaiterOf(bucket.key, fallback.retryMillis)
  // The local fallback's policy: a share of the key's (made once per policy).
  const shares = new WeakMap<Limit, Limit>()
  const localPolicy = (policy: Limit): Limit => {
    let local = shares.get(policy)
    if (local === undefined) shares.set(policy, local = fallback.local(policy))
    return local
  }

  // What the fallback "allow" or "deny" answers, knowing nothing of a key's state.
  const blind = (bucket: Bucket.Bucket, ops: ReadonlyArray<Op>): ReadonlyArray<Reply> => {
    const limit = bucket.policy.rule.maxCost
    const allowed = fallback.mode === "allow"
    const retryAfter = allowed ? 0 : fallback.retryMillis
    return ops.map((op) => ({
      allowed,
      remaining: allowed ? limit : 0,
      retryAfter,
      resetAfter: retryAfter,
      limit,
      // a partial take takes all it asks for, or nothing
      ...(op.kind === OpKind.TakeUpTo ? { value: allowed ? op.cost : 0 } : {})
    }))
  }

  const degrade = (
    bucket: Bucket.Bucket,
    ops: ReadonlyArray<Op>,
    now: number,
    error?: StoreUnavailable
  ): Answered => {
    health.degraded += ops.length
    switch (fallback.mode) {
      case "local": {
        const [replies, state] = Interpreter.apply(localPolicy(bucket.policy), Bucket.read(bucket), now, ops)
        Bucket.write(bucket, state)
        return { replies, degraded: true, error: undefined }
      }
      case "allow":
      case "deny":
        return { replies: blind(bucket, ops), degraded: true, error: undefined }
      case "error":
        return {
          replies: [],
          degraded: true,
          error: error ?? new StoreUnavailable({ store: store.name, reason: "down; retrying shortly" })
        }
    }
  }

  // A store call that failed (not interrupted): the store is skipped for a
  // while. A store that dies is a store that failed: the fallback answers,
  // and nobody is left waiting on a batch the defect would have dropped.
  const failed = (
    limiter: Bucket.Limiter,
    cause: Cause.Cause<StoreUnavailable>
  ): readonly [number, StoreUnavailable] => {
    const found = Cause.findError(cause)
    const error = Result.isSuccess(found)
      ? found.success
      : Cause.hasInterruptsOnly(cause)
      ? new StoreUnavailable({ store: store.name, reason: "its call was interrupted" })
      : new StoreUnavailable({ store: store.name, reason: `it died: ${String(Cause.squash(cause))}` })
    health.failures++
    const at = limiter.clock.currentTimeMillisUnsafe()
    health.downUntil = at + fallback.retryMillis
    return [at, error]
  }

  // One store call, with the timeout and the fallback.
  const call = (limiter: Bucket.Limiter, bucket: Bucket.Bucket, ops: ReadonlyArray<Op>): Effect.Effect<Answered> => {
    const now = limiter.clock.currentTimeMillisUnsafe()
    if (now < health.downUntil) return Effect.succeed(degrade(bucket, ops, now))
    health.calls++
    health.ops += ops.length
    const timeout = fallback.timeoutMillis
    const applied = store.timesOut === true
      ? store.apply(bucket.key, bucket.policy, ops, timeout)
      : Effect.timeoutOrElse(store.apply(bucket.key, bucket.policy, ops), {
        duration: Duration.millis(timeout),
        orElse: () => Effect.fail(new StoreUnavailable({ store: store.name, reason: `timed out after ${timeout} ms` }))
      })
    // One handler for every outcome (a combinator per case costs on every
    // call). A caller that leaves never reaches it (an interrupted fiber
    // runs no failure handler): an interruption seen here is the store's
    // own (its connection's scope closed, say), a failure of the store like
    // any other, and the fallback answers.
    return Effect.matchCause(applied, {
      onSuccess: (replies) => answered(bucket, replies),
      onFailure: (cause) => unanswered(limiter, bucket, ops, cause)
    })
  }

  // The store answered: what the local fallback counted meanwhile is moot,
  // and a later outage starts from a whole share.
  const answered = (bucket: Bucket.Bucket, replies: ReadonlyArray<Reply>): Answered => {
    if (Bucket.read(bucket) !== undefined) Bucket.write(bucket, undefined)
    return { replies, degraded: false, error: undefined }
  }

  // The store failed (not interrupted): the fallback answers.
  const unanswered = (
    limiter: Bucket.Limiter,
    bucket: Bucket.Bucket,
    ops: ReadonlyArray<Op>,
    cause: Cause.Cause<StoreUnavailable>
  ): Answered => {
    const [at, error] = failed(limiter, cause)
    return degrade(bucket, ops, at, error)
  }

  // A caller-side call is back (or given up on): the key is free, and an
  // actor waiting for it goes on.
  const settle = Bucket.directBack

  // The caller-side path: a decide-now request (`acquire`, `consume`,
  // `peek`, `reset`, `release`) for a key with no actor running and no call
  // of this kind in flight is sent through the store from the caller's
  // fiber, with the same timeout, fallback, metrics and replies as the
  // actor's batch of one. Interruption is as on the actor's path: an
  // operation not yet sent is dropped; one already sent is applied by the
  // store (its units taken) and its answer is lost, as for a caller that
  // leaves while its batch is out.
  const direct = <K extends Request.Kind>(
    limiter: Bucket.Limiter,
    bucket: Bucket.Bucket,
    kind: K,
    cost: number,
    payload: Request.Payload | undefined,
    now: number
  ): Request.Answer<K> | undefined => {
    if (bucket.direct !== undefined || bucket.actor?.mailbox !== undefined) return undefined
    adopt(bucket, kind, payload)
    const out = Bucket.directOut(bucket, now)
    Bucket.touch(limiter, bucket, now)
    const op = opFor(undefined, kind, cost, payload)
    const ops = [op]
    const applyUnsafe = store.applyUnsafe
    if (applyUnsafe !== undefined && store.timesOut === true && now >= health.downUntil) {
      // One suspension from the call to its answer: the store calls back
      // with the outcome, which becomes the answer on the reply's stack.
      health.calls++
      health.ops += ops.length
      return Effect.callback<Request.Reply<K>, Request.FailureOf<K>>((resume) => {
        const cancel = applyUnsafe(bucket.key, bucket.policy, ops, fallback.timeoutMillis, (exit) => {
          settle(bucket, out)
          let answer: Request.Answer<K>
          // (on the store's stack: a defect here is the caller's, never the store's)
          try {
            Bucket.touch(limiter, bucket, limiter.clock.currentTimeMillisUnsafe())
            const result = Exit.isSuccess(exit)
              ? answered(bucket, exit.value)
              : unanswered(limiter, bucket, ops, exit.cause)
            // (the answer runs after the call is settled: a shaper's sleep holds nothing)
            answer = result.error !== undefined
              ? Exit.fail(result.error)
              : answerOf(limiter, kind, op, result.replies[0], result.degraded, bucket.policy)
          } catch (defect) {
            answer = Exit.die(defect)
          }
          resume(answer)
        })
        // the caller leaves: a call not yet sent is withdrawn, one sent is
        // applied by the store and its answer lost
        return Effect.sync(() => {
          cancel?.()
          settle(bucket, out)
        })
      })
    }
    // (the answer runs after the call is settled: a shaper's sleep holds nothing)
    return Effect.flatten(Effect.onExit(
      Effect.map(call(limiter, bucket, ops), (result): Request.Answer<K> => {
        Bucket.touch(limiter, bucket, limiter.clock.currentTimeMillisUnsafe())
        return result.error !== undefined
          ? Exit.fail(result.error)
          : answerOf(limiter, kind, op, result.replies[0], result.degraded, bucket.policy)
      }),
      () => Effect.sync(() => settle(bucket, out))
    ))
  }

  // The caller's fiber, the key quiet: a decide-now request goes out as the
  // caller's own store call; a reconfigure (it changes the policy waiters
  // are timed by), a feedback (the rate they are timed by) and waiters go to
  // the actor, in order. Holds and transactions need the state in process.
  const now = (
    limiter: Bucket.Limiter,
    bucket: Bucket.Bucket,
    kind: Request.Kind,
    cost: number,
    at: number,
    payload: Request.Payload | undefined
  ): Request.Answer | undefined => {
    switch (kind) {
      case Request.Kind.Reconfigure:
      case Request.Kind.Feedback:
      case Request.Kind.Wait:
      case Request.Kind.Reserve:
      case Request.Kind.Poke:
        return undefined
      case Request.Kind.Hold:
      case Request.Kind.HoldWait:
        return Exit.fail(inProcessOnly("a hold"))
      case Request.Kind.Transact:
        return Exit.fail(inProcessOnly("a transaction"))
      default:
        return direct(limiter, bucket, kind, cost, payload, at)
    }
  }

  // Waits until the key's caller-side call is back, so the actor's first
  // batch goes after it (in order) and takes everything queued meanwhile
  // (coalescing). That call ends within the store timeout; should its caller
  // never have run it (interrupted before it started), the wait ends after
  // twice that.
  const takeOver = (limiter: Bucket.Limiter, bucket: Bucket.Bucket): Effect.Effect<void> | undefined => {
    const out = bucket.direct
    if (out === undefined) return undefined
    const left = out.since + 2 * fallback.timeoutMillis - limiter.clock.currentTimeMillisUnsafe()
    if (left <= 0) {
      settle(bucket, out)
      return undefined
    }
    const idle = out.idle ??= Deferred.makeUnsafe<void>()
    return Effect.andThen(
      Effect.timeoutOption(Deferred.await(idle), Duration.millis(left)),
      Effect.sync(() => settle(bucket, out))
    )
  }

  // Decide-now requests between two waits see the same line: one call for all.
  const serveSegment = Effect.fnUntraced(function*(
    limiter: Bucket.Limiter,
    bucket: Bucket.Bucket,
    line: Line.Line,
    requests: ReadonlyArray<Request.Request>
  ) {
    const ops = requests.map((r) => opFor(line, r.kind, r.cost, r.payload))
    for (const r of requests) {
      adopt(bucket, r.kind, r.payload)
      // The key's state changes under the line: the head asks again now.
      if (changesUnderLine(r.kind)) line.wakeAt = 0
    }
    const result = yield* call(limiter, bucket, ops)
    Bucket.touch(limiter, bucket, limiter.clock.currentTimeMillisUnsafe())
    // Failing open, the fallback admits the line at once (its head asks now):
    // nobody is behind it, and each request is answered as on a quiet key.
    const open = result.degraded && fallback.mode === "allow"
    if (open) line.wakeAt = 0
    const asked = open ? requests.map((r) => opFor(undefined, r.kind, r.cost, r.payload)) : ops
    const replies = open ? blind(bucket, asked) : result.replies
    for (let i = 0; i < requests.length; i++) {
      const request = requests[i]
      const kind = request.kind
      if (result.error !== undefined) Request.reply(request, Exit.fail(result.error))
      else if (
        kind !== Request.Kind.Wait && kind !== Request.Kind.Reserve && kind !== Request.Kind.Poke &&
        kind !== Request.Kind.HoldWait
      ) {
        Request.reply(request, answerOf(limiter, kind, asked[i], replies[i], result.degraded, bucket.policy))
      }
    }
  })

  const serveWait = Effect.fnUntraced(function*(
    limiter: Bucket.Limiter,
    bucket: Bucket.Bucket,
    line: Line.Line,
    request: Request.Request
  ) {
    const empty = line.waiters.length === 0
    // With nobody in line: take it only if admitted (a refused try changes
    // nothing, as in-process), and how long it would wait if not.
    const result = yield* call(
      limiter,
      bucket,
      empty
        ? [{ kind: OpKind.Admit, cost: request.cost, queued: 0 }, {
          kind: OpKind.WaitTime,
          cost: request.cost,
          queued: 0
        }]
        : [{ kind: OpKind.WaitTime, cost: request.cost, queued: Line.ahead(line, Line.place(line, request)) }]
    )
    const now = limiter.clock.currentTimeMillisUnsafe()
    Bucket.touch(limiter, bucket, now)
    if (result.error !== undefined) return Request.reply(request, Exit.fail(result.error))
    // The store does not answer and the fallback denies: no turn comes while
    // it is down, so the waiter is refused now rather than kept waiting.
    if (result.degraded && fallback.mode === "deny") {
      limiter.recorder.denied++
      return Request.reply(request, Exit.fail(deniedWaiter(bucket)))
    }
    // failing open, the line goes at once (its head asks now)
    if (result.degraded && fallback.mode === "allow") line.wakeAt = 0
    if (empty && result.replies[0].allowed) {
      limiter.recorder.allowed++
      return Request.reply(request, Line.admittedAtOnce(request, Operations.shaping(result.replies[0], bucket.policy)))
    }
    // a dry run never keeps a caller waiting: it goes now, counted
    if (empty && Operations.dryRun(limiter.recorder, bucket.policy)) {
      return Request.reply(request, Line.admittedAtOnce(request, 0))
    }
    const wait = result.replies[empty ? 1 : 0].retryAfter
    Line.join(
      line,
      request,
      Line.place(line, request),
      wait,
      now,
      bucket.policy.rule.release !== undefined,
      Request.reply,
      (entry) => Bucket.leave(limiter, bucket, entry, false),
      true
    )
    if (empty && line.waiters.length > 0) line.wakeAt = now + (wait === Infinity ? releasePollMillis : wait)
  })

  // Waiters whose callers left go; if the head went, the new head asks at once.
  const dropCancelled = (line: Line.Line): void => {
    if (Line.removeCancelled(line)) line.wakeAt = 0
  }

  // Admits the head of the line while the store admits it; other processes
  // share the store, so the head asks rather than assumes.
  const admitLine = Effect.fnUntraced(function*(limiter: Bucket.Limiter, bucket: Bucket.Bucket, line: Line.Line) {
    while (line.waiters.length > 0) {
      dropCancelled(line)
      const now = limiter.clock.currentTimeMillisUnsafe()
      // Before the head's turn, every waiter past or at its deadline gives
      // up; at its turn, one whose deadline is now is still asked for
      // (maxWait is inclusive).
      if (Line.expire(line, now, Request.reply, undefined, now >= line.wakeAt)) line.wakeAt = 0
      if (line.waiters.length === 0 || now < line.wakeAt) return
      const head = line.waiters[0]
      // Only an admission changes the key: a head that is refused logs nothing.
      const result = yield* call(limiter, bucket, [{ kind: OpKind.Admit, cost: head.cost, queued: 0 }])
      if (head.cancelled) {
        // The caller left while we asked: give the units back if they were taken.
        if (result.error === undefined && result.replies[0].allowed) {
          yield* call(limiter, bucket, [{ kind: OpKind.Release, cost: head.cost, queued: 0 }])
        }
        continue
      }
      if (result.error !== undefined) {
        Line.shift(line)
        Request.reply(head, Exit.fail(result.error))
        continue
      }
      if (result.degraded && fallback.mode === "deny") {
        // the fallback denies while the store is down: nobody's turn comes
        const refused = Exit.fail(deniedWaiter(bucket))
        limiter.recorder.denied += line.waiters.length
        Line.clear(line, refused, Request.reply)
        return
      }
      const reply = result.replies[0]
      if (!reply.allowed) {
        // Waiting for a release: ask again now and then (another process's
        // release wakes nobody here; this process's own wakes the head at once).
        const retry = reply.retryAfter === Infinity ? releasePollMillis : reply.retryAfter
        line.wakeAt = limiter.clock.currentTimeMillisUnsafe() + Math.max(1, retry)
        // refused: a waiter whose deadline is now cannot have its turn in time
        // (the new head, if the head went, asks at once)
        if (!Line.expire(line, limiter.clock.currentTimeMillisUnsafe(), Request.reply)) return
        line.wakeAt = 0
        continue
      }
      Line.shift(line)
      limiter.recorder.allowed++
      Request.reply(head, Line.admitted(Operations.shaping(reply, bucket.policy)))
      line.wakeAt = 0
    }
  })

  const serveBatch = Effect.fnUntraced(function*(
    limiter: Bucket.Limiter,
    bucket: Bucket.Bucket,
    actor: Bucket.Actor,
    batch: ReadonlyArray<Request.Request>
  ) {
    const line = actor.line
    actor.pending -= batch.length
    limiter.recorder.queued -= batch.length
    if (line.waiters.length > 0) dropCancelled(line)
    let segment: Array<Request.Request> = []
    for (const request of batch) {
      if (request.cancelled || request.kind === Request.Kind.Poke) continue
      if (Operations.table[request.kind].op === undefined && !isWait(request.kind)) {
        // a hold or a transaction: in process only
        Request.reply(request, Exit.fail(inProcessOnly(`a request of kind ${request.kind}`)))
        continue
      }
      if (!isWait(request.kind)) {
        segment.push(request)
        continue
      }
      if (segment.length > 0) {
        yield* serveSegment(limiter, bucket, line, segment)
        segment = []
      }
      yield* serveWait(limiter, bucket, line, request)
    }
    if (segment.length > 0) yield* serveSegment(limiter, bucket, line, segment)
    if (line.waiters.length > 0) yield* admitLine(limiter, bucket, line)
  })

  // A defect in serving a batch (a bug, never a store failure: `call` answers
  // those) hurts only this key: the batch and the line get BucketFailed, and
  // the actor goes on.
  const serve = (
    limiter: Bucket.Limiter,
    bucket: Bucket.Bucket,
    actor: Bucket.Actor,
    batch: ReadonlyArray<Request.Request>
  ): Effect.Effect<void> =>
    Effect.catchDefect(serveBatch(limiter, bucket, actor, batch), (defect) =>
      Effect.sync(() => {
        const exit = Exit.fail(new BucketFailed({ key: bucket.key, defect: String(defect) }))
        for (const request of batch) if (request.kind !== Request.Kind.Poke) Request.reply(request, exit)
        Line.clear(actor.line, exit, Request.reply)
      }))

  return {
    now,
    // A key with no bucket still goes through one: the store holds its state.
    unstarted: () => undefined,
    serve,
    takeOver,
    // Units taken by the store stay taken (as before: an interrupted waiter's
    // refund is the in-process actor's; the store actor gives back a head it
    // admitted only if its caller left while it asked).
    refund: () => {},
    // The state is the store's (it expires there); forget the bucket unless a
    // call for it is out, so the key's next call cannot overtake it.
    settled: (bucket) => bucket.direct === undefined,
    gathers: true,
    minSleep: 1,
    all: (limiter, buckets, cost) => all(limiter, buckets, cost)
  }

  // A call over several keys: one atomic call to the store (every key or
  // none), with the timeout and the fallback of any call. The local
  // fallback decides all or nothing on each key's local share.
  function all(
    limiter: Bucket.Limiter,
    buckets: ReadonlyArray<Bucket.Bucket>,
    cost: number
  ): Effect.Effect<Bucket.All, Request.Failure> {
    const applyAll = store.applyAll
    if (applyAll === undefined) {
      return Effect.fail(
        new InvalidRequest({
          field: "keys",
          value: String(buckets.length),
          reason: `the ${store.name} store cannot take from several keys at once`
        })
      )
    }
    const refused = store.checkKeys?.(buckets.map((b) => b.key))
    if (refused !== undefined) {
      return Effect.fail(new InvalidRequest({ field: "keys", value: String(buckets.length), reason: refused }))
    }
    const toAll = (reply: AllReplyOf, degraded: boolean, final = false): Bucket.All => {
      for (const r of reply.replies) {
        if (r.allowed && reply.allowed) limiter.recorder.allowed++
      }
      if (!reply.allowed) limiter.recorder.denied++
      const op: Op = { kind: OpKind.Take, cost, queued: 0 }
      const decisions = reply.replies.map((r) => Operations.decision(op, r, degraded, 0))
      return final ? { allowed: reply.allowed, decisions, final } : { allowed: reply.allowed, decisions }
    }
    const fallbackAll = (
      now: number,
      error: StoreUnavailable | undefined
    ): Effect.Effect<Bucket.All, Request.Failure> => {
      health.degraded += buckets.length
      switch (fallback.mode) {
        case "local": {
          const entries = buckets.map((b) => ({ key: b.key, policy: localPolicy(b.policy), cost }))
          const [reply, states] = Interpreter.applyAll(entries, buckets.map(Bucket.read), now)
          if (reply.allowed) buckets.forEach((b, i) => Bucket.write(b, states[i]))
          return Effect.succeed(toAll(reply, true))
        }
        case "allow":
        case "deny": {
          const allowed = fallback.mode === "allow"
          const retryAfter = allowed ? 0 : fallback.retryMillis
          return Effect.succeed(toAll(
            {
              allowed,
              replies: buckets.map((b) => ({
                allowed,
                remaining: allowed ? b.policy.rule.maxCost : 0,
                retryAfter,
                resetAfter: retryAfter,
                limit: b.policy.rule.maxCost
              }))
            },
            true,
            !allowed
          ))
        }
        case "error":
          return Effect.fail(error ?? new StoreUnavailable({ store: store.name, reason: "down; retrying shortly" }))
      }
    }
    const now = limiter.clock.currentTimeMillisUnsafe()
    for (const b of buckets) Bucket.touch(limiter, b, now)
    if (now < health.downUntil) return fallbackAll(now, undefined)
    health.calls++
    health.ops += buckets.length
    const timeout = fallback.timeoutMillis
    const entries = buckets.map((b) => ({ key: b.key, policy: b.policy, cost }))
    const applied = store.timesOut === true
      ? applyAll(entries, timeout)
      : Effect.timeoutOrElse(applyAll(entries), {
        duration: Duration.millis(timeout),
        orElse: () => Effect.fail(new StoreUnavailable({ store: store.name, reason: `timed out after ${timeout} ms` }))
      })
    return Effect.matchCauseEffect(applied, {
      onSuccess: (reply) => {
        for (const b of buckets) if (Bucket.read(b) !== undefined) Bucket.write(b, undefined)
        return Effect.succeed(toAll(reply, false))
      },
      // (an interruption seen here is the store's own, as in `call`)
      onFailure: (cause) => {
        const [at, error] = failed(limiter, cause)
        return fallbackAll(at, error)
      }
    })
  }
}
