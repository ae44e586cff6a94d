/**
 * A bucket's line of waiters: the callers of `wait` (and the places taken by
 * `reserve`) that could not be admitted at once, in arrival order. Both
 * actors keep one, the in-process actor and the store-backed one; they differ
 * only in how the head is admitted (by the key's own state, or by asking the
 * store), so everything else about the line is here: who may join and who is
 * refused at once, cancelled waiters, deadlines, and clearing it.
 *
 * A waiter takes nothing until it is admitted, so one that leaves gives back
 * exactly nothing; while anyone waits, a decide-now request is denied (it may
 * not jump the line).
 *
 * @since 0.2.0
 */
import { Duration, Effect, Exit } from "effect"
import { Overloaded, RateLimitExceeded } from "../../Errors.ts"
import type { Recorder } from "../Recorder.ts"
import * as Request from "./Request.ts"

/**
 * What a line needs to know about its bucket and limiter.
 *
 * @since 0.2.0
 */
export interface Owner {
  readonly key: string
  readonly maxWaiters: number
  readonly recorder: Recorder
}

/**
 * The line of one bucket.
 *
 * @since 0.2.0
 */
export class Line {
  /** Waiters in arrival order; `waiters[0]` is served first. */
  readonly waiters: Array<Request.Request> = []
  /** The cost of every waiter in line. */
  cost = 0
  /** When the head can be admitted (valid while the line is not empty). */
  wakeAt = 0
  /** The earliest deadline of a waiter in line (Infinity when none has one). */
  nextDeadline = Infinity
  readonly owner: Owner
  constructor(owner: Owner) {
    this.owner = owner
  }
  get length(): number {
    return this.waiters.length
  }
}

/**
 * How an admitted waiter is answered: go now, or after a shaper's `delay`.
 *
 * @example
 * ```ts
 * import * as Line from "./Line.ts"
 *
 * const go = Line.admitted(0) // succeeds at once
 * const later = Line.admitted(250) // sleeps 250 ms, then succeeds
 * ```
 *
 * @since 0.2.0
 */
export const admitted = (delay: number): Effect.Effect<void> =>
  delay > 0 ? Effect.sleep(Duration.millis(delay)) : Exit.void

const reservedNow = Exit.succeed<Request.Reserved>({ delay: 0, cancel: Effect.void })

/**
 * How a reservation admitted at once is answered: act after a shaper's
 * `delay` (0: now); there is no place in line to give back.
 *
 * @since 0.2.0
 */
export const reservedAfter = (delay: number): Request.Answer<typeof Request.Kind.Reserve> =>
  delay > 0 ? Exit.succeed<Request.Reserved>({ delay, cancel: Effect.void }) : reservedNow

/**
 * How a waiter of either kind admitted at once is answered (see
 * {@link admitted} and {@link reservedAfter}).
 *
 * @since 0.2.0
 */
export const admittedAtOnce = (request: Request.Request, delay: number): Request.Answer =>
  request.kind === Request.Kind.Reserve ? reservedAfter(delay) : admitted(delay)

/**
 * A waiter that cannot be admitted now asks to join the line; `wait` is how
 * long until its turn (on the caller's clock; `Infinity` when its turn comes
 * only with a release). It is refused at once, with `RateLimitExceeded`, when
 * that is past its `maxWait` (unless its turn depends on a release: then it
 * waits up to `maxWait` for one), or with `Overloaded` when the line is full;
 * otherwise it joins at the back. A reservation is answered at once with its
 * delay and a `cancel`; its place in line is a waiter nobody awaits.
 *
 * @since 0.2.0
 */
