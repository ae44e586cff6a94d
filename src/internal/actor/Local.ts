/**
 * In-process deciding: the key's state lives in its bucket, and every
 * request runs its operation (`Operations.ts`) through the one interpreter
 * (`operation/Interpreter.ts`) on that state, as a store runs it on the
 * state it keeps. The same function decides on the caller's fiber (the fast
 * path, when the key is quiet) and in the actor's batch pass, so the two
 * cannot drift apart.
 *
 * What only a bucket in process does, it does here, on the same operations:
 * the line of waiters (a waiter is admitted by `Admit`, timed by
 * `WaitTime`), holds for calls over several keys (units held count as taken:
 * the operations carry them), a reconfigure (the bucket has both policies,
 * so usage carries over), and transactions (`tollgate/persistence`).
 *
 * A batch pass is synchronous: one clock read; the requests in mailbox order
 * (a waiter joins the line, anything else is decided at once); then the head
 * of the line is admitted while it fits. The state is committed before any
 * reply is sent (see `Request.flush`). Nothing in the pass yields, so a batch
 * is atomic with respect to every other fiber, and a defect in it hurts only
 * this key: the request that failed, those after it and those in line get
 * `BucketFailed`, and the bucket starts afresh.
 *
 * @since 0.2.0
 */
import { Exit } from "effect"
import { BucketFailed, InvalidRequest } from "../../Errors.ts"
import type { Carry } from "../algorithm/Algorithm.ts"
import * as Block from "../algorithm/Block.ts"
import type { Limit } from "../Limit.ts"
import * as Interpreter from "../operation/Interpreter.ts"
import * as Op from "../operation/Op.ts"
import * as Bucket from "./Bucket.ts"
import * as Line from "./Line.ts"
import * as Monotone from "./Monotone.ts"
import * as Operations from "./Operations.ts"
import * as Request from "./Request.ts"

// Deciding one request of the key now, on its state (`A`: its answer).
type Decide<A> = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  kind: Request.Kind,
  cost: number,
  now: number,
  payload: Request.Payload | undefined
) => A

// Where the key stands for a request decided now.
const queueOf = (bucket: Bucket.Bucket): Operations.Queue => {
  const actor = bucket.actor
  const line = actor === undefined ? 0 : actor.line.cost
  const busy = bucket.held > 0 || (actor !== undefined && (actor.pending > 0 || actor.line.waiters.length > 0))
  return line === 0 && bucket.held === 0 && !busy ? Operations.quiet : { line, held: bucket.held, busy }
}

// Runs one operation on the bucket's state and keeps the state after.
const run = (bucket: Bucket.Bucket, now: number, op: Op.Op): Op.Reply => {
  const [reply, stored] = Interpreter.applyOne(bucket.policy, Bucket.read(bucket), now, op)
  Bucket.write(bucket, stored)
  return reply
}

const answering = (limiter: Bucket.Limiter, policy: Limit): Operations.Answering => ({
  recorder: limiter.recorder,
  policy,
  degraded: false,
  behind: limiter.clock.behind
})

/**
 * Decides a request now against the key's state (the caller's fiber, or
 * the actor's batch pass): its operation through the interpreter, and its
 * answer. Waiters, holds, a reconfigure and transactions are the bucket's
 * own (below).
 *
 * @since 0.3.0
 */
const decide: Decide<Request.Answer> = (limiter, bucket, kind, cost, now, payload) => {
  switch (kind) {
    case Request.Kind.Reconfigure: {
      if (payload !== undefined && "policy" in payload) reconfigure(bucket, payload, now)
      return Exit.void
    }
    case Request.Kind.Hold:
      return hold(limiter, bucket, cost, now)
    case Request.Kind.Transact:
      return transact(limiter, bucket, now, payload)
    case Request.Kind.Delete: {
      if (payload === undefined || !("policy" in payload)) break
      // a policy the key was given is forgotten too (the supervisor sends the
      // key's own), once the delete has said whether the key had state: then
      // it has none, under its own policy
      const answer = interpret(limiter, bucket, kind, cost, now, payload)
      reconfigure(bucket, payload, now)
      Bucket.write(bucket, undefined)
      return answer
    }
    case Request.Kind.Acquire: {
      if (payload === undefined && (bucket.actor === undefined || bucket.actor.line.waiters.length === 0)) {
        const inPlace = Bucket.acquireInPlace(limiter, bucket, cost, now)
        if (inPlace !== undefined) return inPlace
      }
    }
  }
  return interpret(limiter, bucket, kind, cost, now, payload)
}

