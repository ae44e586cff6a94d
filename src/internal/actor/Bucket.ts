/**
 * The bucket: one key's actor, and everything about that key.
 *
 * A bucket owns the key's state in a `Ref`. Its actor is a fiber that serves
 * a bounded `Queue` mailbox of requests, each with a `Deferred` reply, in
 * batches: every batch is served in one pass (one clock read, the state
 * committed, then the replies sent in order), and it keeps the FIFO
 * {@link Line} of callers that `wait`. Its front door, {@link submit}, is
 * where every request for the key comes in:
 *
 * - **The fast path.** When the key is quiet (nothing queued, nobody
 *   waiting), the request is decided on the caller's fiber by the same
 *   decision the actor runs. Nothing is ahead of it and JavaScript runs it
 *   in one piece, so that is the actor serving it at once (a differential
 *   test runs the same workloads with the fast path on and off and compares
 *   every decision). A defect there restarts only this key.
 * - **The mailbox.** Anything else is offered to the mailbox, starting the
 *   actor if it is not running. A full mailbox refuses at once (`Overloaded`).
 * - **Hibernation and retirement.** With nothing queued and nobody waiting,
 *   the actor gives its mailbox back and its fiber ends; the state stays.
 *   Retired (reaped, or the limiter closed), it serves what was queued and
 *   answers whoever still waits with `LimiterShutdown`. Its `stopped` latch
 *   opens whenever its fiber is not running: shutdown waits on it.
 *
 * How a request is decided depends on where the key's state lives: in the
 * bucket (`Local`) or in a shared store (`Remote`). The {@link Backend} of
 * the limiter says; the actor's loop and its lifecycle are the same for both.
 *
 * @since 0.1.0
 */
import {
  type Cause,
  Deferred,
  Duration,
  Effect,
  Exit,
  type Fiber,
  type Inspectable,
  Latch,
  MutableRef,
  Queue,
  Ref
} from "effect"
import type { Pipeable } from "effect/Pipeable"
import type { Decision } from "../../Decision.ts"
import { BucketFailed, LimiterShutdown, Overloaded } from "../../Errors.ts"
import * as Block from "../algorithm/Block.ts"
import type { Limit } from "../Limit.ts"
import type { Recorder } from "../Recorder.ts"
import type { Activity } from "./Activity.ts"
import * as Line from "./Line.ts"
import * as Monotone from "./Monotone.ts"
import * as Operations from "./Operations.ts"
import * as Request from "./Request.ts"

/**
 * Limits of one bucket.
 *
 * @since 0.1.0
 */
export interface Limits {
  readonly mailboxCapacity: number
  readonly maxWaiters: number
  /** How long a head that does not fit may be passed by smaller waiters (ms; 0 or absent: never). */
  readonly passMillis?: number | undefined
}

/**
 * A bucket's mailbox.
 *
 * @since 0.2.0
 */
export type Mailbox = Queue.Queue<Request.Request, Cause.Done>

/**
 * What all the buckets of one limiter share.
 *
 * @since 0.2.0
 */
export interface Limiter {
  readonly clock: Monotone.Now
  /** When each bucket last decided (see `Activity`), and the bucket in each slot. */
  readonly activity: Activity<Bucket>
  readonly recorder: Recorder
  readonly limits: Limits
  /** Decide a quiet key's requests on the caller's fiber (see {@link submit}). */
  readonly fastPath: boolean
  readonly backend: Backend
  /** Makes a bucket's mailbox (bounded, `dropping`: a full one refuses at once). */
  readonly mailbox: () => Mailbox
  /** Runs an actor in the limiter's scope. */
  readonly fork: (actor: Effect.Effect<void>) => Fiber.Fiber<void>
  /** The supervisor forgets a bucket: its actor died, or its key was deleted (the key starts afresh). */
  readonly forget: (key: string, bucket: Bucket) => void
}

/**
 * Where a key's state lives, and so how its requests are decided: in the
 * bucket (`Local`) or in a shared store (`Remote`).
 *
 * @since 0.2.0
 */
