/**
 * The bucket actor: one fiber per key. It owns the key's algorithm state in a
 * `Ref`, serves a bounded `Queue` mailbox of requests whose replies are
 * `Deferred`s, opens a readiness latch once it runs, and holds the FIFO line
 * of callers that `wait`.
 *
 * Every batch taken from the mailbox is served in one synchronous pass: one
 * clock read, one state write, the replies completed in order. Nothing in the
 * pass yields, so a batch is atomic with respect to every other fiber.
 *
 * @since 0.1.0
 */
import { type Cause, type Clock, Deferred, Duration, Effect, Exit, type Fiber, Latch, Queue, Ref } from "effect"
import { constVoid } from "effect/Function"
import type { Outcome } from "../algorithm/Algorithm.ts"
import * as Decision from "../Decision.ts"
import { LimiterShutdown, Overloaded, RateLimitExceeded } from "../Errors.ts"
import type { Recorder } from "../Metrics.ts"
import type * as Policy from "../Policy.ts"

/**
 * What a request asks for.
 *
 * @since 0.1.0
 */
export const Kind = {
  /** Decide now; reply `boolean`. */
  Acquire: 0,
  /** Decide now; reply `Decision`. */
  Consume: 1,
  /** Wait in line up to `maxWait`; reply `void` once admitted. */
  Wait: 2,
  /** No request: wakes the actor to re-time its line (a waiter left). */
  Poke: 3,
  /** Decide as `Consume` would, take nothing; reply `Decision`. */
  Peek: 4,
  /** Forget the key's usage: back to the initial state; reply `void`. */
  Reset: 5
} as const

/**
 * @since 0.1.0
 */
export type Kind = typeof Kind[keyof typeof Kind]

/**
 * One message in a bucket's mailbox.
 *
 * @since 0.1.0
 */
export class Request {
  /** Set when the caller was interrupted: the actor skips it and it takes nothing. */
  cancelled = false
  readonly kind: Kind
  readonly cost: number
  readonly maxWait: number
  readonly reply: Deferred.Deferred<any, any>
  constructor(kind: Kind, cost: number, maxWait: number, reply: Deferred.Deferred<any, any>) {
    this.kind = kind
    this.cost = cost
    this.maxWait = maxWait
    this.reply = reply
  }
}

/**
 * Limits of one bucket.
 *
 * @since 0.1.0
 */
export interface Limits {
  readonly mailboxCapacity: number
  readonly maxWaiters: number
}

/**
 * A bucket: the actor's state and mailbox. Created by the supervisor; the
 * fields other than `mailbox` and `pending` belong to the actor's fiber.
 *
 * @since 0.1.0
 */
export class Bucket {
  /** Requests offered and not yet served (queued or in the batch being served). */
  pending = 0
  /** Set once the bucket will take no more requests (reaped or shut down). */
  retired = false
  /** When the bucket last served a request. */
  lastActive: number
  /** Waiters in arrival order; `line[0]` is served first. */
  readonly line: Array<Request> = []
  /** The cost of every live waiter in `line`. */
  lineCost = 0
  /** When the head of the line can be admitted (valid while the line is non-empty). */
  wakeAt = 0
  readonly state: Ref.Ref<unknown>
  /** The actor's fiber, once forked. */
  fiber: Fiber.Fiber<void> | undefined = undefined
  /** Called by the supervisor when it reaps this bucket (for the metrics). */
  onReap: () => void = constVoid
  readonly ready: Latch.Latch = Latch.makeUnsafe(false)
  readonly key: string
  readonly policy: Policy.Valid
  readonly mailbox: Queue.Queue<Request, Cause.Done>
  readonly limits: Limits
  readonly clock: Clock.Clock
  readonly recorder: Recorder
  constructor(
    key: string,
    policy: Policy.Valid,
    mailbox: Queue.Queue<Request, Cause.Done>,
    limits: Limits,
    clock: Clock.Clock,
    recorder: Recorder
  ) {
    this.key = key
    this.policy = policy
    this.mailbox = mailbox
    this.limits = limits
    this.clock = clock
    this.recorder = recorder
    const now = clock.currentTimeMillisUnsafe()
    this.lastActive = now
    this.state = Ref.makeUnsafe<unknown>(policy.algorithm.initial(policy.config as never, now))
  }
}

/**
 * Makes the bounded mailbox for a bucket.
 *
 * @since 0.1.0
 */
export const makeMailbox = (limits: Limits): Effect.Effect<Queue.Queue<Request, Cause.Done>> =>
  Queue.make<Request, Cause.Done>({ capacity: limits.mailboxCapacity, strategy: "dropping" })

/**
 * Result of {@link offer}.
 *
 * @since 0.1.0
 */
