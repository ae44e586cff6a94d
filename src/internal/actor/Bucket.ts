/**
 * The bucket actor: one per key. It owns the key's algorithm state in a
 * `Ref`, serves a bounded `Queue` mailbox of requests whose replies are
 * `Deferred`s, opens a readiness latch once its fiber runs, and holds the FIFO
 * line of callers that `wait`.
 *
 * Every batch taken from the mailbox is served in one synchronous pass: one
 * clock read, the state committed, then the replies completed in order.
 * Nothing in the pass yields, so a batch is atomic with respect to every
 * other fiber.
 *
 * The uncontended fast path (see `Supervisor`) decides a request on the
 * caller's fiber with the same {@link decide} the actor uses, when nothing is
 * queued and nobody waits: observably the actor serving it at once. With the
 * fast path on, the actor's fiber runs only while it has something to do
 * (queued requests or waiters) and hibernates when it has not; its state
 * stays in the bucket.
 *
 * @since 0.1.0
 */
import { type Cause, Deferred, Duration, Effect, Exit, type Fiber, Latch, type MutableRef, Queue, Ref } from "effect"
import type * as Decision from "../../Decision.ts"
import { BucketFailed, InvalidRequest, LimiterShutdown, Overloaded, RateLimitExceeded } from "../../Errors.ts"
import type { Recorder } from "../../Metrics.ts"
import type * as Policy from "../../Policy.ts"
import { type Algorithm, type Carry, type Outcome, peekOutcome } from "../algorithm/Algorithm.ts"
import type * as Remote from "./Remote.ts"

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
  Reset: 5,
  /** Take a place in line now, act later; reply `Reserved` at once. */
  Reserve: 6,
  /** Give `cost` units back (a refund or a returned permit); reply `void`. */
  Release: 7,
  /** Switch the key to `payload` (a `Reconfiguration`); reply `void`. */
  Reconfigure: 8
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
  /**
   * For a waiter whose turn depends on a release (a concurrency limit with
   * every unit out): when it gives up with `RateLimitExceeded`.
   */
  deadline = Infinity
  readonly kind: Kind
  readonly cost: number
  readonly maxWait: number
  readonly reply: Deferred.Deferred<any, any>
  readonly payload: Reconfiguration | undefined
  constructor(
    kind: Kind,
    cost: number,
    maxWait: number,
    reply: Deferred.Deferred<any, any>,
    payload?: Reconfiguration | undefined
  ) {
    this.kind = kind
    this.cost = cost
    this.maxWait = maxWait
    this.reply = reply
    this.payload = payload
  }
}

/**
 * A new policy for a key and how its usage carries over.
 *
 * @since 0.1.0
 */
export interface Reconfiguration {
  readonly policy: Policy.Valid
  readonly carry: Carry
}

/**
 * The reply to `Reserve`: how long until the reservation is admitted, and its
 * place in line (`undefined` when it was admitted at once).
 *
 * @since 0.1.0
 */
export interface Reserved {
  readonly delay: number
  readonly entry: Request | undefined
  readonly bucket: Bucket | undefined
}

/**
 * Where a bucket reads the time: the limiter's clock, which never goes back
 * (a {@link Monotone}).
 *
 * @since 0.1.0
 */
export interface Now {
  readonly currentTimeMillisUnsafe: () => number
  /**
   * How far the last reading was held above the underlying clock's (0 unless
   * that clock stepped back). Valid right after a reading, before anything
   * yields; durations told to callers add it, so they are counted on the
   * caller's clock.
   */
  readonly behind: number
}

