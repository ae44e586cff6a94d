/**
 * The `RateLimiter` service: what programs use.
 *
 * @since 0.1.0
 */
import { Context, Duration, Effect, Layer, Predicate, type Scope } from "effect"
import * as Bucket from "./actor/Bucket.ts"
import type { Decision } from "./Decision.ts"
import {
  InvalidPolicy,
  InvalidRequest,
  type LimiterShutdown,
  type Overloaded,
  type RateLimitExceeded
} from "./Errors.ts"
import * as Policy from "./Policy.ts"
import * as Supervisor from "./supervisor/Supervisor.ts"

/**
 * Options of {@link RateLimiter.make} and {@link RateLimiter.layer}.
 *
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
  /** Longest key, in UTF-16 code units; longer keys fail with `InvalidRequest`. Default 512. */
  readonly maxKeyLength?: number | undefined
  /**
   * Decide uncontended requests on the caller's fiber, with the same pure step
   * the actor runs (default true). Off, every request goes through the
   * bucket's mailbox and every live bucket keeps its fiber.
   */
  readonly fastPath?: boolean | undefined
  /** The `limiter` label on this limiter's metrics. Default "default". */
  readonly name?: string | undefined
}

/**
 * Options of `acquire` and `consume`.
 *
 * @since 0.1.0
 */
export interface AcquireOptions {
  /** Units to take: a positive integer, 1 by default. */
  readonly cost?: number | undefined
}

/**
 * Options of `wait`.
 *
 * @since 0.1.0
 */
export interface WaitOptions {
  /** Units to take: a positive integer, 1 by default. */
  readonly cost?: number | undefined
  /** Longest acceptable wait; past it the call fails at once with `RateLimitExceeded`. Unbounded by default. */
  readonly maxWait?: Duration.Input | undefined
}

/**
 * The errors any call can end with.
 *
 * @since 0.1.0
 */
export type CallError = InvalidRequest | InvalidPolicy | Overloaded | LimiterShutdown

/**
 * Counts of what the limiter has done.
 *
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
      const supervisor = yield* Supervisor.make(settings.supervisor)
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
        wait: (key, options) =>
          Effect.suspend(() => {
            const invalid = checkKey(key) ?? checkCost(options?.cost)
            if (invalid !== undefined) return Effect.fail(invalid)
            const maxWait = options?.maxWait === undefined ? Infinity : parseMaxWait(options.maxWait)
            if (maxWait instanceof InvalidRequest) return Effect.fail(maxWait)
            return supervisor.submitUnsafe<void, RateLimitExceeded>(key, Bucket.Kind.Wait, options?.cost ?? 1, maxWait)
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
  const duration = Duration.fromInput(input)
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

const validateOptions = (options: Options): Effect.Effect<{
  readonly supervisor: Supervisor.Options
  readonly maxKeyLength: number
}, InvalidPolicy> =>
  Effect.suspend(() => {
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
 * @since 0.1.0
 */
export declare namespace RateLimiter {
  export type Options = Options_
  export type AcquireOptions = AcquireOptions_
  export type WaitOptions = WaitOptions_
  export type CallError = CallError_
  export type Stats = Stats_
}