export const Offered = {
  Queued: 0,
  /** The bucket is retired (reaped or shut down): look the key up again. */
  Retired: 1,
  /** The mailbox is full: the caller gets `Overloaded`. */
  Full: 2
} as const

/**
 * @since 0.1.0
 */
export type Offered = typeof Offered[keyof typeof Offered]

/**
 * Puts a request in the mailbox, never suspending.
 *
 * @since 0.1.0
 */
export const offer = (bucket: Bucket, request: Request): Offered => {
  if (bucket.retired) return Offered.Retired
  if (!Queue.offerUnsafe(bucket.mailbox, request)) return bucket.retired ? Offered.Retired : Offered.Full
  bucket.pending++
  return Offered.Queued
}

/**
 * Waits for the reply to a queued request. If the caller is interrupted first,
 * the request is marked cancelled: the actor skips it (it takes nothing), and
 * a waiter leaving the line wakes the actor so those behind it are re-timed.
 *
 * @since 0.1.0
 */
export const await_ = <A, E>(bucket: Bucket, request: Request): Effect.Effect<A, E> =>
  Effect.onInterrupt(
    Deferred.await(request.reply as Deferred.Deferred<A, E>),
    () =>
      Effect.sync(() => {
        request.cancelled = true
        if (request.kind === Kind.Wait && !bucket.retired) {
          // Best effort: if the mailbox is full the actor is about to wake anyway.
          if (Queue.offerUnsafe(bucket.mailbox, new Request(Kind.Poke, 0, 0, pokeReply))) bucket.pending++
        }
      })
  )

const pokeReply = Deferred.makeUnsafe<any, any>()
const exitTrue = Exit.succeed(true)
const exitFalse = Exit.succeed(false)
const exitVoid = Exit.void
const exitShutdown = Exit.fail(new LimiterShutdown())

// A denial for a decide-now request that finds waiters in line: they come first.
const behindLine = (bucket: Bucket, state: unknown, now: number, cost: number): Outcome<unknown> => {
  const { algorithm, config } = bucket.policy
  const limit = algorithm.maxCost(config as never)
  return {
    allowed: false,
    state,
    remaining: 0,
    retryAfter: algorithm.waitTime(config as never, state as never, now, bucket.lineCost, cost),
    resetAfter: algorithm.waitTime(config as never, state as never, now, bucket.lineCost, limit),
    limit
  }
}

const peekOutcome = (bucket: Bucket, state: unknown, now: number, cost: number): Outcome<unknown> =>
  bucket.line.length === 0
    ? bucket.policy.algorithm.step(bucket.policy.config as never, state as never, now, cost)
    : behindLine(bucket, state, now, cost)

// Drops waiters whose callers left; they took nothing, so those behind move up.
const removeCancelled = (bucket: Bucket): void => {
  let j = 0
  for (let i = 0; i < bucket.line.length; i++) {
    const w = bucket.line[i]
    if (!w.cancelled) bucket.line[j++] = w
    else bucket.lineCost -= w.cost
  }
  bucket.line.length = j
}

// Replies are completed only after the batch's state is committed: completing
// a Deferred resumes its caller synchronously, on this stack, and that caller
// may come straight back to this bucket.
const replies: Array<Deferred.Deferred<any, any>> = []
const exits: Array<Exit.Exit<any, any>> = []

const reply = (deferred: Deferred.Deferred<any, any>, exit: Exit.Exit<any, any>): void => {
  replies.push(deferred)
  exits.push(exit)
}

const flush = (from: number): void => {
  const end = replies.length
  for (let i = from; i < end; i++) Deferred.doneUnsafe(replies[i], exits[i])
  // A reentrant serve (another bucket's, from a resumed caller) flushed its own
  // entries already; only this pass's slice is cleared.
  replies.length = from
  exits.length = from
}

/**
 * Serves one batch at `now`, synchronously: decide-now requests in order,
 * then admits the head of the line for as long as it fits. The state is
 * committed once, then every reply of the batch is completed in order.
 *
 * @since 0.1.0
 */
