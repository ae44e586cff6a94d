/**
 * A bucket's line of waiters: the callers of `wait` (and the places taken by
 * `reserve`) that could not be admitted at once, in the order they are
 * served. Both actors keep one, the in-process actor and the store-backed
 * one; they differ only in how the head is admitted (by the key's own state,
 * or by asking the store), so everything else about the line is here: where
 * a waiter goes, who may join and who is refused at once, cancelled waiters,
 * deadlines, and clearing it.
 *
 * A waiter takes nothing until it is admitted, so one that leaves gives back
 * exactly nothing; while anyone waits, a decide-now request is denied (it may
 * not jump the line).
 *
 * **Order.** By default the line is FIFO: a waiter joins at the back (one
 * `push`, nothing else; a line that uses none of what follows pays for none
 * of it). A waiter may carry an {@link Request.Order}:
 *
 * - a `priority` (an integer, 0 by default): a higher priority is served
 *   first; within one priority, waiters keep their order;
 * - a `tenant` with a `weight`: waiters of different tenants share the key
 *   by weight, in start-time fair queuing (Goyal, Vin and Cheng, 1996). Each
 *   waiter is stamped with a virtual start time, `max(V, F_t)`, where `V` is
 *   the latest start time admitted (it never goes back) and `F_t` is when the
 *   tenant's previous waiter finishes in virtual time (its start plus its
 *   cost divided by its weight); the line is kept sorted by stamp. A tenant
 *   that floods stamps its own waiters ever later and cannot hold back the
 *   others; a tenant that comes back from idle starts at `V`, so it brings
 *   no credit from the time it was away (its share went to the active ones
 *   meanwhile). Callers without a tenant are one tenant of weight 1: those
 *   already in a plain line when its first waiter with an order comes are
 *   stamped then, one after another from `V` (so the head keeps its turn).
 *   A line that empties starts afresh (`V` is 0, every tenant new).
 *
 * The line is kept sorted by (priority, stamp, arrival): a waiter's place is
 * found by binary search, and those it passes in front of are promised no
 * later turn than their `maxWait` (each gets a deadline, after which it
 * gives up with `RateLimitExceeded`).
 *
 * **The head of the line.** A head that does not fit blocks those behind it
 * (strict order, the default). With `passMillis` set, waiters behind it that
 * fit now are admitted before it (the in-process actor does this), for as
 * long as the head has waited less than `passMillis`; from then on it blocks
 * again until it is admitted, so it waits at most `passMillis` plus the time
 * the key takes to make room for it. A passed waiter may be served later
 * than its estimate, so every waiter of such a line is held to its
 * `maxWait`.
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
  /** How long a head that does not fit may be passed by smaller waiters (ms; 0: never). */
  readonly passMillis: number
}

// A tenant of a fair line: when its last waiter finishes in virtual time,
// and how many of its waiters are in line.
interface Tenant {
  finish: number
  waiting: number
}

const plainTenant = ""

/**
 * The line of one bucket.
 *
 * @since 0.2.0
 */
export class Line {
  /** Waiters in the order they are served; `waiters[0]` is the head. */
  readonly waiters: Array<Request.Request> = []
  /** The cost of every waiter in line. */
  cost = 0
  /** When the head can be admitted (valid while the line is not empty). */
  wakeAt = 0
  /** The earliest deadline of a waiter in line (Infinity when none has one). */
  nextDeadline = Infinity
  /** Set once a waiter with an order (a priority, a tenant) joined; cleared when the line empties. */
  ordered = false
  /**
   * A fair line's virtual time: the latest start stamp admitted. It never
   * goes back (a higher priority, or a waiter passing the head, may be
   * admitted out of stamp order), so tenants new to the line are served in
   * the order they came.
   */
  virtual = 0
  /** A fair line's tenants (made with the first tenant). */
  tenants: Map<string, Tenant> | undefined = undefined
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

const priorityOf = (request: Request.Request): number => request.order === undefined ? 0 : request.order.priority

// Whether `a` is served before `b` (both stamped): higher priority, then
// earlier stamp; equal ones keep their arrival order.
const before = (a: Request.Request, b: Request.Request): boolean => {
  const pa = priorityOf(a)
  const pb = priorityOf(b)
  return pa > pb || (pa === pb && a.tag < b.tag)
}

/**
 * Where `request` would join the line: an index into `waiters` (its
 * length: at the back). Stamps the request with its virtual start time
 * (kept only if it joins). A plain waiter in a plain line goes to the back
 * with no search.
 *
 * @example
 * ```ts
 * import * as Line from "./Line.ts"
 * import * as Request from "./Request.ts"
 *
 * declare const line: Line.Line
 * const request = Request.make(Request.Kind.Wait, 1, Infinity)
 * const index = Line.place(line, request) // line.length for a plain line
 * ```
 *
 * @since 0.2.0
 */
export const place = (line: Line, request: Request.Request): number => {
  const waiters = line.waiters
  const order = request.order
  if (order === undefined && !line.ordered) return waiters.length
  if (!line.ordered) stampPlain(line)
  // An ordered line: stamp it (callers without a tenant are one tenant).
  const tenant = line.tenants?.get(order?.tenant ?? plainTenant)
  request.tag = tenant === undefined || tenant.finish < line.virtual ? line.virtual : tenant.finish
  // Binary search for the first waiter it is served before.
  let lo = 0
  let hi = waiters.length
  if (hi > 0 && !before(request, waiters[hi - 1])) return hi
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (before(request, waiters[mid])) hi = mid
    else lo = mid + 1
  }
  return lo
}