/**
 * The limiter's clock: the Effect `Clock`'s reading, held at the highest
 * reading so far. One per limiter, shared by all its buckets, so every
 * decision, new bucket, reap and waiter is timed on the same time line.
 *
 * When the clock steps back, the limiter's time stands still at its highest
 * reading until the clock passes it again: nothing refills, nothing is
 * un-refilled, and a bucket started in the meantime is anchored where a kept
 * one would be (so a reap stays invisible, DESIGN invariants 2 and 6).
 *
 * @example
 * ```ts
 * import * as Bucket from "./Bucket.ts"
 *
 * let t = 5_000
 * const clock = new Bucket.Monotone({ currentTimeMillisUnsafe: () => t })
 * clock.currentTimeMillisUnsafe() // 5000
 * t = 3_000 // the clock steps back 2 s
 * clock.currentTimeMillisUnsafe() // 5000: the limiter's time stands still
 * clock.behind // 2000
 * ```
 *
 * @since 0.1.0
 */
export class Monotone implements Now {
  /**
   * The highest reading so far: the limiter's time. Starts as a number (not
   * `undefined`) so V8 keeps the field an unboxed double, written in place on
   * every reading rather than boxed anew.
   */
  private highest = -Infinity
  behind = 0
  /** The clock read (Effect's `Clock` in the limiter's context). */
  readonly clock: { readonly currentTimeMillisUnsafe: () => number }
  constructor(clock: { readonly currentTimeMillisUnsafe: () => number }) {
    this.clock = clock
    this.highest = clock.currentTimeMillisUnsafe()
  }
  currentTimeMillisUnsafe(): number {
    const t = this.clock.currentTimeMillisUnsafe()
    if (t >= this.highest) {
      this.highest = t
      this.behind = 0
      return t
    }
    // Behind (or not a number): the time stands still.
    this.behind = t < this.highest ? this.highest - t : 0
    return this.highest
  }
}

/**
 * Milliseconds to sleep, on the underlying clock, until the limiter's time
 * reaches `target` (0 when it has). While the limiter's time stands still
 * after a step back, it reaches a later `target` exactly when the clock does,
 * so the sleep runs to `target` on the clock, not `target - now` of it.
 *
 * @example
 * ```ts
 * import * as Bucket from "./Bucket.ts"
 *
 * let t = 5_000
 * const clock = new Bucket.Monotone({ currentTimeMillisUnsafe: () => t })
 * Bucket.millisUntil(clock, 6_000) // 1000
 * t = 3_000 // stepped back: the limiter's time stays at 5000
 * Bucket.millisUntil(clock, 6_000) // 3000, on the clock that reads 3000
 * ```
 *
 * @since 0.1.0
 */
export const millisUntil = (clock: Now, target: number): number => {
  const delay = target - clock.currentTimeMillisUnsafe()
  return delay > 0 ? delay + clock.behind : 0
}

const millis = (ms: number): Duration.Duration => ms === Infinity ? Duration.infinity : Duration.millis(ms)

/**
 * Builds a `Decision` from an algorithm's outcome.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "../algorithm/TokenBucket.ts"
 * import { fromOutcome } from "./Bucket.ts"
 *
 * const c = TokenBucket.config({ capacity: 1, tokens: 1, periodMillis: 1000 })
 * const d = fromOutcome(TokenBucket.step(c, TokenBucket.initial(c, 0), 0, 1))
 * ```
 *
 * @since 0.1.0
 */
export const fromOutcome = (outcome: Outcome<unknown>): Decision.Decision => {
  const decision: Decision.Decision = {
    allowed: outcome.allowed,
    remaining: outcome.remaining,
    retryAfter: millis(outcome.retryAfter),
    resetAfter: millis(outcome.resetAfter),
    limit: outcome.limit
  }
  return outcome.delay !== undefined && outcome.delay > 0 ? { ...decision, delay: millis(outcome.delay) } : decision
}

// A duration told to a caller (retryAfter, resetAfter, a wait) is counted on
// the caller's clock: while the limiter's time stands still, it adds the gap.
const onClock = (millis: number, behind: number): number => millis > 0 ? millis + behind : millis

/**
 * A decision's figures as the caller's clock counts them (see
 * {@link millisUntil}): the outcome as it is unless the clock is behind.
 *
 * @since 0.1.0
 */