export const serve = (bucket: Bucket, batch: ReadonlyArray<Request>, now: number): void => {
  const { algorithm, config } = bucket.policy
  const from = replies.length
  let state = bucket.state.ref.current
  let allowed = 0
  let denied = 0
  if (bucket.line.length > 0) removeCancelled(bucket)
  for (let i = 0; i < batch.length; i++) {
    const request = batch[i]
    bucket.pending--
    if (request.cancelled || request.kind === Kind.Poke) continue
    switch (request.kind) {
      case Kind.Acquire:
      case Kind.Consume: {
        const outcome = bucket.line.length === 0
          ? algorithm.step(config as never, state as never, now, request.cost)
          : behindLine(bucket, state, now, request.cost)
        state = outcome.state
        if (outcome.allowed) allowed++
        else denied++
        reply(
          request.reply,
          request.kind === Kind.Acquire
            ? (outcome.allowed ? exitTrue : exitFalse)
            : Exit.succeed(Decision.fromOutcome(outcome))
        )
        break
      }
      case Kind.Peek: {
        reply(request.reply, Exit.succeed(Decision.peek(peekOutcome(bucket, state, now, request.cost), request.cost)))
        break
      }
      case Kind.Reset: {
        state = algorithm.initial(config as never, now)
        reply(request.reply, exitVoid)
        break
      }
      case Kind.Wait: {
        const wait = algorithm.waitTime(config as never, state as never, now, bucket.lineCost, request.cost)
        if (wait === 0 && bucket.line.length === 0) {
          const outcome = algorithm.step(config as never, state as never, now, request.cost)
          if (outcome.allowed) {
            state = outcome.state
            allowed++
            reply(request.reply, exitVoid)
            break
          }
        }
        if (wait > request.maxWait) {
          denied++
          reply(
            request.reply,
            Exit.fail(new RateLimitExceeded({ key: bucket.key, retryAfter: Duration.millis(wait) }))
          )
        } else if (bucket.line.length >= bucket.limits.maxWaiters) {
          bucket.recorder.overload()
          reply(request.reply, Exit.fail(new Overloaded({ key: bucket.key, capacity: bucket.limits.maxWaiters })))
        } else {
          bucket.line.push(request)
          bucket.lineCost += request.cost
        }
        break
      }
    }
  }
  // Admit the head of the line while it fits, in arrival order.
  let head = 0
  while (head < bucket.line.length) {
    const w = bucket.line[head]
    if (w.cancelled) {
      bucket.lineCost -= w.cost
      head++
      continue
    }
    const outcome = algorithm.step(config as never, state as never, now, w.cost)
    if (!outcome.allowed) break
    state = outcome.state
    bucket.lineCost -= w.cost
    allowed++
    head++
    reply(w.reply, exitVoid)
  }
  if (head > 0) bucket.line.splice(0, head)
  if (bucket.line.length > 0) {
    bucket.wakeAt = now + algorithm.waitTime(config as never, state as never, now, 0, bucket.line[0].cost)
  }
  bucket.state.ref.current = state
  bucket.lastActive = now
  bucket.recorder.decided(allowed, denied)
  flush(from)
}

const serveNow = (bucket: Bucket, batch: ReadonlyArray<Request>): void =>
  serve(bucket, batch, bucket.clock.currentTimeMillisUnsafe())

const empty: ReadonlyArray<Request> = []

/**
 * Ends the bucket: refuses new requests, and completes everything still
 * queued or waiting with `LimiterShutdown`. Used when the actor stops for any
 * reason other than a drained mailbox.
 *
 * @since 0.1.0
 */
export const close = (bucket: Bucket): void => {
  bucket.retired = true
  Queue.endUnsafe(bucket.mailbox)
  for (const w of bucket.line) Deferred.doneUnsafe(w.reply, exitShutdown)
  bucket.line.length = 0
  bucket.lineCost = 0
}

const drainShutdown = (bucket: Bucket) =>
  Effect.flatMap(Queue.clear(bucket.mailbox), (leftover) =>
    Effect.sync(() => {
      for (const request of leftover) {
        bucket.pending--
        Deferred.doneUnsafe(request.reply, exitShutdown)
      }
    }))

/**
 * The actor's loop. Shared by all buckets (one generator function, the
 * bucket passed in), so a bucket costs no closures of its own.
 *
 * It returns when the mailbox has been ended (reap or shutdown) and drained:
 * every request queued before the end is served with a real decision.
 *
 * @since 0.1.0
 */
export const run: (bucket: Bucket) => Effect.Effect<void> = Effect.fnUntraced(
  function*(bucket: Bucket) {
    Latch.openUnsafe(bucket.ready)
    while (true) {
      if (bucket.line.length === 0) {
        serveNow(bucket, yield* Queue.takeAll(bucket.mailbox))
      } else {
        const delay = bucket.wakeAt - bucket.clock.currentTimeMillisUnsafe()
        if (delay <= 0) {
          serveNow(bucket, empty)
          yield* Effect.yieldNow
        } else {
          const batch = yield* Effect.timeoutOption(Queue.takeAll(bucket.mailbox), Duration.millis(delay))
          serveNow(bucket, batch._tag === "Some" ? batch.value : empty)
        }
      }
    }
  },
  Effect.catchTag("Done", () => Effect.void),
  (effect, bucket) =>
    Effect.onExit(effect, () => Effect.andThen(Effect.sync(() => close(bucket)), drainShutdown(bucket)))
)
