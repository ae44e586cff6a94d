/**
 * The `RateLimiter` service: what programs use.
 *
 * @since 0.1.0
 */
import {
  Context,
  Duration,
  Effect,
  Effectable,
  type Fiber,
  type Inspectable,
  Layer,
  Option,
  Predicate,
  Result,
  Schema,
  type Scope
} from "effect"
import type { Pipeable } from "effect/Pipeable"
import type { Decision, Taken } from "./Decision.ts"
import {
  type BucketFailed,
  InvalidPolicy,
  InvalidRequest,
  type LimiterShutdown,
  type Overloaded,
  type RateLimitExceeded
} from "./Errors.ts"
import * as Engine from "./internal/actor/Engine.ts"
import * as Request from "./internal/actor/Request.ts"
import type { Carry } from "./internal/algorithm/Algorithm.ts"
import * as AllOrNothing from "./internal/coordinator/AllOrNothing.ts"
import type { Limit } from "./internal/Limit.ts"
import * as Rules from "./internal/Rules.ts"
import * as Supervisor from "./internal/supervisor/Supervisor.ts"
import * as Trace from "./internal/Trace.ts"
import * as Policy from "./Policy.ts"
import { CurrentStore, type StoreUnavailable } from "./Store.ts"

/**
 * Options of {@link RateLimiter.make} and {@link RateLimiter.layer}.
 *
 * @example
 * ```ts
 * import { Policy, type RateLimiter } from "tollgate"
 *
 * const options: RateLimiter.Options = {
 *   policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } }),
 *   idleTimeout: "5 minutes",
 *   maxBuckets: 100_000
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** One policy for every key, or a function from key to policy (tiers, routes). */
  readonly policy: Policy.Policy | ((key: string) => Policy.Policy)
  /** How long a bucket stays after its last use before it may be reaped (once settled). Default 1 minute. */
  readonly idleTimeout?: Duration.Input | undefined
  /** Requests a bucket queues before new ones fail with `Overloaded`. Default 1024. */
  readonly mailboxCapacity?: number | undefined
  /** Callers that may wait in one key's line before new ones fail with `Overloaded`. Default 1024. */
  readonly maxWaiters?: number | undefined
  /**
   * Most live buckets (default 1,000,000). At the cap, a new key takes the
   * place of a bucket that is safe to forget (settled, nothing queued, nobody
   * waiting); if there is none, its call fails with `Overloaded` (reason
   * "buckets"). A flood of new keys cannot exhaust memory, and no existing
   * key is forgotten early. It also bounds the keys reconfigured to a policy
   * of their own: one more `reconfigure` of a new key past it fails the same
   * way (a key reconfigured back to its own policy gives its place up).
   */
  readonly maxBuckets?: number | undefined
  /** Longest key, in UTF-16 code units; longer keys fail with `InvalidRequest`. Default 512. */
  readonly maxKeyLength?: number | undefined
  /**
   * Decide uncontended requests on the caller's fiber, with the same pure step
   * the actor runs (default true); with a shared store, an idle key's request
   * is sent through the store from the caller's fiber. Off, every request
   * goes through the bucket's mailbox; its actor still gives its fiber back
   * once the key goes quiet.
   */
  readonly fastPath?: boolean | undefined
  /** The `limiter` label on this limiter's metrics. Default "default". */
  readonly name?: string | undefined
  /**
   * The limiter shares its keys through a store (`Store.CurrentStore`:
   * `RedisStore.layer`, `MemoryStore.layer`): with `shared: true` building it
   * needs one (a type error when none is provided, `InvalidPolicy` naming
   * `shared` if one is missing at run time), so a program that means to
   * share cannot run unshared by mistake. Without it, the limiter uses a
   * store if one is provided and keeps each key in its bucket otherwise.
   */
  readonly shared?: boolean | undefined
  /**
   * With a tracer installed, each call is a span (`RateLimiter.acquire`,
   * `.consume`, `.wait`, ...) with the limiter's name, the key's policy, the
   * cost and the decision; the key itself only with `traceKeys: true` (keys
   * are often personal data). Default false. Without a tracer, no span is
   * made.
   */
  readonly traceKeys?: boolean | undefined
  /**
   * What a waiter at the head of a line does when it does not fit yet.
   * `"block"` (the default): everyone behind it waits (strict order).
   * `{ pass: duration }`: waiters behind it that fit now go first, for as
   * long as the head has waited less than `pass`; from then on it blocks
   * until it is admitted, so a large cost is never starved. (In process;
   * with a shared store the line is strict.)
   */
  readonly headOfLine?: "block" | { readonly pass: Duration.Input } | undefined
  /**
   * With a shared store (`Store.CurrentStore`, e.g. `RedisStore.layer`): what
   * happens when it does not answer within `timeout` (default 250 ms).
   * `mode` "local" (default) decides in-process with `share` (default 1) of
   * each key's limit; "allow" fails open; "deny" fails closed; "error" fails
   * the call with `StoreUnavailable`. After a failure the store is skipped for
   * `retryAfter` (default 1 second), then tried again.
   */
  readonly fallback?: {
    readonly mode?: "local" | "allow" | "deny" | "error" | undefined
    readonly share?: number | undefined
    readonly timeout?: Duration.Input | undefined
    readonly retryAfter?: Duration.Input | undefined
  } | undefined
}

/**
 * What building a limiter with options `O` needs besides a `Scope`: the
 * store, when it is to share its keys (`shared: true`).
 *
 * @example
 * ```ts
 * import type { RateLimiter } from "tollgate"
 *
 * // a limiter that must share needs the store (Store.CurrentStore) to be built
 * type Shared = RateLimiter.Needs<RateLimiter.Options & { readonly shared: true }>
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export type Needs<O extends Options> = 0 extends (1 & O) ? never : O["shared"] extends true ? CurrentStore : never

/**
 * Options of `acquire` and `consume`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const upload = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   return yield* limiter.acquire("user:42", { cost: 5 })
 * })
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface AcquireOptions {
  /**
   * Units to take: an integer >= 0, 1 by default. A cost of 0 takes nothing
   * and reports the key as it stands (x/time/rate's `AllowN(t, 0)`).
   */
  readonly cost?: number | undefined
  /**
   * The length of the window this call opens, if it opens one
   * (rate-limiter-flexible's `customDuration`): only for a fixed window that
   * opens at its first hit; any other policy refuses it with
   * `InvalidRequest`. `Duration.infinity`: the window never ends. Default:
   * the policy's window.
   */
  readonly duration?: Duration.Input | undefined
}

/**
 * Options of `force` and `penalty`, and of `set`.
 *
 * @example
 * ```ts
 * import type { RateLimiter } from "tollgate"
 *
 * const options: RateLimiter.ForceOptions = { cost: 3, duration: "1 minute" }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface ForceOptions {
  /** Units to take: an integer >= 0, 1 by default. */
  readonly cost?: number | undefined
  /** As in {@link AcquireOptions}: the window this call opens, for a fixed window that opens at its first hit. */
  readonly duration?: Duration.Input | undefined
}

/**
 * Options of `add`.
 *
 * @example
 * ```ts
 * import type { RateLimiter } from "tollgate"
 *
 * // Bucket4j's forceAddTokens: above the limit if it comes to that
 * const options: RateLimiter.AddOptions = { overLimit: true }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface AddOptions {
  /**
   * Let the key hold more than its limit (Bucket4j's `forceAddTokens`);
   * by default the units added stop at the limit (Bucket4j's `addTokens`).
   */
  readonly overLimit?: boolean | undefined
}

