/**
 * The store seam: where keys' state lives when limits are shared. Without a
 * store, each key's state lives in its bucket, in this process. A `Store`
 * keeps it elsewhere (Redis), shared by every process that uses the same
 * store; each key's bucket still fronts it locally, queues its requests,
 * sends them in one call per batch (coalescing), and keeps its line of
 * waiters.
 *
 * A store does two things, atomically: run a call on one key's stored value
 * (`apply`), and run a take over several keys, all or nothing (`applyAll`).
 * What a call does is tollgate's own business: a store never looks inside
 * it. It reads the key's stored value, hands it to {@link run} with the time,
 * keeps what comes back, and answers with what `run` answered; `MemoryStore`
 * is such a store in a dozen lines. Everything a store keeps is a plain
 * value; {@link encode} and {@link decode} turn it into text and back for a
 * store outside this process.
 *
 * A program that means to share its limits says so (`RateLimiter.make({
 * ..., shared: true })`): it then needs a `CurrentStore` to be built, and
 * cannot run unshared by mistake.
 *
 * @since 0.1.0
 */
import { Context } from "effect"
import { StoreUnavailable } from "./Errors.ts"
import * as Engine from "./internal/actor/Engine.ts"
import * as Block from "./internal/algorithm/Block.ts"
import * as Interpreter from "./internal/operation/Interpreter.ts"