// A plain line is about to take its first waiter with an order: the
// waiters already there are the plain tenant's, stamped as they would have
// been had the line been ordered when they came (one after another from the
// line's virtual time), so they count toward that tenant's share.
const stampPlain = (line: Line): void => {
  let finish = line.virtual
  for (const w of line.waiters) {
    w.tag = finish
    finish += w.cost
  }
  line.tenants = new Map([[plainTenant, { finish, waiting: line.waiters.length }]])
}

/**
 * The cost of the waiters ahead of `index` (what a waiter placed there
 * waits behind).
 *
 * @since 0.2.0
 */
export const ahead = (line: Line, index: number): number => {
  const waiters = line.waiters
  if (index >= waiters.length) return line.cost
  let cost = 0
  for (let i = 0; i < index; i++) cost += waiters[i].cost
  return cost
}

/**
 * A waiter that cannot be admitted now asks to join the line; `wait` is how
 * long until its turn (on the caller's clock; `Infinity` when its turn comes
 * only with a release). It is refused at once, with `RateLimitExceeded`, when
 * that is past its `maxWait` (unless its turn depends on a release: then it
 * waits up to `maxWait` for one), or with `Overloaded` when the line is full;
 * otherwise it joins at the back. A reservation is answered at once with its
 * delay and a `cancel`; its place in line is a waiter nobody awaits. With
 * `estimated` (the wait is a shared store's estimate, not a promise: other
 * processes take from the same key), a waiter is held to its `maxWait`: it
 * gives up with `RateLimitExceeded` if its turn has not come by then.
 *
 * @since 0.2.0
 */
export const join = (
  line: Line,
  request: Request.Request,
  index: number,
  wait: number,
  now: number,
  canRelease: boolean,
  answer: (request: Request.Request, answer: Request.Answer) => void,
  leave: (entry: Request.Request) => void,
  estimated = false
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
  const entry = reserving
    ? new Request.Request(Request.Kind.Wait, request.cost, request.maxWait, request.order)
    : request
  entry.since = now
  entry.tag = request.tag
  // A turn that depends on a release, or a wait that is only an estimate (a
  // shared store, where other processes take too), is held to its maxWait.
  if ((onRelease || (estimated && !reserving)) && request.maxWait !== Infinity) {
    setDeadline(line, entry, now + request.maxWait)
  }
  const waiters = line.waiters
  if (index >= waiters.length) {
    waiters.push(entry)
  } else {
    waiters.splice(index, 0, entry)
    // Those it passed in front of were promised their turn within maxWait.
    for (let i = index + 1; i < waiters.length; i++) {
      const w = waiters[i]
      if (w.maxWait !== Infinity && w.deadline === Infinity) setDeadline(line, w, w.since + w.maxWait)
    }
  }
  if (request.order !== undefined || line.ordered) enter(line, entry)
  if (line.owner.passMillis > 0 && entry.maxWait !== Infinity && entry.deadline === Infinity) {
    // A head that is passed may be served later than its estimate (in an
    // ordered line too): hold it to its maxWait.
    setDeadline(line, entry, now + entry.maxWait)
  }
  line.cost += request.cost
  recorder.waiting++
  if (reserving) {
    answer(request, Exit.succeed<Request.Reserved>({ delay: wait, cancel: Effect.sync(() => leave(entry)) }))
  }
}

const setDeadline = (line: Line, w: Request.Request, deadline: number): void => {
  w.deadline = deadline
  if (deadline < line.nextDeadline) line.nextDeadline = deadline
}