/**
 * Options of `wait`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const send = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   yield* limiter.wait("user:42", { cost: 2, maxWait: "5 seconds" }) // or RateLimitExceeded at once
 * })
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface WaitOptions {
  /** Units to take: an integer >= 0, 1 by default. */
  readonly cost?: number | undefined
  /** Longest acceptable wait; past it the call fails at once with `RateLimitExceeded`. Unbounded by default. */
  readonly maxWait?: Duration.Input | undefined
  /**
   * The waiter's priority, an integer (default 0): a higher priority is
   * served first; within one priority, in order of arrival. Waiters it
   * passes are still held to their `maxWait`.
   */
  readonly priority?: number | undefined
  /**
   * The tenant the call is made for: waiters of different tenants share the
   * key by `weight` (fair queuing), so one tenant that floods cannot hold
   * back the others, and the share of a tenant that waits for nothing goes
   * to those that do.
   */
  readonly tenant?: string | undefined
  /** The tenant's weight, a positive number (default 1): its share is its weight over the waiting tenants' total. */
  readonly weight?: number | undefined
}

/**
 * Options of `reserve`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const reserve = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   return yield* limiter.reserve("user:42", { maxWait: "10 seconds" })
 * })
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface ReserveOptions {
  /** Units to take: an integer >= 0, 1 by default. */
  readonly cost?: number | undefined
  /** Longest acceptable delay; past it the call fails at once with `RateLimitExceeded`. Unbounded by default. */
  readonly maxWait?: Duration.Input | undefined
}

/**
 * A place in a key's line, taken now (x/time/rate's `Reservation`): act after
 * `delay`. `cancel` before then gives the place back: the reservation takes
 * nothing and those behind it move up. Cancelling after `delay` has passed
 * changes nothing, as the units were taken when its turn came.
 *
 * @example
 * ```ts
 * import { Duration, Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   const reservation = yield* limiter.reserve("user:42")
 *   if (Duration.isGreaterThan(reservation.delay, Duration.seconds(1))) {
 *     yield* reservation.cancel // not worth waiting for: give the place back
 *   } else {
 *     yield* Effect.sleep(reservation.delay)
 *   }
 * })
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Reservation {
  /** How long until the reservation's turn: zero when it was admitted at once (a shaper's delay, if it has one). */
  readonly delay: Duration.Duration
  /** Gives the place back, if its turn has not come yet. */
  readonly cancel: Effect.Effect<void>
}

/**
 * Options of `reconfigure`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Policy, RateLimiter } from "tollgate"
 *
 * const upgrade = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   const pro = Policy.tokenBucket({ capacity: 500, refill: { tokens: 50, per: "1 second" } })
 *   yield* limiter.reconfigure("user:42", pro, { carry: "proportional" })
 * })
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface ReconfigureOptions {
  /**
   * How the key's usage carries over (default `"as-is"`): `"reset"` starts
   * afresh, `"proportional"` keeps the same fraction of the limit,
   * `"as-is"` keeps the same units (capped by the new limit). Across
   * algorithms, the whole units available are carried the same way
   * (docs/algorithms.md, "Reconfigure").
   */
  readonly carry?: Carry | undefined
}

/**
 * What upstream said, for `feedback`: it coped (`"ok"`), it pushed back
 * (`"throttled"`: a 429, a 503, a timeout), or how long it took
 * (`{ latency }`, compared with the adaptive policy's target).
 *
 * @example
 * ```ts
 * import type { RateLimiter } from "tollgate"
 *
 * const signals: Array<RateLimiter.Feedback> = ["ok", "throttled", { latency: "250 millis" }]
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export type Feedback = "ok" | "throttled" | { readonly latency: Duration.Input }

/**
 * Options of `feedback`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const on429 = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   yield* limiter.feedback("upstream", "throttled", { retryAfter: "30 seconds" })
 * })
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface FeedbackOptions {
  /** With `"throttled"`: upstream's `Retry-After`; the key admits nothing before it has passed (a day at most). */
  readonly retryAfter?: Duration.Input | undefined
}

/**
 * The errors any call can end with.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const allowed = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   return yield* limiter.acquire("user:42")
 * }).pipe(Effect.catchTag("Overloaded", () => Effect.succeed(false)))
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type CallError = InvalidRequest | InvalidPolicy | Overloaded | LimiterShutdown | BucketFailed | StoreUnavailable

/**
 * Counts of what the limiter has done: live `buckets` and running `actors`,
 * buckets `started` and `reaped`, decisions `allowed` and `denied`, calls
 * refused as `overloaded`, requests `queued` and callers `waiting` now, keys
 * with a policy of their own (`overrides`), and, with a shared store, its
 * calls, the operations they carried, its failures and the decisions its
 * fallback made (`degraded`).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const program = Effect.gen(function*() {
 *   const stats: RateLimiter.Stats = yield* (yield* RateLimiter).stats
 *   return stats.storeOps / Math.max(1, stats.storeCalls) // the coalescing factor
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Stats = Supervisor.Stats

/**
 * A rate limiter: one bucket per key, each an actor.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Policy, RateLimiter } from "tollgate"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   const ok = yield* limiter.acquire("user:42")
 *   const d = yield* limiter.consume("user:42", { cost: 5 })
 *   yield* limiter.wait("user:42", { maxWait: "2 seconds" })
 * }).pipe(Effect.provide(RateLimiter.layer({
 *   policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
 * })))
 * ```
 *
 * @since 0.1.0
 * @category services
 */
