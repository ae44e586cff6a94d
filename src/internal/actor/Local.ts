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
import { Duration, Effect, Exit, Option } from "effect"
import type * as Decision from "../../Decision.ts"
import { BucketFailed, InvalidRequest } from "../../Errors.ts"
import type * as Policy from "../../Policy.ts"
import type { Carry, Outcome, Rule } from "../algorithm/Algorithm.ts"
import * as Block from "../algorithm/Block.ts"
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

// A refusal a dry-run policy lets through: admitted, flagged, and what it
// would have been told (when it could have been admitted) kept.
const letThrough = (d: Decision.Decision): Decision.Decision => {
  const { delay: _, ...rest } = d
  return { ...rest, allowed: true, dryRun: true }
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

/**
 * What a request of `cost` gets against `state` when `held` units are held
 * for calls over several keys (see `Multi`): they count as taken. It is
 * admitted only if the held units and its own cost both fit; it takes only
 * its own. A denial that the held units cause changes nothing, and says
 * when the request would fit behind them.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "../algorithm/TokenBucket.ts"
 * import { bind } from "../algorithm/Algorithm.ts"
 * import * as Local from "./Local.ts"
 *
 * const rule = bind(TokenBucket.algorithm, TokenBucket.config({ capacity: 2, tokens: 1, periodMillis: 1000 }))
 * Local.fit(rule, rule.initial(0), 0, 1, 1).allowed // true: 1 held + 1 fit in 2
 * Local.fit(rule, rule.initial(0), 0, 2, 1).allowed // false, retryAfter 1000
 * ```
 *
 * @since 0.2.0
 */
export const fit = (rule: Policy.Valid["rule"], state: unknown, now: number, cost: number, held: number) => {
  if (held === 0) return rule.step(state, now, cost)
  const both = rule.step(state, now, held + cost)
  if (!both.allowed) {
    const behind = behindLine(rule, state, now, held, cost)
    return { ...behind, remaining: Math.max(0, both.remaining - held) }
  }
  const own = rule.step(state, now, cost)
  return own.allowed ? { ...own, remaining: Math.max(0, own.remaining - held) } : own
}

const waiting = (bucket: Bucket.Bucket): boolean => {
  const line = bucket.actor?.line
  return line !== undefined && line.waiters.length > 0
}

// What a request of `cost` gets now: the step, or a denial behind the line.
const outcomeOf = (bucket: Bucket.Bucket, rule: Rule, state: unknown, now: number, cost: number): Outcome<unknown> => {
  const line = bucket.actor?.line
  return line === undefined || line.waiters.length === 0
    ? fit(rule, state, now, cost, bucket.held)
    : behindLine(rule, state, now, line.cost + bucket.held, cost)
}

// A block, in-process: the bucket runs its policy with the rule blocked
// until then (`Block.rule`), so a key never blocked pays nothing. The policy
// underneath is kept to go back to.
interface BlockedPolicy {
  readonly unblocked: Policy.Valid
}
const unblocked = (policy: Policy.Valid): Policy.Valid => (policy as Partial<BlockedPolicy>).unblocked ?? policy
const blockUntil = (bucket: Bucket.Bucket, until: number): void => {
  const base = unblocked(bucket.policy)
  const blocked: Policy.Valid & BlockedPolicy = Object.freeze({
    ...base,
    rule: Block.rule(base.rule, until),
    unblocked: base
  })
  bucket.policy = blocked
}
const unblock = (bucket: Bucket.Bucket): void => {
  bucket.policy = unblocked(bucket.policy)
}

// A refusal by the policy itself (not by a block, nor behind the line)
// blocks the key for the policy's blockDuration (rate-limiter-flexible):
// what the caller is told is then the block's.
const refused = (bucket: Bucket.Bucket, outcome: Outcome<unknown>, now: number, cost: number): Outcome<unknown> => {
  const policy = bucket.policy
  if (policy.blockMillis > 0 && !waiting(bucket) && !(now < Block.until(policy.rule))) {
    const until = now + policy.blockMillis
    blockUntil(bucket, until)
    return Block.outcome(unblocked(policy).rule, outcome.state, now, until, cost)
  }
  return outcome
}

// The rule a request runs: the key's, or with the window its call gives
// (`Bucket.refuse` has checked the policy has one).
const ruleOf = (bucket: Bucket.Bucket, payload: Request.Payload | undefined): Rule =>
  payload !== undefined && "window" in payload
    ? bucket.policy.rule.withWindow(payload.window) ?? bucket.policy.rule
    : bucket.policy.rule

// Takes `cost` now, or denies: the outcome's state is kept either way (a
// denial usually leaves it as it was, but a sliding log's countBlocked
// records it).
const take = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  cost: number,
  now: number,
  rule: Rule = bucket.policy.rule
): Outcome<unknown> => {
  const outcome = outcomeOf(bucket, rule, Bucket.read(bucket), now, cost)
  Bucket.touch(limiter, bucket, now)
  Bucket.write(bucket, outcome.state)
  if (outcome.allowed) {
    limiter.recorder.allowed++
    return outcome
  }
  limiter.recorder.denied++
  return refused(bucket, outcome, now, cost)
}