export const join = (
  line: Line,
  request: Request.Request,
  wait: number,
  now: number,
  canRelease: boolean,
  answer: (request: Request.Request, answer: Request.Answer) => void,
  leave: (entry: Request.Request) => void
): void => {
  const { key, maxWaiters, recorder } = line.owner
  const reserving = request.kind === Request.Kind.Reserve
  // Infinity with a release: the turn comes when units come back, not with
  // time; such a waiter may wait up to its maxWait for it.
  const onRelease = wait === Infinity && canRelease && request.kind === Request.Kind.Wait
  if (wait > request.maxWait && !onRelease) {
    recorder.denied++
    return answer(request, Exit.fail(new RateLimitExceeded({ key, retryAfter: Duration.millis(wait) })))
  }
  if (line.waiters.length >= maxWaiters) {
    recorder.overloaded++
    return answer(request, Exit.fail(new Overloaded({ key, reason: "waiters", capacity: maxWaiters })))
  }
  const entry = reserving ? new Request.Request(Request.Kind.Wait, request.cost, request.maxWait) : request
  if (onRelease && request.maxWait !== Infinity) {
    entry.deadline = now + request.maxWait
    if (entry.deadline < line.nextDeadline) line.nextDeadline = entry.deadline
  }
  line.waiters.push(entry)
  line.cost += request.cost
  recorder.waiting++
  if (reserving) {
    answer(request, Exit.succeed<Request.Reserved>({ delay: wait, cancel: Effect.sync(() => leave(entry)) }))
  }
}

/**
 * The head was admitted (or failed): it leaves the line.
 *
 * @since 0.2.0
 */
export const shift = (line: Line): void => {
  const head = line.waiters.shift()
  if (head === undefined) return
  line.cost -= head.cost
  line.owner.recorder.waiting--
}

/**
 * The first `count` waiters were admitted: they leave the line.
 *
 * @since 0.2.0
 */
export const admit = (line: Line, count: number): void => {
  if (count === 0) return
  for (let i = 0; i < count; i++) line.cost -= line.waiters[i].cost
  line.waiters.splice(0, count)
  line.owner.recorder.waiting -= count
}

/**
 * Drops waiters whose callers left; they took nothing, so those behind move
 * up. Returns whether the head changed.
 *
 * @since 0.2.0
 */
export const removeCancelled = (line: Line): boolean => {
  const waiters = line.waiters
  const head = waiters[0]
  let j = 0
  for (let i = 0; i < waiters.length; i++) {
    const w = waiters[i]
    if (!w.cancelled) waiters[j++] = w
    else line.cost -= w.cost
  }
  line.owner.recorder.waiting -= waiters.length - j
  waiters.length = j
  return waiters[0] !== head
}

/**
 * Waiters past their deadline (waiting for a release) give up: they took
 * nothing. Each is answered `RateLimitExceeded` and leaves the line. Returns
 * whether the head changed.
 *
 * @since 0.2.0
 */
export const expire = (
  line: Line,
  now: number,
  answer: (request: Request.Request, answer: Request.Answer) => void
): boolean => {
  if (line.nextDeadline > now) return false
  const { key, recorder } = line.owner
  let next = Infinity
  for (const w of line.waiters) {
    if (w.cancelled) continue
    if (w.deadline <= now) {
      w.cancelled = true
      recorder.denied++
      answer(w, Exit.fail(new RateLimitExceeded({ key, retryAfter: Duration.infinity })))
    } else if (w.deadline < next) next = w.deadline
  }
  line.nextDeadline = next
  return removeCancelled(line)
}

/**
 * Waiters whose cost is above `maxCost` (the key's new limit) can never be
 * admitted: each is answered `InvalidRequest`-style by `refuse` and leaves.
 *
 * @since 0.2.0
 */
export const dropAbove = (
  line: Line,
  maxCost: number,
  answer: (request: Request.Request) => void
): void => {
  let dropped = false
  for (const w of line.waiters) {
    if (w.cost > maxCost && !w.cancelled) {
      w.cancelled = true
      dropped = true
      answer(w)
    }
  }
  if (dropped) removeCancelled(line)
}

/**
 * Empties the line: every waiter still there is answered `exit` (the bucket
 * failed, or the limiter shut down).
 *
 * @since 0.2.0
 */
export const clear = (
  line: Line,
  exit: Request.Answer,
  answer: (request: Request.Request, answer: Request.Answer) => void
): void => {
  for (const w of line.waiters) if (!w.cancelled) answer(w, exit)
  line.owner.recorder.waiting -= line.waiters.length
  line.waiters.length = 0
  line.cost = 0
  line.nextDeadline = Infinity
}
