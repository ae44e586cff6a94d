/**
 * A `Store` in a plain `Map`, running the pure algorithms: the reference every
 * other store must agree with, and a way to run the remote path (coalescing,
 * fallback) without a server. Its time is the Effect `Clock`'s.
 *
 * @since 0.1.0
 */
import { Clock, Effect } from "effect"
import { type Algorithm, type Outcome, peekOutcome, type Signal } from "./internal/algorithm/Algorithm.ts"
import type * as Policy from "./Policy.ts"
import { type AllReply, type Entry, type Op, OpKind, type Reply, type Store } from "./Store.ts"

/**
 * Applies ops to a state with the policy's algorithm: the semantics every
 * store implements. Returns the replies and the state after.
 *
 * @example
 * ```ts
 * import { MemoryStore, Policy, Store } from "tollgate"
 *
 * const policy = Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * const [replies] = MemoryStore.applyOps(policy, undefined, 0, [{ kind: Store.OpKind.Take, cost: 1, queued: 0 }])
 * ```
 *
 * @category algorithms
 * @since 0.1.0
 */
export const applyOps = (
  policy: Policy.Valid,
  stored: unknown,
  now: number,
  ops: ReadonlyArray<Op>
): readonly [ReadonlyArray<Reply>, unknown] => {
  const { algorithm, config } = policy
  const c = config as never
  // `undefined` is a key with no state: it reads as fresh, and a Take or a
  // Release gives it state (as an in-process bucket starts for them).
  let state = stored
  const current = () => state === undefined ? algorithm.initial(c, now) : state
  const replies: Array<Reply> = []
  for (const op of ops) {
    switch (op.kind) {
      case OpKind.Take:
      case OpKind.Peek: {
        const outcome = op.kind === OpKind.Take
          ? algorithm.step(c, current() as never, now, op.cost)
          : peekOutcome(algorithm as Algorithm<unknown, unknown>, c, current(), now, op.cost)
        if (op.kind === OpKind.Take) state = outcome.state
        replies.push(replyOf(outcome))
        break
      }
      case OpKind.Admit: {
        // A denial keeps the state as it was; a fresh key still gets its
        // initial state (its first use anchors it, as a bucket's start does).
        const before = current()
        const outcome = algorithm.step(c, before as never, now, op.cost)
        state = outcome.allowed ? outcome.state : before
        replies.push({
          allowed: outcome.allowed,
          remaining: outcome.remaining,
          retryAfter: outcome.retryAfter,
          resetAfter: outcome.resetAfter,
          limit: outcome.limit
        })
        break
      }
      case OpKind.Reset:
        if (state !== undefined) state = algorithm.initial(c, now)
        replies.push(done(policy))
        break
      case OpKind.Release:
        // Units go back to the key's state, a fresh key's initial one included
        // (as in-process, where a release starts the bucket of a key that
        // starts below its limit).
        if (algorithm.release !== undefined) {
          state = algorithm.release(c, current() as never, now, op.cost)
        }
        replies.push(done(policy))
        break
      case OpKind.WaitTime: {
        // A request behind `queued` units of waiters: denied, with when it
        // would be admitted and when the key would be fresh again.
        const limit = algorithm.maxCost(c)
        replies.push({
          allowed: false,
          remaining: 0,
          retryAfter: algorithm.waitTime(c, current() as never, now, op.queued, op.cost),
          resetAfter: algorithm.waitTime(c, current() as never, now, op.queued, limit),
          limit
        })
        break
      }
      case OpKind.Adapt: {
        // A signal for an adaptive rate (a key with no state gets its
        // initial one); other policies are left as they are.
        if (algorithm.adapt !== undefined) {
          state = algorithm.adapt(c, current() as never, now, signals[op.cost] ?? "ok", op.queued)
        }
        replies.push(done(policy))
        break
      }
    }
  }
  return [replies, state]
}

// A store's reply: an outcome's figures.
const replyOf = (outcome: Outcome<unknown>): Reply => ({
  allowed: outcome.allowed,
  remaining: outcome.remaining,
  retryAfter: outcome.retryAfter,
  resetAfter: outcome.resetAfter,
  limit: outcome.limit
})

// OpKind.Adapt's cost: which signal.
const signals: ReadonlyArray<Signal> = ["ok", "throttled", "latency"]

/**
 * Takes each entry's cost from its key's state, from every key or from none:
 * the semantics of `Store.applyAll` every store implements. Each key is
 * stepped on its own state at `now`; if all admit, the replies are what each
 * took and the states after are returned; if one denies, nothing changes
 * (the states come back as they were, a key with none still has none) and
 * each reply is what that key alone would decide.
 *
 * @example
 * ```ts
 * import { MemoryStore, Policy } from "tollgate"
 *
 * const small = Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * const large = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * const [all] = MemoryStore.applyAllOps(
 *   [{ key: "user", policy: small, cost: 2 }, { key: "global", policy: large, cost: 2 }],
 *   [undefined, undefined],
 *   0
 * )
 * // all.allowed: false (the user's limit is 1); the global key is untouched
 * ```
 *
 * @category algorithms
 * @since 0.2.0
 */
export const applyAllOps = (
  entries: ReadonlyArray<Entry>,
  stored: ReadonlyArray<unknown>,
  now: number
): readonly [AllReply, ReadonlyArray<unknown>] => {
  const replies: Array<Reply> = []
  const next: Array<unknown> = []
  let allowed = true
  for (let i = 0; i < entries.length; i++) {
    const { cost, policy } = entries[i]
    const rule = policy.rule
    const state = stored[i] === undefined ? rule.initial(now) : stored[i]
    const outcome = rule.step(state, now, cost)
    if (!outcome.allowed) allowed = false
    next.push(outcome.state)
    replies.push(replyOf(outcome))
  }
  return [{ allowed, replies }, allowed ? next : stored]
}

const done = (policy: Policy.Valid): Reply => ({
  allowed: true,
  remaining: 0,
  retryAfter: 0,
  resetAfter: 0,
  limit: policy.algorithm.maxCost(policy.config as never)
})

/**
 * Makes an in-memory store (its states live as long as it does).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { MemoryStore } from "tollgate"
 *
 * const program = Effect.gen(function*() {
 *   const store = yield* MemoryStore.make
 * })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: Effect.Effect<Store> = Effect.gen(function*() {
  const clock = yield* Clock.Clock
  const states = new Map<string, unknown>()
  return {
    name: "memory",
    apply: (key, policy, ops) =>
      Effect.sync(() => {
        const [replies, state] = applyOps(policy, states.get(key), clock.currentTimeMillisUnsafe(), ops)
        if (state !== undefined) states.set(key, state)
        return replies
      }),
    applyAll: (entries) =>
      Effect.sync(() => {
        const [reply, after] = applyAllOps(
          entries,
          entries.map((e) => states.get(e.key)),
          clock.currentTimeMillisUnsafe()
        )
        if (reply.allowed) entries.forEach((e, i) => states.set(e.key, after[i]))
        return reply
      })
  }
})
