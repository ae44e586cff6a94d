/**
 * The store seam: where a key's state lives. By default it lives in the
 * bucket itself (in-process). A `Store` keeps it elsewhere (Redis), shared by
 * every process that uses the same store; the bucket actor still fronts each
 * key locally, queues its requests and sends them in one call per batch
 * (coalescing), and keeps its line of waiters.
 *
 * A store applies a list of operations to one key atomically, in order, and
 * answers each. The operations mirror the pure algorithms exactly: a store is
 * correct when it gives the same answers as `MemoryStore` (the conformance
 * suite checks it).
 *
 * @since 0.1.0
 */
import { Context, type Effect, type Exit, Schema } from "effect"
import type { Limit } from "./internal/Limit.ts"
import * as Operation from "./internal/operation/Op.ts"

/**
 * What an operation does.
 *
 * @example
 * ```ts
 * import { Store } from "tollgate"
 *
 * const take: Store.Op = { kind: Store.OpKind.Take, cost: 1, queued: 0 }
 * const peek: Store.Op = { kind: Store.OpKind.Peek, cost: 1, queued: 0 }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export const OpKind: typeof Operation.Kind = Operation.Kind

/**
 * One of the values of {@link OpKind}.
 *
 * @example
 * ```ts
 * import { Store } from "tollgate"
 *
 * const changesState = (kind: Store.OpKind): boolean => kind !== Store.OpKind.Peek && kind !== Store.OpKind.WaitTime
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type OpKind = Operation.Kind

/**
 * One operation on a key.
 *
 * @example
 * ```ts
 * import { Store } from "tollgate"
 *
 * // a refund of 3 units
 * const release: Store.Op = { kind: Store.OpKind.Release, cost: 3, queued: 0 }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type Op = Operation.Op

/**
 * The answer to one operation: an algorithm's outcome without its state.
 * Durations are milliseconds; `retryAfter` is `Infinity` for never.
 *
 * @example
 * ```ts
 * import { MemoryStore, Policy, Store } from "tollgate"
 *
 * const policy = Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * const take: Store.Op = { kind: Store.OpKind.Take, cost: 1, queued: 0 }
 * const [replies] = MemoryStore.applyOps(policy, undefined, 0, [take, take])
 * // replies[0]: allowed, remaining 0; replies[1]: denied, retryAfter 1000
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type Reply = Operation.Reply

/**
 * One key of an all-or-nothing call over several keys: its policy and the
 * units to take from it.
 *
 * @example
 * ```ts
 * import { Policy, Store } from "tollgate"
 *
 * const policy = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * const entry: Store.Entry = { key: "user:42", policy, cost: 1 }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface Entry {
  readonly key: string
  readonly policy: Limit
  readonly cost: number
}

/**
 * The answer to an all-or-nothing call: whether every key admitted (and
 * gave its units), and each key's own reply in the order given: what it took
 * when `allowed`, what it alone would decide when not (a denial takes
 * nothing from any key).
 *
 * @example
 * ```ts
 * import type { Store } from "tollgate"
 *
 * const binding = (all: Store.AllReply) => all.replies.findIndex((r) => !r.allowed)
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export type AllReply = Operation.AllReply

/**
 * The store could not answer (unreachable, too slow, or it failed). The
 * limiter applies its fallback policy; the error reaches callers only with
 * `fallback: "error"`.
 *
 * @example
 * ```ts
 * import { Store } from "tollgate"
 *
 * const error = new Store.StoreUnavailable({ store: "redis", reason: "timed out after 250 ms" })
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export class StoreUnavailable extends Schema.TaggedError<StoreUnavailable>()("StoreUnavailable", {
  store: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `the ${this.store} store is unavailable: ${this.reason}`
  }
}

/**
 * A place to keep keys' state.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { MemoryStore, Policy, RateLimiter, Store } from "tollgate"
 *
 * // A store of your own: here one that counts its calls and keeps state in memory.
 * const counting = Effect.map(MemoryStore.make, (inner): Store.Store => {
 *   let calls = 0
 *   return {
 *     name: "counting",
 *     apply: (key, policy, ops, timeoutMillis) => {
 *       calls++
 *       return inner.apply(key, policy, ops, timeoutMillis)
 *     }
 *   }
 * })
 *
 * const Limiter = RateLimiter.layer({
 *   policy: Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } })
 * }).pipe(Layer.provide(Layer.effect(Store.CurrentStore, counting)))
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Store {
  /** A short name for errors and metrics ("memory", "redis"). */
  readonly name: string
  /**
   * Applies `ops` to `key` atomically and in order; one reply per op. A
   * store that sets `timesOut` fails the call with `StoreUnavailable` once
   * `timeoutMillis` have passed; for any other, the limiter races the call
   * with a timer of its own.
   */
  readonly apply: (
    key: string,
    policy: Limit,
    ops: ReadonlyArray<Op>,
    timeoutMillis?: number
  ) => Effect.Effect<ReadonlyArray<Reply>, StoreUnavailable>
  /**
   * `apply` for a caller that waits with a callback rather than an effect:
   * `done` is called once with the outcome (on the stack of the reply, or
   * at once), and the function returned, if any, withdraws a call not yet
   * sent (its caller has left; `done` is then never called). Only for a store
   * that sets `timesOut`: `timeoutMillis` is then always given. The limiter
   * uses it, when a store offers it, for a call with nothing else pending on
   * its key: one suspension of the caller from the call to its answer.
   */
  readonly applyUnsafe?: (
    key: string,
    policy: Limit,
    ops: ReadonlyArray<Op>,
    timeoutMillis: number,
    done: (exit: Exit.Exit<ReadonlyArray<Reply>, StoreUnavailable>) => void
  ) => (() => void) | undefined
  /**
   * Whether `apply` enforces its `timeoutMillis` itself (a store that sends
   * many calls in one round trip can time them out together, for far less
   * than a timer per call).
   */
  readonly timesOut?: boolean | undefined
  /**
   * Takes each entry's cost from its key, from every key or from none, in
   * one atomic step (an acquire over several keys: a user, its organisation
   * and a global limit). A denial leaves every key as it was. A store
   * without it cannot serve calls over several keys (they fail with
   * `InvalidRequest`). `timeoutMillis` as for `apply`.
   */
  readonly applyAll?: (
    entries: ReadonlyArray<Entry>,
    timeoutMillis?: number
  ) => Effect.Effect<AllReply, StoreUnavailable>
  /**
   * Why `applyAll` cannot take these keys together (on Redis Cluster: keys
   * of different hash slots), or `undefined`. The limiter asks before each
   * call over several keys and fails it with `InvalidRequest` (a
   * configuration error, not an outage: no fallback decides it).
   */
  readonly checkKeys?: ((keys: ReadonlyArray<string>) => string | undefined) | undefined
}

/**
 * The store the limiter uses: none (the default) keeps every key's state in
 * its bucket, in-process. Provide a store (for example `RedisStore.layer`) to
 * share limits across processes.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { MemoryStore, Policy, RateLimiter, Store } from "tollgate"
 *
 * const Limiter = RateLimiter.layer({
 *   policy: Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } })
 * }).pipe(Layer.provide(Layer.effect(Store.CurrentStore, MemoryStore.make)))
 * ```
 *
 * @category services
 * @since 0.1.0
 */
export const CurrentStore: Context.Reference<Store | undefined> = Context.Reference<Store | undefined>(
  "tollgate/Store",
  { defaultValue: () => undefined }
)