export class RateLimiter extends Context.Service<RateLimiter, {
  /**
   * Takes `cost` units now if the key has them: `true` (go ahead) or `false`
   * (over the limit). Given several keys, takes from every one or from none.
   *
   * @example
   * ```ts
   * import { RateLimiter } from "tollgate"
   *
   * // true: go ahead; false: over the limit
   * const ok = RateLimiter.use((limiter) => limiter.acquire("user:42", { cost: 2 }))
   * ```
   */
  readonly acquire: (key: string | ReadonlyArray<string>, options?: AcquireOptions) => Effect.Effect<boolean, CallError>
  /**
   * Like `acquire`, with the figures: remaining, retryAfter, resetAfter,
   * limit (over several keys, the most restrictive, and each key's in `keys`).
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { RateLimiter } from "tollgate"
   *
   * const remaining = RateLimiter.use((limiter) => limiter.consume("user:42")).pipe(Effect.map((d) => d.remaining))
   * ```
   */
  readonly consume: (
    key: string | ReadonlyArray<string>,
    options?: AcquireOptions
  ) => Effect.Effect<Decision, CallError>
  /**
   * Waits its turn in the key's line; fails at once with `RateLimitExceeded`
   * if that is past `maxWait`. Given several keys, waits until every one
   * admits the cost and takes it from all at once.
   *
   * @example
   * ```ts
   * import { RateLimiter } from "tollgate"
   *
   * const turn = RateLimiter.use((limiter) => limiter.wait("user:42", { maxWait: "2 seconds" }))
   * ```
   */
  readonly wait: (
    key: string | ReadonlyArray<string>,
    options?: WaitOptions
  ) => Effect.Effect<void, CallError | RateLimitExceeded>
  /**
   * What `consume` would decide now, without taking anything (and without
   * starting a bucket): Bucket4j's `estimateAbilityToConsume`. A cost above
   * what the policy can ever grant is answered "never" (`retryAfter`
   * infinite), not refused.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { RateLimiter } from "tollgate"
   *
   * const wouldAllow = RateLimiter.use((limiter) => limiter.peek("user:42", { cost: 5 })).pipe(Effect.map((d) => d.allowed))
   * ```
   */
  readonly peek: (key: string, options?: AcquireOptions) => Effect.Effect<Decision, CallError>
  /**
   * Forgets the key's usage: its bucket goes back to the initial state (full,
   * by default), and a block ends. (Bucket4j's `reset()` refills to capacity
   * whatever the bucket starts with: that is `fill`.)
   *
   * @example
   * ```ts
   * import { RateLimiter } from "tollgate"
   *
   * const forget = RateLimiter.use((limiter) => limiter.reset("user:42"))
   * ```
   */
  readonly reset: (key: string) => Effect.Effect<void, CallError>
  /**
   * Takes a place in the key's line now and says when to act; see {@link Reservation}.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { RateLimiter } from "tollgate"
   *
   * const program = Effect.gen(function*() {
   *   const limiter = yield* RateLimiter
   *   const reservation = yield* limiter.reserve("user:42")
   *   yield* Effect.sleep(reservation.delay) // or yield* reservation.cancel, to give the place back
   * })
   * ```
   */
  readonly reserve: (
    key: string,
    options?: ReserveOptions
  ) => Effect.Effect<Reservation, CallError | RateLimitExceeded>
  /**
   * Runs `effect` once the key admits it (waiting its turn as `wait` does).
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { RateLimiter } from "tollgate"
   *
   * const send = RateLimiter.use((limiter) => limiter.limit("api.example.com")(Effect.succeed("sent")))
   * ```
   */
  readonly limit: (
    key: string,
    options?: WaitOptions
  ) => <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | CallError | RateLimitExceeded, R>
  /**
   * Gives `amount` units back to the key (a refund, or a permit returned to a
   * concurrency limit), never above its limit. Fails with `InvalidRequest` for
   * policies whose units only come back with time.
   *
   * @example
   * ```ts
   * import { RateLimiter } from "tollgate"
   *
   * const refund = RateLimiter.use((limiter) => limiter.release("user:42", 5))
   * ```
   */
  readonly release: (key: string, amount?: number) => Effect.Effect<void, CallError>
  /**
   * Runs `effect` holding `cost` units of the key (waiting its turn for them),
   * and gives them back when it ends: on success, failure or interruption.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { RateLimiter } from "tollgate"
   *
   * // with Policy.concurrency: at most `capacity` queries at once
   * const query = RateLimiter.use((limiter) => limiter.withPermit("db")(Effect.sleep("100 millis")))
   * ```
   */
  readonly withPermit: (
    key: string,
    options?: WaitOptions
  ) => <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | CallError | RateLimitExceeded, R>
  /**
   * Switches the key to a new policy, as a message to its bucket: in order with
   * its other requests; waiters in line are re-timed against the new limit
   * (and told at once if they can never be admitted under it).
   *
   * @example
   * ```ts
   * import { Policy, RateLimiter } from "tollgate"
   *
   * const pro = Policy.tokenBucket({ capacity: 500, refill: { tokens: 50, per: "1 second" } })
   * const upgrade = RateLimiter.use((limiter) => limiter.reconfigure("user:42", pro, { carry: "proportional" }))
   * ```
   */
  readonly reconfigure: (
    key: string,
    policy: Policy.Policy,
    options?: ReconfigureOptions
  ) => Effect.Effect<void, CallError>
  /**
   * What the limiter has done so far, and how many buckets are alive.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { RateLimiter } from "tollgate"
   *
   * const decided = RateLimiter.use((limiter) => limiter.stats).pipe(Effect.map(({ allowed, denied }) => allowed + denied))
   * ```
   */
  readonly stats: Effect.Effect<Stats>
  // Adaptive rates.
  /**
   * Tells a key with an adaptive policy (`Policy.adaptive`) how upstream
   * coped: `"ok"` raises its rate additively, `"throttled"` cuts it
   * multiplicatively (and, with `retryAfter`, admits nothing before then),
   * `{ latency }` compares with the policy's target. In-band: the key's
   * requests are served in order and its waiters are re-timed at the new
   * rate. Fails with `InvalidRequest` for a key whose policy has a fixed rate.
   *
   * @example
   * ```ts
   * import { RateLimiter } from "tollgate"
   *
   * // the upstream answered 429 with Retry-After: 30
   * const throttled = RateLimiter.use((limiter) => limiter.feedback("upstream", "throttled", { retryAfter: "30 seconds" }))
   * ```
   */
  readonly feedback: (key: string, signal: Feedback, options?: FeedbackOptions) => Effect.Effect<void, CallError>

  // ---------------------------------------------------------------------------
  // Beyond a plain decision: what the peers' users look for by name. Each is
  // one request to the key's bucket, in order with its others, decided by the
  // same rule on the caller's fiber and in the actor, and by the stores'
  // scripts; each answers the key as it stands after it (Bucket4j's verbose
  // results). See docs/algorithms.md, "Beyond the limit".