export const decision = (outcome: Outcome<unknown>, behind: number): Decision.Decision =>
  fromOutcome(
    behind > 0
      ? {
        ...outcome,
        retryAfter: onClock(outcome.retryAfter, behind),
        resetAfter: onClock(outcome.resetAfter, behind)
      }
      : outcome
  )

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
 * A bucket: a key's state and its actor. Created by the supervisor. The
 * state, the line and `wakeAt` are written only by the actor's batch pass or
 * by {@link decide} when nothing is queued (so never concurrently).
 *
 * @since 0.1.0
 */
export class Bucket {
  // Fields are laid out in declaration order: the ones every request reads
  // come first, so a decision on a cold bucket touches as few cache lines as
  // it can. Number fields start as numbers, so V8 keeps them unboxed in place
  // (a field that starts `undefined` would box every later write).
  readonly state: Ref.Ref<unknown>
  /**
   * `state.ref`, held here as well: one pointer less to follow on every
   * decision, which shows once the buckets no longer fit in the cache (about
   * 5–10 % on 100 000 keys).
   */
  readonly cell: MutableRef.MutableRef<unknown>
  /** The key's policy; changed only by `Reconfigure`. */
  policy: Policy.Valid
  /** The largest cost the policy can ever grant (cached: checked on every request). */
  maxCost = 0
  /** Requests offered and not yet served (queued or in the batch being served). */
  pending = 0
  /** Waiters in arrival order; `line[0]` is served first. */
  readonly line: Array<Request> = []
  /** When the bucket last decided a request. */
  lastActive = 0
  readonly recorder: Recorder
  /** Set once the bucket takes no more requests (reaped or shut down). */
  retired = false
  /** The cost of every waiter in `line`. */
  lineCost = 0
  /** When the head of the line can be admitted (valid while the line is non-empty). */
  wakeAt = 0
  /** The earliest deadline of a waiter in line (Infinity when none has one). */
  nextDeadline = Infinity
  /** The mailbox, while the actor runs. */
  mailbox: Queue.Queue<Request, Cause.Done> | undefined = undefined
  /** The actor's fiber, while it runs. */
  fiber: Fiber.Fiber<void> | undefined = undefined
  /** Open while the actor's fiber runs and serves its mailbox. */
  // Made on first use: a latch is about 650 bytes, and most buckets (served by
  // the fast path) never start their actor.
  private latch: Latch.Latch | undefined = undefined
  get ready(): Latch.Latch {
    return this.latch ??= Latch.makeUnsafe(false)
  }
  /** Whether anyone has looked at (or opened) the readiness latch yet. */
  get hasLatch(): boolean {
    return this.latch !== undefined
  }
  readonly key: string
  readonly limits: Limits
  readonly clock: Now
  /** Whether the actor stops when it has nothing queued and nobody waiting. */
  readonly hibernates: boolean
  /** Set when the key's state lives in a shared store: see `Remote`. */
  remote: Remote.Link | undefined = undefined
  constructor(
    key: string,
    policy: Policy.Valid,
    limits: Limits,
    clock: Now,
    recorder: Recorder,
    hibernates: boolean
  ) {
    this.key = key
    this.policy = policy
    this.maxCost = policy.algorithm.maxCost(policy.config as never)
    this.limits = limits
    this.clock = clock
    this.recorder = recorder
    this.hibernates = hibernates
    const now = clock.currentTimeMillisUnsafe()
    this.lastActive = now
    this.state = Ref.makeUnsafe<unknown>(policy.algorithm.initial(policy.config as never, now))
    this.cell = this.state.ref
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
  Full: 2,
  /** The actor is not running: start it with a mailbox first. */
  Stopped: 3
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
  if (bucket.mailbox === undefined) return Offered.Stopped
  if (!Queue.offerUnsafe(bucket.mailbox, request)) return bucket.retired ? Offered.Retired : Offered.Full
  bucket.pending++
  bucket.recorder.queued++
  return Offered.Queued
}

const pokeReply = Deferred.makeUnsafe<any, any>()

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
    () => Effect.sync(() => leave(bucket, request, true))
  )

