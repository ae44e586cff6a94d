/**
 * The `RateLimiter` on an Effect Cluster: each key has one owner across all
 * the runners, the runner that holds its shard's lock, and every call for
 * the key, from any runner, is decided there, by an in-process limiter, in
 * one FIFO line.
 *
 * - **Keys to shards.** A key's shard is the cluster's hash of the key (of
 *   its `{hash tag}`, the part between the first `{` and the next `}`, when
 *   it has one: keys with the same tag share a shard, which a call over
 *   several keys needs).
 * - **Partitions.** A shard's keys live in one entity of the cluster (a
 *   partition, not an entity per key), which runs an in-process
 *   `RateLimiter` for them on the shard's owner.
 * - **Calls.** A call for a key of a shard this runner owns goes straight to
 *   its partition; any other goes to the owner, in one message per round
 *   and destination runner with every call made meanwhile (coalesced).
 *   `wait`, `reserve`, `limit` and `withPermit` stand in the owner's line,
 *   whoever calls.
 * - **Moves.** A shard that moves (a runner joins or leaves) is handed over:
 *   the old owner writes its keys' states and its line to the cluster's
 *   storage before its lock is released, and the next owner starts from
 *   them; callers in line keep their order. Nothing is admitted twice.
 * - **Crashes.** A shard whose owner crashed comes back empty: a key first
 *   used within its recovery time (a token bucket's capacity over its rate,
 *   a window's length) of the new owner's claim admits nothing until then.
 *   While a crashed runner's shards have no owner, calls for them get the
 *   limiter's `fallback` answer after `fallback.timeout`, flagged
 *   `degraded`.
 *
 * Build it over the cluster's `Sharding` and a `ClusterStorage` (both from
 * `ClusterRunner.layerPostgres`, or your own runner's).
 *
 * @since 0.3.0
 */
import { Duration, Effect, Layer, Option, Predicate, Result, Schema, type Scope } from "effect"
import { Entity, EntityId, Sharding } from "effect/cluster"
import type { Decision } from "../Decision.ts"
import { InvalidPolicy, InvalidRequest, RateLimitExceeded } from "../Errors.ts"
import * as Recorder from "../internal/Recorder.ts"
import * as Rules from "../internal/Rules.ts"
import * as Policy from "../Policy.ts"
import { RateLimiter } from "../RateLimiter.ts"
import { StoreUnavailable } from "../Store.ts"
import { ClusterStorage } from "./ClusterStorage.ts"
import { apply } from "./internal/apply.ts"
import * as Owner from "./internal/owner.ts"
import { Kind, type Op, pack, partition, Tag, type WaitRequest, type WaitResult } from "./internal/protocol.ts"
import * as Router from "./internal/router.ts"

/**
 * Options of {@link make} and {@link layer}: the limiter's own (the same on
 * every runner), and the cluster's.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import type { ClusterLimiter } from "tollgate/cluster"
 *
 * const free = Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
 * const pro = Policy.tokenBucket({ capacity: 1000, refill: { tokens: 100, per: "1 second" } })
 * const options: ClusterLimiter.Options = {
 *   policy: free,
 *   policies: { free, pro },
 *   fallback: { mode: "deny", timeout: "250 millis" }
 * }
 * ```
 *
 * @category models
 * @since 0.3.0
 */
export interface Options extends RateLimiter.Options {
  /**
   * Policies by name, the same on every runner: what `reconfigure` can
   * switch a key to on a cluster (a policy travels by its name).
   */
  readonly policies?: Readonly<Record<string, Policy.Policy>> | undefined
  /**
   * How long a call waits for a shard that is being handed over to reach
   * its next owner before it falls back (default 10 seconds); also how long
   * a place handed over waits for its caller to come back for it.
   */
  readonly handoffTimeout?: Duration.Input | undefined
  /**
   * Rounds out at once to one destination runner (default 1: the calls made
   * while one is out go together in the next, which costs the cluster fewer
   * messages; bench:cluster).
   */
  readonly maxInFlight?: number | undefined
  /** Most calls in one round (default 1024). */
  readonly maxBatch?: number | undefined
}

const ClusterOptions = Schema.Struct({
  handoffTimeout: Rules.optional(Rules.PositiveDuration),
  maxInFlight: Rules.optional(Rules.PositiveInteger),
  maxBatch: Rules.optional(Rules.PositiveInteger)
})

