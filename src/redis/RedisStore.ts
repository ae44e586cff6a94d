/**
 * A `Store` on Redis: every process that points at the same Redis (and
 * prefix) shares each key's limit. Each algorithm's `MemoryStore.applyOps`
 * runs as one Lua script, so a batch of operations on a key is applied
 * atomically and in order, with exactly the in-process arithmetic (the
 * conformance suite runs the same random batches through both and requires
 * identical replies). The bucket actor in front of each key sends a whole
 * batch in one `EVALSHA` (coalescing), so a hot key costs one round trip per
 * batch, not one per request.
 *
 * Supported algorithms: token bucket, GCRA, leaky bucket, fixed window,
 * sliding window, sliding log, concurrency, warm-up/bursty and composites of
 * them (see `supported`). A policy of any other algorithm fails its calls
 * with `StoreUnavailable`, whose reason says so.
 *
 * Built over effect's `Redis` service (`effect/persistence`); `layer` brings
 * its own node-redis client through `NodeRedis.layer`.
 *
 * @since 0.1.0
 */
import { NodeRedis } from "@effect/platform-node"
import { Cause, Clock, Context, Duration, Effect, Exit, Fiber, Layer, Predicate, Scope, Tracer } from "effect"
import { identity } from "effect/Function"
import { Redis } from "effect/persistence"
import { InvalidPolicy } from "../Errors.ts"
import * as Policy from "../Policy.ts"
import { CurrentStore, type Op, type Reply, type Store, StoreUnavailable } from "../Store.ts"
import * as Scripts from "./internal/scripts.ts"

/**
 * Options of {@link make}.
 *
 * @example
 * ```ts
 * import type { RedisStore } from "tollgate/redis"
 *
 * const options: RedisStore.Options = { prefix: "api:", clock: "server", maxBatchKeys: 64 }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /** Prepended to every key: the namespace of this limiter in Redis. Default `"tollgate:"`. */
  readonly prefix?: string | undefined
  /**
   * Whose time decides. `"server"` (the default): the script reads Redis's
   * `TIME`, so instances whose clocks disagree still agree on every key.
   * `"client"`: the caller's Effect `Clock` is sent with each call (what
   * `TestClock` tests use; instances must then keep their clocks in step).
   */
  readonly clock?: "server" | "client" | undefined
  /**
   * How long a key is kept after its state has settled (when forgetting it
   * can no longer change a decision). Default 0: Redis drops it then. Longer
   * keeps a full bucket's anchor (which only matters to clocks that step
   * back); `Duration.infinity` keeps every key.
   */
  readonly keepSettled?: Duration.Input | undefined
  /**
   * Most keys in one round trip (default 64). Calls for different keys made
   * at the same moment share one `EVALSHA`; each key is still applied
   * atomically on its own. On Redis Cluster, keys of one call must share a
   * hash slot: set 1 there (or give keys a common `{hash tag}`).
   */
  readonly maxBatchKeys?: number | undefined
  /**
   * Most round trips out at once (default 1). A call made while they are out
   * waits for the next round, which carries every call made meanwhile: a busy
   * store costs few, large calls (far less CPU per decision, here and on the
   * server) for at most one extra round trip of waiting. A lone call never
   * waits. Raise it when callers are few and spread out over a slow link.
   */
  readonly maxInFlight?: number | undefined
  /**
   * How long a call that brings no timeout of its own waits for Redis before
   * it fails with `StoreUnavailable` (default 5 seconds, node-redis' own
   * default). The limiter always brings its own: `fallback.timeout`.
   */
  readonly timeout?: Duration.Input | undefined
}