export interface Backend {
  /**
   * Decides a request on the caller's fiber, the key being quiet; or
   * `undefined`: it goes to the actor.
   */
  readonly now: (
    limiter: Limiter,
    bucket: Bucket,
    kind: Request.Kind,
    cost: number,
    now: number,
    payload: Request.Payload | undefined
  ) => Request.Answer | undefined
  /**
   * A request for a key with no bucket that need not start one (a `peek`
   * reads the initial state, a `reset` has nothing to forget); `undefined`:
   * start the bucket.
   */
  readonly unstarted: (
    limiter: Limiter,
    key: string,
    policy: Limit,
    kind: Request.Kind,
    cost: number
  ) => Request.Answer | undefined
  /** Serves one batch (empty: the line's turn); `undefined` when done synchronously. */
  readonly serve: (limiter: Limiter, bucket: Bucket, actor: Actor, batch: ReadonlyArray<Request.Request>) =>
    | Effect.Effect<void>
    | undefined
  /** What a fresh actor waits for before it serves, if anything (a store call a caller still has out). */
  readonly takeOver: (limiter: Limiter, bucket: Bucket) => Effect.Effect<void> | undefined
  /** A waiter admitted in the very instant its caller left gives its units back. */
  readonly refund: (limiter: Limiter, bucket: Bucket, cost: number) => void
  /** Whether forgetting the key's state now can change no later decision. */
  readonly settled: (bucket: Bucket, now: number) => boolean
  /** Whether the actor lets callers running now join its next batch (a batch costs a round trip). */
  readonly gathers: boolean
  /** The least an actor whose line waits sleeps before it looks at the line again (ms). */
  readonly minSleep: number
  /**
   * Takes `cost` from every bucket or from none, in one atomic call to a
   * shared store. `undefined` in process, where a call over several keys
   * holds units in each bucket instead (see `Multi`).
   */
  readonly all:
    | ((limiter: Limiter, buckets: ReadonlyArray<Bucket>, cost: number) => Effect.Effect<All, Request.Failure>)
    | undefined
}

/**
 * The answer to a call over several keys: whether every key admitted, and
 * each key's decision in the order given (what it took when admitted, what
 * it alone would decide when not).
 *
 * @since 0.2.0
 */
export interface All {
  readonly allowed: boolean
  readonly decisions: ReadonlyArray<Decision>
  /**
   * A refusal no wait can outlast: the store does not answer and the
   * fallback denies, so a caller that waits is refused at once.
   */
  readonly final?: boolean | undefined
}

/**
 * A bucket: a key's policy, its state and (once a request has had to queue)
 * its actor.
 *
 * @since 0.1.0
 */