const show = (value: unknown): string =>
  Predicate.isString(value) ? JSON.stringify(value) : Predicate.isObject(value) ? typeof value : String(value)

/**
 * The part of `key` that picks its shard: its `{hash tag}` (the part
 * between the first `{` and the next `}`, when not empty), or all of it.
 *
 * @example
 * ```ts
 * import { ClusterLimiter } from "tollgate/cluster"
 *
 * ClusterLimiter.hashPart("{org:7}:user:42") // "org:7"
 * ClusterLimiter.hashPart("user:42") // "user:42"
 * ```
 *
 * @category routing
 * @since 0.3.0
 */
export const hashPart = (key: string): string => {
  const open = key.indexOf("{")
  if (open === -1) return key
  const close = key.indexOf("}", open + 1)
  return close === -1 || close === open + 1 ? key : key.slice(open + 1, close)
}

const wireDuration = (input: Duration.Input | undefined): number | string | undefined => {
  if (input === undefined || Predicate.isString(input) || Predicate.isNumber(input)) return input
  const d = Duration.fromInput(input)
  return Option.isSome(d) ? Duration.toMillis(d.value) : Number.NaN
}

const millisOf = (input: Duration.Input | undefined): number => {
  if (input === undefined) return Infinity
  if (Predicate.isNumber(input) && Number.isNaN(input)) return 0
  const d = Duration.fromInput(input)
  return Option.isSome(d) && Duration.toMillis(d.value) >= 0 ? Duration.toMillis(d.value) : 0
}

const degrade = (value: unknown): unknown => {
  if (Predicate.isObject(value) && "allowed" in value && "retryAfter" in value) return { ...value, degraded: true }
  if (Option.isOption(value)) return Option.map(value as Option.Option<Decision>, (d) => ({ ...d, degraded: true }))
  return value
}

// What answers while a shard's owner does not (the limiter's `fallback`).
const makeFallback = (
  mode: "local" | "allow" | "deny" | "error",
  local: RateLimiter["Service"],
  named: ReadonlyMap<string, Policy.Policy>,
  policyFor: (key: string) => Policy.Valid | InvalidPolicy,
  retryMillis: number
): Router.Fallback => {
  const unavailable = (reason: string) => Effect.fail(new StoreUnavailable({ store: "cluster", reason }))
  const synthesized = (op: Op, allowed: boolean): unknown => {
    const policy = policyFor(op.key)
    const limit = policy._tag === "InvalidPolicy" ? 0 : policy.rule.maxCost
    const wait = allowed ? Duration.zero : Duration.millis(retryMillis)
    const decision: Decision = {
      allowed,
      remaining: allowed ? limit : 0,
      retryAfter: wait,
      resetAfter: wait,
      limit,
      degraded: true
    }
    switch (op.k) {
      case Kind.Acquire:
      case Kind.AcquireAll:
        return allowed
      case Kind.TakeUpTo:
        return { ...decision, taken: allowed ? op.n ?? limit : 0 }
      case Kind.Get:
        return Option.none()
      case Kind.Delete:
        return false
      default:
        return decision
    }
  }
  // operations that only change the key: lost if answered while its owner is away
  const changesOnly = (k: number) =>
    k === Kind.Reset || k === Kind.Release || k === Kind.SetRate || k === Kind.Reconfigure || k === Kind.Feedback
  return {
    decide: (op, reason) => {
      switch (mode) {
        case "local":
          return Effect.map(apply(local, op, named), degrade)
        case "allow":
        case "deny":
          if (op.k === Kind.Cancel) return Effect.void
          return changesOnly(op.k) ? unavailable(reason) : Effect.succeed(synthesized(op, mode === "allow"))
        case "error":
          return unavailable(reason)
      }
    },
    wait: (req, maxWait, reason) => {
      switch (mode) {
        case "local": {
          const call = req.reserve
            ? Effect.map(
              local.reserve(req.key, { cost: req.n, maxWait }),
              (r): WaitResult => ({ t: Tag.Ok, dl: Duration.toMillis(r.delay) })
            )
            : Effect.as(
              local.wait(req.keys ?? req.key, {
                cost: req.n,
                maxWait,
                priority: req.pr,
                tenant: req.tn,
                weight: req.wt
              }),
              { t: Tag.Ok } as WaitResult
            )
          return call
        }
        case "allow":
          return Effect.succeed({ t: Tag.Ok, dl: 0 })
        case "deny":
          return Effect.fail(new RateLimitExceeded({ key: req.key, retryAfter: Duration.millis(retryMillis) }))
        case "error":
          return unavailable(reason)
      }
    }
  }
}