// A request's operation through the interpreter, and its answer.
const interpret: Decide<Request.Answer> = (limiter, bucket, kind, cost, now, payload) => {
  const definition = Operations.table[kind]
  const op = definition.op!(cost, payload, queueOf(bucket))
  const reply = run(bucket, now, op)
  if (definition.touches) Bucket.touch(limiter, bucket, now)
  return definition.answer(answering(limiter, bucket.policy), op, reply)
}

// A waiter on the caller's fiber or in a batch: admitted at once if nobody
// waits and it fits now (a refused try changes nothing). Returns the
// shaper's delay, or -1 if it has to wait.
const admitAtOnce = (limiter: Bucket.Limiter, bucket: Bucket.Bucket, cost: number, now: number): number => {
  const line = bucket.actor?.line
  if (line !== undefined && line.waiters.length > 0) return -1
  const reply = run(bucket, now, Op.make(Op.Kind.Admit, cost, bucket.held))
  if (!reply.allowed) {
    // a dry run never keeps a caller waiting: it goes now, counted
    if (!Operations.dryRun(limiter.recorder, bucket.policy)) return -1
    Bucket.touch(limiter, bucket, now)
    return 0
  }
  Bucket.touch(limiter, bucket, now)
  limiter.recorder.allowed++
  return Operations.shaping(reply, bucket.policy)
}

// A fresh key is anchored at its first use (as the interpreter anchors it
// for a take): a hold, which takes nothing, anchors it itself.
const anchor = (bucket: Bucket.Bucket, now: number): void => {
  if (Bucket.read(bucket) === undefined) Bucket.write(bucket, bucket.policy.rule.initial(now))
}

// A hold for a call over several keys: decided as a take would be (it may
// not jump the line), but the units are held, not taken from the state. It
// does not anchor a fresh key: the commit follows in the same call, and a
// call refused by another key leaves the key as it found it (as the
// decision on the caller's fiber over quiet keys does).
const hold = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  cost: number,
  now: number
): Request.Answer<typeof Request.Kind.Hold> => {
  const op = Operations.table[Request.Kind.Acquire].op!(cost, undefined, queueOf(bucket))
  // the take's answer, without keeping what it took
  const [reply] = Interpreter.applyOne(bucket.policy, Bucket.read(bucket), now, op)
  Bucket.touch(limiter, bucket, now)
  const d = Operations.decision(op, reply, false, limiter.clock.behind)
  if (!d.allowed) return Exit.succeed({ decision: d, holder: undefined })
  Bucket.hold(bucket, cost)
  return Exit.succeed({ decision: d, holder: bucket })
}

// A hold that waits, held at once if nobody waits and it fits now.
const holdAtOnce = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  request: Request.Request | undefined,
  cost: number,
  now: number
): Request.Answer<typeof Request.Kind.HoldWait> | undefined => {
  const line = bucket.actor?.line
  if (line !== undefined && line.waiters.length > 0) return undefined
  anchor(bucket, now)
  const op = Op.make(Op.Kind.Admit, cost, bucket.held)
  const [reply] = Interpreter.applyOne(bucket.policy, Bucket.read(bucket), now, op)
  if (!reply.allowed) return undefined
  Bucket.touch(limiter, bucket, now)
  return granted(limiter, bucket, request, cost, op, reply)
}

// A hold is granted: its units are held until its call commits or gives them back.
const granted = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  request: Request.Request | undefined,
  cost: number,
  op: Op.Op,
  reply: Op.Reply
): Request.Answer<typeof Request.Kind.HoldWait> => {
  const d = Operations.decision(op, reply, false, limiter.clock.behind)
  Bucket.hold(bucket, cost)
  if (request !== undefined) request.holding = true
  return Exit.succeed({ decision: d, holder: bucket })
}

