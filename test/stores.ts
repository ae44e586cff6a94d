/**
 * A limiter on a fresh `MemoryStore`: the store-backed path (each key's
 * state in the store, decided by the store's interpreter, the line on the
 * store's actor) without a server to start.
 */
import { Effect } from "effect"
import { MemoryStore, RateLimiter, Store } from "../src/index.ts"

/** `RateLimiter.make(options)` on a store of its own. */
export const onStore = (options: RateLimiter.Options) =>
  Effect.flatMap(
    MemoryStore.make,
    (store) => RateLimiter.make(options).pipe(Effect.provideService(Store.CurrentStore, store))
  )