export class Bucket implements Ref.Ref<unknown>, MutableRef.MutableRef<unknown> {
  // What makes the bucket a Ref and its cell: from Effect's `Ref` prototype
  // (set on its prototype after the class), declared here for the compiler.
  declare readonly "~effect/Ref": Ref.Ref.Variance<unknown>["~effect/Ref"]
  declare readonly "~effect/MutableRef": "~effect/MutableRef"
  declare readonly pipe: Pipeable["pipe"]
  declare readonly toString: () => string
  declare readonly [Inspectable.NodeInspectSymbol]: () => unknown
  // Fields every request reads come first, so a decision on a cold bucket
  // touches as few cache lines as it can; number fields start as numbers, so
  // V8 keeps them unboxed.
  /** The key's policy; changed only by `Reconfigure`. */
  policy: Limit
  /**
   * The key's state, in the bucket's Ref: the bucket is that Ref, and the
   * Ref's cell (`ref`, where `Ref` keeps its value, is the bucket itself).
   * Read with `Ref.getUnsafe` and written with `Ref`'s own synchronous write
   * ({@link write}) on the caller's fiber and in the actor's batch pass,
   * which never yields between a read and its write. A Ref of its own (a
   * `Ref`, its `MutableRef`, then the state) costs two dependent loads more
   * per decision, each a cache miss on a large key set visited out of order:
   * 1096 against 769 ns a decision on 100 000 keys, nothing measurable on
   * 1000 keys (docs/performance.md).
   */
  current: unknown = undefined
  /**
   * The policy's in-place take, while the state is the algorithm's own (not
   * absent, not under a block), and the state it was found for (`plain`).
   * Kept by {@link write}, so an admission reads two fields where it would
   * follow the policy to its rule and test the state's class: about 5 % of a
   * lone call (bench/history.md, 2026-11-28). A state written some other way
   * (Effect's `Ref.set` on the bucket) is not `plain`, and goes the
   * operation's way.
   */
  takes: ((state: unknown, now: number, cost: number) => boolean) | undefined = undefined
  /** The state `takes` was found for (see {@link takes}). */
  plain: unknown = undefined
  /** Its slot in the limiter's `Activity` (when it last decided); -1 once forgotten. */
  slot: number
  /** The actor, made the first time a request has to queue. */
  actor: Actor | undefined = undefined
  /**
   * Units held for all-or-nothing calls over several keys (see `Multi`):
   * not yet taken from the state, but no other request may use them until
   * their call commits (takes them) or gives them back. 0 almost always.
   */
  held = 0
  /**
   * A store call made for the key on a caller's fiber (a store-backed key's
   * caller-side path), while it is out: the key's actor sends its first
   * batch only after it. On the bucket, not in a table of the backend's: a
   * lookup in a table of every key out costs a cache miss per call on a
   * large key set.
   */
  direct: Direct | undefined = undefined
  readonly key: string
  constructor(key: string, policy: Limit, slot: number) {
    // no state yet (`current` undefined): the key reads as fresh until its
    // first operation anchors it
    this.policy = policy
    this.slot = slot
    this.key = key
  }
  /** The Ref's cell: the bucket itself. */
  get ref(): MutableRef.MutableRef<unknown> {
    return this
  }
  toJSON(): unknown {
    // Ref's own would print its cell, which is this bucket, again and again
    return { _id: "Bucket", key: this.key, state: this.current }
  }
}

// The prototype of Effect's `Ref`, with the mark of a `MutableRef`: what
// `Ref`'s functions and `Equal` look for on a bucket.
Object.setPrototypeOf(
  Bucket.prototype,
  Object.assign(Object.create(Object.getPrototypeOf(Ref.makeUnsafe(undefined))), {
    "~effect/MutableRef": "~effect/MutableRef"
  })
)

/**
 * A caller-side store call of a key (see {@link Bucket.direct}).
 *
 * @since 0.2.0
 */
export interface Direct {
  /** When it started (an actor waits for it at most twice the store timeout). */
  readonly since: number
  /** Completed when it is back, for an actor that waits for it. */
  idle: Deferred.Deferred<void> | undefined
}

/**
 * A caller-side store call of the key goes out at `now` (see
 * {@link Bucket.direct}): the key's actor, if one starts meanwhile, sends its
 * first batch after it.
 *
 * @since 0.3.0
 */
export const directOut = (bucket: Bucket, now: number): Direct => {
  const out: Direct = { since: now, idle: undefined }
  bucket.direct = out
  return out
}

/**
 * The caller-side call `out` is back (or given up on): the key is free, and
 * an actor waiting for it goes on.
 *
 * @since 0.3.0
 */
export const directBack = (bucket: Bucket, out: Direct): void => {
  if (bucket.direct === out) bucket.direct = undefined
  if (out.idle !== undefined) Deferred.doneUnsafe(out.idle, Exit.void)
}

/**
 * The part of a bucket that exists once a request has had to queue: the
 * mailbox (while the fiber runs), the line, and the `stopped` latch.
 *
 * @since 0.2.0
 */
export class Actor {
  /** Requests offered and not yet served (queued, or in the batch being served). */
  pending = 0
  readonly line: Line.Line
  /** The mailbox, while the actor's fiber runs. */
  mailbox: Mailbox | undefined = undefined
  /** Set while a batch is being served across a yield (a store call out). */
  serving = false
  /** Set once the bucket takes no more requests (reaped, shut down, or its fiber died). */
  retired = false
  /**
   * Open while the actor's fiber is not running; shutdown awaits it. Made
   * with the actor (only a bucket that ever queued has one); closing and
   * opening it is a flag, so it costs nothing measurable per batch.
   */
  readonly stopped: Latch.Latch = Latch.makeUnsafe(true)
  constructor(owner: Line.Owner) {
    this.line = new Line.Line(owner)
  }
}