  /**
   * Takes `cost` units now whatever the limit (Bucket4j's
   * `consumeIgnoringRateLimits`): the key may go into debt, which it pays
   * back before anything else is admitted. Always admitted; `delay` is how
   * long until the key is within its limit again (absent: it is). Every
   * policy supports it.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { RateLimiter } from "tollgate"
   *
   * // how long until the key is within its limit again
   * const debt = RateLimiter.use((limiter) => limiter.force("user:42", { cost: 3 })).pipe(Effect.map((d) => d.delay))
   * ```
   */
  readonly force: (key: string, options?: ForceOptions) => Effect.Effect<Decision, CallError>
  /**
   * rate-limiter-flexible's `penalty(key, points)`: `force` of `points`
   * (default 1), with its `duration` per call.
   *
   * @example
   * ```ts
   * import { RateLimiter } from "tollgate"
   *
   * const failedLogin = RateLimiter.use((limiter) => limiter.penalty("login:alice", 2))
   * ```
   */
  readonly penalty: (
    key: string,
    points?: number,
    options?: { readonly duration?: Duration.Input | undefined }
  ) => Effect.Effect<Decision, CallError>
  /**
   * Gives `amount` units to the key and answers how it stands (Bucket4j's
   * `addTokens`): never above its limit, unless `overLimit` (Bucket4j's
   * `forceAddTokens`: a token bucket then holds more than its capacity
   * until requests spend it). Fails with `InvalidRequest` for a policy that
   * has no such units: `release`'s refusals, and with `overLimit` the
   * sliding window, sliding log, smooth, concurrency and adaptive policies.
   *
   * @example
   * ```ts
   * import { RateLimiter } from "tollgate"
   *
   * const bonus = RateLimiter.use((limiter) => limiter.add("user:42", 10, { overLimit: true }))
   * ```
   */
  readonly add: (key: string, amount: number, options?: AddOptions) => Effect.Effect<Decision, CallError>
  /**
   * rate-limiter-flexible's `reward(key, points)`: `add` of `points`
   * (default 1), never above the limit (rate-limiter-flexible lets a reward
   * lift a key above it; `add` with `overLimit` does that).
   *
   * @example
   * ```ts
   * import { RateLimiter } from "tollgate"
   *
   * const goodLogin = RateLimiter.use((limiter) => limiter.reward("login:alice", 1))
   * ```
   */
  readonly reward: (key: string, points?: number) => Effect.Effect<Decision, CallError>
  /**
   * The key full, nothing used, whatever it starts with (Bucket4j's
   * `reset()`, which refills to capacity; `reset` goes back to the key's
   * initial state). Ends a block.
   *
   * @example
   * ```ts
   * import { RateLimiter } from "tollgate"
   *
   * const full = RateLimiter.use((limiter) => limiter.fill("user:42"))
   * ```
   */
  readonly fill: (key: string) => Effect.Effect<Decision, CallError>
  /**
   * Takes as many units as the key admits now, at most `cost` (default: all
   * there are), and says how many (Bucket4j's `tryConsumeAsMuchAsPossible`).
   * Behind waiters, or blocked, it takes none.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { RateLimiter } from "tollgate"
   *
   * const taken = RateLimiter.use((limiter) => limiter.consumeUpTo("user:42", { cost: 10 })).pipe(Effect.map((d) => d.taken))
   * ```
   */
  readonly consumeUpTo: (key: string, options?: { readonly cost?: number | undefined }) => Effect.Effect<
    Taken,
    CallError
  >
  /**
   * How the key stands, or `Option.none()` when it has no state worth
   * keeping: never seen, deleted, or settled (forgetting it would change
   * nothing) (rate-limiter-flexible's `get`, which answers `null`).
   * Starts no bucket.
   *
   * @example
   * ```ts
   * import { Effect, Option } from "effect"
   * import { RateLimiter } from "tollgate"
   *
   * const seen = RateLimiter.use((limiter) => limiter.get("user:42")).pipe(Effect.map(Option.isSome))
   * ```
   */
  readonly get: (key: string) => Effect.Effect<Option.Option<Decision>, CallError>
  /**
   * The key as if `used` units had been taken from full, now
   * (rate-limiter-flexible's `set(key, points, duration)`); `used` above the
   * limit is a debt. `duration`: the window it opens, as for `acquire`. Ends
   * a block.
   *
   * @example
   * ```ts
   * import { RateLimiter } from "tollgate"
   *
   * // as if 4 units had been used, from full
   * const restored = RateLimiter.use((limiter) => limiter.set("user:42", 4))
   * ```
   */
  readonly set: (
    key: string,
    used: number,
    options?: { readonly duration?: Duration.Input | undefined }
  ) => Effect.Effect<Decision, CallError>
  /**
   * Forgets the key (rate-limiter-flexible's `delete`): its state, a block,
   * and a policy or rate it was given by `reconfigure` or `setRate` (it comes
   * back under the limiter's policy, as a key never seen); says whether it
   * had state worth keeping.
   *
   * @example
   * ```ts
   * import { RateLimiter } from "tollgate"
   *
   * // true when the key had any state
   * const existed = RateLimiter.use((limiter) => limiter.delete("user:42"))
   * ```
   */
  readonly delete: (key: string) => Effect.Effect<boolean, CallError>
  /**
   * Refuses every request for the key for `duration` from now
   * (rate-limiter-flexible's `block`; `Duration.infinity`: until `reset`,
   * `fill`, `set` or `delete`), with `retryAfter` running to its end. A new
   * block replaces one in force. Requests refused by the block take nothing.
   *
   * @example
   * ```ts
   * import { RateLimiter } from "tollgate"
   *
   * const banned = RateLimiter.use((limiter) => limiter.block("ip:203.0.113.7", "15 minutes"))
   * ```
   */
  readonly block: (key: string, duration: Duration.Input) => Effect.Effect<Decision, CallError>
  /**
   * Changes the key's rate, keeping the rest of its policy (Guava's
   * `setRate(permitsPerSecond)`, x/time/rate's `SetLimit`): a smooth policy
   * keeps its `nextFree` (the next request pays the previous one's cost at
   * the old rate) and rescales its stored permits; a token bucket keeps the
   * tokens it holds and refills at the new rate from now (0 stops it). Any
   * other policy fails with `InvalidRequest` (`reconfigure` changes any
   * policy). The key keeps the new rate across reaps, as after `reconfigure`,
   * until it is set back to its policy's own rate, reconfigured or deleted.
   * Keys at the same rate share one policy, so a rate costs a key no more
   * than a `reconfigure` does.
   *
   * @example
   * ```ts
   * import { RateLimiter } from "tollgate"
   *
   * // 20 per second from now on, the rest of the key's policy kept
   * const faster = RateLimiter.use((limiter) => limiter.setRate("user:42", 20))
   * ```
   */
  readonly setRate: (key: string, perSecond: number) => Effect.Effect<void, CallError>
}>()("tollgate/RateLimiter") {
  /**
   * Builds a limiter in the current scope; closing the scope shuts it down
   * (every pending call ends with a decision or `LimiterShutdown`).
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { Policy, RateLimiter } from "tollgate"
   *
   * const program = Effect.scoped(Effect.gen(function*() {
   *   const limiter = yield* RateLimiter.make({ policy: Policy.fixedWindow({ limit: 10, window: "1 minute" }) })
   *   return yield* limiter.acquire("user:42")
   * }))
   * ```
   *
   * @since 0.1.0
   * @category constructors
   */
  static readonly make: <const O extends Options>(
    options: O
  ) => Effect.Effect<RateLimiter["Service"], InvalidPolicy, Scope.Scope | Needs<O>> = Effect
    .fnUntraced(function*(options: Options) {
      const settings = yield* validateOptions(options)
      const found = yield* Effect.serviceOption(CurrentStore)
      if (options.shared === true && Option.isNone(found)) {
        return yield* new InvalidPolicy({
          field: "shared",
          value: "true",
          reason:
            "needs a store to share keys through: provide Store.CurrentStore (RedisStore.layer, MemoryStore.layer)"
        })
      }
      const store = Option.isSome(found) ? Engine.engineOf(found.value) : undefined
      yield* Effect.logDebug(
        `tollgate: limiter ${JSON.stringify(settings.supervisor.name)} keeps its keys ${
          store === undefined ? "in this process" : `in the ${store.name} store`
        }`
      )
      const supervisor = yield* Supervisor.make({ ...settings.supervisor, store })
      const { maxKeyLength } = settings
      const maxKeys = 64
      const rated = new RatedPolicies()
      const { name } = settings.supervisor
      const traceKeys = options.traceKeys === true

      const door: Door = { supervisor, maxKeyLength, name, traceKeys }
      const traced = <A, E>(
        fiber: Fiber.Fiber<unknown, unknown>,
        operation: string,
        key: string | ReadonlyArray<string>,
        cost: number,
        effect: Effect.Effect<A, E>
      ): Effect.Effect<A, E> => tracedBy(door, fiber, operation, key, cost, effect)
      const checkKey = (key: string): InvalidRequest | undefined => keyProblem(key, maxKeyLength)

      // Several keys: at least one, at most maxKeys, each valid, no two alike.
      const checkKeys = (keys: ReadonlyArray<string>): InvalidRequest | undefined => {
        if (!Array.isArray(keys)) {
          return new InvalidRequest({
            field: "key",
            value: typeof keys,
            reason: "must be a string or an array of strings"
          })
        }
        if (keys.length === 0 || keys.length > maxKeys) {
          return new InvalidRequest({
            field: "keys",
            value: String(keys.length),
            reason: `must name between 1 and ${maxKeys} keys`
          })
        }
        const seen = new Set<string>()
        for (let i = 0; i < keys.length; i++) {
          const invalid = checkKey(keys[i])
          if (invalid !== undefined) return new InvalidRequest({ ...invalid, field: `keys[${i}]` })
          if (seen.has(keys[i])) {
            return new InvalidRequest({
              field: `keys[${i}]`,
              value: JSON.stringify(keys[i]),
              reason: "is named twice"
            })
          }
          seen.add(keys[i])
        }
        return undefined
      }

      // Effects are descriptions: the decision is made each time one runs.
      const decide = <K extends Request.DecideKind>(kind: K, key: string, options: AcquireOptions | undefined) =>
        new DecideCall<K>(door, kind, key, options)

      const decideAll = <A>(
        operation: string,
        keys: ReadonlyArray<string>,
        options: AcquireOptions | undefined,
        f: (keys: ReadonlyArray<string>, cost: number) => Effect.Effect<A, CallError>
      ) =>
        Effect.withFiber((fiber) => {
          const invalid = checkKeys(keys) ?? checkCost(options?.cost)
          if (invalid !== undefined) return Effect.fail(invalid)
          return traced(fiber, operation, keys, options?.cost ?? 1, f(keys, options?.cost ?? 1))
        })

      // A waiter's maxWait and order, checked.
      const waitArgs = (options: WaitOptions | undefined) => {
        const maxWait = options?.maxWait === undefined ? Infinity : parseMaxWait(options.maxWait)
        if (maxWait instanceof InvalidRequest) return maxWait
        const order = options === undefined ? undefined : orderOf(options, maxKeyLength)
        return order instanceof InvalidRequest ? order : { maxWait, order }
      }
      // One of the operations beyond a plain decision: the key and the
      // numbers checked, then one request to the key's bucket.
      const beyond = <K extends Request.DecideKind>(
        kind: K,
        key: string,
        cost: InvalidRequest | number,
        duration?: Duration.Input
      ) =>
        Effect.suspend(() => {
          const invalid = checkKey(key) ?? (cost instanceof InvalidRequest ? cost : undefined)
          if (invalid !== undefined) return Effect.fail(invalid)
          const units = cost instanceof InvalidRequest ? 0 : cost
          if (duration === undefined) return supervisor.submitUnsafe(key, kind, units, 0)
          const window = parseWindow(duration)
          if (window instanceof InvalidRequest) return Effect.fail(window)
          return supervisor.submitUnsafe(key, kind, units, 0, { window })
        })
      const add = (key: string, amount: number, options?: AddOptions) =>
        beyond(
          options?.overLimit === true ? Request.Kind.ForceAdd : Request.Kind.Add,
          key,
          units("amount", amount, 1, 1)
        )

      // A call that may wait, on one key or several: its keys (`check`) and
      // numbers checked when it runs, then `go` with its cost and its maxWait
      // and order. (A caller without types may pass anything as a key: each
      // door checks its own kind of key.)
      const waiting = <A, E>(
        operation: string,
        key: string | ReadonlyArray<string>,
        check: () => InvalidRequest | undefined,
        options: WaitOptions | undefined,
        go: (cost: number, args: Exclude<ReturnType<typeof waitArgs>, InvalidRequest>) => Effect.Effect<A, E>
      ): Effect.Effect<A, E | InvalidRequest> =>
        Effect.withFiber((fiber): Effect.Effect<A, E | InvalidRequest> => {
          const invalid = check() ?? checkCost(options?.cost)
          if (invalid !== undefined) return Effect.fail(invalid)
          const args = waitArgs(options)
          if (args instanceof InvalidRequest) return Effect.fail(args)
          const cost = options?.cost ?? 1
          return traced(fiber, operation, key, cost, go(cost, args))
        })
      const waitFor = <K extends Request.WaitKind>(
        kind: K,
        key: string,
        options: WaitOptions | undefined,
        operation = operations[kind]
      ) =>
        waiting(
          operation,
          key,
          () => checkKey(key),
          options,
          (cost, args) => supervisor.submitUnsafe(key, kind, cost, args.maxWait, args.order)
        )
      const waitAll = (keys: ReadonlyArray<string>, options: WaitOptions | undefined) =>
        waiting(
          "wait",
          keys,
          () => checkKeys(keys),
          options,
          (cost, args) => AllOrNothing.wait(supervisor, keys, cost, args.maxWait, args.order)
        )
      const wait = (key: string | ReadonlyArray<string>, options: WaitOptions | undefined) =>
        Predicate.isString(key) ? waitFor(Request.Kind.Wait, key, options) : waitAll(key, options)

      const release = (key: string, amount?: number) =>
        Effect.suspend(() => {
          const invalid = checkKey(key) ??
            (amount === undefined || (Number.isSafeInteger(amount) && amount > 0)
              ? undefined
              : new InvalidRequest({ field: "amount", value: String(amount), reason: "must be a positive integer" }))
          if (invalid !== undefined) return Effect.fail(invalid)
          return supervisor.submitUnsafe(key, Request.Kind.Release, amount ?? 1, 0)
        })

      return RateLimiter.of({
        acquire: (key, options) =>
          Predicate.isString(key)
            ? decide(Request.Kind.Acquire, key, options)
            : decideAll("acquire", key, options, (keys, cost) => AllOrNothing.acquire(supervisor, keys, cost)),
        consume: (key, options) =>
          Predicate.isString(key)
            ? decide(Request.Kind.Consume, key, options)
            : decideAll("consume", key, options, (keys, cost) => AllOrNothing.consume(supervisor, keys, cost)),
        peek: (key, options) => decide(Request.Kind.Peek, key, options),
        reset: (key) =>
          Effect.suspend(() => {
            const invalid = checkKey(key)
            return invalid !== undefined
              ? Effect.fail(invalid)
              : supervisor.submitUnsafe(key, Request.Kind.Reset, 0, 0)
          }),
        wait,
        reserve: (key, options) =>
          Effect.map(
            waitFor(Request.Kind.Reserve, key, options),
            (reserved): Reservation => ({ delay: Duration.millis(reserved.delay), cancel: reserved.cancel })
          ),
        // One key only (a permit over several keys is not offered): waitFor
        // refuses an array, so withPermit never takes what it cannot give back.
        limit: (key, options) => (effect) => Effect.andThen(waitFor(Request.Kind.Wait, key, options, "limit"), effect),
        release,
        withPermit: (key, options) => (effect) =>
          Effect.uninterruptibleMask((restore) =>
            Effect.andThen(
              restore(waitFor(Request.Kind.Wait, key, options, "withPermit")),
              Effect.ensuring(restore(effect), Effect.ignore(release(key, options?.cost ?? 1)))
            )
          ),
        force: (key, options) => beyond(Request.Kind.Force, key, units("cost", options?.cost, 1, 0), options?.duration),
        penalty: (key, points, options) =>
          beyond(Request.Kind.Force, key, units("points", points, 1, 0), options?.duration),
        add,
        reward: (key, points) => add(key, points ?? 1),
        fill: (key) => beyond(Request.Kind.Fill, key, 0),
        consumeUpTo: (key, options) =>
          beyond(Request.Kind.TakeUpTo, key, units("cost", options?.cost, Number.MAX_SAFE_INTEGER, 1)),
        get: (key) => beyond(Request.Kind.Get, key, 0),
        set: (key, used, options) => beyond(Request.Kind.Set, key, units("used", used, 0, 0), options?.duration),
        delete: (key) => beyond(Request.Kind.Delete, key, 0),
        block: (key, duration) =>
          Effect.suspend(() => {
            const window = parseWindow(duration)
            if (window instanceof InvalidRequest) return Effect.fail(window)
            return beyond(Request.Kind.Block, key, 0, duration)
          }),
        setRate: (key, perSecond) =>
          Effect.suspend(() => {
            const invalid = checkKey(key)
            if (invalid !== undefined) return Effect.fail(invalid)
            const limit = supervisor.policyOf(key)
            if (limit instanceof InvalidPolicy) return Effect.fail(limit)
            const policy = validOf(limit)
            if (policy === undefined) return Effect.die(new Error("a key's policy is no Policy"))
            const next = rated.withRate(policy, perSecond)
            if (next._tag === "Invalid") {
              return Effect.fail(
                new InvalidRequest({ field: "rate", value: String(perSecond), reason: next.error.reason })
              )
            }
            return supervisor.submitUnsafe(key, Request.Kind.Reconfigure, 0, 0, {
              policy: next,
              carry: "as-is",
              rate: policy.rule.rate?.of
            })
          }),
        reconfigure: (key, policy, options) =>
          Effect.suspend(() => {
            const invalid = checkKey(key)
            if (invalid !== undefined) return Effect.fail(invalid)
            if (!Policy.isPolicy(policy)) {
              return Effect.fail(
                new InvalidPolicy({ field: "policy", value: typeof policy, reason: "must be a Policy" })
              )
            }
            if (policy._tag === "Invalid") return Effect.fail(policy.error)
            const carry = options?.carry ?? "as-is"
            if (carry !== "reset" && carry !== "proportional" && carry !== "as-is") {
              return Effect.fail(
                new InvalidPolicy({
                  field: "carry",
                  value: String(carry),
                  reason: "must be reset, proportional or as-is"
                })
              )
            }
            return supervisor.submitUnsafe(key, Request.Kind.Reconfigure, 0, 0, { policy, carry })
          }),
        stats: supervisor.stats,
        feedback: (key, signal, options) =>
          Effect.suspend(() => {
            const invalid = checkKey(key)
            if (invalid !== undefined) return Effect.fail(invalid)
            const payload = signalOf(signal, options)
            if (payload instanceof InvalidRequest) return Effect.fail(payload)
            return supervisor.submitUnsafe(key, Request.Kind.Feedback, 0, 0, payload)
          })
      })
    })

  /**
   * The limiter as a layer.
   *
   * @example
   * ```ts
   * import { Policy, RateLimiter } from "tollgate"
   *
   * const LimiterLive = RateLimiter.layer({
   *   policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } }),
   *   idleTimeout: "1 minute",
   *   mailboxCapacity: 1024
   * })
   * ```
   *
   * @since 0.1.0
   */
  static readonly layer = <const O extends Options>(options: O): Layer.Layer<RateLimiter, InvalidPolicy, Needs<O>> =>
    Layer.effect(RateLimiter, RateLimiter.make(options))
}

