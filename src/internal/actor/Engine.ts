/**
 * A shared store as the limiter's buckets use it: operations on one key, or
 * a take over several keys, run atomically where the keys' state lives. The
 * public seam (`Store.ts`) hides this behind opaque calls; a store of
 * tollgate's own (Redis) offers it directly, with what makes it fast (a
 * callback form, its own timeouts).
 *
 * @since 0.3.0
 */
import { Effect, type Exit } from "effect"
import type { StoreUnavailable } from "../../Errors.ts"
import type { Limit } from "../Limit.ts"
import type * as Op from "../operation/Op.ts"

/**
 * One key of a take over several keys: its policy and the units to take.
 *
 * @since 0.3.0
 */
export interface Entry {
  readonly key: string
  readonly policy: Limit
  readonly cost: number
}

/**
 * A store, as the buckets call it.
 *
 * @since 0.3.0
 */
export interface Engine {
  /** The store's name (metrics, errors). */
  readonly name: string
  /**
   * Applies `ops` to `key`'s state atomically, in order, as the interpreter
   * would; `timeoutMillis` bounds the call when the store enforces it
   * itself (`timesOut`).
   */
  readonly apply: (
    key: string,
    policy: Limit,
    ops: ReadonlyArray<Op.Op>,
    timeoutMillis?: number
  ) => Effect.Effect<ReadonlyArray<Op.Reply>, StoreUnavailable>
  /**
   * `apply` with a callback: `done` is called once with the outcome, and
   * the function returned, if any, withdraws a call not yet sent. Only for a
   * store that sets `timesOut`.
   */
  readonly applyUnsafe?:
    | ((
      key: string,
      policy: Limit,
      ops: ReadonlyArray<Op.Op>,
      timeoutMillis: number,
      done: (exit: Exit.Exit<ReadonlyArray<Op.Reply>, StoreUnavailable>) => void
    ) => (() => void) | undefined)
    | undefined
  /** Whether `apply` enforces its `timeoutMillis` itself. */
  readonly timesOut?: boolean | undefined
  /** A take from every key or from none, atomically; absent: calls over several keys are refused. */
  readonly applyAll?:
    | ((entries: ReadonlyArray<Entry>, timeoutMillis?: number) => Effect.Effect<Op.AllReply, StoreUnavailable>)
    | undefined
  /** Why `applyAll` cannot take these keys together (Redis Cluster: different hash slots), or `undefined`. */
  readonly checkKeys?: ((keys: ReadonlyArray<string>) => string | undefined) | undefined
}

/**
 * What a call's opaque body holds (see `Store.Call`).
 *
 * @since 0.3.0
 */
export const CallBody: unique symbol = Symbol.for("tollgate/Store/Call")

/**
 * One call to a store: a key, and what to do to its state (opaque outside
 * tollgate: the operations are the engine's protocol).
 *
 * @since 0.3.0
 */
export interface Call {
  readonly key: string
  readonly [CallBody]: {
    readonly policy: Limit
    /** Operations on the key (a call of `apply`). */
    readonly ops: ReadonlyArray<Op.Op>
    /** The units a take over several keys takes from this one (a call of `applyAll`). */
    readonly cost: number
  }
}

/**
 * What an answer's opaque body holds (see `Store.Answer`).
 *
 * @since 0.3.0
 */
export const AnswerBody: unique symbol = Symbol.for("tollgate/Store/Answer")

/**
 * A store's answer to a call (opaque outside tollgate).
 *
 * @since 0.3.0
 */
export interface Answer {
  readonly [AnswerBody]: { readonly replies: ReadonlyArray<Op.Reply>; readonly allowed: boolean }
}

/**
 * Where a store of tollgate's own keeps its engine (see {@link engineOf}).
 *
 * @since 0.3.0
 */
export const EngineId: unique symbol = Symbol.for("tollgate/Store/Engine")

/**
 * A store as anyone can write one: a name, `apply` (a call on one key,
 * atomically), and `applyAll` (a take over several keys, all or nothing).
 *
 * @since 0.3.0
 */
export interface Pluggable {
  readonly name: string
  readonly apply: (call: Call) => Effect.Effect<Answer, StoreUnavailable>
  readonly applyAll?: ((calls: ReadonlyArray<Call>) => Effect.Effect<Answer, StoreUnavailable>) | undefined
  /** A store of tollgate's own: its engine, called directly. */
  readonly [EngineId]?: Engine | undefined
}

/**
 * A call of `ops` on `key`.
 *
 * @since 0.3.0
 */
export const call = (key: string, policy: Limit, ops: ReadonlyArray<Op.Op>, cost = 0): Call => ({
  key,
  [CallBody]: { policy, ops, cost }
})

/**
 * An answer.
 *
 * @since 0.3.0
 */
export const answer = (replies: ReadonlyArray<Op.Reply>, allowed = true): Answer => ({
  [AnswerBody]: { replies, allowed }
})

/**
 * The engine of a store: its own, or one that runs every call through its
 * `apply` and `applyAll`.
 *
 * @since 0.3.0
 */
export const engineOf = (store: Pluggable): Engine => {
  const own = store[EngineId]
  if (own !== undefined) return own
  const { applyAll } = store
  return {
    name: store.name,
    apply: (key, policy, ops) => Effect.map(store.apply(call(key, policy, ops)), (a) => a[AnswerBody].replies),
    applyAll: applyAll === undefined ? undefined : (entries) =>
      Effect.map(
        applyAll(entries.map((e) => call(e.key, e.policy, [], e.cost))),
        (a) => ({ allowed: a[AnswerBody].allowed, replies: a[AnswerBody].replies })
      )
  }
}

/**
 * A store of tollgate's own from its engine: `apply` and `applyAll` for
 * anyone, the engine for the limiter.
 *
 * @since 0.3.0
 */
export const pluggable = (engine: Engine): Pluggable => {
  const { applyAll } = engine
  return {
    name: engine.name,
    apply: (c) => Effect.map(engine.apply(c.key, c[CallBody].policy, c[CallBody].ops), (replies) => answer(replies)),
    applyAll: applyAll === undefined ? undefined : (calls) =>
      Effect.map(
        applyAll(calls.map((c) => ({ key: c.key, policy: c[CallBody].policy, cost: c[CallBody].cost }))),
        (all) => answer(all.replies, all.allowed)
      ),
    [EngineId]: engine
  }
}