// The key as a unit request sees it: the figures every operation that
// changes a key without deciding one answers with (Bucket4j's verbose
// results: the state after the call).
const standing = (limiter: Bucket.Limiter, bucket: Bucket.Bucket, now: number): Decision.Decision =>
  decision(bucket.policy.rule.peek(Bucket.read(bucket), now, 1), limiter.clock.behind)

const cannotRelease = (policy: Policy.Valid): string =>
  `its policy (${policy.rule.name}) has no release: units come back by themselves`

const cannotHoldMore = (policy: Policy.Valid): string =>
  `its policy (${policy.rule.name}) cannot hold more than its limit`

type Decide<K extends Request.Kind> = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  cost: number,
  now: number,
  payload: Request.Payload | undefined
) => Request.Answer<K>

const reconfigurationOf = (payload: Request.Payload | undefined): Request.Reconfiguration | undefined =>
  payload !== undefined && "policy" in payload ? payload : undefined

/**
 * How each decide-now kind is decided against the key's state, on the
 * caller's fiber or in the actor's batch pass alike.
 *
 * @since 0.2.0
 */
export const decide: { readonly [K in Request.DecideKind]: Decide<K> } = {
  [Request.Kind.Acquire]: (limiter, bucket, cost, now, payload) => {
    const rule = bucket.policy.rule
    if (rule.takeInPlace !== undefined && payload === undefined && bucket.held === 0 && !waiting(bucket)) {
      // acquire needs no figures: the algorithm's shortcut writes the
      // admitted state into the bucket's own (no allocation per admission).
      Bucket.touch(limiter, bucket, now)
      if (rule.takeInPlace(Bucket.read(bucket), now, cost)) {
        limiter.recorder.allowed++
        return exitTrue
      }
      limiter.recorder.denied++
      // a denial: a block may start, and a dry run lets it through
      if (bucket.policy.blockMillis > 0) refused(bucket, rule.step(Bucket.read(bucket), now, cost), now, cost)
      return dryRun(limiter, bucket.policy) ? exitTrue : exitFalse
    }
    const outcome = take(limiter, bucket, cost, now, ruleOf(bucket, payload))
    if (!outcome.allowed) return dryRun(limiter, bucket.policy) ? exitTrue : exitFalse
    // A shaper admits now and spaces the caller out: it proceeds after `delay`.
    return outcome.delay !== undefined && outcome.delay > 0 && !bucket.policy.dryRun
      ? Effect.as(Effect.sleep(Duration.millis(outcome.delay)), true)
      : exitTrue
  },
  [Request.Kind.Consume]: (limiter, bucket, cost, now, payload) => {
    const d = decision(take(limiter, bucket, cost, now, ruleOf(bucket, payload)), limiter.clock.behind)
    return Exit.succeed(!d.allowed && dryRun(limiter, bucket.policy) ? letThrough(d) : d)
  },
  [Request.Kind.Peek]: (limiter, bucket, cost, now) => {
    const state = Bucket.read(bucket)
    const line = bucket.actor?.line
    const rule = bucket.policy.rule
    const outcome = line !== undefined && line.waiters.length > 0
      ? behindLine(rule, state, now, line.cost + bucket.held, cost)
      : bucket.held === 0
      ? rule.peek(state, now, cost)
      : { ...fit(rule, state, now, cost, bucket.held), remaining: rule.peek(state, now, cost).remaining }
    return Exit.succeed(decision(outcome, limiter.clock.behind))
  },
  [Request.Kind.Reset]: (_, bucket, __, now) => {
    unblock(bucket)
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
    const to = reconfigurationOf(payload)
    if (to !== undefined) reconfigure(bucket, to, now)
    return Exit.void
  },
  [Request.Kind.Force]: (limiter, bucket, cost, now, payload) => {
    const rule = ruleOf(bucket, payload)
    const forced = rule.force(Bucket.read(bucket), now, cost)
    Bucket.write(bucket, forced)
    Bucket.touch(limiter, bucket, now)
    // the debt: how long until a request of no units is admitted again
    const within = rule.step(forced, now, 0)
    // (a shaper's delay for no units is no debt: only the debt's wait is told)
    const d = decision({ ...within, allowed: true, retryAfter: 0, delay: undefined }, limiter.clock.behind)
    return Exit.succeed(
      within.allowed ? d : { ...d, delay: millis(Monotone.onClock(within.retryAfter, limiter.clock.behind)) }
    )
  },
  [Request.Kind.Add]: (limiter, bucket, cost, now) => {
    const release = bucket.policy.rule.release
    if (release === undefined) {
      return Exit.fail(
        new InvalidRequest({ field: "key", value: JSON.stringify(bucket.key), reason: cannotRelease(bucket.policy) })
      )
    }
    Bucket.write(bucket, release(Bucket.read(bucket), now, cost))
    return Exit.succeed(standing(limiter, bucket, now))
  },
  [Request.Kind.ForceAdd]: (limiter, bucket, cost, now) => {
    const forceAdd = bucket.policy.rule.forceAdd
    if (forceAdd === undefined) {
      return Exit.fail(
        new InvalidRequest({ field: "key", value: JSON.stringify(bucket.key), reason: cannotHoldMore(bucket.policy) })
      )
    }
    Bucket.write(bucket, forceAdd(Bucket.read(bucket), now, cost))
    Bucket.touch(limiter, bucket, now)
    return Exit.succeed(standing(limiter, bucket, now))
  },
  [Request.Kind.Fill]: (limiter, bucket, _, now) => {
    unblock(bucket)
    Bucket.write(bucket, bucket.policy.rule.full(now))
    return Exit.succeed(standing(limiter, bucket, now))
  },
  [Request.Kind.TakeUpTo]: (limiter, bucket, cost, now) => {
    const rule = bucket.policy.rule
    const state = Bucket.read(bucket)
    Bucket.touch(limiter, bucket, now)
    // nobody jumps the line: behind waiters, nothing is taken
    const { outcome, taken } = waiting(bucket)
      ? { outcome: outcomeOf(bucket, rule, state, now, 1), taken: 0 }
      : rule.takeUpTo(state, now, cost)
    if (taken > 0) {
      Bucket.write(bucket, outcome.state)
      limiter.recorder.allowed++
    } else limiter.recorder.denied++
    return Exit.succeed({ ...decision(outcome, limiter.clock.behind), taken })
  },
  [Request.Kind.Get]: (limiter, bucket, _, now) =>
    Exit.succeed(
      Bucket.settled(limiter, bucket, now) ? Option.none() : Option.some(standing(limiter, bucket, now))
    ),
  [Request.Kind.Set]: (limiter, bucket, cost, now, payload) => {
    unblock(bucket)
    const rule = ruleOf(bucket, payload)
    Bucket.write(bucket, rule.force(rule.full(now), now, cost))
    Bucket.touch(limiter, bucket, now)
    return Exit.succeed(standing(limiter, bucket, now))
  },
  [Request.Kind.Delete]: (limiter, bucket, _, now, payload) => {
    const had = !Bucket.settled(limiter, bucket, now)
    unblock(bucket)
    // the policy the key was given is forgotten too (the supervisor sends its own)
    const to = reconfigurationOf(payload)
    if (to !== undefined) reconfigure(bucket, to, now)
    Bucket.write(bucket, bucket.policy.rule.initial(now))
    return Exit.succeed(had)
  },
  [Request.Kind.Block]: (limiter, bucket, _, now, payload) => {
    const window = payload !== undefined && "window" in payload ? payload.window : 0
    blockUntil(bucket, now + window)
    Bucket.touch(limiter, bucket, now)
    return Exit.succeed(standing(limiter, bucket, now))
  },
  [Request.Kind.Hold]: (limiter, bucket, cost, now) => hold(limiter, bucket, cost, now),
  [Request.Kind.Feedback]: (_, bucket, __, now, payload) => {
    const adapt = bucket.policy.rule.adapt
    if (adapt === undefined) {
      return Exit.fail(
        new InvalidRequest({ field: "key", value: JSON.stringify(bucket.key), reason: fixedRate(bucket.policy) })
      )
    }
    // Only ever sent with its signal (RateLimiter.feedback).
    if (payload !== undefined && "signal" in payload) {
      Bucket.write(bucket, adapt(Bucket.read(bucket), now, payload.signal, payload.millis))
    }
    return Exit.void
  },
  [Request.Kind.Transact]: (limiter, bucket, __, now, payload) => {
    if (payload === undefined || !("run" in payload)) return Exit.void
    const [reply, state] = payload.run(Bucket.read(bucket), now)
    Bucket.write(bucket, state)
    Bucket.touch(limiter, bucket, now)
    return Exit.succeed(reply)
  }
}

