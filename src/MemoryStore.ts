/**
 * A `Store` in a plain `Map`, running the pure algorithms: the reference every
 * other store must agree with, and a way to run the remote path (coalescing,
 * fallback) without a server. Its time is the Effect `Clock`'s.
 *
 * @since 0.1.0
 */
import { Clock, Effect } from "effect"
import type { Limit } from "./internal/Limit.ts"
import * as Interpreter from "./internal/operation/Interpreter.ts"
import type { AllReply, Entry, Op, Reply, Store } from "./Store.ts"

/**
 * Applies ops to a state with the policy's algorithm: the semantics every
 * store implements. Returns the replies and the state after.
 *
 * A key's state is `undefined` (none: it reads as fresh), the algorithm's
 * own, or a `Block.Stored` (a block beside it). Take, Admit, a partial take,
 * Force, the adds, Fill, Set and Block give a key with no state its state;
 * Peek, Get and WaitTime never do. Get and Delete answer in `value` whether
 * the key had state worth keeping (1) or none, or only a settled one (0). While a block lasts, Take, Admit, Peek, a
 * partial take and WaitTime are refused with the block's figures
 * (`Block.outcome`) and change nothing; a Take the policy itself refuses
 * starts a block of `policy.blockMillis`, if it has one. Reset, Fill, Set and
 * Delete end a block; Release, Force and the adds work underneath it.
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
  policy: Limit,
  stored: unknown,
  now: number,
  ops: ReadonlyArray<Op>
): readonly [ReadonlyArray<Reply>, unknown] => Interpreter.apply(policy, stored, now, ops)

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
): readonly [AllReply, ReadonlyArray<unknown>] => Interpreter.applyAll(entries, stored, now)

/**
 * When a stored state (a block beside it, or not) may be forgotten.
 *
 * @example
 * ```ts
 * import { MemoryStore, Policy } from "tollgate"
 *
 * const policy = Policy.fixedWindow({ limit: 1, window: "1 second" }) as Policy.Valid
 * MemoryStore.settledAt(policy, undefined) // -Infinity: nothing to keep
 * ```
 *
 * @category algorithms
 * @since 0.2.0
 */
export const settledAt = (policy: Limit, stored: unknown): number => Interpreter.settledAt(policy, stored)

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
        else states.delete(key)
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