/**
 * Options of {@link layer}: the store's, plus where Redis is.
 *
 * @example
 * ```ts
 * import { RedisStore } from "tollgate/redis"
 *
 * const Store = RedisStore.layer({
 *   url: "redis://:secret@redis.internal:6379/0",
 *   prefix: "api:",
 *   connectTimeout: "2 seconds"
 * })
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface LayerOptions extends Options {
  /** `redis://[[user]:password@]host[:port][/db]`. Default `redis://localhost:6379`. */
  readonly url?: string | undefined
  /** More node-redis client options (TLS, credentials, timeouts) for `NodeRedis.layer`. */
  readonly client?: Omit<NonNullable<Parameters<typeof NodeRedis.layer>[0]>, "url"> | undefined
  /**
   * How long building the layer waits for Redis to connect and answer
   * (default 5 seconds); past it, building fails with `RedisError`.
   */
  readonly connectTimeout?: Duration.Input | undefined
  /**
   * How long closing the layer waits for the replies still due (default 2
   * seconds); past it, the connection is dropped and those calls fail.
   */
  readonly closeTimeout?: Duration.Input | undefined
}

/**
 * The names of the algorithms this store runs; a policy of any other
 * algorithm fails its calls with `StoreUnavailable`.
 *
 * @example
 * ```ts
 * import { RedisStore } from "tollgate/redis"
 *
 * RedisStore.supported // ["token-bucket", "gcra", "leaky-bucket", ...]
 * ```
 *
 * @category constants
 * @since 0.1.0
 */
export const supported: ReadonlyArray<string> = Scripts.supported

/**
 * Whether this store runs the policy's algorithm (every part of it, for a
 * composite). Check it at startup to fail early rather than on first use.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import { RedisStore } from "tollgate/redis"
 *
 * const policy = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
 * RedisStore.supports(policy) // true
 * ```
 *
 * @category guards
 * @since 0.1.0
 */
export const supports = (policy: Policy.Valid): boolean =>
  !Predicate.isString(Scripts.forPolicy(policy.algorithm, policy.config))

const validate = (options: Options) => {
  const prefix = options.prefix ?? "tollgate:"
  if (!Predicate.isString(prefix)) {
    return new InvalidPolicy({ field: "prefix", value: typeof prefix, reason: "must be a string" })
  }
  const clock = options.clock ?? "server"
  if (clock !== "server" && clock !== "client") {
    return new InvalidPolicy({ field: "clock", value: String(clock), reason: "must be server or client" })
  }
  let keep = 0
  if (options.keepSettled !== undefined) {
    const duration = Duration.fromInput(options.keepSettled)
    keep = duration._tag === "Some" ? Duration.toMillis(duration.value) : NaN
    if (!(keep >= 0)) {
      return new InvalidPolicy({
        field: "keepSettled",
        value: String(options.keepSettled),
        reason: "must be a duration >= 0"
      })
    }
  }
  const maxBatchKeys = options.maxBatchKeys ?? 64
  if (!(Number.isSafeInteger(maxBatchKeys) && maxBatchKeys > 0)) {
    return new InvalidPolicy({
      field: "maxBatchKeys",
      value: String(options.maxBatchKeys),
      reason: "must be a positive integer"
    })
  }
  const maxInFlight = options.maxInFlight ?? 1
  if (!(Number.isSafeInteger(maxInFlight) && maxInFlight > 0)) {
    return new InvalidPolicy({
      field: "maxInFlight",
      value: String(options.maxInFlight),
      reason: "must be a positive integer"
    })
  }
  const timeout = options.timeout === undefined ? 5000 : Policy.positiveMillis(options.timeout)
  if (timeout === undefined) {
    return new InvalidPolicy({
      field: "timeout",
      value: String(options.timeout),
      reason: "must be a positive, finite duration"
    })
  }
  return {
    prefix,
    server: clock === "server",
    timeout,
    keep: keep === Infinity ? "inf" : String(keep),
    maxBatchKeys,
    maxInFlight
  } as const
}

const unavailable = (reason: string) => new StoreUnavailable({ store: "redis", reason })

const timedOut = (e: Entry) => unavailable(`timed out after ${e.timeout} ms`)

const describe = (error: Redis.RedisError): string => {
  const cause = error.cause
  return Predicate.isError(cause) ? cause.message : String(cause)
}

