/**
 * A `Store` in a plain `Map`: the reference every other store agrees with,
 * and the way to share limits between limiters of one process (or to run
 * the shared-store path, coalescing and fallback, without a server). It is
 * the whole of what a store must do: read a key's value, `Store.run` the
 * call on it, keep what comes back. Its time is the Effect `Clock`'s.
 *
 * Keys are kept as long as the store (a store with expiring keys forgets a
 * key once `Store.run` says it has settled: forgetting it then makes no
 * decision more permissive).
 *
 * @since 0.1.0
 */
import { Clock, Effect, Layer } from "effect"
import * as Store from "./Store.ts"

/**
 * Makes an in-memory store (its keys live as long as it does).
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
export const make: Effect.Effect<Store.Store> = Effect.gen(function*() {
  const clock = yield* Clock.Clock
  const values = new Map<string, unknown>()
  const keep = (key: string, stored: unknown): void => {
    if (stored === undefined) values.delete(key)
    else values.set(key, stored)
  }
  return {
    name: "memory",
    apply: (call) =>
      Effect.sync(() => {
        const ran = Store.run(call, values.get(call.key), clock.currentTimeMillisUnsafe())
        keep(call.key, ran.stored)
        return ran.answer
      }),
    applyAll: (calls) =>
      Effect.sync(() => {
        const ran = Store.runAll(calls, calls.map((c) => values.get(c.key)), clock.currentTimeMillisUnsafe())
        calls.forEach((c, i) => keep(c.key, ran.stored[i]))
        return ran.answer
      })
  }
})

/**
 * An in-memory store as the limiter's `CurrentStore`: the limiters it is
 * provided to share their keys.
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
 * @category layers
 * @since 0.3.0
 */
export const layer: Layer.Layer<Store.CurrentStore> = Layer.effect(Store.CurrentStore, make)