// A transaction of `tollgate/persistence`: a pure transition over the
// key's state, run in order with the key's other requests.
const transact = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  now: number,
  payload: Request.Payload | undefined
): Request.Answer<typeof Request.Kind.Transact> => {
  if (payload === undefined || !("run" in payload)) return Exit.void
  const stored = Bucket.read(bucket)
  const [reply, state] = payload.run(stored === undefined ? bucket.policy.rule.initial(now) : stored, now)
  Bucket.write(bucket, state)
  Bucket.touch(limiter, bucket, now)
  return Exit.succeed(reply)
}

// The carry rule for algorithms without an exact `reconfigure` of their own
// (and across algorithms): count the whole units available now under the
// old policy, start the new one fresh, and take from it what brings it down
// to the same units ("as-is", capped by the new limit) or the same share of
// its limit ("proportional"). Units out under a concurrency limit stay out.
const carryOver = (from: Limit, state: unknown, next: Limit, now: number, carry: Carry): unknown => {
  const fresh = next.rule.initial(now)
  if (carry === "reset") return fresh
  const available = from.rule.step(state, now, 0).remaining
  // Units in use carry over between concurrency limits: holders still hold them.
  const target = from._tag === "Concurrency" && next._tag === "Concurrency" && carry === "as-is"
    ? next.quota.limit - (from.quota.limit - available)
    : carry === "as-is"
    ? available
    : Math.floor((available / from.quota.limit) * next.quota.limit)
  const take = next.rule.step(fresh, now, 0).remaining - Math.max(0, target)
  if (!(take > 0)) return fresh
  const taken = next.rule.step(fresh, now, take)
  return taken.allowed ? taken.state : fresh
}

// Switches the policy, carrying the usage over as asked (across
// algorithms, in whole units: carryOver); a block goes on under the new policy;
// waiters that can no longer ever be admitted are told so, the others are
// re-timed by the batch pass.
const reconfigure = (bucket: Bucket.Bucket, to: Request.Reconfiguration, now: number): void => {
  const from = bucket.policy
  const next = to.policy
  const stored = Bucket.read(bucket)
  const blocked = stored instanceof Block.Stored ? stored : undefined
  const raw = blocked === undefined ? stored : blocked.state
  const state = raw === undefined ? from.rule.initial(now) : raw
  // a change of rate only (setRate) is carried by the algorithm's own rate rule
  const rated = to.rate !== undefined && next.rule.rate !== undefined && next.algorithm === from.algorithm
    ? next.rule.rate.carry(to.rate, state, now)
    : undefined
  const carried = rated ?? from.rule.reconfigure(state, next.rule, now, to.carry) ??
    carryOver(from, state, next, now, to.carry)
  Bucket.adopt(
    bucket,
    next,
    blocked !== undefined && now < blocked.until ? new Block.Stored(blocked.until, carried) : carried
  )
  const line = bucket.actor?.line
  if (line === undefined) return
  const max = next.rule.maxCost
  Line.dropAbove(line, max, (w) =>
    Request.answer(
      w,
      Exit.fail(
        new InvalidRequest({
          field: "cost",
          value: String(w.cost),
          reason: `exceeds the new limit ${max}: it can never succeed`
        })
      )
    ))
}

// How long until a waiter of `cost` behind `queued` units is admitted (on
// the limiter's clock).
const waitTime = (bucket: Bucket.Bucket, now: number, queued: number, cost: number): number =>
  Interpreter.applyOne(bucket.policy, Bucket.read(bucket), now, Op.make(Op.Kind.WaitTime, cost, queued))[0].retryAfter