const fixedRate = (policy: Policy.Valid): string =>
  `its policy (${policy.rule.name}) has a fixed rate: feedback needs Policy.adaptive`

const noHold: Request.Held = {
  decision: { allowed: false, remaining: 0, retryAfter: Duration.zero, resetAfter: Duration.zero, limit: 0 },
  holder: undefined
}

// A hold for a call over several keys, decided now: as a take would be (it
// may not jump the line), but the units are held, not taken from the state.
const hold = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  cost: number,
  now: number
): Request.Answer<typeof Request.Kind.Hold> => {
  const outcome = outcomeOf(bucket, bucket.policy.rule, Bucket.read(bucket), now, cost)
  Bucket.touch(limiter, bucket, now)
  const d = decision(outcome, limiter.clock.behind)
  if (!outcome.allowed) return Exit.succeed(d === noHold.decision ? noHold : { decision: d, holder: undefined })
  bucket.held += cost
  return Exit.succeed({ decision: d, holder: bucket })
}

// A dry-run policy lets a refusal through, counted (nginx's limit_req_dry_run).
const dryRun = (limiter: Bucket.Limiter, policy: Policy.Valid): boolean => {
  if (!policy.dryRun) return false
  limiter.recorder.dryRun++
  return true
}

// A waiter on the caller's fiber or in a batch: admitted at once if nobody
// waits and it fits now (a refused try changes nothing). Returns the
// shaper's delay, or -1 if it has to wait.
const admitAtOnce = (limiter: Bucket.Limiter, bucket: Bucket.Bucket, cost: number, now: number): number => {
  const line = bucket.actor?.line
  if (line !== undefined && line.waiters.length > 0) return -1
  const outcome = fit(bucket.policy.rule, Bucket.read(bucket), now, cost, bucket.held)
  if (!outcome.allowed) {
    // a dry run never keeps a caller waiting: it goes now, counted
    if (!dryRun(limiter, bucket.policy)) return -1
    Bucket.touch(limiter, bucket, now)
    return 0
  }
  Bucket.write(bucket, outcome.state)
  Bucket.touch(limiter, bucket, now)
  limiter.recorder.allowed++
  return bucket.policy.dryRun ? 0 : outcome.delay ?? 0
}