/**
 * Makes a bucket for `key` under `policy`.
 *
 * @since 0.2.0
 */
export const make = (limiter: Limiter, key: string, policy: Limit): Bucket => {
  const now = limiter.clock.currentTimeMillisUnsafe()
  const slot = limiter.activity.take(now)
  const bucket = new Bucket(key, policy, slot)
  limiter.activity.own(slot, bucket)
  return bucket
}

/**
 * Records that the bucket decided a request at `now` (what keeps it from
 * being reaped as idle).
 *
 * @since 0.2.0
 */
export const touch = (limiter: Limiter, bucket: Bucket, now: number): void => {
  limiter.activity.times[bucket.slot] = now
}

/**
 * The bucket is no longer in the limiter's table: its slot goes to the next
 * bucket (a late `touch`, from an actor still draining, writes nowhere).
 *
 * @since 0.2.0
 */
export const forgotten = (limiter: Limiter, bucket: Bucket): void => {
  limiter.activity.free(bucket.slot)
  bucket.slot = -1
}

/**
 * Whether the bucket is out of the limiter's table (see {@link forgotten}):
 * what it decides from now on is lost with it.
 *
 * @since 0.3.0
 */
export const isForgotten = (bucket: Bucket): boolean => bucket.slot < 0

/**
 * The key's state.
 *
 * @since 0.2.0
 */
export const read = (bucket: Bucket): unknown => Ref.getUnsafe(bucket)

/**
 * Sets the key's state: `Ref.set`'s own write, without the `Effect` around
 * it (Effect 4.1 has `Ref.getUnsafe` but no synchronous setter), for the
 * caller's fiber and the actor's synchronous batch pass.
 *
 * @since 0.2.0
 */
export const write = (bucket: Bucket, state: unknown): void => {
  MutableRef.set(bucket.ref, state)
  const take = state === undefined || state instanceof Block.Stored ? undefined : bucket.policy.rule.takeInPlace
  bucket.takes = take
  bucket.plain = take === undefined ? undefined : state
}

const exitTrue = Exit.succeed(true)
const exitFalse = Exit.succeed(false)

/**
 * `acquire` on the bucket's own state in place (the algorithm's
 * `takeInPlace`: no allocation per admission), when nothing stands in its
 * way: a plain state (no block beside it), nothing held. The same decision
 * as the operation's (a law test checks the shortcut against `step`).
 * `undefined` when it does not apply, and the request goes the operation's
 * way: so does a denial that may block the key, or that a dry run lets
 * through. Only the bucket's owner (its quiet caller, or its actor) calls
 * it: the state object is the bucket's alone.
 *
 * @since 0.3.0
 */
export const acquireInPlace = (
  limiter: Limiter,
  bucket: Bucket,
  cost: number,
  now: number
): Request.Answer<typeof Request.Kind.Acquire> | undefined => {
  const take = bucket.takes
  const state = bucket.current
  if (take === undefined || state !== bucket.plain || bucket.held !== 0) return undefined
  if (take(state, now, cost)) {
    touch(limiter, bucket, now)
    limiter.recorder.allowed++
    return exitTrue
  }
  if (bucket.policy.blockMillis > 0 || bucket.policy.dryRun) return undefined
  touch(limiter, bucket, now)
  limiter.recorder.denied++
  return exitFalse
}

/**
 * Switches the bucket to `policy`, with `state` carried over to it.
 *
 * @since 0.3.0
 */
export const adopt = (bucket: Bucket, policy: Limit, state: unknown): void => {
  bucket.policy = policy
  write(bucket, state)
}

/**
 * Holds `cost` units for a call over several keys (see {@link Bucket.held}).
 *
 * @since 0.3.0
 */
export const hold = (bucket: Bucket, cost: number): void => {
  bucket.held += cost
}

/**
 * The front door: everything that comes for the key. Decides on the
 * caller's fiber when the key is quiet (the fast path), or queues the
 * request for the actor, starting it if it is not running. `undefined`: the
 * bucket has retired under the caller, who looks the key up again.
 *
 * @since 0.2.0
 */