// A waiter with an order joins: the line is ordered from now on, and its
// tenant finishes later by its cost over its weight.
const enter = (line: Line, w: Request.Request): void => {
  line.ordered = true
  const tenants = line.tenants ??= new Map()
  const name = w.order?.tenant ?? plainTenant
  const weight = w.order?.tenant === undefined ? 1 : w.order.weight
  let tenant = tenants.get(name)
  if (tenant === undefined) tenants.set(name, tenant = { finish: 0, waiting: 0 })
  tenant.finish = w.tag + w.cost / weight
  tenant.waiting++
  // Tenants with nobody waiting whose finish V has passed are as good as
  // new: forget them now and then, so the map follows the line's size.
  if (tenants.size > 2 * line.waiters.length + 16) {
    for (const [key, t] of tenants) if (t.waiting === 0 && t.finish <= line.virtual) tenants.delete(key)
  }
}

// A waiter leaves an ordered line (admitted, cancelled or refused).
const exit = (line: Line, w: Request.Request, admitted: boolean): void => {
  if (!line.ordered) return
  if (admitted && w.tag > line.virtual) line.virtual = w.tag
  const tenant = line.tenants?.get(w.order?.tenant ?? plainTenant)
  if (tenant !== undefined && tenant.waiting > 0) tenant.waiting--
}

// The line is empty: it is plain again, and fair queuing starts afresh.
const emptied = (line: Line): void => {
  if (line.waiters.length > 0 || !line.ordered) return
  line.ordered = false
  line.virtual = 0
  line.tenants = undefined
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
  exit(line, head, true)
  emptied(line)
}

/**
 * The first `count` waiters were admitted: they leave the line.
 *
 * @since 0.2.0
 */
export const admit = (line: Line, count: number): void => {
  if (count === 0) return
  for (let i = 0; i < count; i++) {
    line.cost -= line.waiters[i].cost
    exit(line, line.waiters[i], true)
  }
  line.waiters.splice(0, count)
  line.owner.recorder.waiting -= count
  emptied(line)
}

/**
 * The waiters at `indices` (ascending) were admitted out of turn (they
 * passed a head that did not fit): they leave the line.
 *
 * @since 0.2.0
 */
export const admitAt = (line: Line, indices: ReadonlyArray<number>): void => {
  if (indices.length === 0) return
  const waiters = line.waiters
  let j = 0
  let k = 0
  for (let i = 0; i < waiters.length; i++) {
    const w = waiters[i]
    if (k < indices.length && indices[k] === i) {
      k++
      line.cost -= w.cost
      exit(line, w, true)
    } else {
      waiters[j++] = w
    }
  }
  waiters.length = j
  line.owner.recorder.waiting -= indices.length
  emptied(line)
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
    else {
      line.cost -= w.cost
      exit(line, w, false)
    }
  }
  line.owner.recorder.waiting -= waiters.length - j
  waiters.length = j
  emptied(line)
  return waiters[0] !== head
}

/**
 * Waiters past their deadline (waiting for a release, or passed by others
 * beyond their `maxWait`) give up: they took nothing. Each is answered
 * `RateLimitExceeded` and leaves the line; its `retryAfter` is `retry` of
 * the cost ahead of it (Infinity when not given). Returns whether the head
 * changed. With `before`, only waiters whose deadline is before `now` go: a
 * turn that comes exactly at the deadline is still waited for (`maxWait` is
 * inclusive), so a caller about to ask for the head's turn keeps those.
 *
 * @since 0.2.0
 */
export const expire = (
  line: Line,
  now: number,
  answer: (request: Request.Request, answer: Request.Answer) => void,
  retry?: (queued: number, cost: number) => number,
  before = false
): boolean => {
  if (before ? line.nextDeadline >= now : line.nextDeadline > now) return false
  const { key, recorder } = line.owner
  let next = Infinity
  let queued = 0
  for (const w of line.waiters) {
    if (w.cancelled) continue
    if (before ? w.deadline < now : w.deadline <= now) {
      w.cancelled = true
      recorder.denied++
      const after = retry === undefined ? Infinity : retry(queued, w.cost)
      answer(
        w,
        Exit.fail(
          new RateLimitExceeded({ key, retryAfter: after === Infinity ? Duration.infinity : Duration.millis(after) })
        )
      )
    } else {
      queued += w.cost
      if (w.deadline < next) next = w.deadline
    }
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
  line.ordered = false
  line.virtual = 0
  line.tenants = undefined
}

/**
 * Whether the head of the line may still be passed at `now` by waiters
 * behind it that fit (see `passMillis`).
 *
 * @since 0.2.0
 */
export const passable = (line: Line, now: number): boolean => {
  const pass = line.owner.passMillis
  return pass > 0 && line.waiters.length > 1 && now - line.waiters[0].since < pass
}