// A hold that waits, admitted at once if nobody waits and it fits now.
const holdAtOnce = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  request: Request.Request | undefined,
  cost: number,
  now: number
): Request.Answer<typeof Request.Kind.HoldWait> | undefined => {
  const line = bucket.actor?.line
  if (line !== undefined && line.waiters.length > 0) return undefined
  const outcome = fit(bucket.policy.rule, Bucket.read(bucket), now, cost, bucket.held)
  if (!outcome.allowed) return undefined
  Bucket.touch(limiter, bucket, now)
  return granted(limiter, bucket, request, cost, outcome)
}

// A hold is granted: its units are held until its call commits or gives them back.
const granted = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  request: Request.Request | undefined,
  cost: number,
  outcome: Outcome<unknown>
): Request.Answer<typeof Request.Kind.HoldWait> => {
  bucket.held += cost
  if (request !== undefined) request.holding = true
  return Exit.succeed({ decision: decision(outcome, limiter.clock.behind), holder: bucket })
}

type Now<K extends Request.Kind> = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  cost: number,
  now: number,
  payload: Request.Payload | undefined
) => Request.Answer<K> | undefined

// The caller's fiber, the key quiet: every kind is decided as the actor
// would, a waiter admitted at once if it fits. A key deleted while quiet is
// forgotten at once (nothing is queued for it, nobody waits): it has no state.
const now: { readonly [K in Request.Kind]: Now<K> } = {
  ...decide,
  [Request.Kind.Delete]: (limiter, bucket, _, now) => {
    const had = !Bucket.settled(limiter, bucket, now)
    limiter.forget(bucket.key, bucket)
    Bucket.retire(bucket)
    return Exit.succeed(had)
  },
  [Request.Kind.Wait]: (limiter, bucket, cost, now) => {
    const delay = admitAtOnce(limiter, bucket, cost, now)
    return delay < 0 ? undefined : Line.admitted(delay)
  },
  [Request.Kind.Reserve]: (limiter, bucket, cost, now) => {
    const delay = admitAtOnce(limiter, bucket, cost, now)
    return delay < 0 ? undefined : Line.reservedAfter(delay)
  },
  [Request.Kind.Poke]: () => undefined,
  [Request.Kind.HoldWait]: (limiter, bucket, cost, now) => holdAtOnce(limiter, bucket, undefined, cost, now)
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
  const from = unblocked(bucket.policy)
  const until = Block.until(bucket.policy.rule)
  const next = to.policy
  const state = Bucket.read(bucket)
  // a change of rate only (setRate) is carried by the algorithm's own rate rule
  const rated = to.rate !== undefined && next.rule.rate !== undefined && next.algorithm === from.algorithm
    ? next.rule.rate.carry(to.rate, state, now)
    : undefined
  Bucket.write(
    bucket,
    rated ?? from.rule.reconfigure(state, next.rule, now, to.carry) ?? carryOver(from, state, next, now, to.carry)
  )
  bucket.policy = next
  // a block goes on under the new policy
  if (now < until) blockUntil(bucket, until)
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
  if (request.kind === Request.Kind.HoldWait) {
    const held = holdAtOnce(limiter, bucket, request, request.cost, now)
    if (held !== undefined) return Request.answer(request, held)
  } else {
    const delay = admitAtOnce(limiter, bucket, request.cost, now)
    if (delay >= 0) return Request.answer(request, Line.admittedAtOnce(request, delay))
  }
  const rule = bucket.policy.rule
  const index = Line.place(line, request)
  const queued = Line.ahead(line, index) + bucket.held
  const wait = Monotone.onClock(rule.waitTime(Bucket.read(bucket), now, queued, request.cost), limiter.clock.behind)
  Bucket.touch(limiter, bucket, now)
  Line.join(
    line,
    request,
    index,
    wait,
    now,
    rule.release !== undefined,
    Request.answer,
    (entry) => Bucket.leave(limiter, bucket, entry, false)
  )
}

