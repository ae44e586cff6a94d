/**
 * tollgate: a rate limiter for Effect programs, built the actor way.
 *
 * This entry point is the limiter itself: the `RateLimiter` service, the
 * policies, decisions, errors and metrics, and the `Store` seam with its
 * in-memory reference store. It loads nothing but `effect`, so it runs
 * wherever Effect does (Node 20 and later). The HTTP middleware is in
 * `tollgate/http`, the Redis store in `tollgate/redis`, and the stand-alone
 * service in `tollgate/server`.
 *
 * @since 0.1.0
 */
import * as Decision from "./Decision.ts"
import {
  BucketFailed,
  InvalidPolicy,
  InvalidRequest,
  LimiterShutdown,
  MissingPackage,
  Overloaded,
  RateLimitExceeded,
  StoreUnavailable
} from "./Errors.ts"
import * as MemoryStore from "./MemoryStore.ts"
import * as Metrics from "./Metrics.ts"
import * as Policy from "./Policy.ts"
import { RateLimiter } from "./RateLimiter.ts"
import * as Store from "./Store.ts"

export {
  /**
   * A bucket failed with a defect; only that key is restarted.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import type { BucketFailed } from "tollgate"
   *
   * const report = (error: BucketFailed) => Effect.logError(`key ${error.key} failed: ${error.defect}`)
   * ```
   *
   * @category errors
   * @since 0.1.0
   */
  BucketFailed,
  /**
   * Decisions: what a call to the limiter answers.
   *
   * @example
   * ```ts
   * import type { Decision } from "tollgate"
   *
   * const wait = (d: Decision.Decision) => d.allowed ? 0 : d.retryAfter
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  Decision,
  /**
   * A policy or limiter option is invalid; names the field and the value.
   *
   * @example
   * ```ts
   * import { InvalidPolicy } from "tollgate"
   *
   * const error = new InvalidPolicy({ field: "capacity", value: "0", reason: "must be positive" })
   * ```
   *
   * @category errors
   * @since 0.1.0
   */
  InvalidPolicy,
  /**
   * A call's input is invalid (key, cost); names the field and the value.
   *
   * @example
   * ```ts
   * import { InvalidRequest } from "tollgate"
   *
   * const error = new InvalidRequest({ field: "key", value: "\"\"", reason: "must not be empty" })
   * ```
   *
   * @category errors
   * @since 0.1.0
   */
  InvalidRequest,
  /**
   * The limiter shut down before the call could be decided.
   *
   * @example
   * ```ts
   * import { LimiterShutdown } from "tollgate"
   *
   * const error = new LimiterShutdown()
   * ```
   *
   * @category errors
   * @since 0.1.0
   */
  LimiterShutdown,
  /**
   * The in-memory reference store: the semantics every `Store` implements.
   *
   * @example
   * ```ts
   * import { Layer } from "effect"
   * import { MemoryStore, Store } from "tollgate"
   *
   * const InMemory = Layer.effect(Store.CurrentStore, MemoryStore.make)
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  MemoryStore,
  /**
   * The limiter's metrics, in Effect's `Metric` registry.
   *
   * @example
   * ```ts
   * import { Metric } from "effect"
   * import { Metrics } from "tollgate"
   *
   * const denied = Metric.value(Metric.withAttributes(Metrics.decisions, { limiter: "default", outcome: "denied" }))
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  Metrics,
  /**
   * A part of tollgate needs an optional package that is not installed; the
   * message names it and the command that installs it.
   *
   * @example
   * ```ts
   * import { MissingPackage } from "tollgate"
   *
   * const error = new MissingPackage({ feature: "the HTTP service", packages: ["@effect/platform-node"] })
   * ```
   *
   * @category errors
   * @since 0.3.0
   */
  MissingPackage,
  /**
   * A key's mailbox or line of waiters is full, or the limiter holds `maxBuckets` keys and none it may forget.
   *
   * @example
   * ```ts
   * import type { Overloaded } from "tollgate"
   *
   * const busy = (error: Overloaded): string => `${error.key}: ${error.reason} full (${error.capacity})`
   * ```
   *
   * @category errors
   * @since 0.1.0
   */
  Overloaded,
  /**
   * Policies: what limit applies to a key.
   *
   * @example
   * ```ts
   * import { Policy } from "tollgate"
   *
   * const policy = Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  Policy,
  /**
   * The service: one bucket per key, each an actor.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { Policy, RateLimiter } from "tollgate"
   *
   * const program = Effect.gen(function*() {
   *   const limiter = yield* RateLimiter
   *   return yield* limiter.acquire("user:42")
   * }).pipe(Effect.provide(RateLimiter.layer({
   *   policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
   * })))
   * ```
   *
   * @category services
   * @since 0.1.0
   */
  RateLimiter,
  /**
   * `wait`, `reserve`, `limit` or `withPermit` would wait past `maxWait`.
   *
   * @example
   * ```ts
   * import { Duration } from "effect"
   * import type { RateLimitExceeded } from "tollgate"
   *
   * const seconds = (error: RateLimitExceeded): number => Duration.toSeconds(error.retryAfter)
   * ```
   *
   * @category errors
   * @since 0.1.0
   */
  RateLimitExceeded,
  /**
   * The store seam: where keys' state lives, for writing a store of your own.
   *
   * @example
   * ```ts
   * import type { Store } from "tollgate"
   *
   * const describe = (store: Store.Store): string => `keys live in ${store.name}`
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  Store,
  /**
   * A shared store could not answer; the error reaches callers only with
   * `fallback: { mode: "error" }`.
   *
   * @example
   * ```ts
   * import { StoreUnavailable } from "tollgate"
   *
   * const error = new StoreUnavailable({ store: "redis", reason: "timed out after 250 ms" })
   * ```
   *
   * @category errors
   * @since 0.3.0
   */
  StoreUnavailable
}