// A waiter in a batch: admitted at once, refused, or in line.
const enter = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  line: Line.Line,
  request: Request.Request,
  now: number
) => {
  if (request.kind === Request.Kind.HoldWait) {
    const held = holdAtOnce(limiter, bucket, request, request.cost, now)
    if (held !== undefined) return Request.answer(request, held)
  } else {
    const delay = admitAtOnce(limiter, bucket, request.cost, now)
    if (delay >= 0) return Request.answer(request, Line.admittedAtOnce(request, delay))
  }
  const index = Line.place(line, request)
  const queued = Line.ahead(line, index) + bucket.held
  const wait = Monotone.onClock(waitTime(bucket, now, queued, request.cost), limiter.clock.behind)
  Bucket.touch(limiter, bucket, now)
  Line.join(
    line,
    request,
    index,
    wait,
    now,
    bucket.policy.rule.release !== undefined,
    Request.answer,
    (entry) => Bucket.leave(limiter, bucket, entry, false)
  )
}

// Admits the head of the line while it fits, in order. A hold that waits is
// granted its hold (the units held, not taken). With the head-of-line rule
// set, waiters behind a head that does not fit are admitted if they fit,
// while the head may still be passed (see `Line.passable`).
const admitLine = (limiter: Bucket.Limiter, bucket: Bucket.Bucket, line: Line.Line, now: number): void => {
  const waiters = line.waiters
  let head = 0
  while (head < waiters.length && admitOne(limiter, bucket, waiters[head], now)) head++
  let passed: Array<number> | undefined
  if (head < waiters.length && Line.passable(line, now) && head === 0) {
    passed = []
    for (let i = 1; i < waiters.length; i++) if (admitOne(limiter, bucket, waiters[i], now)) passed.push(i)
  }
  if (head > 0 || (passed !== undefined && passed.length > 0)) {
    if (passed !== undefined) Line.admitAt(line, passed)
    else Line.admit(line, head)
    Bucket.touch(limiter, bucket, now)
  }
  if (waiters.length > 0) {
    let wait = waitTime(bucket, now, bucket.held, waiters[0].cost)
    // While the head may be passed, whoever behind it fits first wakes the actor.
    if (Line.passable(line, now)) {
      for (let i = 1; i < waiters.length; i++) {
        const t = waitTime(bucket, now, bucket.held, waiters[i].cost)
        if (t < wait) wait = t
      }
    }
    line.wakeAt = now + wait
  }
}

// One waiter admitted if it fits now: its answer kept, and its take (or its
// hold) made. False when it does not fit.
const admitOne = (limiter: Bucket.Limiter, bucket: Bucket.Bucket, w: Request.Request, now: number): boolean => {
  const op = Op.make(Op.Kind.Admit, w.cost, bucket.held)
  if (w.kind === Request.Kind.HoldWait) {
    // held, not taken: the state stays as it is
    const [reply] = Interpreter.applyOne(bucket.policy, Bucket.read(bucket), now, op)
    if (!reply.allowed) return false
    Request.answer(w, granted(limiter, bucket, w, w.cost, op, reply))
    return true
  }
  const reply = run(bucket, now, op)
  if (!reply.allowed) return false
  limiter.recorder.allowed++
  Request.answer(w, Line.admitted(reply.delay ?? 0))
  return true
}