export const submit = <K extends Request.Kind>(
  limiter: Limiter,
  bucket: Bucket,
  kind: K,
  cost: number,
  maxWait: number,
  payload?: Request.Payload
): Request.Answer<K> | undefined => {
  // (what the policy cannot do is refused first: Operations.refuse, for any
  // kind but the commonest, which need only their cost checked)
  if (
    cost > bucket.policy.rule.maxCost || payload !== undefined ||
    (kind !== Request.Kind.Acquire && kind !== Request.Kind.Consume && kind !== Request.Kind.Peek)
  ) {
    const invalid = Operations.refuse(bucket.policy, bucket.key, kind, cost, payload)
    if (invalid !== undefined) return Exit.fail(invalid)
  }
  const actor = bucket.actor
  if (limiter.fastPath && (actor === undefined || (actor.pending === 0 && actor.line.waiters.length === 0))) {
    const now = limiter.clock.currentTimeMillisUnsafe()
    // Inline rather than through a guard function: this is the hot path,
    // and a closure per call shows in the profile.
    try {
      const answer = limiter.backend.now(limiter, bucket, kind, cost, now, payload)
      // (a backend answers a request of kind K with an Answer<K>, as the actor does)
      if (answer !== undefined) return answer as Request.Answer<K>
    } catch (defect) {
      return fail(limiter, bucket, now, defect)
    }
  }
  return enqueue(limiter, bucket, kind, cost, maxWait, payload)
}

const enqueue = <K extends Request.Kind>(
  limiter: Limiter,
  bucket: Bucket,
  kind: K,
  cost: number,
  maxWait: number,
  payload: Request.Payload | undefined
): Request.Answer<K> | undefined => {
  const actor = bucket.actor ??= new Actor({
    key: bucket.key,
    maxWaiters: limiter.limits.maxWaiters,
    recorder: limiter.recorder,
    passMillis: limiter.limits.passMillis ?? 0
  })
  if (actor.retired) return undefined
  const request = Request.make(kind, cost, maxWait, payload)
  // Offer first, then fork: the fork runs the actor at once, and its first
  // batch already holds this request.
  const starting = actor.mailbox === undefined ? actor.mailbox = limiter.mailbox() : undefined
  if (!offer(limiter, actor, request)) {
    limiter.recorder.overloaded++
    return Exit.fail(
      new Overloaded({ key: bucket.key, reason: "mailbox", capacity: limiter.limits.mailboxCapacity })
    )
  }
  if (starting !== undefined) start(limiter, bucket, actor, starting)
  return Effect.onInterrupt(Request.await(request), () => Effect.sync(() => leave(limiter, bucket, request, true)))
}

// Puts a request in the running actor's mailbox, never suspending; false
// when it is full (or ended).
const offer = (limiter: Limiter, actor: Actor, request: Request.Request): boolean => {
  if (actor.mailbox === undefined || !Queue.offerUnsafe(actor.mailbox, request)) return false
  actor.pending++
  limiter.recorder.queued++
  return true
}

const start = (limiter: Limiter, bucket: Bucket, actor: Actor, mailbox: Mailbox): void => {
  limiter.recorder.actors++
  actor.stopped.closeUnsafe()
  limiter.fork(run(limiter, bucket, actor, mailbox))
}

/**
 * A caller leaves: its request is skipped if not yet served, and a waiter
 * leaving the line wakes the actor so those behind it are re-timed. If the
 * waiter was admitted in the same instant and `refund` is set, its units are
 * given back, so an interrupted waiter never keeps what it took.
 *
 * @since 0.1.0
 */
export const leave = (limiter: Limiter, bucket: Bucket, request: Request.Request, refund: boolean): void => {
  // Answered: sent, or kept for its batch's flush, which may resume the
  // fiber that interrupts this caller before the answer reaches it.
  const answer = Deferred.isDoneUnsafe(request.reply) ? request.reply.effect : request.answered
  if (answer !== undefined) {
    if (refund && Exit.isExit(answer) && Exit.isSuccess(answer)) {
      if (request.kind === Request.Kind.Wait) limiter.backend.refund(limiter, bucket, request.cost)
      // a hold granted in the very instant its caller left: given back
      else if (request.holding) unhold(limiter, bucket, request.cost)
    }
    return
  }
  request.cancelled = true
  poke(limiter, bucket)
}