// `allowed remaining retryAfter resetAfter limit` per op, `*n` after one
// that answers n ops in a row; `inf` is Infinity.
const decode = (raw: unknown, count: number): ReadonlyArray<Reply> | undefined => {
  if (!Predicate.isString(raw)) return undefined
  const fields = raw.split(" ")
  const replies: Array<Reply> = []
  for (let i = 0; i < fields.length;) {
    if (i + 5 > fields.length) return undefined
    const reply: Reply = {
      allowed: fields[i] === "1",
      remaining: number(fields[i + 1]),
      retryAfter: number(fields[i + 2]),
      resetAfter: number(fields[i + 3]),
      limit: number(fields[i + 4])
    }
    i += 5
    let times = 1
    if (i < fields.length && fields[i].startsWith("*")) {
      times = Number(fields[i].slice(1))
      i++
    }
    if (!(Number.isSafeInteger(times) && times >= 1 && replies.length + times <= count)) return undefined
    for (let k = 0; k < times; k++) replies.push(reply)
  }
  return replies.length === count ? replies : undefined
}

const number = (s: string): number => s === "inf" ? Infinity : s === "-inf" ? -Infinity : Number(s)

// `kind cost queued times` for each run of equal operations (a hot key's
// batch is mostly the same Take, over and over).
const encodeOps = (ops: ReadonlyArray<Op>): string => {
  // the most common call by far: one Take of 1
  if (ops.length === 1 && ops[0].kind === 0 && ops[0].cost === 1 && ops[0].queued === 0) return "0 1 0 1"
  let out = ""
  for (let i = 0; i < ops.length;) {
    const op = ops[i]
    let j = i + 1
    while (j < ops.length && ops[j].kind === op.kind && ops[j].cost === op.cost && ops[j].queued === op.queued) j++
    out += (i === 0 ? "" : " ") + op.kind + " " + op.cost + " " + op.queued + " " + (j - i)
    i = j
  }
  return out
}

// One key's call waiting for its round trip. Its caller waits in an
// `Effect.callback` (no Deferred, no interrupt handler of its own: a call
// costs one suspension).
class Entry {
  /** Set when the caller was interrupted: not sent if it has not been yet. */
  cancelled = false
  /** The caller's resume, once it waits; the answer, if it came first. */
  resume: ((exit: Exit.Exit<ReadonlyArray<Reply>, StoreUnavailable>) => void) | undefined = undefined
  answer: Exit.Exit<ReadonlyArray<Reply>, StoreUnavailable> | undefined = undefined
  readonly key: string
  readonly script: Scripts.Script
  readonly policy: string
  readonly ops: string
  readonly count: number
  /** The caller's timeout (ms), and when it runs out. */
  readonly timeout: number
  readonly deadline: number
  constructor(
    key: string,
    script: Scripts.Script,
    policy: string,
    ops: string,
    count: number,
    timeout: number,
    deadline: number
  ) {
    this.key = key
    this.script = script
    this.policy = policy
    this.ops = ops
    this.count = count
    this.timeout = timeout
    this.deadline = deadline
  }
  /** Answers the caller (once). */
  complete(exit: Exit.Exit<ReadonlyArray<Reply>, StoreUnavailable>): void {
    if (this.answer !== undefined) return
    this.answer = exit
    const resume = this.resume
    if (resume !== undefined) {
      this.resume = undefined
      resume(exit)
    }
  }
  /** The caller's wait: one suspension, cancelled (not sent) if interrupted. */
  readonly wait: Effect.Effect<ReadonlyArray<Reply>, StoreUnavailable> = Effect.callback((resume) => {
    if (this.answer !== undefined) return resume(this.answer)
    this.resume = resume
    return Effect.sync(() => {
      this.cancelled = true
      this.resume = undefined
    })
  })
}