/**
 * A caller leaves: its request is skipped if not yet served, and a waiter
 * leaving the line wakes the actor so those behind it are re-timed. If the
 * waiter was admitted in the same instant and `refund` is set, its units are
 * given back, so an interrupted waiter never keeps what it took.
 *
 * @since 0.1.0
 */
export const leave = (bucket: Bucket, request: Request, refund: boolean): void => {
  if (Deferred.isDoneUnsafe(request.reply)) {
    if (refund && request.kind === Kind.Wait && Exit.isSuccess(request.reply.effect as Exit.Exit<unknown, unknown>)) {
      giveBack(bucket, request.cost, bucket.clock.currentTimeMillisUnsafe())
    }
    return
  }
  request.cancelled = true
  // Best effort: if the mailbox is full the actor is about to wake anyway.
  if (bucket.line.length > 0) poke(bucket)
}

const poke = (bucket: Bucket): void => {
  offer(bucket, new Request(Kind.Poke, 0, 0, pokeReply))
}

// Applies a release at once. Safe from any fiber: the state is only ever
// mid-update inside a synchronous batch pass, never across a yield.
const giveBack = (bucket: Bucket, amount: number, now: number): void => {
  const { algorithm, config } = bucket.policy
  if (algorithm.release === undefined) return
  bucket.cell.current = algorithm.release(config as never, bucket.cell.current as never, now, amount)
  if (bucket.line.length > 0) poke(bucket)
}

/** @internal */
export const exitTrue = Exit.succeed(true)
/** @internal */
export const exitFalse = Exit.succeed(false)
const exitVoid = Exit.void
const exitShutdown = Exit.fail(new LimiterShutdown())
/** @internal */
export const exitReservedNow = Exit.succeed<Reserved>({ delay: 0, entry: undefined, bucket: undefined })

// A decide-now request that finds waiters in line is denied: they come first.
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

/**
 * Decides one decide-now request (`Acquire`, `Consume`, `Peek`, `Reset`) at
 * `now` against the bucket's state, commits the new state, and returns the
 * reply. Both the actor's batch pass and the caller-side fast path use it, so
 * the two cannot drift apart.
 *
 * @since 0.1.0
 */
export const decide = (
  bucket: Bucket,
  kind: Kind,
  cost: number,
  now: number,
  payload?: Reconfiguration
): Effect.Effect<any, any> => {
  const { algorithm, config } = bucket.policy
  const ref = bucket.cell
  switch (kind) {
    case Kind.Reset:
      ref.current = algorithm.initial(config as never, now)
      return exitVoid
    case Kind.Release:
      if (algorithm.release === undefined) {
        return Exit.fail(
          new InvalidRequest({ field: "key", value: JSON.stringify(bucket.key), reason: cannotRelease(bucket) })
        )
      }
      ref.current = algorithm.release(config as never, ref.current as never, now, cost)
      return exitVoid
    case Kind.Reconfigure:
      reconfigure(bucket, payload!, now)
      return exitVoid
  }
  if (kind === Kind.Acquire && algorithm.takeInPlace !== undefined && bucket.line.length === 0) {
    // acquire needs no figures: the algorithm's shortcut, when it has one. The
    // state is this bucket's alone, so it is updated where it is.
    bucket.lastActive = now
    if (algorithm.takeInPlace(config as never, ref.current as never, now, cost)) {
      bucket.recorder.allowed++
      return exitTrue
    }
    bucket.recorder.denied++
    return exitFalse
  }
  const outcome = bucket.line.length === 0
    ? algorithm.step(config as never, ref.current as never, now, cost)
    : behindLine(bucket, ref.current, now, cost)
  if (kind === Kind.Peek) {
    return Exit.succeed(decision(
      bucket.line.length === 0
        ? peekOutcome(algorithm as Algorithm<unknown, unknown>, config, ref.current, now, cost)
        : outcome,
      bucket.clock.behind
    ))
  }
  bucket.lastActive = now
  // A denial usually leaves the state as it was, but some algorithms record
  // it (a sliding log's countBlocked), so the outcome's state is kept either way.
  ref.current = outcome.state
  if (outcome.allowed) bucket.recorder.allowed++
  else bucket.recorder.denied++
  if (kind === Kind.Consume) return Exit.succeed(decision(outcome, bucket.clock.behind))
  if (!outcome.allowed) return exitFalse
  // A shaper admits now and spaces the caller out: it proceeds after `delay`.
  return outcome.delay !== undefined && outcome.delay > 0 ? sleepThen(outcome.delay, true) : exitTrue
}