/**
 * Gives back `cost` units held for an all-or-nothing call (it did not
 * commit): those in line are re-timed.
 *
 * @since 0.2.0
 */
export const unhold = (limiter: Limiter, bucket: Bucket, cost: number): void => {
  bucket.held -= cost
  poke(limiter, bucket)
}

/**
 * Wakes a running actor whose line waits, so it re-times the line (best
 * effort: if the mailbox is full, the actor is about to wake anyway).
 *
 * @since 0.2.0
 */
export const poke = (limiter: Limiter, bucket: Bucket): void => {
  const actor = bucket.actor
  if (actor !== undefined && actor.line.waiters.length > 0) offer(limiter, actor, Request.poke)
}

/**
 * Starts the bucket afresh after a defect: every waiter in line gets `exit`,
 * the state goes back to the policy's initial state.
 *
 * @since 0.1.0
 */
export const restart = (limiter: Limiter, bucket: Bucket, now: number, exit: Exit.Exit<never, BucketFailed>): void => {
  if (bucket.actor !== undefined) Line.clear(bucket.actor.line, exit, Request.answer)
  write(bucket, undefined)
  touch(limiter, bucket, now)
}

/**
 * After a defect on the caller's fiber: restarts the bucket and answers the
 * call with `BucketFailed`.
 *
 * @since 0.1.0
 */
export const fail = (
  limiter: Limiter,
  bucket: Bucket,
  now: number,
  defect: unknown
): Exit.Exit<never, BucketFailed> => {
  const exit = Exit.fail(new BucketFailed({ key: bucket.key, defect: String(defect) }))
  const from = Request.mark()
  restart(limiter, bucket, now, exit)
  Request.flush(from)
  return exit
}

/**
 * Whether the bucket may be forgotten at `now` without changing any
 * decision: nothing queued, nobody waiting, and its state settled (for a
 * token bucket: full again).
 *
 * @since 0.2.0
 */
export const settled = (limiter: Limiter, bucket: Bucket, now: number): boolean => {
  const actor = bucket.actor
  return (actor === undefined || (actor.pending === 0 && actor.line.waiters.length === 0 && !actor.serving)) &&
    bucket.held === 0 && limiter.backend.settled(bucket, now)
}

/**
 * Whether the bucket has decided nothing for `idleMillis` and may be
 * forgotten (see {@link settled}): what the sweep reaps.
 *
 * @since 0.2.0
 */
export const idle = (limiter: Limiter, bucket: Bucket, now: number, idleMillis: number): boolean =>
  now - limiter.activity.times[bucket.slot] >= idleMillis && settled(limiter, bucket, now)

/**
 * Whether the key is quiet: nothing queued for its actor, nobody in its
 * line, nothing held (a request decided now is the first thing it serves).
 *
 * @since 0.3.0
 */
export const quiet = (bucket: Bucket): boolean => {
  const actor = bucket.actor
  return bucket.held === 0 && (actor === undefined || (actor.pending === 0 && actor.line.waiters.length === 0))
}

/**
 * Whether the bucket takes no more requests (reaped, shut down, or its
 * actor died).
 *
 * @since 0.3.0
 */
export const retired = (bucket: Bucket): boolean => bucket.actor?.retired === true

/**
 * Retires the bucket (reaped, or the limiter closes): it takes no more
 * requests; a running actor serves what was queued and ends.
 *
 * @since 0.2.0
 */
export const retire = (bucket: Bucket): void => {
  const actor = bucket.actor
  if (actor === undefined) return
  actor.retired = true
  if (actor.mailbox !== undefined) Queue.endUnsafe(actor.mailbox)
}

/**
 * Completes once the bucket's actor is not running, or `undefined` if it
 * never ran: what shutdown waits for after retiring every bucket.
 *
 * @since 0.2.0
 */
export const stopped = (bucket: Bucket): Effect.Effect<void> | undefined => bucket.actor?.stopped.await

const exitShutdown = Exit.fail(new LimiterShutdown())