let waitIds = 0
const idPrefix = Math.floor(Math.random() * 2 ** 48).toString(36)

/**
 * Builds the limiter in the current scope. On a runner it also hosts the
 * partitions of the shards the runner owns (and hands them over when the
 * scope closes); on a client-only node it only calls.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Policy } from "tollgate"
 * import { ClusterLimiter } from "tollgate/cluster"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const limiter = yield* ClusterLimiter.make({ policy: Policy.fixedWindow({ limit: 10, window: "1 minute" }) })
 *   return yield* limiter.acquire("user:42")
 * }))
 * ```
 *
 * @category constructors
 * @since 0.3.0
 */
export const make: (
  options: Options
) => Effect.Effect<
  RateLimiter["Service"],
  InvalidPolicy,
  Scope.Scope | Sharding.Sharding | ClusterStorage
> = Effect.fnUntraced(function*(options: Options) {
  if (!Predicate.isObject(options)) {
    return yield* new InvalidPolicy({ field: "options", value: String(options), reason: "must be an object" })
  }
  const decoded = Rules.decode(ClusterOptions, options, { root: "", show })
  if (Result.isFailure(decoded)) return yield* new InvalidPolicy(decoded.failure)
  const { policies, handoffTimeout: _h, maxInFlight: _m, maxBatch: _b, ...limiterOptions } = options
  const named = new Map<string, Policy.Policy>()
  const names = new Map<Policy.Policy, string>()
  for (const [name, policy] of Object.entries(policies ?? {})) {
    if (!Policy.isPolicy(policy)) {
      return yield* new InvalidPolicy({ field: `policies.${name}`, value: typeof policy, reason: "must be a Policy" })
    }
    if (policy._tag === "Invalid") return yield* policy.error
    named.set(name, policy)
    if (!names.has(policy)) names.set(policy, name)
  }
  // The limiter's own options are checked as in process: building the
  // fallback's limiter checks them.
  const policyFor = (key: string): Policy.Valid | InvalidPolicy => {
    const p = Predicate.isFunction(options.policy) ? options.policy(key) : options.policy
    return Policy.isPolicy(p) && p._tag !== "Invalid"
      ? p
      : new InvalidPolicy({ field: "policy", value: typeof p, reason: "the policy function returned no Policy" })
  }
  yield* Effect.scoped(RateLimiter.make(limiterOptions))
  const fallback = limiterOptions.fallback
  const share = fallback?.share ?? 1
  const local = yield* RateLimiter.make({
    ...limiterOptions,
    name: `${limiterOptions.name ?? "default"}-fallback`,
    fallback: undefined,
    policy: (key) => {
      const p = policyFor(key)
      return p._tag === "InvalidPolicy"
        ? Policy.tokenBucket({ capacity: Number.NaN, refill: { tokens: 1, per: 1 } })
        : Policy.share(p, share)
    }
  })

  const name = limiterOptions.name ?? "default"
  const timeoutMillis = millisOf(fallback?.timeout ?? 250)
  const retryMillis = millisOf(fallback?.retryAfter ?? 1000)
  const handoffMillis = millisOf(options.handoffTimeout ?? "10 seconds")
  const sharding = yield* Sharding.Sharding
  const storage = yield* ClusterStorage
  const group = "default"
  const entity = partition(name)

  // An entity id on each shard: the partition of shard s is that entity.
  // Found by trying s0, s1, ... (each shard's first; the same on every runner).
  const entityIds: Array<string> = []
  let tried = 0
  const entityIdOf = (shard: number): string => {
    while (entityIds[shard] === undefined) {
      const id = `s${tried++}`
      const s = sharding.getShardId(EntityId.make(id), group).id
      if (entityIds[s] === undefined) entityIds[s] = id
    }
    return entityIds[shard]
  }
  const shardOf = (key: string): number => sharding.getShardId(EntityId.make(hashPart(key)), group).id

  const client = yield* sharding.makeClient(entity)
  // On a client-only node the entity is never started: its owner has no partitions.
  const owner = yield* Owner.make({
    name,
    limiter: { ...limiterOptions, fallback: undefined },
    policyFor,
    named,
    storage,
    sharding,
    group,
    handoffMillis,
    openEntity: (shard) => client(entityIdOf(shard)).Open()
  })
  {
    const hosted = owner
    yield* sharding.registerEntity(
      entity,
      Effect.gen(function*() {
        const address = yield* Entity.CurrentAddress
        const runner = yield* Entity.CurrentRunnerAddress
        hosted.runnerIs(`${runner.host}:${runner.port}`)
        const shard = address.shardId.id
        // Started at once, opened on a fiber of its own: the cluster lets a
        // shard's lock go without waiting for an entity still starting, but
        // waits for a started one to stop, and its stop waits for the
        // opening and hands the shard over (see the owner). Calls wait for
        // the opening.
        hosted.begin(shard)
        yield* Effect.addFinalizer(() => hosted.close(shard))
        return entity.of({
          Batch: ({ payload }) => hosted.batch(payload),
          Wait: ({ payload }) => hosted.wait(payload),
          Open: () => Effect.asVoid(hosted.open(shard))
        })
      }),
      { concurrency: "unbounded", maxIdleTime: Duration.infinity, mailboxCapacity: "unbounded" }
    ).pipe(
      // no span per message on the owner (the hot path, as in process)
      Effect.withTracerEnabled(false)
    )
    // Runs first when the runner stops (finalizers run last-added-first): every
    // partition is handed over while the cluster still delivers messages
    // here, so callers meanwhile are told Moved and wait for the next owners.
    yield* Effect.addFinalizer(() => hosted.closeAll)
  }

  const router = yield* Router.make({
    owner,
    batch: (id, ops, v) => client(id).Batch(pack(ops, v)),
    waitCall: (id, req) => client(id).Wait(req),
    entityIdOf,
    timeoutMillis,
    retryMillis,
    handoffMillis,
    maxInFlight: options.maxInFlight ?? 1,
    maxBatch: options.maxBatch ?? 1024,
    fallback: makeFallback(fallback?.mode ?? "local", local, named, policyFor, retryMillis)
  })

  // The limiter's metrics (labelled with its name), as in process: its
  // partitions' counts on this runner added up, and its rounds as the store's.
  const sum = (f: (r: Recorder.Recorder) => number) => {
    let n = 0
    for (const r of owner.recorders()) n += f(r)
    return n
  }
  const aggregate: Recorder.Recorder = {
    get allowed() {
      return sum((r) => r.allowed)
    },
    get denied() {
      return sum((r) => r.denied)
    },
    get overloaded() {
      return sum((r) => r.overloaded)
    },
    get started() {
      return sum((r) => r.started)
    },
    get reaped() {
      return sum((r) => r.reaped)
    },
    get live() {
      return sum((r) => r.live)
    },
    get actors() {
      return sum((r) => r.actors)
    },
    get queued() {
      return sum((r) => r.queued)
    },
    get waiting() {
      return sum((r) => r.waiting)
    },
    get dryRun() {
      return sum((r) => r.dryRun)
    }
  }
  yield* Recorder.register(aggregate, name, router.counts)

  const maxKeyLength = limiterOptions.maxKeyLength ?? 512
  const checkKey = (key: string, field = "key"): InvalidRequest | undefined => {
    if (!Predicate.isString(key)) return new InvalidRequest({ field, value: typeof key, reason: "must be a string" })
    if (key.length === 0) return new InvalidRequest({ field, value: "\"\"", reason: "must not be empty" })
    if (key.length > maxKeyLength) {
      return new InvalidRequest({
        field,
        value: JSON.stringify(key.slice(0, 32) + "…"),
        reason: `is ${key.length} long; the limit is ${maxKeyLength}`
      })
    }
    return undefined
  }
  // Several keys: valid, and on one shard (one owner decides them together).
  const checkKeys = (keys: ReadonlyArray<string>): InvalidRequest | number => {
    if (!Array.isArray(keys) || keys.length === 0 || keys.length > 64) {
      return new InvalidRequest({
        field: "keys",
        value: Array.isArray(keys) ? String(keys.length) : typeof keys,
        reason: "must name between 1 and 64 keys"
      })
    }
    let shard = -1
    for (let i = 0; i < keys.length; i++) {
      const invalid = checkKey(keys[i], `keys[${i}]`)
      if (invalid !== undefined) return invalid
      const s = shardOf(keys[i])
      if (shard === -1) shard = s
      else if (s !== shard) {
        return new InvalidRequest({
          field: `keys[${i}]`,
          value: JSON.stringify(keys[i]),
          reason: `is on another shard than ${
            JSON.stringify(keys[0])
          }: the keys of one call must share a shard; give them a common {hash tag}`
        })
      }
    }
    return shard
  }

  const one = (k: Kind, key: string, fields?: Omit<Op, "k" | "s" | "key">) =>
    Effect.suspend(() => {
      const invalid = checkKey(key)
      if (invalid !== undefined) return Effect.fail(invalid)
      return router.decide({ k, s: shardOf(key), key, ...fields })
    })
  const many = (k: Kind, keys: ReadonlyArray<string>, fields?: Omit<Op, "k" | "s" | "key">) =>
    Effect.suspend(() => {
      const shard = checkKeys(keys)
      if (shard instanceof InvalidRequest) return Effect.fail(shard)
      return router.decide({ k, s: shard, key: keys[0], keys, ...fields })
    })

  const place = (
    key: string | ReadonlyArray<string>,
    options: RateLimiter.WaitOptions | undefined,
    reserve: boolean
  ): Effect.Effect<readonly [WaitResult, WaitRequest], RateLimiter.CallError | RateLimitExceeded> =>
    Effect.suspend(() => {
      let shard: number
      let first: string
      let keys: ReadonlyArray<string> | undefined
      if (Predicate.isString(key)) {
        const invalid = checkKey(key)
        if (invalid !== undefined) return Effect.fail(invalid)
        shard = shardOf(key)
        first = key
      } else {
        const s = checkKeys(key)
        if (s instanceof InvalidRequest) return Effect.fail(s)
        shard = s
        first = key[0]
        keys = key
      }
      const req: WaitRequest = {
        id: `${idPrefix}.${(waitIds++).toString(36)}`,
        s: shard,
        key: first,
        ...(keys === undefined ? {} : { keys }),
        ...(options?.cost === undefined ? {} : { n: options.cost }),
        ...(options?.maxWait === undefined ? {} : { mw: wireDuration(options.maxWait) }),
        ...(options?.priority === undefined ? {} : { pr: options.priority }),
        ...(options?.tenant === undefined ? {} : { tn: options.tenant }),
        ...(options?.weight === undefined ? {} : { wt: options.weight }),
        reserve,
        resume: false
      }
      return Effect.map(router.wait(req, millisOf(options?.maxWait)), (r) => [r, req] as const)
    })

  const wait = (key: string | ReadonlyArray<string>, options?: RateLimiter.WaitOptions) =>
    Effect.asVoid(place(key, options, false))
  const release = (key: string, amount?: number) =>
    Effect.asVoid(one(Kind.Release, key, amount === undefined ? {} : { n: amount }))
  const add = (key: string, amount: number, options?: RateLimiter.AddOptions) =>
    one(options?.overLimit === true ? Kind.ForceAdd : Kind.Add, key, { n: amount }) as Effect.Effect<
      Decision,
      RateLimiter.CallError
    >
  const cost = (n: number | undefined) => n === undefined ? {} : { n }
  // (a cost of 1 is the default, as in process)
  const acquireOne = { n: 1 }
  const window = (d: Duration.Input | undefined) => d === undefined ? {} : { d: wireDuration(d)! }
  const decision = (e: Effect.Effect<unknown, RateLimiter.CallError>) =>
    e as Effect.Effect<Decision, RateLimiter.CallError>

  return RateLimiter.of({
    acquire: (key, o) =>
      (Predicate.isString(key)
        ? one(Kind.Acquire, key, o === undefined ? acquireOne : { n: o.cost ?? 1, ...window(o.duration) })
        : many(Kind.AcquireAll, key, cost(o?.cost))) as Effect.Effect<boolean, RateLimiter.CallError>,
    consume: (key, o) =>
      decision(
        Predicate.isString(key)
          ? one(Kind.Consume, key, o === undefined ? acquireOne : { n: o.cost ?? 1, ...window(o.duration) })
          : many(Kind.ConsumeAll, key, cost(o?.cost))
      ),
    peek: (key, o) => decision(one(Kind.Peek, key, cost(o?.cost))),
    reset: (key) => Effect.asVoid(one(Kind.Reset, key)),
    wait,
    reserve: (key, o) =>
      Effect.map(place(key, o, true), ([r, req]): RateLimiter.Reservation => ({
        delay: Duration.millis(r.dl ?? 0),
        cancel: Effect.ignore(router.decide({ k: Kind.Cancel, s: req.s, key: req.key, p: req.id }))
      })),
    limit: (key, o) => (effect) => Effect.andThen(wait(key, o), effect),
    release,
    withPermit: (key, o) => (effect) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.andThen(
          restore(wait(key, o)),
          Effect.ensuring(restore(effect), Effect.ignore(release(key, o?.cost ?? 1)))
        )
      ),
    reconfigure: (key, policy, o) =>
      Effect.suspend(() => {
        if (!Policy.isPolicy(policy)) {
          return Effect.fail(new InvalidPolicy({ field: "policy", value: typeof policy, reason: "must be a Policy" }))
        }
        if (policy._tag === "Invalid") return Effect.fail(policy.error)
        const policyName = names.get(policy)
        if (policyName === undefined) {
          return Effect.fail(
            new InvalidPolicy({
              field: "policy",
              value: policy._tag,
              reason: "on a cluster, reconfigure takes one of the policies named in the `policies` option"
            })
          )
        }
        return Effect.asVoid(one(Kind.Reconfigure, key, {
          p: policyName,
          ...(o?.carry === undefined ? {} : { c: o.carry })
        }))
      }),
    stats: Effect.map(
      owner.stats,
      (stats): RateLimiter.Stats => ({
        ...stats,
        storeCalls: router.counts.calls,
        storeOps: router.counts.ops,
        storeFailures: router.counts.failures,
        degraded: router.counts.degraded
      })
    ),
    feedback: (key, signal, o) =>
      Effect.suspend(() => {
        if (signal === "ok" || signal === "throttled") {
          return Effect.asVoid(one(Kind.Feedback, key, {
            p: signal,
            ...(signal === "throttled" && o?.retryAfter !== undefined ? { f: wireDuration(o.retryAfter)! } : {})
          }))
        }
        if (Predicate.isObject(signal) && "latency" in signal) {
          return Effect.asVoid(one(Kind.Feedback, key, { p: "latency", f: wireDuration(signal.latency)! }))
        }
        return Effect.fail(
          new InvalidRequest({
            field: "signal",
            value: Predicate.isString(signal) ? JSON.stringify(signal) : typeof signal,
            reason: "must be \"ok\", \"throttled\" or { latency }"
          })
        )
      }),
    force: (key, o) => decision(one(Kind.Force, key, { ...cost(o?.cost), ...window(o?.duration) })),
    penalty: (key, points, o) => decision(one(Kind.Force, key, { ...cost(points), ...window(o?.duration) })),
    add,
    reward: (key, points) => add(key, points ?? 1),
    fill: (key) => decision(one(Kind.Fill, key)),
    consumeUpTo: (key, o) => one(Kind.TakeUpTo, key, cost(o?.cost)) as Effect.Effect<never, RateLimiter.CallError>,
    get: (key) => one(Kind.Get, key) as Effect.Effect<Option.Option<Decision>, RateLimiter.CallError>,
    set: (key, used, o) => decision(one(Kind.Set, key, { n: used, ...window(o?.duration) })),
    delete: (key) => one(Kind.Delete, key) as Effect.Effect<boolean, RateLimiter.CallError>,
    block: (key, duration) => decision(one(Kind.Block, key, { d: wireDuration(duration) ?? Number.NaN })),
    setRate: (key, perSecond) => Effect.asVoid(one(Kind.SetRate, key, { n: perSecond }))
  })
})

/**
 * The limiter as a layer: provides `RateLimiter`, routed over the cluster.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import { ClusterLimiter, ClusterRunner } from "tollgate/cluster"
 * import { Layer } from "effect"
 *
 * const Limiter = ClusterLimiter.layer({
 *   policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
 * }).pipe(Layer.provide(ClusterRunner.layerPostgres({
 *   url: "postgres://localhost/app",
 *   runner: { host: "10.0.0.1", port: 34431 }
 * })))
 * ```
 *
 * @category layers
 * @since 0.3.0
 */
export const layer = (
  options: Options
): Layer.Layer<
  RateLimiter,
  InvalidPolicy,
  Sharding.Sharding | ClusterStorage
> => Layer.effect(RateLimiter, make(options))
