/**
 * A message in a bucket's mailbox: what it asks for (its kind) and the
 * `Deferred` its caller awaits. The reply's type follows from the kind
 * ({@link Replies}): an `acquire` is answered with a `boolean`, a `consume`
 * with a `Decision`, a `reserve` with a {@link Reserved}.
 *
 * Answers given while a batch is served are kept (see {@link answer}) and
 * sent once the batch's state is committed ({@link flush}): completing a
 * `Deferred` resumes its caller synchronously, on the actor's stack, and that
 * caller may come straight back to the same bucket.
 *
 * @since 0.2.0
 */
import { Deferred, type Effect, type Option } from "effect"
import type { Decision, Taken } from "../../Decision.ts"
import type {
  BucketFailed,
  InvalidRequest,
  LimiterShutdown,
  Overloaded,
  RateLimitExceeded,
  StoreUnavailable
} from "../../Errors.ts"
import type { Carry, Signal as AlgorithmSignal } from "../algorithm/Algorithm.ts"
import type { Limit } from "../Limit.ts"

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
  /** Decide as `Consume` would, take nothing; reply `Decision`. */
  Peek: 2,
  /** Forget the key's usage: back to the initial state. */
  Reset: 3,
  /** Give `cost` units back (a refund or a returned permit). */
  Release: 4,
  /** Switch the key to `payload` (a {@link Reconfiguration}). */
  Reconfigure: 5,
  /** Wait in line up to `maxWait`; reply once admitted. */
  Wait: 6,
  /** Take a place in line now, act later; reply {@link Reserved} at once. */
  Reserve: 7,
  /** No request: wakes the actor to re-time its line (a waiter left). */
  Poke: 8,
  /** Take `cost` whatever the limit, into debt; reply `Decision` (the debt's wait in `delay`). */
  Force: 9,
  /** Give `cost` units back, capped (a refund that reports); reply `Decision`. */
  Add: 10,
  /** Add `cost` units with no cap; reply `Decision`. */
  ForceAdd: 11,
  /** Back to a full key (nothing used); reply `Decision`. */
  Fill: 12,
  /** Take as much as there is, at most `cost`; reply {@link Taken}. */
  TakeUpTo: 13,
  /** The key as it stands; reply `Option<Decision>` (none: no state). */
  Get: 14,
  /** The key as if `cost` units had been used from full; reply `Decision`. */
  Set: 15,
  /** Forget the key; reply whether it had state. */
  Delete: 16,
  /** Refuse everything until `payload.window` from now; reply `Decision`. */
  Block: 17,
  // Several keys at once, fairness and adaptive rates: 20 and up.
  /**
   * Decide now as `Consume` would, and if admitted hold `cost` units for an
   * all-or-nothing call over several keys (taken by its commit, or given
   * back); reply {@link Held}.
   */
  Hold: 20,
  /** Wait in line as `Wait` does; once admitted, hold `cost` units as `Hold` does; reply {@link Held}. */
  HoldWait: 21,
  /** A signal for an adaptive rate (`payload`, a {@link Signal}); in-band, so waiters are re-timed. */
  Feedback: 22,
  /** Runs a pure transition over the key's state (`payload`, a {@link Transaction}); reply its result. */
  Transact: 23
} as const

/**
 * @since 0.1.0
 */
export type Kind = typeof Kind[keyof typeof Kind]

/**
 * The kinds decided at once, against the key's state as it stands.
 *
 * @since 0.2.0
 */
export type DecideKind =
  | typeof Kind.Acquire
  | typeof Kind.Consume
  | typeof Kind.Peek
  | typeof Kind.Reset
  | typeof Kind.Release
  | typeof Kind.Reconfigure
  | typeof Kind.Force
  | typeof Kind.Add
  | typeof Kind.ForceAdd
  | typeof Kind.Fill
  | typeof Kind.TakeUpTo
  | typeof Kind.Get
  | typeof Kind.Set
  | typeof Kind.Delete
  | typeof Kind.Block
  | typeof Kind.Hold
  | typeof Kind.Feedback
  | typeof Kind.Transact

/**
 * The kinds that may wait in the key's line.
 *
 * @since 0.2.0
 */
export type WaitKind = typeof Kind.Wait | typeof Kind.Reserve | typeof Kind.HoldWait

/**
 * The reply to each kind of request.
 *
 * @since 0.2.0
 */