// Admits the head of the line while it fits, in order. A hold that waits is
// granted its hold (the units held, not taken). With the head-of-line rule
// set, waiters behind a head that does not fit are admitted if they fit,
// while the head may still be passed (see `Line.passable`).
const admitLine = (limiter: Bucket.Limiter, bucket: Bucket.Bucket, line: Line.Line, now: number): void => {
  const rule = bucket.policy.rule
  const waiters = line.waiters
  let state = Bucket.read(bucket)
  let head = 0
  while (head < waiters.length) {
    const w = waiters[head]
    const outcome = fit(rule, state, now, w.cost, bucket.held)
    if (!outcome.allowed) break
    state = admitOne(limiter, bucket, w, state, outcome)
    head++
  }
  let passed: Array<number> | undefined
  if (head < waiters.length && Line.passable(line, now) && head === 0) {
    passed = []
    for (let i = 1; i < waiters.length; i++) {
      const w = waiters[i]
      const outcome = fit(rule, state, now, w.cost, bucket.held)
      if (!outcome.allowed) continue
      state = admitOne(limiter, bucket, w, state, outcome)
      passed.push(i)
    }
  }
  if (head > 0 || (passed !== undefined && passed.length > 0)) {
    Bucket.write(bucket, state)
    if (passed !== undefined) Line.admitAt(line, passed)
    else Line.admit(line, head)
    Bucket.touch(limiter, bucket, now)
  }
  if (waiters.length > 0) {
    let wait = rule.waitTime(state, now, bucket.held, waiters[0].cost)
    // While the head may be passed, whoever behind it fits first wakes the actor.
    if (Line.passable(line, now)) {
      for (let i = 1; i < waiters.length; i++) {
        const t = rule.waitTime(state, now, bucket.held, waiters[i].cost)
        if (t < wait) wait = t
      }
    }
    line.wakeAt = now + wait
  }
}

