/**
 * Effect's `RateLimiterStore` (from `effect/persistence`) backed by
 * tollgate: each key's counter lives in a tollgate bucket, the key's single
 * writer, which the limiter starts on first use and reaps once the key has
 * settled (an expired counter, a full bucket) and gone idle. An app that
 * uses Effect's `RateLimiter` moves to tollgate by swapping one layer:
 * `RateLimiterStore.layer()` for `RateLimiter.layerStoreMemory`.
 *
 * Decisions are those of Effect's in-memory store, number for number:
 * `fixedWindow` and `tokenBucket` (so `consume` with `onExceeded` `"delay"`
 * or `"fail"`, `remaining`, `resetAfter`, `retryAfter` and the delays), and
 * the adaptive calls (`adaptiveConsume`, `adaptiveFeedback`: a 429 with a
 * Retry-After starts a cooldown, then a learning phase measures what the
 * upstream accepts). What tollgate adds is the bucket per key: calls for one
 * key are applied in order by one fiber, and idle keys do not accumulate
 * (Effect's memory store keeps every key it has seen).
 *
 * The state lives in this process. To share limits across processes, use
 * Effect's `layerStoreRedis`, or tollgate's own `RateLimiter` on
 * `RedisStore`.
 *
 * @since 0.2.0
 */
import { Duration, Effect, Layer, Predicate, type Scope } from "effect"
import { RateLimiter as EffectRateLimiter } from "effect/persistence"
import { InvalidPolicy } from "../Errors.ts"
import * as Monotone from "../internal/actor/Monotone.ts"
import * as Request from "../internal/actor/Request.ts"
import { bind } from "../internal/algorithm/Algorithm.ts"
import type { Limit } from "../internal/Limit.ts"
import * as Supervisor from "../internal/supervisor/Supervisor.ts"
import * as Ledger from "./internal/ledger.ts"

/**
 * Options of {@link make} and {@link layer}.
 *
 * @example
 * ```ts
 * import { RateLimiterStore } from "tollgate/persistence"
 *
 * const options: RateLimiterStore.Options = { idleTimeout: "5 minutes", maxBuckets: 100_000 }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface Options {
  /** How long a settled key's bucket stays after its last call (default 1 minute). */
  readonly idleTimeout?: Duration.Input | undefined
  /** Most live keys (default 1,000,000); past it, a new key takes the place of a settled one, and fails with a store error when there is none. */
  readonly maxBuckets?: number | undefined
  /** Most calls queued for one key (default 1024). */
  readonly mailboxCapacity?: number | undefined
  /** The `limiter` label of tollgate's metrics (default `"persistence"`). */
  readonly name?: string | undefined
}

// What the core needs of a policy (`Limit`): the ledger's bound rule, no
// quota of its own (each call brings its limit), no dry run, no block. It is
// no public policy: only this module's buckets hold it.
const ledger: Limit = {
  _tag: "Ledger",
  algorithm: Ledger.algorithm,
  config: undefined,
  rule: bind(Ledger.algorithm, undefined),
  quota: { limit: Infinity, windowMillis: 0 },
  dryRun: false,
  blockMillis: 0
}

const positiveInt = (field: string, value: unknown, fallback: number): number | InvalidPolicy => {
  if (value === undefined) return fallback
  return Predicate.isNumber(value) && Number.isSafeInteger(value) && value > 0
    ? value
    : new InvalidPolicy({ field, value: String(value), reason: "must be a positive integer" })
}

const storeError = (message: string) => (cause: unknown) =>
  new EffectRateLimiter.RateLimiterError({
    reason: new EffectRateLimiter.RateLimitStoreError({ message, cause })
  })

// Options checked, with their defaults filled in.
interface Settings {
  readonly idleMillis: number
  readonly maxBuckets: number
  readonly mailboxCapacity: number
  readonly name: string
}

const defaults: Settings = { idleMillis: 60_000, maxBuckets: 1_000_000, mailboxCapacity: 1024, name: "persistence" }