export {
  /**
   * The store could not answer (see `Errors.StoreUnavailable`).
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
  StoreUnavailable
}

/**
 * One call to a store: the key, and what to do to its stored value (opaque:
 * {@link run} knows).
 *
 * @example
 * ```ts
 * import type { Store } from "tollgate"
 *
 * const keyOf = (call: Store.Call): string => call.key
 * ```
 *
 * @category models
 * @since 0.3.0
 */
export type Call = Engine.Call

/**
 * A store's answer to a call (opaque: what {@link run} or {@link runAll}
 * answered).
 *
 * @example
 * ```ts
 * import type { Effect } from "effect"
 * import type { Store } from "tollgate"
 *
 * type Apply = (call: Store.Call) => Effect.Effect<Store.Answer, Store.StoreUnavailable>
 * ```
 *
 * @category models
 * @since 0.3.0
 */
export type Answer = Engine.Answer

/**
 * A place to keep keys' state: `apply` runs a call on one key atomically
 * (read the stored value, {@link run}, keep the result), `applyAll` a take
 * over several keys, all or nothing ({@link runAll}); a store without
 * `applyAll` refuses calls over several keys.
 *
 * @example
 * ```ts
 * import { Clock, Effect } from "effect"
 * import { Store } from "tollgate"
 *
 * // a store in a Map (what MemoryStore is)
 * const inMap = Effect.gen(function*() {
 *   const clock = yield* Clock.Clock
 *   const values = new Map<string, unknown>()
 *   const store: Store.Store = {
 *     name: "map",
 *     apply: (call) =>
 *       Effect.sync(() => {
 *         const ran = Store.run(call, values.get(call.key), clock.currentTimeMillisUnsafe())
 *         if (ran.stored === undefined) values.delete(call.key)
 *         else values.set(call.key, ran.stored)
 *         return ran.answer
 *       })
 *   }
 *   return store
 * })
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Store extends Engine.Pluggable {}

/**
 * What {@link run} returns: the answer, the value to keep (`undefined`:
 * nothing; forget the key), and from when the key may be forgotten (a
 * store with expiring keys sets its expiry there; `Infinity`: never).
 *
 * @example
 * ```ts
 * import type { Store } from "tollgate"
 *
 * const expiresIn = (ran: Store.Ran, now: number) => Math.max(1, ran.settledAt - now)
 * ```
 *
 * @category models
 * @since 0.3.0
 */
export interface Ran {
  readonly answer: Answer
  readonly stored: unknown
  readonly settledAt: number
}

/**
 * Runs a call on the key's stored value (`undefined`: none) at `now`: the
 * semantics every store keeps. A store runs it atomically (no other call on
 * the same key in between) and keeps `stored`.
 *
 * @example
 * ```ts
 * import type { Store } from "tollgate"
 * import { Store as S } from "tollgate"
 *
 * const once = (call: Store.Call, kept: unknown, now: number) => S.run(call, kept, now).answer
 * ```
 *
 * @category running
 * @since 0.3.0
 */
export const run = (call: Call, stored: unknown, now: number): Ran => {
  const { ops, policy } = call[Engine.CallBody]
  const [replies, next] = Interpreter.apply(policy, stored, now, ops)
  return { answer: Engine.answer(replies), stored: next, settledAt: Interpreter.settledAt(policy, next) }
}

/**
 * Runs a take over several keys (the calls of one `applyAll`, each key's
 * stored value in the same order) at `now`: from every key or from none.
 * Keep `stored` for every key when the take was made; a denial leaves every
 * value as it was.
 *
 * @example
 * ```ts
 * import { Store } from "tollgate"
 *
 * const all = (calls: ReadonlyArray<Store.Call>, values: ReadonlyArray<unknown>, now: number) =>
 *   Store.runAll(calls, values, now).stored
 * ```
 *
 * @category running
 * @since 0.3.0
 */
export const runAll = (
  calls: ReadonlyArray<Call>,
  stored: ReadonlyArray<unknown>,
  now: number
): { readonly answer: Answer; readonly stored: ReadonlyArray<unknown> } => {
  const entries = calls.map((c) => ({ policy: c[Engine.CallBody].policy, cost: c[Engine.CallBody].cost }))
  const [all, next] = Interpreter.applyAll(entries, stored, now)
  return { answer: Engine.answer(all.replies, all.allowed), stored: next }
}

// Numbers JSON cannot hold, and a block kept beside a state, as tagged objects.
const replacer = function(this: unknown, _: string, value: unknown): unknown {
  if (typeof value === "number") {
    if (value === Infinity) return { $n: "inf" }
    if (value === -Infinity) return { $n: "-inf" }
    if (Number.isNaN(value)) return { $n: "nan" }
    if (Object.is(value, -0)) return { $n: "-0" }
    return value
  }
  return value instanceof Block.Stored ? { $block: value.until, state: value.state } : value
}

const reviver = (_: string, value: unknown): unknown => {
  if (typeof value !== "object" || value === null) return value
  if ("$n" in value) {
    const n = (value as { readonly $n: string }).$n
    return n === "inf" ? Infinity : n === "-inf" ? -Infinity : n === "-0" ? -0 : NaN
  }
  if ("$block" in value) {
    const b = value as { readonly $block: number; readonly state: unknown }
    return new Block.Stored(b.$block, b.state)
  }
  return value
}

/**
 * A stored value as text, for a store outside this process (every number
 * exact, `Infinity` and `-0` included).
 *
 * @example
 * ```ts
 * import { Store } from "tollgate"
 *
 * Store.decode(Store.encode({ level: -0, at: Infinity })) // { level: -0, at: Infinity }
 * ```
 *
 * @category running
 * @since 0.3.0
 */
export const encode = (stored: unknown): string => JSON.stringify(stored, replacer)

/**
 * A stored value back from its text (see {@link encode}).
 *
 * @example
 * ```ts
 * import { Store } from "tollgate"
 *
 * Store.decode("{\"level\":5,\"at\":1000}") // { level: 5, at: 1000 }
 * ```
 *
 * @category running
 * @since 0.3.0
 */
export const decode = (text: string): unknown => JSON.parse(text, reviver)

/**
 * The store a limiter keeps its keys in. A limiter made with `shared: true`
 * needs one (forgetting it is a type error, not a limiter that silently
 * runs on its own); any other uses one if it is provided, and keeps each
 * key's state in its bucket, in process, if not.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { MemoryStore, Policy, RateLimiter } from "tollgate"
 *
 * const Limiter = RateLimiter.layer({
 *   policy: Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } }),
 *   shared: true
 * }).pipe(Layer.provide(MemoryStore.layer))
 * ```
 *
 * @category services
 * @since 0.1.0
 */
export class CurrentStore extends Context.Service<CurrentStore, Store>()("tollgate/Store") {}