// What a limiter's doors share, read by a call when it runs.
interface Door {
  readonly supervisor: Supervisor.Supervisor
  readonly maxKeyLength: number
  readonly name: string | undefined
  readonly traceKeys: boolean
}

// A key a limiter takes: a string of 1 to `maxKeyLength` characters.
const keyFits = (key: string, maxKeyLength: number): boolean =>
  typeof key === "string" && key.length > 0 && key.length <= maxKeyLength

// A key that cannot be a key: not a string, empty, or longer than `maxKeyLength`.
const keyProblem = (key: string, maxKeyLength: number): InvalidRequest | undefined => {
  if (keyFits(key, maxKeyLength)) return undefined
  if (!Predicate.isString(key)) {
    return new InvalidRequest({ field: "key", value: typeof key, reason: "must be a string" })
  }
  if (key.length === 0) return new InvalidRequest({ field: "key", value: "\"\"", reason: "must not be empty" })
  return new InvalidRequest({
    field: "key",
    value: JSON.stringify(key.slice(0, 32) + "…"),
    reason: `is ${key.length} long; the limit is ${maxKeyLength}`
  })
}

// A span per call, only when a tracer is installed to see it. A door hands
// over the fiber that runs it (`Effect.withFiber`, or a call's `evaluate`),
// so the check does not look the running fiber up.
const tracedBy = <A, E>(
  door: Door,
  fiber: Fiber.Fiber<unknown, unknown>,
  operation: string,
  key: string | ReadonlyArray<string>,
  cost: number,
  effect: Effect.Effect<A, E>
): Effect.Effect<A, E> =>
  Trace.enabled(fiber)
    ? Trace.span(`RateLimiter.${operation}`, () => {
      const attributes: Record<string, unknown> = {
        "tollgate.limiter": door.name,
        "tollgate.cost": cost,
        "tollgate.policy": Predicate.isString(key) ? policyName(door, key) : "several keys"
      }
      if (door.traceKeys) attributes["tollgate.key"] = Predicate.isString(key) ? key : key.join(" ")
      return attributes
    }, effect)
    : effect