// One batch at the limiter's time, synchronously: requests in mailbox order,
// then the head of the line for as long as it fits; the state is committed
// before any reply is sent.
const serve = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  actor: Bucket.Actor,
  batch: ReadonlyArray<Request.Request>
): undefined => {
  const now = limiter.clock.currentTimeMillisUnsafe()
  const from = Request.mark()
  const line = actor.line
  actor.pending -= batch.length
  limiter.recorder.queued -= batch.length
  let i = 0
  // A key deleted and not used after it in the batch has no state: as on the
  // caller's fiber and in a store, it is forgotten once nothing else needs it,
  // so its next use starts from the initial state at that time.
  let deleted = false
  try {
    if (line.waiters.length > 0) Line.removeCancelled(line)
    for (; i < batch.length; i++) {
      const request = batch[i]
      if (request.cancelled) continue
      const kind = request.kind
      if (kind === Request.Kind.Poke) continue
      if (kind === Request.Kind.Wait || kind === Request.Kind.Reserve || kind === Request.Kind.HoldWait) {
        enter(limiter, bucket, line, request, now)
      } else Request.answer(request, decide(limiter, bucket, kind, request.cost, now, request.payload))
      if (kind === Request.Kind.Delete) deleted = true
      else if (kind !== Request.Kind.Peek && kind !== Request.Kind.Get) deleted = false
    }
    if (line.waiters.length > 0) {
      const retry = (queued: number, cost: number) => waitTime(bucket, now, queued + bucket.held, cost)
      // maxWait is inclusive: a waiter whose deadline is now is admitted if
      // its turn is now, and gives up only if it is still in line after that
      Line.expire(line, now, Request.answer, retry, true)
      admitLine(limiter, bucket, line, now)
      // (a head that gave up may let the next one in now)
      if (line.waiters.length > 0 && Line.expire(line, now, Request.answer, retry)) {
        admitLine(limiter, bucket, line, now)
      }
    }
    // (a waiter admitted after the delete used the key: it has state again;
    // units held by a call over several keys are still the key's, as on the
    // caller's fiber)
    if (
      deleted && line.waiters.length === 0 && actor.pending === 0 && bucket.held === 0 &&
      Bucket.read(bucket) === undefined
    ) {
      limiter.forget(bucket.key, bucket)
      Bucket.retire(bucket)
    }
  } catch (defect) {
    // Only this key is hurt: the request that failed, those after it in the
    // batch and those in line get BucketFailed; the bucket starts afresh.
    const exit = Exit.fail(new BucketFailed({ key: bucket.key, defect: String(defect) }))
    for (; i < batch.length; i++) if (batch[i].kind !== Request.Kind.Poke) Request.answer(batch[i], exit)
    Bucket.restart(limiter, bucket, now, exit)
  }
  Request.flush(from)
  return undefined
}

// The caller's fiber, the key quiet: every kind is decided as the actor
// would, a waiter admitted at once if it fits. A key deleted while quiet is
// forgotten at once (nothing is queued for it, nobody waits): it has no state.
const now: Decide<Request.Answer | undefined> = (limiter, bucket, kind, cost, at, payload) => {
  // The commonest request of all, first: the key is quiet here, so nobody
  // waits (as `decide` checks in a batch); no take in place, the interpreter
  if (kind === Request.Kind.Acquire && payload === undefined) {
    return Bucket.acquireInPlace(limiter, bucket, cost, at) ?? interpret(limiter, bucket, kind, cost, at, payload)
  }
  switch (kind) {
    case Request.Kind.Wait: {
      const delay = admitAtOnce(limiter, bucket, cost, at)
      return delay < 0 ? undefined : Line.admitted(delay)
    }
    case Request.Kind.Reserve: {
      const delay = admitAtOnce(limiter, bucket, cost, at)
      return delay < 0 ? undefined : Line.reservedAfter(delay)
    }
    case Request.Kind.HoldWait:
      return holdAtOnce(limiter, bucket, undefined, cost, at)
    case Request.Kind.Poke:
      return undefined
    case Request.Kind.Delete: {
      const answer = decide(limiter, bucket, kind, cost, at, payload)
      if (bucket.held === 0) {
        limiter.forget(bucket.key, bucket)
        Bucket.retire(bucket)
      }
      return answer
    }
    default:
      return decide(limiter, bucket, kind, cost, at, payload)
  }
}

// A request for a key with no bucket that need not start one: its
// operation, run on no state, leaves no state (a peek reads the initial
// state; a reset, a get or a delete find none; a release or an add to a key
// that starts full has nothing to give back to). A reconfigure of such a
// key only changes which policy it starts under. Anything else starts it.
const unstarted = (
  limiter: Bucket.Limiter,
  _: string,
  policy: Limit,
  kind: Request.Kind,
  cost: number
): Request.Answer | undefined => {
  switch (kind) {
    case Request.Kind.Reconfigure:
      return Exit.void
    case Request.Kind.Peek:
    case Request.Kind.Reset:
    case Request.Kind.Release:
    case Request.Kind.Add:
    case Request.Kind.Get:
    case Request.Kind.Delete: {
      const definition = Operations.table[kind]
      const at = limiter.clock.currentTimeMillisUnsafe()
      const op = definition.op!(cost, undefined, Operations.quiet)
      const [reply, stored] = Interpreter.applyOne(policy, undefined, at, op)
      return stored === undefined ? definition.answer(answering(limiter, policy), op, reply) : undefined
    }
    default:
      return undefined
  }
}