// One waiter admitted: its answer kept, and the state it leaves.
const admitOne = (
  limiter: Bucket.Limiter,
  bucket: Bucket.Bucket,
  w: Request.Request,
  state: unknown,
  outcome: Outcome<unknown>
): unknown => {
  if (w.kind === Request.Kind.HoldWait) {
    // held, not taken: the state stays as it is
    Request.answer(w, granted(limiter, bucket, w, w.cost, outcome))
    return state
  }
  limiter.recorder.allowed++
  Request.answer(w, Line.admitted(outcome.delay ?? 0))
  return outcome.state
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
      } else Request.answer(request, decide[kind](limiter, bucket, request.cost, now, request.payload))
      if (kind === Request.Kind.Delete) deleted = true
      else if (kind !== Request.Kind.Peek && kind !== Request.Kind.Get) deleted = false
    }
    if (line.waiters.length > 0) {
      Line.expire(
        line,
        now,
        Request.answer,
        (queued, cost) => bucket.policy.rule.waitTime(Bucket.read(bucket), now, queued + bucket.held, cost)
      )
      admitLine(limiter, bucket, line, now)
    }
    if (deleted && line.waiters.length === 0 && actor.pending === 0) {
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

type Unstarted<K extends Request.Kind> = (
  limiter: Bucket.Limiter,
  policy: Policy.Valid,
  cost: number
) => Request.Answer<K> | undefined

const start = () => undefined

// A release, or an add, starts no bucket when the key's initial state is
// settled (a fresh key holds all a release could give back), and starts one
// when it is not (a token bucket with `initialTokens` below capacity), so the
// units go where a bucket would have them.
const releaseUnstarted = (limiter: Bucket.Limiter, policy: Policy.Valid) => {
  if (policy.rule.release === undefined) {
    return Exit.fail(new InvalidRequest({ field: "key", value: "(new key)", reason: cannotRelease(policy) }))
  }
  const at = limiter.clock.currentTimeMillisUnsafe()
  return at >= policy.rule.settledAt(policy.rule.initial(at)) ? Exit.void : undefined
}

// A key with no bucket is in its policy's initial state: peek reads it;
// reset has nothing to forget; reconfigure only changes which policy the key
// starts under; get and delete find no state. A forced add the policy cannot
// hold is refused before a bucket starts.
const unstarted: { readonly [K in Request.Kind]: Unstarted<K> } = {
  [Request.Kind.Acquire]: start,
  [Request.Kind.Consume]: start,
  [Request.Kind.Peek]: (limiter, policy, cost) => {
    const at = limiter.clock.currentTimeMillisUnsafe()
    return Exit.succeed(decision(policy.rule.peek(policy.rule.initial(at), at, cost), limiter.clock.behind))
  },
  [Request.Kind.Reset]: () => Exit.void,
  [Request.Kind.Release]: releaseUnstarted,
  [Request.Kind.Reconfigure]: () => Exit.void,
  [Request.Kind.Wait]: start,
  [Request.Kind.Reserve]: start,
  [Request.Kind.Poke]: start,
  [Request.Kind.Force]: start,
  [Request.Kind.Add]: (limiter, policy) => {
    if (policy.rule.release === undefined) {
      return Exit.fail(new InvalidRequest({ field: "key", value: "(new key)", reason: cannotRelease(policy) }))
    }
    const at = limiter.clock.currentTimeMillisUnsafe()
    const fresh = policy.rule.initial(at)
    // as for a release; a fresh key that starts full is told how it stands
    return at >= policy.rule.settledAt(fresh)
      ? Exit.succeed(decision(policy.rule.peek(fresh, at, 1), limiter.clock.behind))
      : undefined
  },
  [Request.Kind.ForceAdd]: (_, policy) =>
    policy.rule.forceAdd === undefined
      ? Exit.fail(new InvalidRequest({ field: "key", value: "(new key)", reason: cannotHoldMore(policy) }))
      : undefined,
  [Request.Kind.Fill]: start,
  [Request.Kind.TakeUpTo]: start,
  [Request.Kind.Get]: () => Exit.succeed(Option.none()),
  [Request.Kind.Set]: start,
  [Request.Kind.Delete]: () => Exit.succeed(false),
  [Request.Kind.Block]: start,
  [Request.Kind.Hold]: start,
  [Request.Kind.HoldWait]: start,
  [Request.Kind.Feedback]: (_, policy) =>
    policy.rule.adapt === undefined
      ? Exit.fail(new InvalidRequest({ field: "key", value: "(new key)", reason: fixedRate(policy) }))
      : undefined,
  [Request.Kind.Transact]: start
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
  minSleep: 0,
  all: undefined
}