const policyName = (door: Door, key: string): string => {
  const policy = door.supervisor.policyOf(key)
  return policy instanceof InvalidPolicy ? "invalid" : policy.rule.name
}

// A decision on one key (`acquire`, `consume`, `peek`), checked and made
// when the call runs, on the fiber that runs it.
const decideNow = <K extends Request.DecideKind>(
  door: Door,
  fiber: Fiber.Fiber<unknown, unknown>,
  kind: K,
  key: string,
  options: AcquireOptions | undefined
): Effect.Effect<Request.Reply<K>, DecideError<K>> => {
  const invalid = keyProblem(key, door.maxKeyLength) ?? checkCost(options?.cost)
  if (invalid !== undefined) return Effect.fail(invalid)
  const cost = options?.cost ?? 1
  if (options?.duration === undefined) {
    return tracedBy(door, fiber, operations[kind], key, cost, door.supervisor.submitUnsafe(key, kind, cost, 0))
  }
  const window = parseWindow(options.duration)
  if (window instanceof InvalidRequest) return Effect.fail(window)
  return tracedBy(
    door,
    fiber,
    operations[kind],
    key,
    cost,
    door.supervisor.submitUnsafe(key, kind, cost, 0, { window })
  )
}

// A single-key decision as the program holds it: one object, whose
// prototype's `evaluate` (Effect's `Effectable.Prototype`) decides each time
// the call runs. The commonest call is made this way because
// `Effect.withFiber` makes three objects a call (the effect, a closure and
// the closure's captured variables) where this makes one: about 10 ns of a
// call of about 110 (bench/history.md, 2026-11-28).
class DecideCall<K extends Request.DecideKind> implements Effect.Effect<Request.Reply<K>, DecideError<K>> {
  // What makes it an Effect: from its prototype (set after the class),
  // declared here for the compiler.
  declare readonly "~effect/Effect": Effect.Variance<Request.Reply<K>, DecideError<K>, never>
  declare readonly [Symbol.iterator]: () => Effect.EffectIterator<Effect.Effect<Request.Reply<K>, DecideError<K>>>
  declare readonly pipe: Pipeable["pipe"]
  declare readonly toJSON: () => unknown
  declare readonly toString: () => string
  declare readonly [Inspectable.NodeInspectSymbol]: () => unknown
  readonly door: Door
  readonly kind: K
  readonly key: string
  readonly options: AcquireOptions | undefined
  constructor(door: Door, kind: K, key: string, options: AcquireOptions | undefined) {
    this.door = door
    this.kind = kind
    this.key = key
    this.options = options
  }
}
type DecideError<K extends Request.DecideKind> = CallError | Request.FailureOf<K>
Object.setPrototypeOf(
  DecideCall.prototype,
  Effectable.Prototype<DecideCall<Request.DecideKind>>({
    label: "tollgate/RateLimiter/decide",
    evaluate(fiber) {
      const door = this.door
      const key = this.key
      // The commonest call (a fitting key, no options, no tracer) is checked
      // by as few tests as can check it, and goes straight in: about 5 % of a
      // lone call (bench/history.md, 2026-11-28). Any other: `decideNow`.
      if (this.options === undefined && keyFits(key, door.maxKeyLength) && Trace.none(fiber)) {
        return door.supervisor.submitUnsafe(key, this.kind, 1, 0)
      }
      return decideNow(door, fiber, this.kind, key, this.options)
    }
  })
)

const checkCost = (cost: number | undefined): InvalidRequest | undefined =>
  cost === undefined || (Number.isSafeInteger(cost) && cost >= 0)
    ? undefined
    : new InvalidRequest({
      field: "cost",
      value: Predicate.isNumber(cost) ? String(cost) : typeof cost,
      reason: "must be an integer >= 0"
    })

// A count of units given to an operation: a safe integer of at least `least`
// (its default when left out), or the InvalidRequest naming it.
const units = (field: string, n: number | undefined, fallback: number, least: number): number | InvalidRequest =>
  n === undefined
    ? fallback
    : Number.isSafeInteger(n) && n >= least
    ? n
    : new InvalidRequest({
      field,
      value: Predicate.isNumber(n) ? String(n) : typeof n,
      reason: least > 0 ? "must be a positive integer" : "must be an integer >= 0"
    })

// A window a call opens, or a block's length: positive milliseconds, or
// Infinity (for ever).
// Each traced kind's span name (`RateLimiter.<name>`).
const operations: { readonly [K in Request.DecideKind | Request.WaitKind]: string } = {
  [Request.Kind.Acquire]: "acquire",
  [Request.Kind.Consume]: "consume",
  [Request.Kind.Peek]: "peek",
  [Request.Kind.Wait]: "wait",
  [Request.Kind.Reserve]: "reserve",
  [Request.Kind.HoldWait]: "wait",
  [Request.Kind.Reset]: "reset",
  [Request.Kind.Release]: "release",
  [Request.Kind.Reconfigure]: "reconfigure",
  [Request.Kind.Force]: "force",
  [Request.Kind.Add]: "add",
  [Request.Kind.ForceAdd]: "add",
  [Request.Kind.Fill]: "fill",
  [Request.Kind.TakeUpTo]: "consumeUpTo",
  [Request.Kind.Get]: "get",
  [Request.Kind.Set]: "set",
  [Request.Kind.Delete]: "delete",
  [Request.Kind.Block]: "block",
  [Request.Kind.Hold]: "hold",
  [Request.Kind.Feedback]: "feedback",
  [Request.Kind.Transact]: "transact"
}