export interface Replies {
  readonly [Kind.Acquire]: boolean
  readonly [Kind.Consume]: Decision
  readonly [Kind.Peek]: Decision
  readonly [Kind.Reset]: void
  readonly [Kind.Release]: void
  readonly [Kind.Reconfigure]: void
  readonly [Kind.Wait]: void
  readonly [Kind.Reserve]: Reserved
  readonly [Kind.Poke]: void
  readonly [Kind.Force]: Decision
  readonly [Kind.Add]: Decision
  readonly [Kind.ForceAdd]: Decision
  readonly [Kind.Fill]: Decision
  readonly [Kind.TakeUpTo]: Taken
  readonly [Kind.Get]: Option.Option<Decision>
  readonly [Kind.Set]: Decision
  readonly [Kind.Delete]: boolean
  readonly [Kind.Block]: Decision
  readonly [Kind.Hold]: Held
  readonly [Kind.HoldWait]: Held
  readonly [Kind.Feedback]: void
  readonly [Kind.Transact]: unknown
}

/**
 * The reply to a request of kind `K`.
 *
 * @since 0.2.0
 */
export type Reply<K extends Kind> = Replies[K]

/**
 * What any request may fail with once it reaches its bucket.
 *
 * @since 0.2.0
 */
export type Failure = BucketFailed | InvalidRequest | LimiterShutdown | Overloaded | StoreUnavailable

/**
 * What a request of kind `K` may fail with: a waiter may also be told its
 * turn is past its `maxWait`.
 *
 * @since 0.2.0
 */
export type FailureOf<K extends Kind> = Failure | (K extends WaitKind ? RateLimitExceeded : never)

/**
 * The answer to a request of kind `K`: an `Exit`, or an effect (a shaper's
 * delay, slept by the caller once admitted).
 *
 * @since 0.2.0
 */
export type Answer<K extends Kind = Kind> = Effect.Effect<Reply<K>, FailureOf<K>>

/**
 * A new policy for a key and how its usage carries over. A change of rate
 * only (`setRate`) says what the old rate was (the algorithm's `rateOf`):
 * its state is carried by the algorithm's own rate rule, in a store too.
 *
 * @since 0.1.0
 */
export interface Reconfiguration {
  readonly policy: Limit
  readonly carry: Carry
  readonly rate?: readonly [number, number] | undefined
}

/**
 * A length of time a request carries: the window a call opens (a duration
 * per call), or how long a block lasts. Milliseconds, `Infinity` for ever.
 *
 * @since 0.2.0
 */
export interface Window {
  readonly window: number
}

/**
 * A signal for an adaptive rate: `"ok"` (the upstream coped: additive
 * increase), `"throttled"` (it pushed back: multiplicative decrease, and no
 * admission before `retryAfter` ms when it said so), or a latency in ms
 * (compared with the policy's target).
 *
 * @since 0.2.0
 */
export interface Signal {
  readonly signal: AlgorithmSignal
  /** For `"throttled"`: how long the upstream asked to wait (ms; 0 when it did not say). For `"latency"`: the latency (ms). */
  readonly millis: number
}

/**
 * A pure transition over a key's state, run by its bucket in order with the
 * key's other requests (the single writer): the state (`undefined` for a key
 * with no state yet) and the limiter's time in, the reply and the next state
 * out.
 *
 * @since 0.2.0
 */
export interface Transaction {
  readonly run: (state: unknown, now: number) => readonly [reply: unknown, state: unknown]
}

/**
 * What a request may carry besides its cost: a new policy, a length of
 * time (`Window`), a signal, a transaction, or (for a waiter) its place in
 * line.
 *
 * @since 0.2.0
 */
export type Payload = Reconfiguration | Window | Signal | Transaction | Order

/**
 * The reply to `Hold` and `HoldWait`: the decision (what a take would have
 * left), and the hold itself, which the caller commits or gives back.
 *
 * @since 0.2.0
 */
export interface Held {
  readonly decision: Decision
  /**
   * The bucket holding the units; `undefined` when the hold was refused.
   * Typed `unknown` so that requests do not import the bucket that serves
   * them (no cycle); the coordinator checks it with `instanceof`.
   */
  readonly holder: unknown
}

/**
 * How a waiter is ordered in its line: by `priority` (higher first), then,
 * for waiters of a `tenant`, by that tenant's fair share (`weight`), then by
 * arrival.
 *
 * @since 0.2.0
 */
export interface Order {
  readonly priority: number
  readonly tenant: string | undefined
  readonly weight: number
}