const settings = (options: Options): Settings | InvalidPolicy => {
  const idle = options.idleTimeout === undefined ? undefined : Duration.fromInput(options.idleTimeout)
  const idleMillis = idle === undefined
    ? defaults.idleMillis
    : idle._tag === "Some"
    ? Duration.toMillis(idle.value)
    : NaN
  if (!(idleMillis > 0 && idleMillis < Infinity)) {
    return new InvalidPolicy({
      field: "idleTimeout",
      value: String(options.idleTimeout),
      reason: "must be a positive, finite duration"
    })
  }
  const maxBuckets = positiveInt("maxBuckets", options.maxBuckets, defaults.maxBuckets)
  if (maxBuckets instanceof InvalidPolicy) return maxBuckets
  const mailboxCapacity = positiveInt("mailboxCapacity", options.mailboxCapacity, defaults.mailboxCapacity)
  if (mailboxCapacity instanceof InvalidPolicy) return mailboxCapacity
  return { idleMillis, maxBuckets, mailboxCapacity, name: options.name ?? defaults.name }
}

/**
 * Builds the store in the current scope; closing it stops every bucket.
 * Without options it cannot fail (as Effect's `layerStoreMemory`); with
 * options, a bad one fails with `InvalidPolicy` naming the field.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "effect/persistence"
 * import { RateLimiterStore } from "tollgate/persistence"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const store = yield* RateLimiterStore.make()
 *   const limiter = yield* RateLimiter.make.pipe(Effect.provideService(RateLimiter.RateLimiterStore, store))
 *   return yield* limiter.consume({ key: "user:42", limit: 10, window: "1 minute" })
 * }))
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export function make(): Effect.Effect<EffectRateLimiter.RateLimiterStore["Service"], never, Scope.Scope>
export function make(
  options: Options
): Effect.Effect<EffectRateLimiter.RateLimiterStore["Service"], InvalidPolicy, Scope.Scope>
export function make(
  options?: Options
): Effect.Effect<EffectRateLimiter.RateLimiterStore["Service"], InvalidPolicy, Scope.Scope> {
  return Effect.suspend(() => {
    const checked = options === undefined ? defaults : settings(options)
    return checked instanceof InvalidPolicy ? Effect.fail(checked) : build(checked)
  })
}

const build = (options: Settings): Effect.Effect<EffectRateLimiter.RateLimiterStore["Service"], never, Scope.Scope> =>
  Effect.gen(function*() {
    const { idleMillis, maxBuckets, mailboxCapacity } = options
    const supervisor = yield* Supervisor.make({
      policyFor: () => ledger,
      limits: { mailboxCapacity, maxWaiters: 1 },
      idleTimeoutMillis: idleMillis,
      maxBuckets,
      name: options.name
    })

    // One transition of a key's ledger, by its bucket, in order with the
    // key's other calls. Each kind of call has keys of its own, as Effect's
    // memory store keeps one map per kind. Effect's `RateLimiter.consume`
    // calls the store while it builds its effect, so nothing happens here
    // until the effect runs, and each run is a call of its own: an effect
    // built once and run many times takes each time, and one built and
    // dropped takes nothing. The transition also gets how far the limiter's
    // clock is held above the caller's (`behind`, read with the time it
    // decides at), so the durations it answers are on the caller's clock.
    const run = <A, S>(
      key: string,
      message: string,
      step: (state: Ledger.State<S>, now: number, behind: number) => readonly [A, Ledger.State<S>]
    ): Effect.Effect<A, EffectRateLimiter.RateLimiterError> =>
      Effect.suspend(() => {
        let reply: A | undefined
        let ran = false
        const transaction: Request.Transaction = {
          run: (state, now) => {
            // the key's prefix fixes what its ledger holds
            const [out, next] = step(state as Ledger.State<S>, now, supervisor.limiter.clock.behind)
            reply = out
            ran = true
            return [undefined, next]
          }
        }
        return Effect.flatMap(
          Effect.mapError(supervisor.submitUnsafe(key, Request.Kind.Transact, 0, 0, transaction), storeError(message)),
          () => ran ? Effect.succeed(reply as A) : Effect.fail(storeError(message)("the key's bucket did not run"))
        )
      })

    return EffectRateLimiter.RateLimiterStore.of({
      fixedWindow: (o) =>
        run(
          `fw:${o.key}`,
          "Failed to execute fixedWindow rate limiting command",
          (s: Ledger.State<Ledger.Counter>, now, behind) => {
            const [[count, ttl], next] = Ledger.fixedWindow(s, now, o.tokens, Duration.toMillis(o.refillRate), o.limit)
            return [[count, Monotone.onClock(ttl, behind)] as const, next]
          }
        ),
      tokenBucket: (o) =>
        run(
          `tb:${o.key}`,
          "Failed to execute tokenBucket rate limiting command",
          (s: Ledger.State<Ledger.Tokens>, now, behind) => {
            const [[remaining, elapsed], next] = Ledger.tokenBucket(
              s,
              now,
              o.tokens,
              o.limit,
              Duration.toMillis(o.refillRate),
              o.allowOverflow
            )
            // the time since the last refill on the caller's clock, never
            // negative (what Effect's store answers for the same state)
            return [[remaining, Math.max(0, elapsed - behind)] as const, next]
          }
        ),
      adaptiveConsume: (o) =>
        Effect.map(
          run(
            `ad:${o.key}`,
            "Failed to execute adaptive rate limiting consume command",
            (s: Ledger.State<Ledger.Adaptive>, now, behind) => {
              const [[delay, epoch, phase], next] = Ledger.adaptiveConsume(
                s,
                now,
                o.tokens,
                Duration.toMillis(o.fallbackWindow)
              )
              return [[Monotone.onClock(delay, behind), epoch, phase] as const, next]
            }
          ),
          ([delay, epoch, phase]): EffectRateLimiter.AdaptiveConsumeResult => ({
            delay: delay === 0 ? Duration.zero : Duration.millis(delay),
            epoch,
            phase
          })
        ),
      adaptiveFeedback: (o) =>
        run(
          `ad:${o.key}`,
          "Failed to execute adaptive rate limiting feedback command",
          (s: Ledger.State<Ledger.Adaptive>, now) =>
            [
              undefined,
              Ledger.adaptiveFeedback(
                s,
                now,
                o.epoch,
                o.tokens,
                o.status,
                o.retryAfter === undefined ? undefined : Duration.toMillis(o.retryAfter)
              )
            ] as const
        )
    })
  })

/**
 * Effect's `RateLimiterStore` as a layer, backed by tollgate, with the
 * default options: provide it where `RateLimiter.layerStoreMemory` was. Like
 * that layer, it cannot fail (options go to {@link layerWith}).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { RateLimiter } from "effect/persistence"
 * import { RateLimiterStore } from "tollgate/persistence"
 *
 * // before: RateLimiter.layer.pipe(Layer.provide(RateLimiter.layerStoreMemory))
 * const Limiter = RateLimiter.layer.pipe(Layer.provide(RateLimiterStore.layer()))
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter.RateLimiter
 *   return yield* limiter.consume({ key: "user:42", limit: 10, window: "1 minute", algorithm: "token-bucket" })
 * }).pipe(Effect.provide(Limiter))
 * ```
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = (): Layer.Layer<EffectRateLimiter.RateLimiterStore> =>
  Layer.effect(EffectRateLimiter.RateLimiterStore, make())

/**
 * The store as a layer with options (idle timeout, cap on live keys,
 * mailbox size, metrics label), checked when the layer is built: a bad
 * option fails it with `InvalidPolicy` naming the field and the value.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { RateLimiter } from "effect/persistence"
 * import { RateLimiterStore } from "tollgate/persistence"
 *
 * const Limiter = RateLimiter.layer.pipe(Layer.provide(RateLimiterStore.layerWith({ idleTimeout: "5 minutes" })))
 * ```
 *
 * @since 0.3.0
 * @category layers
 */
export const layerWith = (options: Options): Layer.Layer<EffectRateLimiter.RateLimiterStore, InvalidPolicy> =>
  Layer.effect(EffectRateLimiter.RateLimiterStore, make(options))