// The policies `setRate` makes, shared by value: every key set to one rate
// of one policy holds the same policy object (a policy with its bound rule
// is about a kilobyte; one per key was a kilobyte per key for ever). A rate
// is always derived from the policy the key's rates started from, and that
// policy's own rate gives it back, so a key set back to its rate holds its
// policy again (and gives up its place among the reconfigured keys when
// that is the limiter's). At most `perPolicy` rates are kept per policy (the
// most recently made): a limiter that sets ever new rates makes new ones.
class RatedPolicies {
  private readonly roots = new WeakMap<Policy.Valid, Policy.Valid>()
  private readonly made = new WeakMap<Policy.Valid, Map<number, Policy.Valid>>()
  private readonly perPolicy = 256
  withRate(policy: Policy.Valid, perSecond: number): Policy.Policy {
    const root = this.roots.get(policy) ?? policy
    let rates = this.made.get(root)
    const known = rates?.get(perSecond)
    if (known !== undefined) return known
    const next = Policy.withRate(root, perSecond)
    if (next._tag === "Invalid") return next
    const [count, per] = next.rule.rate?.of ?? [NaN, NaN]
    const own = root.rule.rate?.of
    const shared = own !== undefined && own[0] === count && own[1] === per ? root : next
    if (rates === undefined) this.made.set(root, rates = new Map())
    if (rates.size >= this.perPolicy) {
      const oldest = rates.keys().next()
      if (oldest.done !== true) rates.delete(oldest.value)
    }
    rates.set(perSecond, shared)
    this.roots.set(shared, root)
    return shared
  }
}

// A duration given to a call, in milliseconds if `fits` them, or the
// InvalidRequest naming `field`. Duration.fromInput reads NaN as zero: it is
// refused before it gets there.
const durationArg = (
  field: string,
  input: Duration.Input,
  fits: (millis: number) => boolean,
  reason: string
): number | InvalidRequest => {
  const duration = Predicate.isNumber(input) && Number.isNaN(input) ? undefined : Duration.fromInput(input)
  if (duration?._tag === "Some") {
    const millis = Duration.toMillis(duration.value)
    if (fits(millis)) return millis
  }
  return new InvalidRequest({
    field,
    value: Predicate.isString(input) || Predicate.isNumber(input) ? String(input) : typeof input,
    reason
  })
}

const parseWindow = (input: Duration.Input): number | InvalidRequest =>
  durationArg("duration", input, (millis) => millis > 0, "must be a positive duration (or Duration.infinity)")

const parseMaxWait = (input: Duration.Input): number | InvalidRequest =>
  durationArg("maxWait", input, (millis) => millis >= 0 && !Number.isNaN(millis), "must be a duration >= 0")

// A waiter's order: priority, tenant and weight, each checked; undefined
// when none is given (a plain FIFO waiter).
const orderOf = (options: WaitOptions, maxKeyLength: number): Request.Order | InvalidRequest | undefined => {
  const { priority, tenant, weight } = options
  if (priority === undefined && tenant === undefined && weight === undefined) return undefined
  if (priority !== undefined && !Number.isSafeInteger(priority)) {
    return new InvalidRequest({ field: "priority", value: String(priority), reason: "must be an integer" })
  }
  if (tenant !== undefined && !(Predicate.isString(tenant) && tenant.length > 0 && tenant.length <= maxKeyLength)) {
    return new InvalidRequest({
      field: "tenant",
      value: Predicate.isString(tenant) ? JSON.stringify(tenant.slice(0, 32)) : typeof tenant,
      reason: `must be a non-empty string of at most ${maxKeyLength}`
    })
  }
  if (weight !== undefined) {
    if (!(Predicate.isNumber(weight) && weight > 0 && Number.isFinite(weight))) {
      return new InvalidRequest({ field: "weight", value: String(weight), reason: "must be a positive number" })
    }
    if (tenant === undefined) {
      return new InvalidRequest({ field: "weight", value: String(weight), reason: "needs a tenant" })
    }
  }
  return { priority: priority ?? 0, tenant, weight: weight ?? 1 }
}

const signalOf = (signal: Feedback, options: FeedbackOptions | undefined): Request.Signal | InvalidRequest => {
  if (signal === "ok") return { signal, millis: 0 }
  if (signal === "throttled") {
    if (options?.retryAfter === undefined) return { signal, millis: 0 }
    const millis = parseMaxWait(options.retryAfter)
    if (millis instanceof InvalidRequest) return new InvalidRequest({ ...millis, field: "retryAfter" })
    return { signal, millis: Math.min(millis, 86_400_000) }
  }
  if (Predicate.isObject(signal) && "latency" in signal) {
    const millis = parseMaxWait(signal.latency)
    if (millis instanceof InvalidRequest) return new InvalidRequest({ ...millis, field: "latency" })
    return { signal: "latency", millis }
  }
  return new InvalidRequest({
    field: "signal",
    value: Predicate.isString(signal) ? JSON.stringify(signal) : typeof signal,
    reason: "must be \"ok\", \"throttled\" or { latency }"
  })
}

// The limiter's own options, each checked by its rule (the same rules as the
// policies'), in the order they are named when several are bad.
const Share = Rules.number("must be a number in (0, 1]", (n) => n > 0 && n <= 1)
const LimiterOptions = Schema.Struct({
  fastPath: Rules.optional(Rules.Flag),
  shared: Rules.optional(Rules.Flag),
  traceKeys: Rules.optional(Rules.Flag),
  name: Rules.optional(Schema.NonEmptyString.annotate({ message: "must be a non-empty string" })),
  idleTimeout: Rules.optional(Rules.PositiveDuration),
  mailboxCapacity: Rules.optional(Rules.PositiveInteger),
  maxWaiters: Rules.optional(Rules.PositiveInteger),
  fallback: Rules.optional(
    Schema.Struct({
      mode: Rules.optional(
        Schema.Literals(["local", "allow", "deny", "error"]).annotate({
          message: "must be local, allow, deny or error"
        })
      ),
      share: Rules.optional(Share),
      timeout: Rules.optional(Rules.PositiveDuration),
      retryAfter: Rules.optional(Rules.PositiveDuration)
    }).annotate({ message: "must be { mode, share, timeout, retryAfter } or left out" })
  ),
  maxBuckets: Rules.optional(Rules.PositiveInteger),
  maxKeyLength: Rules.optional(Rules.PositiveInteger),
  headOfLine: Rules.optional(
    Schema.Union([
      Schema.Literal("block"),
      Schema.Struct({ pass: Rules.PositiveDuration })
    ]).annotate({ message: "must be \"block\" or { pass: duration }" })
  )
})

// A bad option's value: a string quoted (as in a policy's errors), an object by its type.
const showOption = (value: unknown): string =>
  Predicate.isString(value) ? JSON.stringify(value) : Predicate.isObject(value) ? typeof value : String(value)

// The policy option: one Policy, or a function from key to Policy (whose
// result is checked each time it is asked, and a throw is an InvalidPolicy).
const policyOf = (policy: Options["policy"]): ((key: string) => Policy.Valid | InvalidPolicy) | InvalidPolicy => {
  if (Predicate.isFunction(policy)) {
    return (key) => {
      try {
        const p = policy(key)
        if (!Policy.isPolicy(p)) {
          return new InvalidPolicy({
            field: "policy",
            value: typeof p,
            reason: `the policy function returned no Policy`
          })
        }
        return p._tag === "Invalid" ? p.error : p
      } catch (cause) {
        return new InvalidPolicy({ field: "policy", value: "function", reason: `the policy function threw: ${cause}` })
      }
    }
  }
  if (!Policy.isPolicy(policy)) {
    return new InvalidPolicy({ field: "policy", value: typeof policy, reason: "must be a Policy" })
  }
  if (policy._tag === "Invalid") return policy.error
  return () => policy
}

