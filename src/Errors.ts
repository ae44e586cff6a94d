/**
 * The typed failures of tollgate. A denial is not among them: it is a normal
 * result (`false`, or a `Decision` with `allowed: false`) and allocates no
 * `Error`.
 *
 * @since 0.1.0
 */
import { Inspectable, Schema } from "effect"

/**
 * A policy or limiter option is invalid. Names the field and the value.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Policy, RateLimiter } from "tollgate"
 *
 * const program = RateLimiter.make({
 *   policy: Policy.tokenBucket({ capacity: NaN, refill: { tokens: 1, per: "1 second" } })
 * }).pipe(Effect.catchTag("InvalidPolicy", (e) => Effect.logError(e.message)))
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export class InvalidPolicy extends Schema.TaggedError<InvalidPolicy>()("InvalidPolicy", {
  field: Schema.String,
  value: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `invalid policy: ${this.field} = ${this.value}: ${this.reason}`
  }
}

/**
 * A call's input is invalid (empty or oversized key, a cost that is not an
 * integer >= 0, a cost above what the policy can ever grant). Names the
 * field and the value. The bucket is not touched.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   return yield* limiter.acquire("user:42", { cost: 0.5 })
 * }).pipe(Effect.catchTag("InvalidRequest", (e) => Effect.succeed(e.field === "cost")))
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  field: Schema.String,
  value: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `invalid request: ${this.field} = ${this.value}: ${this.reason}`
  }
}

/**
 * `wait` could not be admitted within `maxWait`. Raised at once, without
 * sleeping first; `retryAfter` says when the same call would be admitted.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   yield* limiter.wait("user:42", { maxWait: "2 seconds" })
 * }).pipe(Effect.catchTag("RateLimitExceeded", (e) => Effect.sleep(e.retryAfter)))
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export class RateLimitExceeded extends Schema.TaggedError<RateLimitExceeded>()("RateLimitExceeded", {
  key: Schema.String,
  retryAfter: Schema.Duration
}) {
  override get message(): string {
    return `rate limit exceeded for ${this.key}: retry after ${this.retryAfter}`
  }
}

/**
 * The limiter has shut down (its scope closed) before the call could be
 * decided. Every call pending at shutdown ends with a decision or this.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   return yield* limiter.acquire("user:42")
 * }).pipe(Effect.catchTag("LimiterShutdown", () => Effect.succeed(false)))
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export class LimiterShutdown extends Schema.TaggedError<LimiterShutdown>()("LimiterShutdown", {}) {
  override get message(): string {
    return "the rate limiter has shut down"
  }
}

/**
 * A bucket's mailbox or its line of waiters is full, or the limiter has
 * `maxBuckets` buckets and none it may forget (`reason` says which). The
 * request was not queued and took nothing; it is counted in `tollgate_overloaded_total`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   return yield* limiter.acquire("user:42")
 * }).pipe(Effect.catchTag("Overloaded", () => Effect.succeed(false)))
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export class Overloaded extends Schema.TaggedError<Overloaded>()("Overloaded", {
  key: Schema.String,
  /** What was full: the key's mailbox, its line of waiters, or the limiter's table of live buckets. */
  reason: Schema.Literals(["mailbox", "waiters", "buckets"]),
  capacity: Schema.Int
}) {
  override get message(): string {
    const what = this.reason === "mailbox"
      ? "requests already queued"
      : this.reason === "waiters"
      ? "callers already waiting"
      : "live keys already (maxBuckets), none of them safe to forget"
    return `rate limiter overloaded for ${this.key}: ${this.capacity} ${what}`
  }
}

/**
 * A bucket failed with a defect (a bug in an algorithm, or a policy that
 * throws). Only that key's pending calls fail with this; the bucket starts
 * afresh and every other key carries on.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "tollgate"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter
 *   return yield* limiter.acquire("user:42")
 * }).pipe(Effect.catchTag("BucketFailed", (e) => Effect.logError(e.message).pipe(Effect.as(false))))
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export class BucketFailed extends Schema.TaggedError<BucketFailed>()("BucketFailed", {
  key: Schema.String,
  defect: Schema.String
}) {
  override get message(): string {
    return `the bucket for ${this.key} failed and was restarted: ${this.defect}`
  }
}

/**
 * A shared store could not answer (unreachable, too slow, or it failed).
 * The limiter applies its fallback; the error reaches callers only with
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
 * A part of tollgate needs a package that is not installed: the HTTP service
 * needs `@effect/platform-node`, the Envoy rate limit service `@grpc/grpc-js`
 * and `@grpc/proto-loader`, reading envoyproxy/ratelimit's YAML `yaml`, the
 * Redis store's own client (`RedisStore.layer`) `ioredis`, a cluster's
 * runners on Postgres (`ClusterRunner.layerPostgres`) `@effect/sql-pg` and
 * `@effect/platform-node`. They are optional peer
 * dependencies, so that `npm install tollgate effect` adds nothing else. The
 * message is one line naming what is missing and the command that installs
 * it; the error carries no stack trace, which would say nothing more.
 *
 * @example
 * ```ts
 * import { MissingPackage } from "tollgate"
 *
 * const error = new MissingPackage({ feature: "the HTTP service", packages: ["@effect/platform-node"] })
 * error.message // "the HTTP service needs @effect/platform-node, which is not installed: npm install @effect/platform-node"
 * ```
 *
 * @category errors
 * @since 0.3.0
 */
export class MissingPackage extends Schema.TaggedError<MissingPackage>()("MissingPackage", {
  /** What needs the packages, in words. */
  feature: Schema.String,
  /** The packages that are not installed. */
  packages: Schema.Array(Schema.String)
}) {
  // Only to drop the stack (decoding still goes through the schema's own constructor).
  // @effect-diagnostics-next-line overriddenSchemaConstructor:off
  constructor(props: { readonly feature: string; readonly packages: ReadonlyArray<string> }) {
    super(props)
    // A stack would point into tollgate's internals and say nothing the message does not.
    Object.defineProperty(this, "stack", { value: `${this.name}: ${this.message}`, writable: true, configurable: true })
  }
  /**
   * How Node prints it (an unhandled rejection, `console.log`): its one line,
   * not its fields.
   *
   * @example
   * ```ts
   * import { MissingPackage } from "tollgate"
   *
   * console.log(new MissingPackage({ feature: "the HTTP service", packages: ["@effect/platform-node"] }))
   * ```
   *
   * @since 0.3.0
   */
  override [Inspectable.NodeInspectSymbol](): string {
    return `${this.name}: ${this.message}`
  }
  override get message(): string {
    const names = this.packages.join(" and ")
    return `${this.feature} needs ${names}, which ${this.packages.length === 1 ? "is" : "are"} not installed: ` +
      `npm install ${this.packages.join(" ")}`
  }
}