const settled = (bucket: Bucket.Bucket, at: number): boolean =>
  at >= Interpreter.settledAt(bucket.policy, Bucket.read(bucket))

/**
 * The in-process backend: the key's state in its bucket.
 *
 * @since 0.2.0
 */
export const backend: Bucket.Backend = {
  now,
  unstarted,
  serve,
  takeOver: () => undefined,
  refund: (limiter, bucket, cost) => {
    if (bucket.policy.rule.release === undefined) return
    run(bucket, limiter.clock.currentTimeMillisUnsafe(), Op.make(Op.Kind.Release, cost))
    Bucket.poke(limiter, bucket)
  },
  settled,
  gathers: false,
  minSleep: 0,
  all: undefined
}

/**
 * What a take over several buckets answers: whether every bucket admitted
 * (and gave its units), and each bucket's reply in the order given (what it
 * took when admitted; what it alone would decide, as `peek` reports it,
 * when not).
 *
 * @since 0.3.0
 */
export interface Taken {
  readonly allowed: boolean
  readonly replies: ReadonlyArray<Op.Reply>
}

// Each bucket's admission of `cost` (`Admit`: a denial changes nothing), or
// undefined when one does not admit.
const admitEach = (buckets: ReadonlyArray<Bucket.Bucket>, now: number, cost: number) => {
  const out: Array<readonly [Op.Reply, unknown]> = []
  const op = Op.make(Op.Kind.Admit, cost)
  for (const bucket of buckets) {
    const result = Interpreter.applyOne(bucket.policy, Bucket.read(bucket), now, op)
    if (!result[0].allowed) return undefined
    out.push(result)
  }
  return out
}

/**
 * A take of `cost` from every bucket at one instant, or from none, decided
 * on the caller's fiber: what the holds and their commit would decide when
 * every key is quiet (nothing queued, nobody in line, nothing held), with
 * nothing between them. In one synchronous section, so atomic with respect
 * to every other request.
 *
 * @since 0.3.0
 */
export const takeAll = (
  limiter: Bucket.Limiter,
  buckets: ReadonlyArray<Bucket.Bucket>,
  cost: number
): Taken => {
  const now = limiter.clock.currentTimeMillisUnsafe()
  const admitted = admitEach(buckets, now, cost)
  for (const bucket of buckets) Bucket.touch(limiter, bucket, now)
  if (admitted === undefined) {
    limiter.recorder.denied++
    const peek = Op.make(Op.Kind.Peek, cost)
    return {
      allowed: false,
      replies: buckets.map((bucket) => Interpreter.applyOne(bucket.policy, Bucket.read(bucket), now, peek)[0])
    }
  }
  buckets.forEach((bucket, i) => Bucket.write(bucket, admitted[i][1]))
  limiter.recorder.allowed += buckets.length
  return { allowed: true, replies: admitted.map(([reply]) => reply) }
}

/**
 * Commits a call over several keys whose every bucket holds `cost`: takes it
 * from each at one instant and drops the holds, or takes nothing (a key
 * reconfigured while it held, say, may no longer admit it) and answers
 * `undefined`, the holds still in place. Each reply counts what other calls
 * still hold against `remaining`.
 *
 * @since 0.3.0
 */
export const commit = (
  limiter: Bucket.Limiter,
  buckets: ReadonlyArray<Bucket.Bucket>,
  cost: number
): ReadonlyArray<Op.Reply> | undefined => {
  const now = limiter.clock.currentTimeMillisUnsafe()
  const admitted = admitEach(buckets, now, cost)
  if (admitted === undefined) return undefined
  const replies = buckets.map((bucket, i) => {
    Bucket.write(bucket, admitted[i][1])
    Bucket.hold(bucket, -cost)
    Bucket.touch(limiter, bucket, now)
    const reply = admitted[i][0]
    return { ...reply, remaining: Math.max(0, reply.remaining - bucket.held) }
  })
  limiter.recorder.allowed += buckets.length
  return replies
}