const sleepThen = <A>(millis: number, value: A): Effect.Effect<A> =>
  Effect.as(Effect.sleep(Duration.millis(millis)), value)

// What an admitted waiter is answered: go now, or after a shaper's delay.
const admitted = (delay: number): Effect.Effect<void> => delay > 0 ? Effect.sleep(Duration.millis(delay)) : exitVoid

const cannotRelease = (bucket: Bucket): string =>
  `its policy (${bucket.policy.algorithm.name}) has no release: units come back by themselves`

// Switches the policy, carrying the usage over as asked (a different
// algorithm always starts afresh); waiters that can no longer ever be
// admitted are told so, the others are re-timed by the next batch pass.
// The carry rule for algorithms without an exact `reconfigure` (and across
// algorithms): count the whole units available now under the old policy, start
// the new one fresh, and take from it what brings it down to the same units
// ("as-is", capped by the new limit) or the same share of its limit
// ("proportional"). Units out under a concurrency limit stay out.
const carryOver = (from: Policy.Valid, state: unknown, next: Policy.Valid, now: number, carry: Carry): unknown => {
  const fresh = next.algorithm.initial(next.config as never, now)
  if (carry === "reset") return fresh
  const step = (p: Policy.Valid, s: unknown, cost: number) => p.algorithm.step(p.config as never, s as never, now, cost)
  const available = step(from, state, 0).remaining
  // Units in use carry over between concurrency limits: holders still hold them.
  const target = from._tag === "Concurrency" && next._tag === "Concurrency" && carry === "as-is"
    ? next.quota.limit - (from.quota.limit - available)
    : carry === "as-is"
    ? available
    : Math.floor((available / from.quota.limit) * next.quota.limit)
  const take = step(next, fresh, 0).remaining - Math.max(0, target)
  if (!(take > 0)) return fresh
  const taken = step(next, fresh, take)
  return taken.allowed ? taken.state : fresh
}

const reconfigure = (bucket: Bucket, to: Reconfiguration, now: number): void => {
  const from = bucket.policy
  const next = to.policy
  const ref = bucket.cell
  ref.current = from.algorithm === next.algorithm && next.algorithm.reconfigure !== undefined
    ? next.algorithm.reconfigure(from.config as never, ref.current as never, next.config as never, now, to.carry)
    : carryOver(from, ref.current, next, now, to.carry)
  bucket.policy = next
  bucket.maxCost = next.algorithm.maxCost(next.config as never)
  const max = next.algorithm.maxCost(next.config as never)
  for (const w of bucket.line) {
    if (w.cost > max && !w.cancelled) {
      w.cancelled = true
      reply(
        w.reply,
        Exit.fail(
          new InvalidRequest({
            field: "cost",
            value: String(w.cost),
            reason: `exceeds the new limit ${max}: it can never succeed`
          })
        )
      )
    }
  }
  if (bucket.line.length > 0) removeCancelled(bucket)
}

/**
 * Admits a `wait` of `cost` at once if nobody waits and it fits now
 * (committing the state), as the actor would; `false` if it has to queue.
 *
 * @since 0.1.0
 */
export const admitNow = (bucket: Bucket, cost: number, now: number): number => {
  if (bucket.line.length > 0) return -1
  const { algorithm, config } = bucket.policy
  const outcome = algorithm.step(config as never, bucket.cell.current as never, now, cost)
  if (!outcome.allowed) return -1
  bucket.cell.current = outcome.state
  bucket.lastActive = now
  bucket.recorder.allowed++
  return outcome.delay ?? 0
}

