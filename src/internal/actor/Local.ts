/**
 * In-process deciding: the key's state lives in its bucket, and every
 * request is one call of the policy's pure step on it. The same functions
 * decide on the caller's fiber (the fast path, when the key is quiet) and in
 * the actor's batch pass, so the two cannot drift apart.
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
import { Duration, Effect, Exit } from "effect"
import type * as Decision from "../../Decision.ts"
import { BucketFailed, InvalidRequest } from "../../Errors.ts"
import type * as Policy from "../../Policy.ts"
import type { Carry, Outcome } from "../algorithm/Algorithm.ts"
import * as Bucket from "./Bucket.ts"
import * as Line from "./Line.ts"
import * as Monotone from "./Monotone.ts"
import * as Request from "./Request.ts"

const millis = (ms: number): Duration.Duration => ms === Infinity ? Duration.infinity : Duration.millis(ms)

/**
 * A `Decision` from an algorithm's outcome, its durations counted on the
 * caller's clock (`behind`: see `Monotone.Now`).
 *
 * @example
 * ```ts
 * import * as TokenBucket from "../algorithm/TokenBucket.ts"
 * import * as Local from "./Local.ts"
 *
 * const c = TokenBucket.config({ capacity: 1, tokens: 1, periodMillis: 1000 })
 * const d = Local.decision(TokenBucket.step(c, TokenBucket.initial(c, 0), 0, 1), 0)
 * ```
 *
 * @since 0.2.0
 */
export const decision = (outcome: Outcome<unknown>, behind: number): Decision.Decision => {
  const d: Decision.Decision = {
    allowed: outcome.allowed,
    remaining: outcome.remaining,
    retryAfter: millis(Monotone.onClock(outcome.retryAfter, behind)),
    resetAfter: millis(Monotone.onClock(outcome.resetAfter, behind)),
    limit: outcome.limit
  }
  return outcome.delay !== undefined && outcome.delay > 0 ? { ...d, delay: millis(outcome.delay) } : d
}

const exitTrue = Exit.succeed(true)
const exitFalse = Exit.succeed(false)

// A request decided now against a key whose line is not empty is denied:
// the waiters come first. It is told when its turn would come behind them.
const behindLine = (rule: Policy.Valid["rule"], state: unknown, now: number, queued: number, cost: number) => ({
  allowed: false,
  state,
  remaining: 0,
  retryAfter: rule.waitTime(state, now, queued, cost),
  resetAfter: rule.waitTime(state, now, queued, rule.maxCost),
  limit: rule.maxCost
})

// What a request of `cost` gets now: the step, or a denial behind the line.
const outcomeOf = (bucket: Bucket.Bucket, state: unknown, now: number, cost: number): Outcome<unknown> => {
  const rule = bucket.policy.rule
  const line = bucket.actor?.line
  return line === undefined || line.waiters.length === 0
    ? rule.step(state, now, cost)
    : behindLine(rule, state, now, line.cost, cost)
}

// Takes `cost` now, or denies: the outcome's state is kept either way (a
// denial usually leaves it as it was, but a sliding log's countBlocked
// records it).
const take = (limiter: Bucket.Limiter, bucket: Bucket.Bucket, cost: number, now: number): Outcome<unknown> => {
  const outcome = outcomeOf(bucket, Bucket.read(bucket), now, cost)
  Bucket.touch(limiter, bucket, now)
  Bucket.write(bucket, outcome.state)
  if (outcome.allowed) limiter.recorder.allowed++
  else limiter.recorder.denied++
  return outcome
}

const cannotRelease = (policy: Policy.Valid): string =>
  `its policy (${policy.rule.name}) has no release: units come back by themselves`

type Decide<K extends Request.Kind> = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  cost: number,
  now: number,
  payload: Request.Reconfiguration | undefined
) => Request.Answer<K>

/**
 * How each decide-now kind is decided against the key's state, on the
 * caller's fiber or in the actor's batch pass alike.
 *
 * @since 0.2.0
 */