// The actor's end for any reason but hibernation: the bucket retires, and
// everything still queued or waiting is answered `LimiterShutdown`.
const close = (limiter: Limiter, bucket: Bucket, actor: Actor): Effect.Effect<void> =>
  Effect.suspend(() => {
    const died = !actor.retired
    actor.retired = true
    if (died) limiter.forget(bucket.key, bucket)
    const from = Request.mark()
    Line.clear(actor.line, exitShutdown, Request.answer)
    Request.flush(from)
    const mailbox = actor.mailbox
    actor.mailbox = undefined
    if (mailbox === undefined) return stop(limiter, actor)
    Queue.endUnsafe(mailbox)
    return Effect.flatMap(Queue.clear(mailbox), (leftover) =>
      Effect.suspend(() => {
        actor.pending -= leftover.length
        limiter.recorder.queued -= leftover.length
        for (const request of leftover) Request.reply(request, exitShutdown)
        return stop(limiter, actor)
      }))
  })

const stop = (limiter: Limiter, actor: Actor): Effect.Effect<void> =>
  Effect.sync(() => {
    limiter.recorder.actors--
    actor.stopped.openUnsafe()
  })

// With nothing queued and nobody waiting, a hibernating actor gives its
// mailbox back and its fiber ends; the state stays. Synchronous, so no offer
// can slip in between.
const hibernate = (limiter: Limiter, actor: Actor, mailbox: Mailbox): boolean => {
  if (actor.pending > 0 || actor.line.waiters.length > 0 || actor.retired) return false
  actor.mailbox = undefined
  Queue.endUnsafe(mailbox)
  limiter.recorder.actors--
  actor.stopped.openUnsafe()
  return true
}

const empty: ReadonlyArray<Request.Request> = []

/**
 * The actor: serves the mailbox in batches until it hibernates or retires.
 * With waiters in line it also wakes when the head's turn comes (or a
 * waiter's deadline), if nothing in the mailbox wakes it first. Shared by
 * all buckets (one generator function, the bucket passed in), so a bucket
 * costs no closures of its own.
 *
 * @since 0.1.0
 */
export const run: (limiter: Limiter, bucket: Bucket, actor: Actor, mailbox: Mailbox) => Effect.Effect<void> = Effect
  .fnUntraced(
    function*(limiter: Limiter, bucket: Bucket, actor: Actor, mailbox: Mailbox) {
      const { backend, clock } = limiter
      const takeOver = backend.takeOver(limiter, bucket)
      if (takeOver !== undefined) yield* takeOver
      while (true) {
        const line = actor.line
        let batch: ReadonlyArray<Request.Request> = empty
        let due = false
        if (line.waiters.length === 0) {
          // A batch costs a store round trip: let callers running now join it.
          // The literal actor (no fast path) gives the caller it has just
          // answered one turn to come back before it hibernates: a key in
          // steady use keeps its fiber, an idle one costs no fiber.
          if (backend.gathers || (!limiter.fastPath && actor.pending === 0)) yield* Effect.yieldNow
          if (hibernate(limiter, actor, mailbox)) return
          batch = yield* Queue.takeAll(mailbox)
        } else {
          const delay = Math.max(
            backend.minSleep,
            Monotone.millisUntil(clock, Math.min(line.wakeAt, line.nextDeadline))
          )
          if (delay > 0) {
            const taken = yield* Effect.timeoutOption(Queue.takeAll(mailbox), Duration.millis(delay))
            if (taken._tag === "Some") batch = taken.value
          } else {
            due = true
          }
        }
        const served = backend.serve(limiter, bucket, actor, batch)
        if (served !== undefined) {
          actor.serving = true
          yield* served
          actor.serving = false
        }
        // The head's turn came with nothing queued: let others run before the
        // next look. (With the line empty, the next look ends the actor, at
        // once in process: no caller finds it running with a request queued
        // and nobody in line.)
        if (due && line.waiters.length > 0) yield* Effect.yieldNow
      }
    },
    Effect.catchTag("Done", () => Effect.void),
    (effect, limiter, bucket, actor) =>
      Effect.onExit(
        effect,
        (exit) => Exit.isSuccess(exit) && !actor.retired ? Effect.void : close(limiter, bucket, actor)
      )
  )