// Every policy a limiter holds was made by Policy's constructors: the core
// sees it as a `Limit`, and this gives it back its public type.
const validOf = (limit: Limit): Policy.Valid | undefined => {
  const policy: unknown = limit
  return Policy.isPolicy(policy) && policy._tag !== "Invalid" ? policy : undefined
}

// The local fallback's policy: `fraction` of the key's.
const shareOf = (fraction: number) => (limit: Limit): Limit => {
  const policy = validOf(limit)
  return policy === undefined ? limit : Policy.share(policy, fraction)
}

const validateOptions = (options: Options): Effect.Effect<{
  readonly supervisor: Supervisor.Options
  readonly maxKeyLength: number
}, InvalidPolicy> =>
  Effect.suspend(() => {
    if (!Predicate.isObject(options)) {
      return Effect.fail(new InvalidPolicy({ field: "options", value: String(options), reason: "must be an object" }))
    }
    const decoded = Rules.decode(LimiterOptions, options, { root: "", show: showOption })
    if (Result.isFailure(decoded)) return Effect.fail(new InvalidPolicy(decoded.failure))
    const o = decoded.success
    const policyFor = policyOf(options.policy)
    if (!Predicate.isFunction(policyFor)) return Effect.fail(policyFor)
    return Effect.succeed({
      supervisor: {
        policyFor,
        limits: {
          mailboxCapacity: o.mailboxCapacity ?? 1024,
          maxWaiters: o.maxWaiters ?? 1024,
          passMillis: o.headOfLine === undefined || o.headOfLine === "block" ? 0 : o.headOfLine.pass
        },
        idleTimeoutMillis: o.idleTimeout ?? 60_000,
        maxBuckets: o.maxBuckets ?? 1_000_000,
        fallback: {
          mode: o.fallback?.mode ?? "local",
          share: o.fallback?.share ?? 1,
          local: shareOf(o.fallback?.share ?? 1),
          timeoutMillis: o.fallback?.timeout ?? 250,
          retryMillis: o.fallback?.retryAfter ?? 1000
        },
        fastPath: o.fastPath ?? true,
        name: o.name ?? "default"
      },
      maxKeyLength: o.maxKeyLength ?? 512
    })
  })

type Options_ = Options
type Needs_<O extends Options> = Needs<O>
type AcquireOptions_ = AcquireOptions
type WaitOptions_ = WaitOptions
type CallError_ = CallError
type Stats_ = Stats
type Reservation_ = Reservation
type ReserveOptions_ = ReserveOptions
type ReconfigureOptions_ = ReconfigureOptions
type Feedback_ = Feedback
type FeedbackOptions_ = FeedbackOptions
type ForceOptions_ = ForceOptions
type AddOptions_ = AddOptions

/**
 * The types that go with the service, reachable as `RateLimiter.Options` etc.
 *
 * @example
 * ```ts
 * import { Policy, RateLimiter } from "tollgate"
 *
 * const options: RateLimiter.Options = {
 *   policy: Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } })
 * }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export declare namespace RateLimiter {
  /**
   * Options of `RateLimiter.make` and `RateLimiter.layer` (see {@link Options}).
   *
   * @example
   * ```ts
   * import { Policy, type RateLimiter } from "tollgate"
   *
   * const options: RateLimiter.Options = { policy: Policy.gcra({ rate: { count: 30, per: "1 minute" }, maxBurst: 15 }) }
   * ```
   *
   * @category models
   * @since 0.1.0
   */
  export type Options = Options_
  /**
   * What building a limiter with options `O` needs (see {@link Needs}).
   *
   * @example
   * ```ts
   * import type { RateLimiter } from "tollgate"
   *
   * type Shared = RateLimiter.Needs<RateLimiter.Options & { readonly shared: true }>
   * ```
   *
   * @category models
   * @since 0.3.0
   */
  export type Needs<O extends Options_> = Needs_<O>
  /**
   * Options of `acquire` and `consume` (see {@link AcquireOptions}).
   *
   * @example
   * ```ts
   * import type { RateLimiter } from "tollgate"
   *
   * const heavy: RateLimiter.AcquireOptions = { cost: 5 }
   * ```
   *
   * @category models
   * @since 0.1.0
   */
  export type AcquireOptions = AcquireOptions_
  /**
   * Options of `wait` (see {@link WaitOptions}).
   *
   * @example
   * ```ts
   * import type { RateLimiter } from "tollgate"
   *
   * const patient: RateLimiter.WaitOptions = { maxWait: "30 seconds" }
   * ```
   *
   * @category models
   * @since 0.1.0
   */
  export type WaitOptions = WaitOptions_
  /**
   * The errors any call can end with (see {@link CallError}).
   *
   * @example
   * ```ts
   * import type { RateLimiter } from "tollgate"
   *
   * const retryable = (error: RateLimiter.CallError): boolean => error._tag === "Overloaded"
   * ```
   *
   * @category models
   * @since 0.1.0
   */
  export type CallError = CallError_
  /**
   * Counts of what the limiter has done (see {@link Stats}).
   *
   * @example
   * ```ts
   * import type { RateLimiter } from "tollgate"
   *
   * const deniedShare = (stats: RateLimiter.Stats): number => stats.denied / Math.max(1, stats.allowed + stats.denied)
   * ```
   *
   * @category models
   * @since 0.1.0
   */
  export type Stats = Stats_
  /**
   * A place in a key's line (see {@link Reservation}).
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import type { RateLimiter } from "tollgate"
   *
   * const act = (reservation: RateLimiter.Reservation) => Effect.sleep(reservation.delay)
   * ```
   *
   * @category models
   * @since 0.1.0
   */
  export type Reservation = Reservation_
  /**
   * Options of `reserve` (see {@link ReserveOptions}).
   *
   * @example
   * ```ts
   * import type { RateLimiter } from "tollgate"
   *
   * const bounded: RateLimiter.ReserveOptions = { cost: 2, maxWait: "1 second" }
   * ```
   *
   * @category models
   * @since 0.1.0
   */
  export type ReserveOptions = ReserveOptions_
  /**
   * Options of `reconfigure` (see {@link ReconfigureOptions}).
   *
   * @example
   * ```ts
   * import type { RateLimiter } from "tollgate"
   *
   * const fresh: RateLimiter.ReconfigureOptions = { carry: "reset" }
   * ```
   *
   * @category models
   * @since 0.1.0
   */
  export type ReconfigureOptions = ReconfigureOptions_
  /**
   * What upstream said, for `feedback` (see {@link Feedback}).
   *
   * @example
   * ```ts
   * import type { RateLimiter } from "tollgate"
   *
   * const slow: RateLimiter.Feedback = { latency: 900 }
   * ```
   *
   * @category models
   * @since 0.2.0
   */
  export type Feedback = Feedback_
  /**
   * Options of `feedback` (see {@link FeedbackOptions}).
   *
   * @example
   * ```ts
   * import type { RateLimiter } from "tollgate"
   *
   * const options: RateLimiter.FeedbackOptions = { retryAfter: "5 seconds" }
   * ```
   *
   * @category models
   * @since 0.2.0
   */
  export type FeedbackOptions = FeedbackOptions_
  /**
   * Options of `force`, `penalty` and `set` (see {@link ForceOptions}).
   *
   * @example
   * ```ts
   * import type { RateLimiter } from "tollgate"
   *
   * const penalty: RateLimiter.ForceOptions = { cost: 5 }
   * ```
   *
   * @category models
   * @since 0.2.0
   */
  export type ForceOptions = ForceOptions_
  /**
   * Options of `add` (see {@link AddOptions}).
   *
   * @example
   * ```ts
   * import type { RateLimiter } from "tollgate"
   *
   * const forced: RateLimiter.AddOptions = { overLimit: true }
   * ```
   *
   * @category models
   * @since 0.2.0
   */
  export type AddOptions = AddOptions_
}