export const decide: { readonly [K in Request.DecideKind]: Decide<K> } = {
  [Request.Kind.Acquire]: (limiter, bucket, cost, now) => {
    const rule = bucket.policy.rule
    const line = bucket.actor?.line
    if (rule.takeInPlace !== undefined && (line === undefined || line.waiters.length === 0)) {
      // acquire needs no figures: the algorithm's shortcut writes the
      // admitted state into the bucket's own (no allocation per admission).
      Bucket.touch(limiter, bucket, now)
      if (rule.takeInPlace(Bucket.read(bucket), now, cost)) {
        limiter.recorder.allowed++
        return exitTrue
      }
      limiter.recorder.denied++
      return exitFalse
    }
    const outcome = take(limiter, bucket, cost, now)
    if (!outcome.allowed) return exitFalse
    // A shaper admits now and spaces the caller out: it proceeds after `delay`.
    return outcome.delay !== undefined && outcome.delay > 0
      ? Effect.as(Effect.sleep(Duration.millis(outcome.delay)), true)
      : exitTrue
  },
  [Request.Kind.Consume]: (limiter, bucket, cost, now) =>
    Exit.succeed(decision(take(limiter, bucket, cost, now), limiter.clock.behind)),
  [Request.Kind.Peek]: (limiter, bucket, cost, now) => {
    const state = Bucket.read(bucket)
    const line = bucket.actor?.line
    const outcome = line === undefined || line.waiters.length === 0
      ? bucket.policy.rule.peek(state, now, cost)
      : behindLine(bucket.policy.rule, state, now, line.cost, cost)
    return Exit.succeed(decision(outcome, limiter.clock.behind))
  },
  [Request.Kind.Reset]: (_, bucket, __, now) => {
    Bucket.write(bucket, bucket.policy.rule.initial(now))
    return Exit.void
  },
  [Request.Kind.Release]: (_, bucket, cost, now) => {
    const release = bucket.policy.rule.release
    if (release === undefined) {
      return Exit.fail(
        new InvalidRequest({ field: "key", value: JSON.stringify(bucket.key), reason: cannotRelease(bucket.policy) })
      )
    }
    Bucket.write(bucket, release(Bucket.read(bucket), now, cost))
    return Exit.void
  },
  [Request.Kind.Reconfigure]: (_, bucket, __, now, payload) => {
    // Only ever sent with its payload (RateLimiter.reconfigure).
    if (payload !== undefined) reconfigure(bucket, payload, now)
    return Exit.void
  }
}

// A waiter on the caller's fiber or in a batch: admitted at once if nobody
// waits and it fits now (a refused try changes nothing). Returns the
// shaper's delay, or -1 if it has to wait.
const admitAtOnce = (limiter: Bucket.Limiter, bucket: Bucket.Bucket, cost: number, now: number): number => {
  const line = bucket.actor?.line
  if (line !== undefined && line.waiters.length > 0) return -1
  const outcome = bucket.policy.rule.step(Bucket.read(bucket), now, cost)
  if (!outcome.allowed) return -1
  Bucket.write(bucket, outcome.state)
  Bucket.touch(limiter, bucket, now)
  limiter.recorder.allowed++
  return outcome.delay ?? 0
}

type Now<K extends Request.Kind> = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  cost: number,
  now: number,
  payload: Request.Reconfiguration | undefined
) => Request.Answer<K> | undefined

// The caller's fiber, the key quiet: every kind is decided as the actor
// would, a waiter admitted at once if it fits.
const now: { readonly [K in Request.Kind]: Now<K> } = {
  ...decide,
  [Request.Kind.Wait]: (limiter, bucket, cost, now) => {
    const delay = admitAtOnce(limiter, bucket, cost, now)
    return delay < 0 ? undefined : Line.admitted(delay)
  },
  [Request.Kind.Reserve]: (limiter, bucket, cost, now) => {
    const delay = admitAtOnce(limiter, bucket, cost, now)
    return delay < 0 ? undefined : Line.reservedAfter(delay)
  },
  [Request.Kind.Poke]: () => undefined
}

