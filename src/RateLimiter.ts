/**
 * The `RateLimiter` service: what programs use.
 *
 * @since 0.1.0
 */
import { Context, Duration, Effect, Layer, Predicate, type Scope } from "effect"
import type { Decision } from "./Decision.ts"
import {
  type BucketFailed,
  InvalidPolicy,
  InvalidRequest,
  type LimiterShutdown,
  type Overloaded,
  type RateLimitExceeded
} from "./Errors.ts"
import * as Bucket from "./internal/actor/Bucket.ts"
import type { Carry } from "./internal/algorithm/Algorithm.ts"
import * as Supervisor from "./internal/supervisor/Supervisor.ts"
import * as Policy from "./Policy.ts"
import { CurrentStore, type StoreUnavailable } from "./Store.ts"

/**
 * Options of {@link RateLimiter.make} and {@link RateLimiter.layer}.
 *
 * @example
 * ```ts
 * import { Policy, RateLimiter } from "tollgate"
 *
 * const free = Policy.tokenBucket({ capacity: 5, refill: { tokens: 2, per: "1 second" } })
 * const pro = Policy.tokenBucket({ capacity: 50, refill: { tokens: 20, per: "1 second" } })
 * const options: RateLimiter.Options = {
 *   policy: (key) => key.startsWith("pro:") ? pro : free,
 *   idleTimeout: "5 minutes",
 *   maxBuckets: 100_000,
 *   name: "api"
 * }
 * const LimiterLive = RateLimiter.layer(options)
 * ```
 *
 * @category models
 * @since 0.1.0
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
   * key is forgotten early.
   */
  readonly maxBuckets?: number | undefined
  /** Longest key, in UTF-16 code units; longer keys fail with `InvalidRequest`. Default 512. */
  readonly maxKeyLength?: number | undefined
  /**
   * Decide uncontended requests on the caller's fiber, with the same pure step
   * the actor runs (default true); with a shared store, an idle key's request
   * is sent through the store from the caller's fiber. Off, every request
   * goes through the bucket's mailbox and every live bucket keeps its fiber.
   */
  readonly fastPath?: boolean | undefined
  /** The `limiter` label on this limiter's metrics. Default "default". */
  readonly name?: string | undefined
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
  /** Units to take: a positive integer, 1 by default. */
  readonly cost?: number | undefined
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
  /** Units to take: a positive integer, 1 by default. */
  readonly cost?: number | undefined
  /** Longest acceptable wait; past it the call fails at once with `RateLimitExceeded`. Unbounded by default. */
  readonly maxWait?: Duration.Input | undefined
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
  /** Units to take: a positive integer, 1 by default. */
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
  /** How long until the reservation's turn: zero when it was admitted at once. */
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
   * `"as-is"` keeps the same units (capped by the new limit). A change of
   * algorithm always starts afresh.
   */
  readonly carry?: Carry | undefined
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
 * Counts of what the limiter has done.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const report = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   const { allowed, denied, buckets } = yield* limiter.stats
 *   yield* Effect.log(`allowed ${allowed}, denied ${denied}, ${buckets} live keys`)
 * })
 * ```
 *
 * @category models
 * @since 0.1.0
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
 * @category services
 * @since 0.1.0
 */
export class RateLimiter extends Context.Service<RateLimiter, {
  /** Takes `cost` units now if the key has them: `true` (go ahead) or `false` (over the limit). */
  readonly acquire: (key: string, options?: AcquireOptions) => Effect.Effect<boolean, CallError>
  /** Like `acquire`, with the figures: remaining, retryAfter, resetAfter, limit. */
  readonly consume: (key: string, options?: AcquireOptions) => Effect.Effect<Decision, CallError>
  /** Waits its turn in the key's FIFO line; fails at once with `RateLimitExceeded` if that is past `maxWait`. */
  readonly wait: (key: string, options?: WaitOptions) => Effect.Effect<void, CallError | RateLimitExceeded>
  /** What `consume` would decide now, without taking anything (and without starting a bucket). */
  readonly peek: (key: string, options?: AcquireOptions) => Effect.Effect<Decision, CallError>
  /** Forgets the key's usage: its bucket goes back to the initial state (full, by default). */
  readonly reset: (key: string) => Effect.Effect<void, CallError>
  /** Takes a place in the key's line now and says when to act; see {@link Reservation}. */
  readonly reserve: (
    key: string,
    options?: ReserveOptions
  ) => Effect.Effect<Reservation, CallError | RateLimitExceeded>
  /** Runs `effect` once the key admits it (waiting its turn as `wait` does). */
  readonly limit: (
    key: string,
    options?: WaitOptions
  ) => <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | CallError | RateLimitExceeded, R>
  /**
   * Gives `amount` units back to the key (a refund, or a permit returned to a
   * concurrency limit), never above its limit. Fails with `InvalidRequest` for
   * policies whose units only come back with time.
   */
  readonly release: (key: string, amount?: number) => Effect.Effect<void, CallError>
  /**
   * Runs `effect` holding `cost` units of the key (waiting its turn for them),
   * and gives them back when it ends: on success, failure or interruption.
   */
  readonly withPermit: (
    key: string,
    options?: WaitOptions
  ) => <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | CallError | RateLimitExceeded, R>
  /**
   * Switches the key to a new policy, as a message to its bucket: in order with
   * its other requests; waiters in line are re-timed against the new limit
   * (and told at once if they can never be admitted under it).
   */
  readonly reconfigure: (
    key: string,
    policy: Policy.Policy,
    options?: ReconfigureOptions
  ) => Effect.Effect<void, CallError>
  /** What the limiter has done so far, and how many buckets are alive. */
  readonly stats: Effect.Effect<Stats>
}>()("tollgate/RateLimiter") {
  /**
   * Builds a limiter in the current scope; closing the scope shuts it down
   * (every pending call ends with a decision or `LimiterShutdown`).
   *
   * @since 0.1.0
   */
  static readonly make: (options: Options) => Effect.Effect<RateLimiter["Service"], InvalidPolicy, Scope.Scope> = Effect
    .fnUntraced(function*(options: Options) {
      const settings = yield* validateOptions(options)
      const store = yield* CurrentStore
      const supervisor = yield* Supervisor.make({ ...settings.supervisor, store })
      const { maxKeyLength } = settings

      const checkKey = (key: string): InvalidRequest | undefined => {
        if (!Predicate.isString(key)) {
          return new InvalidRequest({ field: "key", value: typeof key, reason: "must be a string" })
        }
        if (key.length === 0) return new InvalidRequest({ field: "key", value: "\"\"", reason: "must not be empty" })
        if (key.length > maxKeyLength) {
          return new InvalidRequest({
            field: "key",
            value: JSON.stringify(key.slice(0, 32) + "…"),
            reason: `is ${key.length} long; the limit is ${maxKeyLength}`
          })
        }
        return undefined
      }

      // Effects are descriptions: the decision is made each time one runs.
      const decide = <A>(kind: Bucket.Kind, key: string, options: AcquireOptions | undefined) =>
        Effect.suspend(() => {
          const invalid = checkKey(key) ?? checkCost(options?.cost)
          if (invalid !== undefined) return Effect.fail(invalid)
          return supervisor.submitUnsafe<A>(key, kind, options?.cost ?? 1, 0)
        })

      const wait = (key: string, options: WaitOptions | undefined) =>
        Effect.suspend(() => {
          const invalid = checkKey(key) ?? checkCost(options?.cost)
          if (invalid !== undefined) return Effect.fail(invalid)
          const maxWait = options?.maxWait === undefined ? Infinity : parseMaxWait(options.maxWait)
          if (maxWait instanceof InvalidRequest) return Effect.fail(maxWait)
          return supervisor.submitUnsafe<void, RateLimitExceeded>(key, Bucket.Kind.Wait, options?.cost ?? 1, maxWait)
        })

      const release = (key: string, amount?: number) =>
        Effect.suspend(() => {
          const invalid = checkKey(key) ??
            (amount === undefined || (Number.isSafeInteger(amount) && amount > 0)
              ? undefined
              : new InvalidRequest({ field: "amount", value: String(amount), reason: "must be a positive integer" }))
          if (invalid !== undefined) return Effect.fail(invalid)
          return supervisor.submitUnsafe<void>(key, Bucket.Kind.Release, amount ?? 1, 0)
        })

      return RateLimiter.of({
        acquire: (key, options) => decide<boolean>(Bucket.Kind.Acquire, key, options),
        consume: (key, options) => decide<Decision>(Bucket.Kind.Consume, key, options),
        peek: (key, options) => decide<Decision>(Bucket.Kind.Peek, key, options),
        reset: (key) =>
          Effect.suspend(() => {
            const invalid = checkKey(key)
            return invalid !== undefined
              ? Effect.fail(invalid)
              : supervisor.submitUnsafe<void>(key, Bucket.Kind.Reset, 0, 0)
          }),
        wait,
        reserve: (key, options) =>
          Effect.suspend(() => {
            const invalid = checkKey(key) ?? checkCost(options?.cost)
            if (invalid !== undefined) return Effect.fail(invalid)
            const maxWait = options?.maxWait === undefined ? Infinity : parseMaxWait(options.maxWait)
            if (maxWait instanceof InvalidRequest) return Effect.fail(maxWait)
            return Effect.map(
              supervisor.submitUnsafe<Bucket.Reserved, RateLimitExceeded>(
                key,
                Bucket.Kind.Reserve,
                options?.cost ?? 1,
                maxWait
              ),
              (reserved): Reservation => ({
                delay: Duration.millis(reserved.delay),
                cancel: reserved.entry === undefined
                  ? Effect.void
                  : Effect.sync(() => Bucket.leave(reserved.bucket!, reserved.entry!, false))
              })
            )
          }),
        limit: (key, options) => (effect) => Effect.andThen(wait(key, options), effect),
        release,
        withPermit: (key, options) => (effect) =>
          Effect.uninterruptibleMask((restore) =>
            Effect.andThen(
              restore(wait(key, options)),
              Effect.ensuring(restore(effect), Effect.ignore(release(key, options?.cost ?? 1)))
            )
          ),
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
            return supervisor.submitUnsafe<void>(key, Bucket.Kind.Reconfigure, 0, 0, { policy, carry })
          }),
        stats: supervisor.stats
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
  static readonly layer = (options: Options): Layer.Layer<RateLimiter, InvalidPolicy> =>
    Layer.effect(RateLimiter, RateLimiter.make(options))
}

const checkCost = (cost: number | undefined): InvalidRequest | undefined =>
  cost === undefined || (Number.isSafeInteger(cost) && cost > 0)
    ? undefined
    : new InvalidRequest({
      field: "cost",
      value: Predicate.isNumber(cost) ? String(cost) : typeof cost,
      reason: "must be a positive integer"
    })

const parseMaxWait = (input: Duration.Input): number | InvalidRequest => {
  // Duration.fromInput reads NaN as zero: refuse it before it gets there.
  const duration = Predicate.isNumber(input) && Number.isNaN(input)
    ? { _tag: "None" as const }
    : Duration.fromInput(input)
  if (duration._tag === "Some") {
    const millis = Duration.toMillis(duration.value)
    if (millis >= 0 && !Number.isNaN(millis)) return millis
  }
  return new InvalidRequest({
    field: "maxWait",
    value: Predicate.isString(input) || Predicate.isNumber(input) ? String(input) : typeof input,
    reason: "must be a duration >= 0"
  })
}

const positiveInt = (field: string, value: unknown, fallback: number): number | InvalidPolicy => {
  if (value === undefined) return fallback
  return Number.isSafeInteger(value) && (value as number) > 0
    ? value as number
    : new InvalidPolicy({ field, value: String(value), reason: "must be a positive integer" })
}

const validateFallback = (input: Options["fallback"]): Supervisor.Options["fallback"] | InvalidPolicy => {
  const mode = input?.mode ?? "local"
  if (mode !== "local" && mode !== "allow" && mode !== "deny" && mode !== "error") {
    return new InvalidPolicy({
      field: "fallback.mode",
      value: String(mode),
      reason: "must be local, allow, deny or error"
    })
  }
  const share = input?.share ?? 1
  if (!(Predicate.isNumber(share) && share > 0 && share <= 1)) {
    return new InvalidPolicy({ field: "fallback.share", value: String(share), reason: "must be a number in (0, 1]" })
  }
  const timeoutMillis = input?.timeout === undefined ? 250 : Policy.positiveMillis(input.timeout)
  if (timeoutMillis === undefined) {
    return new InvalidPolicy({
      field: "fallback.timeout",
      value: String(input?.timeout),
      reason: "must be a positive finite duration"
    })
  }
  const retryMillis = input?.retryAfter === undefined ? 1000 : Policy.positiveMillis(input.retryAfter)
  if (retryMillis === undefined) {
    return new InvalidPolicy({
      field: "fallback.retryAfter",
      value: String(input?.retryAfter),
      reason: "must be a positive finite duration"
    })
  }
  return { mode, share, timeoutMillis, retryMillis }
}

const validateOptions = (options: Options): Effect.Effect<{
  readonly supervisor: Supervisor.Options
  readonly maxKeyLength: number
}, InvalidPolicy> =>
  Effect.suspend(() => {
    if (!Predicate.isObject(options)) {
      return Effect.fail(new InvalidPolicy({ field: "options", value: String(options), reason: "must be an object" }))
    }
    if (options.fastPath !== undefined && !Predicate.isBoolean(options.fastPath)) {
      return Effect.fail(
        new InvalidPolicy({ field: "fastPath", value: String(options.fastPath), reason: "must be a boolean" })
      )
    }
    if (options.name !== undefined && !(Predicate.isString(options.name) && options.name.length > 0)) {
      return Effect.fail(
        new InvalidPolicy({
          field: "name",
          value: Predicate.isString(options.name) ? "\"\"" : typeof options.name,
          reason: "must be a non-empty string"
        })
      )
    }
    const idleTimeoutMillis = options.idleTimeout === undefined ? 60_000 : Policy.positiveMillis(options.idleTimeout)
    if (idleTimeoutMillis === undefined) {
      return Effect.fail(
        new InvalidPolicy({
          field: "idleTimeout",
          value: String(options.idleTimeout),
          reason: "must be a positive finite duration"
        })
      )
    }
    const mailboxCapacity = positiveInt("mailboxCapacity", options.mailboxCapacity, 1024)
    if (mailboxCapacity instanceof InvalidPolicy) return Effect.fail(mailboxCapacity)
    const maxWaiters = positiveInt("maxWaiters", options.maxWaiters, 1024)
    if (maxWaiters instanceof InvalidPolicy) return Effect.fail(maxWaiters)
    const fallback = validateFallback(options.fallback)
    if (fallback instanceof InvalidPolicy) return Effect.fail(fallback)
    const maxBuckets = positiveInt("maxBuckets", options.maxBuckets, 1_000_000)
    if (maxBuckets instanceof InvalidPolicy) return Effect.fail(maxBuckets)
    const maxKeyLength = positiveInt("maxKeyLength", options.maxKeyLength, 512)
    if (maxKeyLength instanceof InvalidPolicy) return Effect.fail(maxKeyLength)
    const policy = options.policy
    let policyFor: (key: string) => Policy.Valid | InvalidPolicy
    if (Predicate.isFunction(policy)) {
      policyFor = (key) => {
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
          return new InvalidPolicy({
            field: "policy",
            value: "function",
            reason: `the policy function threw: ${cause}`
          })
        }
      }
    } else if (Policy.isPolicy(policy)) {
      if (policy._tag === "Invalid") return Effect.fail(policy.error)
      policyFor = () => policy
    } else {
      return Effect.fail(new InvalidPolicy({ field: "policy", value: typeof policy, reason: "must be a Policy" }))
    }
    return Effect.succeed({
      supervisor: {
        policyFor,
        limits: { mailboxCapacity, maxWaiters },
        idleTimeoutMillis,
        maxBuckets,
        fallback,
        fastPath: options.fastPath ?? true,
        name: options.name ?? "default"
      },
      maxKeyLength
    })
  })

type Options_ = Options
type AcquireOptions_ = AcquireOptions
type WaitOptions_ = WaitOptions
type CallError_ = CallError
type Stats_ = Stats
type Reservation_ = Reservation
type ReserveOptions_ = ReserveOptions
type ReconfigureOptions_ = ReconfigureOptions

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
}