/**
 * The reply to `Reserve`: how long until the reservation is admitted (0 when
 * it was admitted at once), and how to give its place back.
 *
 * @since 0.1.0
 */
export interface Reserved {
  readonly delay: number
  readonly cancel: Effect.Effect<void>
}

/**
 * One message in a bucket's mailbox.
 *
 * @since 0.1.0
 */
export class Request {
  /** Set when the caller left (interrupted, or a reservation cancelled): it is skipped and takes nothing. */
  cancelled = false
  /**
   * For a waiter whose turn depends on a release (a concurrency limit with
   * every unit out): when it gives up with `RateLimitExceeded`.
   */
  deadline = Infinity
  readonly kind: Kind
  readonly cost: number
  readonly maxWait: number
  readonly payload: Payload | undefined
  readonly reply: Deferred.Deferred<Reply<Kind>, FailureOf<Kind>>
  /** A waiter's place: priority and tenant (undefined: priority 0, no tenant, plain FIFO). */
  readonly order: Order | undefined
  /** When it joined a line (for deadlines, aging and the head-of-line rule). */
  since = 0
  /** A fair line's virtual start time of the waiter (see `Line`). */
  tag = 0
  /** Set when a `Hold` or `HoldWait` was granted: its units are held until committed or given back. */
  holding = false
  /**
   * Its answer, once decided and kept to be sent ({@link answer}): a caller
   * that leaves while its batch's answers are being sent (another caller,
   * resumed first, interrupts it) finds here what it was given.
   */
  kept: Answer | undefined = undefined
  constructor(kind: Kind, cost: number, maxWait: number, payload?: Payload | undefined) {
    this.kind = kind
    this.cost = cost
    this.maxWait = maxWait
    this.payload = payload
    this.order = payload !== undefined && "priority" in payload ? payload : undefined
    this.reply = Deferred.makeUnsafe()
  }
}

/**
 * A request of kind `K`: what {@link make} returns, so awaiting it yields `Reply<K>`.
 *
 * @since 0.2.0
 */
export interface Of<K extends Kind> extends Request {
  readonly kind: K
}

/**
 * Makes a request.
 *
 * @example
 * ```ts
 * import * as Request from "./Request.ts"
 *
 * const request = Request.make(Request.Kind.Acquire, 1, 0)
 * const reply = Request.await(request) // Effect<boolean, ...>
 * ```
 *
 * @since 0.2.0
 */
export const make = <K extends Kind>(kind: K, cost: number, maxWait: number, payload?: Payload): Of<K> =>
  new Request(kind, cost, maxWait, payload) as Of<K> // a Request whose `kind` is the K it was made with

/**
 * The reply to a request, typed by its kind.
 *
 * @since 0.2.0
 */
const awaitReply = <K extends Kind>(request: Of<K>): Answer<K> =>
  // The actor answers a request of kind K only with an Answer<K>: `answer`
  // and `reply` are called with the result of the kind's own decision.
  Deferred.await(request.reply) as Answer<K>

export {
  /**
   * The reply to a request, typed by its kind.
   *
   * @since 0.2.0
   */
  awaitReply as await
}

/**
 * A request made only to wake the actor (see `Kind.Poke`); never answered.
 *
 * @since 0.2.0
 */
export const poke: Request = new Request(Kind.Poke, 0, 0)

/**
 * Answers a request at once.
 *
 * @since 0.2.0
 */
export const reply = (request: Request, answer: Answer): void => {
  Deferred.doneUnsafe(request.reply, answer)
}

// The answers of the batch being served, sent by `flush`. One pair of arrays
// for every bucket: a batch is served synchronously, and an answer sent may
// start another batch (on another bucket) from inside `flush`, which keeps
// its own mark.
const requests: Array<Request> = []
const answers: Array<Answer> = []

/**
 * Keeps an answer, to be sent by {@link flush} once the batch's state is
 * committed.
 *
 * @since 0.2.0
 */
export const answer = (request: Request, answer: Answer): void => {
  request.kept = answer
  requests.push(request)
  answers.push(answer)
}

/**
 * Where the answers of a batch that starts now begin (for {@link flush}).
 *
 * @since 0.2.0
 */
export const mark = (): number => requests.length

/**
 * Sends the answers kept since `from`, in order.
 *
 * @since 0.2.0
 */
export const flush = (from: number): void => {
  const end = requests.length
  for (let i = from; i < end; i++) Deferred.doneUnsafe(requests[i].reply, answers[i])
  requests.length = from
  answers.length = from
}