/**
 * The reply to a `wait` admitted at once with a shaper's `delay` (see
 * {@link admitNow}): go now, or after the delay.
 *
 * @since 0.1.0
 */
export const admittedAfter = (delay: number): Effect.Effect<void> => admitted(delay)

// Replies are completed only after the batch's state is committed: completing
// a Deferred resumes its caller synchronously, on this stack, and that caller
// may come straight back to this bucket (even through the fast path).
const replies: Array<Deferred.Deferred<any, any>> = []
const exits: Array<Effect.Effect<any, any>> = []

const reply = (deferred: Deferred.Deferred<any, any>, exit: Effect.Effect<any, any>): void => {
  replies.push(deferred)
  exits.push(exit)
}

const flush = (from: number): void => {
  const end = replies.length
  for (let i = from; i < end; i++) Deferred.doneUnsafe(replies[i], exits[i])
  replies.length = from
  exits.length = from
}

// A waiter: admitted now, refused at once (past maxWait, line full), or queued.
const enqueueWaiter = (bucket: Bucket, request: Request, now: number): void => {
  const reserving = request.kind === Kind.Reserve
  const delay = admitNow(bucket, request.cost, now)
  if (delay >= 0) {
    return reply(
      request.reply,
      reserving
        ? (delay > 0 ? Exit.succeed<Reserved>({ delay, entry: undefined, bucket: undefined }) : exitReservedNow)
        : admitted(delay)
    )
  }
  const { algorithm, config } = bucket.policy
  const wait = onClock(
    algorithm.waitTime(config as never, bucket.cell.current as never, now, bucket.lineCost, request.cost),
    bucket.clock.behind
  )
  bucket.lastActive = now
  // Infinity with a release: the turn comes when units come back, not with
  // time; such a waiter may wait up to its maxWait for it.
  const onRelease = wait === Infinity && algorithm.release !== undefined && request.kind === Kind.Wait
  if (wait > request.maxWait && !onRelease) {
    bucket.recorder.denied++
    return reply(
      request.reply,
      Exit.fail(new RateLimitExceeded({ key: bucket.key, retryAfter: Duration.millis(wait) }))
    )
  }
  if (bucket.line.length >= bucket.limits.maxWaiters) {
    bucket.recorder.overloaded++
    return reply(
      request.reply,
      Exit.fail(new Overloaded({ key: bucket.key, reason: "waiters", capacity: bucket.limits.maxWaiters }))
    )
  }
  // A reservation's place in line is a waiter nobody awaits; the caller was
  // told when it is admitted and acts then.
  const entry = reserving ? new Request(Kind.Wait, request.cost, request.maxWait, Deferred.makeUnsafe()) : request
  if (onRelease && request.maxWait !== Infinity) {
    entry.deadline = now + request.maxWait
    if (entry.deadline < bucket.nextDeadline) bucket.nextDeadline = entry.deadline
  }
  bucket.line.push(entry)
  bucket.lineCost += request.cost
  bucket.recorder.waiting++
  if (reserving) reply(request.reply, Exit.succeed<Reserved>({ delay: wait, entry, bucket }))
}

/**
 * Drops waiters whose callers left; they took nothing, so those behind move up.
 *
 * @since 0.1.0
 */
export const removeCancelled = (bucket: Bucket): void => {
  let j = 0
  for (let i = 0; i < bucket.line.length; i++) {
    const w = bucket.line[i]
    if (!w.cancelled) bucket.line[j++] = w
    else bucket.lineCost -= w.cost
  }
  bucket.recorder.waiting -= bucket.line.length - j
  bucket.line.length = j
}

/**
 * Waiters past their deadline (waiting for a release) give up: they took
 * nothing. Each is marked cancelled and answered `RateLimitExceeded` through
 * `answer`; returns whether any deadline was due (then the caller drops the
 * cancelled from the line). Shared by the in-process and the store-backed
 * actor, which answer differently (after the batch's commit, or at once).
 *
 * @internal
 */