// One round trip (or a few, one per script) and the calls it carries.
class Round {
  readonly groups: ReadonlyMap<Scripts.Script, ReadonlyArray<Entry>>
  /** The earliest deadline of its calls. */
  readonly deadline: number
  constructor(groups: ReadonlyMap<Scripts.Script, ReadonlyArray<Entry>>, deadline: number) {
    this.groups = groups
    this.deadline = deadline
  }
}

/**
 * Makes a store over the `Redis` service in context. Calls for different
 * keys made at the same moment (by the buckets of many keys) share a round
 * trip: one `EVALSHA` with up to `maxBatchKeys` keys, each still applied
 * atomically and in order on its own.
 *
 * @example
 * ```ts
 * import { NodeRedis } from "@effect/platform-node"
 * import { Effect, Layer } from "effect"
 * import { Policy, RateLimiter, Store } from "tollgate"
 * import { RedisStore } from "tollgate/redis"
 *
 * const StoreLive = Layer.effect(Store.CurrentStore, RedisStore.make({ prefix: "api:" })).pipe(
 *   Layer.provide(NodeRedis.layer({ url: "redis://localhost:6379" }))
 * )
 * const Limiter = RateLimiter.layer({
 *   policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
 * }).pipe(Layer.provide(StoreLive))
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: (options?: Options) => Effect.Effect<Store, InvalidPolicy, Redis.Redis | Scope.Scope> = Effect
  .fnUntraced(function*(options: Options = {}) {
    const settings = validate(options)
    if (settings instanceof InvalidPolicy) return yield* settings
    const { keep, maxBatchKeys, maxInFlight, prefix, server, timeout: defaultTimeout } = settings
    const redis = yield* Redis.Redis
    const clock = yield* Clock.Clock
    const scope = yield* Effect.scope
    // Policies are immutable values, shared by every key they apply to.
    const encoded = new WeakMap<Policy.Valid, Scripts.Encoded | string>()
    const encode = (policy: Policy.Valid) => {
      let e = encoded.get(policy)
      if (e === undefined) {
        e = Scripts.forPolicy(policy.algorithm, policy.config)
        encoded.set(policy, e)
      }
      return e
    }
    // EVALSHA; after a NOSCRIPT (a restarted or flushed server), load the
    // script and run it again.
    const evalSha = (script: Scripts.Script, args: ReadonlyArray<string>) =>
      redis.send<unknown>("EVALSHA", script.sha, ...args).pipe(
        Effect.catchIf(
          (error) => describe(error).includes("NOSCRIPT"),
          () =>
            Effect.andThen(
              redis.send<string>("SCRIPT", "LOAD", script.lua),
              redis.send<unknown>("EVALSHA", script.sha, ...args)
            )
        ),
        Effect.mapError((error) => unavailable(describe(error)))
      )

    // One round trip for up to `maxBatchKeys` entries of one script: the I/O
    // boundary, and the span (one per round trip, not per call: a span per
    // call costs about a third of the throughput of a busy store).
    const send = Effect.fnUntraced(function*(script: Scripts.Script, batch: ReadonlyArray<Entry>) {
      const args: Array<string> = [String(batch.length)]
      for (const e of batch) args.push(e.key)
      args.push(server ? "" : String(clock.currentTimeMillisUnsafe()), keep)
      for (const e of batch) args.push(e.policy, e.ops)
      const result = yield* Effect.result(evalSha(script, args))
      answering = true
      try {
        if (result._tag === "Failure") {
          for (const e of batch) e.complete(Exit.fail(result.failure))
          return
        }
        const raw = result.success
        const replies = Array.isArray(raw) && raw.length === batch.length ? raw : undefined
        for (let i = 0; i < batch.length; i++) {
          const decoded = replies === undefined ? undefined : decode(replies[i], batch[i].count)
          batch[i].complete(
            decoded === undefined
              ? Exit.fail(unavailable(`unexpected reply from the ${script.name} script`))
              : Exit.succeed(decoded)
          )
        }
      } finally {
        answering = false
      }
    }, (effect, _script, batch) =>
      // Whatever happens, every caller in the batch gets an answer (a defect
      // here must not leave them waiting until their timeout).
      Effect.catchCause(effect, (cause) =>
        Effect.sync(() => {
          const error = unavailable(`the round trip failed: ${Cause.pretty(cause)}`)
          for (const e of batch) e.complete(Exit.fail(error))
        })), (effect, script, batch) =>
      // The span, only when a tracer is installed to see it. Not `Effect.fn`:
      // it captures a stack trace per call, and with the span that made a lone
      // caller's round trip 10-20 % slower here (docs/performance.md). Effect's
      // native tracer keeps spans nowhere, so skipping it there loses nothing.
      Effect.withFiber((fiber) =>
        fiber.getRef(Tracer.Tracer) === Tracer.nativeTracer ? effect : Effect.withSpan(effect, "RedisStore.apply", {
          attributes: { "tollgate.script": script.name, "tollgate.keys": batch.length },
          captureStackTrace: false
        })
      ))

    // Batching: a call goes out at once while fewer than `maxInFlight` rounds
    // are out (so a lone caller waits for nothing but its round trip); past
    // that it waits in `pending`, and the round that completes next sends
    // everything pending at once, in as few calls as `maxBatchKeys` allows.
    const pending: Array<Entry> = []
    let inFlight = 0
    // Set while a round answers its callers (who resume at once, on its
    // stack): their next calls wait for the next round.
    let answering = false
    // Deadlines: one watchdog per store, asleep until the earliest deadline of
    // the rounds out and of the calls waiting for one. Not a timer per round:
    // that timer, a race of two fibers, cost a lone caller about a sixth of
    // its round trip here (docs/performance.md). On waking it fails every call
    // past its deadline as timed out and frees the slot of each round past
    // its own, so the next round goes out even if that one's reply never comes.
    const watched = new Set<Round>()
    let wakeAt = Infinity
    let watchdog: Fiber.Fiber<void> | undefined
    // A round's slot is given back once: answered, failed, or past its deadline.
    const end = (round: Round): boolean => {
      if (!watched.delete(round)) return false
      inFlight--
      return true
    }
    const expire: Effect.Effect<void> = Effect.suspend(() => {
      watchdog = undefined
      wakeAt = Infinity
      const now = clock.currentTimeMillisUnsafe()
      let next = Infinity
      for (const round of watched) {
        if (round.deadline > now) {
          if (round.deadline < next) next = round.deadline
          continue
        }
        answering = true
        try {
          for (const group of round.groups.values()) {
            for (const e of group) if (e.answer === undefined) e.complete(Exit.fail(timedOut(e)))
          }
        } finally {
          answering = false
        }
        end(round)
      }
      // and the calls waiting for a round (behind one that does not answer)
      let kept = 0
      for (const e of pending) {
        if (e.cancelled) continue
        if (e.deadline <= now) {
          e.cancelled = true
          e.complete(Exit.fail(timedOut(e)))
          continue
        }
        if (e.deadline < next) next = e.deadline
        pending[kept++] = e
      }
      pending.length = kept
      const rearm = next < Infinity ? arm(next) : Effect.void
      return pending.length > 0 && inFlight < maxInFlight ? Effect.andThen(rearm, startRound) : rearm
    })
    const arm = (at: number): Effect.Effect<void> =>
      Effect.suspend(() => {
        const previous = watchdog
        wakeAt = at
        const sleep = clock.sleep(Duration.millis(Math.max(1, at - clock.currentTimeMillisUnsafe())))
        return Effect.flatMap(Effect.forkIn(Effect.andThen(sleep, expire), scope), (fiber) => {
          watchdog = fiber
          return previous === undefined ? Effect.void : Effect.asVoid(Effect.forkDetach(Fiber.interrupt(previous)))
        })
      })

    const round: Effect.Effect<void> = Effect.suspend(() => {
      // One call per script; a key's calls stay in order (a key whose calls
      // use two scripts here, around a change of policy, waits for the next
      // round with its later ones).
      const groups = new Map<Scripts.Script, Array<Entry>>()
      const scriptOf = new Map<string, Scripts.Script | undefined>()
      const later: Array<Entry> = []
      const now = clock.currentTimeMillisUnsafe()
      let until = Infinity
      for (const e of pending) {
        if (e.cancelled) continue
        // out of time while it waited for a round: not sent
        if (e.deadline <= now) {
          e.complete(Exit.fail(timedOut(e)))
          continue
        }
        const seen = scriptOf.get(e.key)
        if (scriptOf.has(e.key) && seen !== e.script) {
          scriptOf.set(e.key, undefined)
          later.push(e)
          continue
        }
        scriptOf.set(e.key, e.script)
        if (e.deadline < until) until = e.deadline
        const group = groups.get(e.script)
        if (group === undefined) groups.set(e.script, [e])
        else group.push(e)
      }
      pending.length = 0
      for (const e of later) pending.push(e)
      if (groups.size === 0) return Effect.void
      const out = new Round(groups, until)
      inFlight++
      watched.add(out)
      const sends: Array<Effect.Effect<void>> = []
      for (const [script, group] of groups) {
        for (let i = 0; i < group.length; i += maxBatchKeys) {
          sends.push(send(script, group.length <= maxBatchKeys ? group : group.slice(i, i + maxBatchKeys)))
        }
      }
      const all = sends.length === 1
        ? sends[0]
        : Effect.forEach(sends, identity, { concurrency: "unbounded", discard: true })
      const sent = Effect.ensuring(
        all,
        Effect.suspend(() => {
          end(out) // false when the watchdog already gave its slot back
          return pending.length > 0 && inFlight < maxInFlight ? startRound : Effect.void
        })
      )
      return until < wakeAt ? Effect.andThen(arm(until), sent) : sent
    })

    // A round runs on a fiber of its own, so that a caller interrupted (the
    // limiter's timeout) cannot cut the round trip of the others in it; it
    // starts at once, on the caller's turn, up to the network call.
    const startRound = Effect.asVoid(Effect.forkDetach(round, { startImmediately: true }))

    // The hot path (one call per batch of a key's requests): untraced; the
    // span is the round trip's.
    const apply = (key: string, policy: Policy.Valid, ops: ReadonlyArray<Op>, timeoutMillis?: number) =>
      Effect.suspend(() => {
        const e = encode(policy)
        if (Predicate.isString(e)) return Effect.fail(unavailable(e))
        const timeout = timeoutMillis ?? defaultTimeout
        const entry = new Entry(
          prefix + key,
          e.script,
          e.policy,
          encodeOps(ops),
          ops.length,
          timeout,
          clock.currentTimeMillisUnsafe() + timeout
        )
        pending.push(entry)
        // While a round is answering its callers, those that call again join
        // the next round (started when it ends) instead of going out one by one.
        if (inFlight < maxInFlight && !answering) return Effect.andThen(startRound, entry.wait)
        // waits for a round: the watchdog wakes for it if it is the first due
        // (interrupted, it is not sent if it has not been yet)
        return entry.deadline < wakeAt ? Effect.andThen(arm(entry.deadline), entry.wait) : entry.wait
      })
    return { name: "redis", apply, timesOut: true }
  })

/**
 * The store as the limiter's `Store.CurrentStore`, over the `Redis` service
 * the application already provides.
 *
 * @example
 * ```ts
 * import { NodeRedis } from "@effect/platform-node"
 * import { Layer } from "effect"
 * import { Policy, RateLimiter } from "tollgate"
 * import { RedisStore } from "tollgate/redis"
 *
 * const Limiter = RateLimiter.layer({
 *   policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
 * }).pipe(
 *   Layer.provide(RedisStore.layerRedis({ prefix: "api:" })),
 *   Layer.provide(NodeRedis.layer({ url: "redis://localhost:6379" }))
 * )
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layerRedis = (options?: Options): Layer.Layer<never, InvalidPolicy, Redis.Redis> =>
  Layer.effect(CurrentStore, make(options))

// After the first connection: reconnect for ever, backing off to about a
// second, so a restarted server is used again soon after it is back. (The
// default of `NodeRedis` stops reconnecting after a socket timeout.)
const reconnect = (connected: { value: boolean }) => (retries: number, cause: Error): number | Error =>
  connected.value ? Math.min(50 * 2 ** retries, 1000) + Math.floor(Math.random() * 100) : cause

/**
 * The store as the limiter's `Store.CurrentStore`, with its own node-redis
 * client (`NodeRedis.layer`). Building it fails with `RedisError` when Redis
 * cannot be reached; once connected, the client reconnects for ever, and
 * while it is disconnected calls fail at once (no offline queue), so the
 * limiter's `fallback` decides.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Policy, RateLimiter } from "tollgate"
 * import { RedisStore } from "tollgate/redis"
 *
 * const Limiter = RateLimiter.layer({
 *   policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } }),
 *   fallback: { mode: "local", share: 1 / 3, timeout: "100 millis" }
 * }).pipe(Layer.provide(RedisStore.layer({ url: "redis://localhost:6379", prefix: "api:" })))
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: LayerOptions = {}): Layer.Layer<never, InvalidPolicy | Redis.RedisError> =>
  Layer.effectContext(Effect.gen(function*() {
    const connectTimeout = yield* bounded(options, "connectTimeout", 5000)
    const closeTimeout = yield* bounded(options, "closeTimeout", 2000)
    const connected = { value: false }
    const { client, url } = options
    const socket = client?.socket
    const redis = NodeRedis.layer({
      disableOfflineQueue: true,
      // The store bounds every call itself (`timeout`); node-redis' own
      // per-command timeout costs an `AbortSignal.timeout` per call.
      commandOptions: { timeout: 0 },
      ...client,
      ...(url === undefined ? {} : { url }),
      socket: { ...socket, reconnectStrategy: socket?.reconnectStrategy ?? reconnect(connected) } as never
    })
    // The client lives in a scope of its own, built and closed on fibers of
    // their own: a server that accepts the connection and never answers is
    // left behind after `connectTimeout` / `closeTimeout`, not waited for.
    const inner = yield* Scope.make()
    const abandon = Effect.forkDetach(Scope.close(inner, Exit.void))
    const building = yield* Effect.forkDetach(Layer.buildWithScope(redis, inner))
    const built = yield* Effect.timeoutOption(Fiber.await(building), connectTimeout)
    if (built._tag === "None") {
      yield* Fiber.interrupt(building).pipe(Effect.andThen(abandon), Effect.forkDetach)
      return yield* new Redis.RedisError({ cause: new Error(`no answer within ${Duration.format(connectTimeout)}`) })
    }
    if (Exit.isFailure(built.value)) {
      yield* abandon
      return yield* built.value
    }
    const context = built.value.value
    connected.value = true
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(
        abandon,
        (closing) =>
          Effect.flatMap(Effect.timeoutOption(Fiber.await(closing), closeTimeout), (closed) =>
            closed._tag === "Some" ? Effect.void : Effect.sync(() => {
              // replies still due: dropped, their calls fail
              const nodeRedis = Context.getOption(context, NodeRedis.NodeRedis)
              if (nodeRedis._tag === "Some") {
                nodeRedis.value.client.destroy()
              }
            }))
      )
    )
    const store = yield* make(options).pipe(Effect.provideContext(context))
    return Context.make(CurrentStore, store)
  }))

const bounded = (
  options: LayerOptions,
  field: "connectTimeout" | "closeTimeout",
  fallback: number
): Effect.Effect<Duration.Duration, InvalidPolicy> => {
  const input = options[field]
  const millis = input === undefined ? fallback : Policy.positiveMillis(input)
  return millis === undefined
    ? Effect.fail(new InvalidPolicy({ field, value: String(input), reason: "must be a positive, finite duration" }))
    : Effect.succeed(Duration.millis(millis))
}