// The carry rule for algorithms without an exact `reconfigure` of their own
// (and across algorithms): count the whole units available now under the
// old policy, start the new one fresh, and take from it what brings it down
// to the same units ("as-is", capped by the new limit) or the same share of
// its limit ("proportional"). Units out under a concurrency limit stay out.
const carryOver = (from: Policy.Valid, state: unknown, next: Policy.Valid, now: number, carry: Carry): unknown => {
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

// Switches the policy, carrying the usage over as asked (a different
// algorithm always starts afresh); waiters that can no longer ever be
// admitted are told so, the others are re-timed by the batch pass.
const reconfigure = (bucket: Bucket.Bucket, to: Request.Reconfiguration, now: number): void => {
  const from = bucket.policy
  const next = to.policy
  const state = Bucket.read(bucket)
  Bucket.write(
    bucket,
    from.rule.reconfigure(state, next.rule, now, to.carry) ?? carryOver(from, state, next, now, to.carry)
  )
  bucket.policy = next
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

// A waiter in a batch: admitted at once, refused, or in line.
const enter = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  line: Line.Line,
  request: Request.Request,
  now: number
) => {
  const delay = admitAtOnce(limiter, bucket, request.cost, now)
  if (delay >= 0) return Request.answer(request, Line.admittedAtOnce(request, delay))
  const rule = bucket.policy.rule
  const wait = Monotone.onClock(rule.waitTime(Bucket.read(bucket), now, line.cost, request.cost), limiter.clock.behind)
  Bucket.touch(limiter, bucket, now)
  Line.join(
    line,
    request,
    wait,
    now,
    rule.release !== undefined,
    Request.answer,
    (entry) => Bucket.leave(limiter, bucket, entry, false)
  )
}

// Admits the head of the line while it fits, in arrival order.
const admitLine = (limiter: Bucket.Limiter, bucket: Bucket.Bucket, line: Line.Line, now: number): void => {
  const rule = bucket.policy.rule
  let state = Bucket.read(bucket)
  let head = 0
  while (head < line.waiters.length) {
    const w = line.waiters[head]
    const outcome = rule.step(state, now, w.cost)
    if (!outcome.allowed) break
    state = outcome.state
    limiter.recorder.allowed++
    head++
    Request.answer(w, Line.admitted(outcome.delay ?? 0))
  }
  if (head > 0) {
    Bucket.write(bucket, state)
    Line.admit(line, head)
    Bucket.touch(limiter, bucket, now)
  }
  if (line.waiters.length > 0) line.wakeAt = now + rule.waitTime(state, now, 0, line.waiters[0].cost)
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
  try {
    if (line.waiters.length > 0) Line.removeCancelled(line)
    for (; i < batch.length; i++) {
      const request = batch[i]
      if (request.cancelled) continue
      const kind = request.kind
      if (kind === Request.Kind.Poke) continue
      if (kind === Request.Kind.Wait || kind === Request.Kind.Reserve) enter(limiter, bucket, line, request, now)
      else Request.answer(request, decide[kind](limiter, bucket, request.cost, now, request.payload))
    }
    if (line.waiters.length > 0) {
      Line.expire(line, now, Request.answer)
      admitLine(limiter, bucket, line, now)
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

type Unstarted<K extends Request.Kind> = (
  limiter: Bucket.Limiter,
  policy: Policy.Valid,
  cost: number
) => Request.Answer<K> | undefined

const start = () => undefined

// A key with no bucket is in its policy's initial state: peek reads it;
// reset has nothing to forget; reconfigure only changes which policy the key
// starts under. A release starts no bucket when the initial state is settled
// (a fresh key holds all a release could give back), and starts one when it
// is not (a token bucket with `initialTokens` below capacity), so the units
// go where a bucket would have them.
const unstarted: { readonly [K in Request.Kind]: Unstarted<K> } = {
  [Request.Kind.Acquire]: start,
  [Request.Kind.Consume]: start,
  [Request.Kind.Peek]: (limiter, policy, cost) => {
    const at = limiter.clock.currentTimeMillisUnsafe()
    return Exit.succeed(decision(policy.rule.peek(policy.rule.initial(at), at, cost), limiter.clock.behind))
  },
  [Request.Kind.Reset]: () => Exit.void,
  [Request.Kind.Release]: (limiter, policy) => {
    if (policy.rule.release === undefined) {
      return Exit.fail(new InvalidRequest({ field: "key", value: "(new key)", reason: cannotRelease(policy) }))
    }
    const at = limiter.clock.currentTimeMillisUnsafe()
    return at >= policy.rule.settledAt(policy.rule.initial(at)) ? Exit.void : undefined
  },
  [Request.Kind.Reconfigure]: () => Exit.void,
  [Request.Kind.Wait]: start,
  [Request.Kind.Reserve]: start,
  [Request.Kind.Poke]: start
}

/**
 * The in-process backend: the key's state in its bucket.
 *
 * @since 0.2.0
 */
export const backend: Bucket.Backend = {
  initial: (policy, at) => policy.rule.initial(at),
  now: (limiter, bucket, kind, cost, at, payload) => now[kind](limiter, bucket, cost, at, payload),
  unstarted: (limiter, _, policy, kind, cost) => unstarted[kind](limiter, policy, cost),
  serve,
  takeOver: () => undefined,
  refund: (limiter, bucket, cost) => {
    const release = bucket.policy.rule.release
    if (release === undefined) return
    Bucket.write(bucket, release(Bucket.read(bucket), limiter.clock.currentTimeMillisUnsafe(), cost))
    Bucket.poke(limiter, bucket)
  },
  settled: (bucket, at) => at >= bucket.policy.rule.settledAt(Bucket.read(bucket)),
  gathers: false,
  minSleep: 0
}