export const expireWaiters = (
  bucket: Bucket,
  now: number,
  answer: (deferred: Deferred.Deferred<any, any>, exit: Exit.Exit<never, RateLimitExceeded>) => void
): boolean => {
  if (bucket.nextDeadline > now) return false
  let next = Infinity
  for (const w of bucket.line) {
    if (w.cancelled) continue
    if (w.deadline <= now) {
      w.cancelled = true
      bucket.recorder.denied++
      answer(w.reply, Exit.fail(new RateLimitExceeded({ key: bucket.key, retryAfter: Duration.infinity })))
    } else if (w.deadline < next) next = w.deadline
  }
  bucket.nextDeadline = next
  return true
}

const expire = (bucket: Bucket, now: number): void => {
  if (expireWaiters(bucket, now, reply)) removeCancelled(bucket)
}

// Admits the head of the line while it fits, in arrival order.
const admitLine = (bucket: Bucket, now: number): void => {
  const { algorithm, config } = bucket.policy
  const ref = bucket.cell
  let head = 0
  while (head < bucket.line.length) {
    const w = bucket.line[head]
    const outcome = algorithm.step(config as never, ref.current as never, now, w.cost)
    if (!outcome.allowed) break
    ref.current = outcome.state
    bucket.lineCost -= w.cost
    bucket.recorder.allowed++
    head++
    reply(w.reply, admitted(outcome.delay ?? 0))
  }
  if (head > 0) {
    bucket.line.splice(0, head)
    bucket.recorder.waiting -= head
    bucket.lastActive = now
  }
  if (bucket.line.length > 0) {
    bucket.wakeAt = now + algorithm.waitTime(config as never, ref.current as never, now, 0, bucket.line[0].cost)
  }
}

/**
 * Serves one batch at `now`, synchronously: requests in mailbox order, then
 * the head of the line for as long as it fits. The state is committed before
 * any reply is completed.
 *
 * @since 0.1.0
 */
export const serve = (bucket: Bucket, batch: ReadonlyArray<Request>, now: number): void => {
  const from = replies.length
  bucket.pending -= batch.length
  bucket.recorder.queued -= batch.length
  let i = 0
  try {
    if (bucket.line.length > 0) removeCancelled(bucket)
    for (; i < batch.length; i++) {
      const request = batch[i]
      if (request.cancelled || request.kind === Kind.Poke) continue
      if (request.kind === Kind.Wait || request.kind === Kind.Reserve) enqueueWaiter(bucket, request, now)
      else reply(request.reply, decide(bucket, request.kind, request.cost, now, request.payload))
    }
    if (bucket.line.length > 0) {
      expire(bucket, now)
      admitLine(bucket, now)
    }
  } catch (defect) {
    // Only this key is hurt: the request that failed, those after it in the
    // batch and those in line get BucketFailed; the bucket starts afresh.
    const exit = Exit.fail(new BucketFailed({ key: bucket.key, defect: String(defect) }))
    for (; i < batch.length; i++) if (batch[i].kind !== Kind.Poke) reply(batch[i].reply, exit)
    restart(bucket, now, exit)
  }
  flush(from)
}

/**
 * Starts the bucket afresh after a defect: every waiter in line gets `exit`,
 * the state goes back to the policy's initial state.
 *
 * @since 0.1.0
 */
export const restart = (bucket: Bucket, now: number, exit: Exit.Exit<never, BucketFailed>): void => {
  for (const w of bucket.line) if (!w.cancelled) reply(w.reply, exit)
  bucket.recorder.waiting -= bucket.line.length
  bucket.line.length = 0
  bucket.lineCost = 0
  bucket.cell.current = bucket.policy.algorithm.initial(bucket.policy.config as never, now)
  bucket.lastActive = now
}

/**
 * The fast path's guard: runs `f` (a decision on the caller's fiber); if it
 * throws, restarts the bucket and fails only this call with `BucketFailed`.
 *
 * @since 0.1.0
 */
export const guard = <A>(bucket: Bucket, now: number, f: () => A): A | Exit.Exit<never, BucketFailed> => {
  try {
    return f()
  } catch (defect) {
    return fail(bucket, now, defect)
  }
}

/**
 * After a defect on the caller's fiber: restarts the bucket and answers the
 * call with `BucketFailed`.
 *
 * @since 0.1.0
 */
export const fail = (bucket: Bucket, now: number, defect: unknown): Exit.Exit<never, BucketFailed> => {
  const exit = Exit.fail(new BucketFailed({ key: bucket.key, defect: String(defect) }))
  const from = replies.length
  restart(bucket, now, exit)
  flush(from)
  return exit
}

const serveNow = (bucket: Bucket, batch: ReadonlyArray<Request>): void =>
  serve(bucket, batch, bucket.clock.currentTimeMillisUnsafe())

const empty: ReadonlyArray<Request> = []

/**
 * Ends the bucket for good: refuses new requests and completes everything
 * still queued or waiting with `LimiterShutdown`. Runs when the actor stops
 * for any reason other than hibernation.
 *
 * @since 0.1.0
 */
export const close = (bucket: Bucket): Effect.Effect<void> =>
  Effect.suspend(() => {
    bucket.retired = true
    if (bucket.hasLatch) Latch.closeUnsafe(bucket.ready)
    for (const w of bucket.line) Deferred.doneUnsafe(w.reply, exitShutdown)
    bucket.recorder.waiting -= bucket.line.length
    bucket.line.length = 0
    bucket.lineCost = 0
    const mailbox = bucket.mailbox
    if (mailbox === undefined) return Effect.void
    Queue.endUnsafe(mailbox)
    return Effect.flatMap(Queue.clear(mailbox), (leftover) =>
      Effect.sync(() => {
        bucket.pending -= leftover.length
        bucket.recorder.queued -= leftover.length
        for (const request of leftover) Deferred.doneUnsafe(request.reply, exitShutdown)
      }))
  })

/**
 * With nothing queued and nobody waiting, a hibernating actor gives its fiber
 * and mailbox back; the state stays. Synchronous, so no offer can slip in.
 *
 * @since 0.1.0
 */
export const hibernate = (bucket: Bucket, mailbox: Queue.Queue<Request, Cause.Done>): boolean => {
  if (!bucket.hibernates || bucket.pending > 0 || bucket.line.length > 0 || bucket.retired) return false
  bucket.mailbox = undefined
  bucket.fiber = undefined
  if (bucket.hasLatch) Latch.closeUnsafe(bucket.ready)
  Queue.endUnsafe(mailbox)
  return true
}

/**
 * The actor's loop over `mailbox`. Shared by all buckets (one generator
 * function, the bucket passed in), so a bucket costs no closures of its own.
 *
 * It returns when the mailbox has been ended (reap or shutdown) and drained
 * (every request queued before the end is served with a real decision), or
 * when it hibernates.
 *
 * @since 0.1.0
 */
export const run: (bucket: Bucket, mailbox: Queue.Queue<Request, Cause.Done>) => Effect.Effect<void> = Effect
  .fnUntraced(
    function*(bucket: Bucket, mailbox: Queue.Queue<Request, Cause.Done>) {
      Latch.openUnsafe(bucket.ready)
      while (true) {
        if (bucket.line.length === 0) {
          if (hibernate(bucket, mailbox)) return
          serveNow(bucket, yield* Queue.takeAll(mailbox))
        } else {
          const delay = millisUntil(bucket.clock, Math.min(bucket.wakeAt, bucket.nextDeadline))
          if (delay <= 0) {
            serveNow(bucket, empty)
            yield* Effect.yieldNow
          } else {
            const batch = yield* Effect.timeoutOption(Queue.takeAll(mailbox), Duration.millis(delay))
            serveNow(bucket, batch._tag === "Some" ? batch.value : empty)
          }
        }
      }
    },
    Effect.catchTag("Done", () => Effect.void),
    (effect, bucket) =>
      Effect.onExit(effect, (exit) => Exit.isSuccess(exit) && !bucket.retired ? Effect.void : close(bucket))
  )
