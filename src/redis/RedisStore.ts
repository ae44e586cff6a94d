/**
 * A `Store` on Redis: every process that points at the same Redis (and
 * prefix) shares each key's limit. The interpreter `MemoryStore` runs is
 * compiled to Lua, so a batch of operations on a key is applied atomically
 * and in order, with exactly the in-process arithmetic (the conformance
 * suite runs the same random operations through both and requires identical
 * replies): one Take or Admit by its algorithm's lean script, anything else
 * by the batch script, a take over several keys (all or nothing) by the
 * multi script, all functions of one Redis Functions library (or `EVAL` scripts
 * on a Redis without Functions). A lone call goes straight to the client;
 * calls for many keys made at once share one command, two commands out at
 * once per server (so the client answers one reply while Redis runs the
 * other); on a Redis Cluster, a node's calls go together, one command per
 * hash slot; the
 * bucket actor in front of each key sends a whole batch in one call
 * (coalescing), so a hot key costs one round trip per batch, not one per
 * request.
 *
 * Supported algorithms: every one of `Policy` (token bucket, GCRA and the
 * leaky bucket, GCRA as a shaper, fixed window, sliding window, sliding log,
 * concurrency, smooth, adaptive, unlimited, and `all` and `burst` over them;
 * see `supported`). A policy of an algorithm of one's own fails its calls
 * with `StoreUnavailable`, whose reason says so.
 *
 * `layer` opens an ioredis client of its own, to one server, a Redis
 * Cluster or a primary behind Sentinel (the client routes, follows
 * redirections and failovers, and connects again); `make` and `layerRedis`
 * run over effect's `Redis` service (`effect/persistence`) that the
 * application provides.
 *
 * @since 0.1.0
 */
import { Clock, Context, Duration, Effect, Exit, Fiber, Layer, Option, Predicate, Result, Scope, Tracer } from "effect"
import { Redis } from "effect/persistence"
import { InvalidPolicy, type MissingPackage } from "../Errors.ts"
import * as Engine from "../internal/actor/Engine.ts"
import type { Limit } from "../internal/Limit.ts"
import { type AllReply, Kind as OpKind, type Op, type Reply } from "../internal/operation/Op.ts"
import * as OptionalPackage from "../internal/OptionalPackage.ts"
import * as Policy from "../Policy.ts"
import { CurrentStore, type Store, StoreUnavailable } from "../Store.ts"
import * as Codec from "./internal/codec.ts"
import * as Connection from "./internal/connection.ts"
import * as Scripts from "./internal/scripts.ts"
import * as Slot from "./internal/slot.ts"

type Entry_ = Engine.Entry

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
   * can no longer change a decision). Default 0: Redis drops it then, or up
   * to 10 seconds later: a lone Take or Admit moves a key's expiry only when
   * the state needs more than it has, and then 10 seconds past the need, so
   * a busy key keeps its TTL between (a write that sets the TTL costs about
   * a third more on the server). Longer keeps a full bucket's anchor (which
   * only matters to clocks that step back); `Duration.infinity` keeps every
   * key.
   */
  readonly keepSettled?: Duration.Input | undefined
  /**
   * Most keys in one round trip (default 64): one command on one server,
   * a node's commands at once on a Redis Cluster (`layer`'s). Calls for
   * different keys made at the same moment share one command per script
   * (and hash slot, on a cluster); each key is still applied atomically on
   * its own. With `cluster: true` over another client (`make`), keys of one
   * command must share a hash slot: set 1 there, or give the prefix a
   * `{hash tag}` (any other value is refused).
   */
  readonly maxBatchKeys?: number | undefined
  /**
   * Most round trips out at once per server (default 2; with `maxBatchKeys`
   * under 64, as many as carry 128 keys): commands on one server, each
   * primary's trips on a Redis Cluster. A lone call goes out at once; calls made while
   * every slot is taken wait for the next free one, and go out together
   * (far less CPU per decision, here and on the server). With two out, the
   * client answers the callers of one reply while Redis runs the other
   * command, so both work at the same time. Raise it when callers are few
   * and spread out over a slow link.
   */
  readonly maxInFlight?: number | undefined
  /**
   * How long a call that brings no timeout of its own waits for Redis before
   * it fails with `StoreUnavailable` (default 5 seconds, node-redis' own
   * default). The limiter always brings its own: `fallback.timeout`.
   */
  readonly timeout?: Duration.Input | undefined
  /**
   * Whether to run the scripts as a Redis Functions library (`FUNCTION LOAD`
   * once, then `FCALL`: Redis 7 and later, Valkey), so the functions the
   * batch script defines are made once, not on every call. Default `true`:
   * on a server without Functions (or whose ACL refuses them) the store
   * goes on with `EVALSHA` for good. `false`: always `EVALSHA`.
   */
  readonly functions?: boolean | undefined
  /**
   * Whether the server is a Redis Cluster (default `false`). Then a script
   * touches the keys of one hash slot only: the default `maxBatchKeys` is 1
   * (a larger one needs a `{hash tag}` in the prefix, which puts the whole
   * limiter in one slot), and a call over several keys whose keys hash to
   * different slots fails with `InvalidRequest` before it is sent. Give the
   * keys of such a call a common hash tag: `{org:a}:user:1`, `{org:a}:org`.
   */
  readonly cluster?: boolean | undefined
  /**
   * Writes that must reach replicas before a call is answered (default
   * none): after each script the store sends `WAIT wait timeout` on the same
   * connection, and answers the call once `wait` replicas have acknowledged
   * its write; when fewer did within `timeout`, the call fails with
   * `StoreUnavailable` (the write stands on the primary) and the limiter's
   * fallback decides. Redis replicates asynchronously: without it, a
   * primary that dies can take the last writes it acknowledged with it, and
   * its promoted replica then admits those requests again (see
   * docs/distributed.md, "Failover"). Keep `timeout` below the calls'
   * timeout (`fallback.timeout`).
   */
  readonly replicas?: { readonly wait: number; readonly timeout: Duration.Input } | undefined
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
export interface LayerOptions extends Omit<Options, "cluster"> {
  /**
   * `redis://[[user]:password@]host[:port][/db]`, or `rediss://…` for TLS
   * (verified against the system's CAs). Default `redis://localhost:6379`.
   * With `cluster: true`, one node of the cluster.
   */
  readonly url?: string | undefined
  /**
   * A Redis Cluster: `true` (`url` is one of its nodes), or the nodes to
   * start from, as URLs (`redis://` or `rediss://`, with the credentials
   * every node takes; no database number). The store learns the others
   * from them, sends each key's calls to the primary that owns its slot,
   * and follows the cluster when slots move or a replica is promoted (the
   * client, ioredis, follows `MOVED` and `ASK` and refreshes its table of
   * slots). Calls over several keys need a common `{hash tag}`.
   */
  readonly cluster?: boolean | { readonly nodes: ReadonlyArray<string> } | undefined
  /**
   * A primary behind Sentinel: the name of its group and the sentinels'
   * URLs (`redis://host:26379` or `rediss://…`). The store asks them for the
   * primary and follows a failover; the credentials and scheme of the URLs
   * (the same in every one) are used for the sentinels and the primary.
   */
  readonly sentinel?: { readonly name: string; readonly sentinels: ReadonlyArray<string> } | undefined
  /**
   * ioredis options for every connection the store opens (a Unix socket
   * `path`, TLS certificates `tls`, `username` and `password` kept out of
   * URLs, a `connectionName`, …), under the store's own: no offline queue,
   * a command out when a connection drops fails at once, reconnecting for
   * ever with a backoff to about a second.
   */
  readonly client?: Connection.ClientOptions | undefined
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
  /**
   * How long a connection may answer nothing while calls are out before the
   * store closes it and the client opens another (default 5 seconds). A
   * connection that nothing closes (a route lost, a middlebox between that
   * forgot it) gives no error: without this, every call would time out into
   * the fallback for as long as the process runs. Counted from the first
   * call that timed out since the connection's last reply (any reply, a late
   * one too); a server stopped for longer (a long script of another
   * client's) costs one reconnection.
   */
  readonly silenceTimeout?: Duration.Input | undefined
}

/**
 * The names of the algorithms this store runs; a policy of any other
 * algorithm fails its calls with `StoreUnavailable`.
 *
 * @example
 * ```ts
 * import { RedisStore } from "tollgate/redis"
 *
 * RedisStore.supported // ["token-bucket", "gcra", "fixed-window", ...]
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
export const supports = (policy: Limit): boolean => !Predicate.isString(encodePolicy(policy))

// The scripts' encoding of a policy, or the sentence saying what of it the
// store does not run. A policy with a blockDuration sends it after its
// configuration, and only to the batch entry point (a refusal starts a block).
const encodePolicy = (policy: Limit): Scripts.Encoded | string => {
  const e = Scripts.forPolicy(policy.algorithm, policy.config)
  return Predicate.isString(e) || !(policy.blockMillis > 0)
    ? e
    : { ...e, policy: `${e.policy} ${Codec.show(policy.blockMillis)}`, lean: undefined, leanConfig: "", leanGroup: "" }
}

// `realCluster`: the store's own client of a Redis Cluster, which groups
// calls per node and slot (one slot per command), so `maxBatchKeys` needs
// no hash tag; `cluster: true` over another client only checks slots.
const validate = (options: Options, realCluster = false) => {
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
  const cluster = options.cluster ?? false
  if (cluster !== true && cluster !== false) {
    return new InvalidPolicy({ field: "cluster", value: String(cluster), reason: "must be a boolean" })
  }
  const maxBatchKeys = options.maxBatchKeys ?? (cluster && !realCluster ? 1 : 64)
  if (!(Number.isSafeInteger(maxBatchKeys) && maxBatchKeys > 0)) {
    return new InvalidPolicy({
      field: "maxBatchKeys",
      value: String(options.maxBatchKeys),
      reason: "must be a positive integer"
    })
  }
  if (cluster && !realCluster && maxBatchKeys > 1 && Slot.hashed(prefix) === prefix) {
    return new InvalidPolicy({
      field: "maxBatchKeys",
      value: String(maxBatchKeys),
      reason: "on Redis Cluster must be 1 unless the prefix has a {hash tag} (one command's keys share one slot)"
    })
  }
  const maxInFlight = options.maxInFlight ?? Math.max(2, Math.ceil(128 / maxBatchKeys))
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
  const functions = options.functions ?? true
  if (functions !== true && functions !== false) {
    return new InvalidPolicy({ field: "functions", value: String(functions), reason: "must be a boolean" })
  }
  let replicas: Connection.Replicas | undefined = undefined
  if (options.replicas !== undefined) {
    const wait = options.replicas.wait
    if (!(Number.isSafeInteger(wait) && wait > 0)) {
      return new InvalidPolicy({ field: "replicas.wait", value: String(wait), reason: "must be a positive integer" })
    }
    const waitMillis = Policy.positiveMillis(options.replicas.timeout)
    if (waitMillis === undefined) {
      return new InvalidPolicy({
        field: "replicas.timeout",
        value: String(options.replicas.timeout),
        reason: "must be a positive, finite duration"
      })
    }
    replicas = { wait, timeout: Math.ceil(waitMillis) }
  }
  return {
    prefix,
    functions,
    server: clock === "server",
    timeout,
    keep: keep === Infinity ? "inf" : String(keep),
    maxBatchKeys,
    maxInFlight,
    cluster,
    replicas
  } as const
}

type Settings = Exclude<ReturnType<typeof validate>, InvalidPolicy>

const unavailable = (reason: string) => new StoreUnavailable({ store: "redis", reason })

const timedOut = (e: Entry) => unavailable(`timed out after ${e.timeout} ms`)

// What the lean entry point is asked to do with a key: admit or take.
const admit = String(OpKind.Admit)
const take = String(OpKind.Take)
const leanKind = (op: Op): string => op.kind === OpKind.Admit ? admit : take

// One key's call. Its caller waits in one `Effect.callback`, resumed by the
// reply (or the watchdog) straight from the socket's callback.
class Entry {
  /** Set when the caller was interrupted before it was sent: it never is. */
  cancelled = false
  /** Set when the lean entry point left it to the batch one (its key is blocked). */
  batchOnly = false
  /** The answer, once given (a call is answered once). */
  answer: Exit.Exit<ReadonlyArray<Reply>, StoreUnavailable> | undefined = undefined
  readonly key: string
  readonly encoded: Scripts.Encoded
  readonly ops: ReadonlyArray<Op>
  /** The caller's timeout (ms), and when it runs out. */
  readonly timeout: number
  readonly deadline: number
  readonly resume: (exit: Exit.Exit<ReadonlyArray<Reply>, StoreUnavailable>) => void
  /** The caller's services when a tracer sees its spans (its round trip gets one). */
  readonly traced: Context.Context<never> | undefined
  /** Its key's hash slot on Redis Cluster (0 on one server). */
  readonly slot: number
  /** The server its commands go to. */
  readonly lane: Lane
  constructor(
    key: string,
    encoded: Scripts.Encoded,
    ops: ReadonlyArray<Op>,
    timeout: number,
    deadline: number,
    resume: (exit: Exit.Exit<ReadonlyArray<Reply>, StoreUnavailable>) => void,
    traced: Context.Context<never> | undefined,
    slot: number,
    lane: Lane
  ) {
    this.key = key
    this.encoded = encoded
    this.ops = ops
    this.timeout = timeout
    this.deadline = deadline
    this.resume = resume
    this.traced = traced
    this.slot = slot
    this.lane = lane
  }
  /**
   * The lean entry point takes it: one Take or Admit with no units held
   * beside it (the lean step knows none), on an algorithm that has one.
   */
  get lean(): boolean {
    const ops = this.ops
    return ops.length === 1 && (ops[0].kind === OpKind.Take || ops[0].kind === OpKind.Admit) &&
      ops[0].queued === 0 && !ops[0].window && this.encoded.lean !== undefined && !this.batchOnly
  }
  /** Answers the caller (once). */
  complete(exit: Exit.Exit<ReadonlyArray<Reply>, StoreUnavailable>): void {
    if (this.answer !== undefined) return
    this.answer = exit
    this.resume(exit)
  }
}

// One server: on Redis Cluster, one primary (as the client's table of
// slots names it); on one server, the only one. Its calls wait in its own
// `pending`, and at most `maxInFlight` of its round trips are out at once,
// so a busy node never holds up the calls of another.
class Lane {
  pending: Array<Entry> = []
  inFlight = 0
  /** When a round of it first timed out since its last reply (-1: none has). */
  silentFrom = -1
  readonly id: string
  constructor(id: string) {
    this.id = id
  }
}

// One round trip to one server: on one server, one command; on Redis
// Cluster, the commands a node gets at once (one per hash slot and entry
// point: a script may only touch the keys of one slot). It holds one of its
// lane's `maxInFlight` slots until its last command is answered (or its
// deadline passes).
class Trip {
  readonly lane: Lane
  /** Its commands not yet answered. */
  out = 0
  rounds: Array<Round> = []
  /** Keys it carries. */
  keys = 0
  constructor(lane: Lane) {
    this.lane = lane
  }
}

// One command: to one entry point (the lean one of a policy, or the batch
// one of an algorithm), with the calls it carries.
class Round {
  readonly route: Scripts.Route
  readonly lean: boolean
  readonly trip: Trip
  /** The hash slot of its keys (Redis Cluster). */
  readonly slot: number
  // (made with its first call: an empty array's first push makes room for
  // 17, about 150 bytes a lone call does not need)
  readonly entries: Array<Entry>
  /** The earliest deadline of its calls. */
  deadline: number
  /** Whether it is out (in the watchdog's list), and its neighbours there. */
  out = false
  prev: Round | undefined = undefined
  next: Round | undefined = undefined
  constructor(route: Scripts.Route, lean: boolean, trip: Trip, first: Entry) {
    this.route = route
    this.lean = lean
    this.trip = trip
    this.slot = first.slot
    this.entries = [first]
    this.deadline = first.deadline
    trip.keys++
  }
  /** A command in `trip`, for the entry point that `e` takes, carrying `e`. */
  static for(e: Entry, trip: Trip): Round {
    const lean = e.lean
    const round = new Round(lean ? e.encoded.lean! : e.encoded.batch, lean, trip, e)
    // (the trip's array, too, is made with its first round)
    if (trip.rounds.length === 0) trip.rounds = [round]
    else trip.rounds.push(round)
    trip.out++
    return round
  }
  add(e: Entry): void {
    this.entries.push(e)
    this.trip.keys++
    if (e.deadline < this.deadline) this.deadline = e.deadline
  }
}

// The rounds out, for the watchdog: a list threaded through the rounds
// themselves. A `Set` of them cost a lone call a third of the store's own
// work (its add and delete: about 0.5 µs of 1.2, bench/redis/path.ts).
class Watched {
  head: Round | undefined = undefined
  add(round: Round): void {
    round.out = true
    round.next = this.head
    if (this.head !== undefined) this.head.prev = round
    this.head = round
  }
  /** Takes it out; false if it was not in. */
  delete(round: Round): boolean {
    if (!round.out) return false
    round.out = false
    const { next, prev } = round
    if (prev === undefined) this.head = next
    else prev.next = next
    if (next !== undefined) next.prev = prev
    round.prev = round.next = undefined
    return true
  }
}

/**
 * Makes a store over the `Redis` service in context. Calls for different
 * keys made at the same moment (by the buckets of many keys) share a round
 * trip, each key still applied atomically and in order on its own; a lone
 * call goes straight to the client. Over `NodeRedis` (`NodeRedis.layer`
 * provided by the application) the store writes its commands with
 * node-redis's own client; over any other `Redis` service, through its
 * `send`. `layer` runs on an ioredis client of its own, which writes each
 * command at once (node-redis writes at the next `setImmediate`).
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
    const redis = yield* Redis.Redis
    // A `NodeRedis` in context is written to with its own client. `@effect/platform-node` is an
    // optional peer, and its `NodeRedis` needs `redis`: without either installed, the application's
    // `Redis` cannot be a `NodeRedis`. (That module alone: the package's index loads every one.)
    const platform = yield* Effect.promise(() =>
      import("@effect/platform-node/NodeRedis").then(Result.succeed, Result.fail)
    )
    if (
      Result.isFailure(platform) &&
      !OptionalPackage.notInstalled(platform.failure, "@effect/platform-node") &&
      !OptionalPackage.notInstalled(platform.failure, "redis")
    ) return yield* Effect.die(platform.failure)
    const nodeRedis = Result.isSuccess(platform)
      ? yield* Effect.serviceOption(platform.success.NodeRedis)
      : Option.none()
    const context = yield* Effect.context<never>()
    return yield* build({
      send: nodeRedis._tag === "Some"
        ? Connection.viaClient(nodeRedis.value.client)
        : Connection.viaService(redis, context)
    }, settings)
  })

// The store over a connection, with its settings checked.
const build = Effect.fnUntraced(function*(connection: Connection.Connection, settings: Settings) {
  const { functions, keep, maxBatchKeys, maxInFlight, prefix, replicas, server, timeout: defaultTimeout } = settings
  const clock = yield* Clock.Clock
  const context = yield* Effect.context<never>()
  const runFork = Effect.runForkWith(context)
  const runner = Connection.makeRunner(connection, Scripts.library, functions)
  const binary = connection.binary === true
  const nodeOf = connection.nodeOf
  const together = connection.together
  // On Redis Cluster, calls are grouped by the node that owns their key's
  // slot (as the client's table of slots says now; the client routes each
  // command itself, following MOVED and ASK).
  const cluster = nodeOf !== undefined
  // Policies are immutable values, shared by every key they apply to.
  const encoded = new WeakMap<Limit, Scripts.Encoded | string>()
  const encode = (policy: Limit) => {
    let e = encoded.get(policy)
    if (e === undefined) {
      e = encodePolicy(policy)
      encoded.set(policy, e)
    }
    return e
  }

  // Batching: a call goes out at once while nothing of its server waits for
  // a round trip and fewer than `maxInFlight` of its trips are out (so a
  // lone caller waits for nothing but its round trip); past that it waits
  // in its lane's `pending`, and each trip that is answered fills its slot
  // again from `pending` (see `dispatch`).
  const only = new Lane("")
  const lanes: Array<Lane> = [only]
  const byNode = new Map<string, Lane>([["", only]])
  const laneOf = (slot: number): Lane => {
    if (!cluster) return only
    const id = nodeOf(slot) ?? ""
    let lane = byNode.get(id)
    if (lane === undefined) {
      lane = new Lane(id)
      byNode.set(id, lane)
      lanes.push(lane)
    }
    return lane
  }
  // Set while a round answers several callers (who resume at once, on its
  // stack): their next calls wait for the next round, which carries them
  // all, rather than going out one by one.
  let answering = false
  // Deadlines: one watchdog per store, asleep until the earliest deadline
  // of the rounds out and of the calls waiting for one. Not a timer per
  // round: that timer, a race of two fibers, cost a lone caller about a
  // sixth of its round trip here (docs/distributed.md). On waking it fails
  // every call past its deadline as timed out and frees the slot of each
  // round past its own, so the next round goes out even if that one's
  // reply never comes.
  const watched = new Watched()
  let wakeAt = Infinity
  let watchdog: Fiber.Fiber<void> | undefined
  let closed = false
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      closed = true
      watchdog?.interruptUnsafe()
    })
  )
  // A round is done once: answered, failed, or past its deadline; its trip's
  // slot is given back with its last round.
  const end = (round: Round): void => {
    if (watched.delete(round) && --round.trip.out === 0) round.trip.lane.inFlight--
  }
  const expire = Effect.sync(() => {
    watchdog = undefined
    wakeAt = Infinity
    const now = clock.currentTimeMillisUnsafe()
    let next = Infinity
    // (the rounds past their deadline are found first, then ended: the list
    // is not changed while it is walked)
    const due: Array<Round> = []
    for (let round = watched.head; round !== undefined; round = round.next) {
      if (round.deadline <= now) due.push(round)
      else if (round.deadline < next) next = round.deadline
    }
    for (const round of due) {
      end(round)
      answer(round.entries, (e) => timedOut(e))
      quiet(round.trip.lane, now)
    }
    // and the calls waiting for a round (behind one that does not answer)
    for (const lane of lanes) {
      const pending = lane.pending
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
    }
    if (next < Infinity) arm(next)
    fill()
  })
  // A round timed out, and nothing has come from its server since the
  // first that did: once that has lasted `silent.after`, the connection is
  // closed and the client opens another. A connection that nothing closes
  // and nothing answers (a route lost, a middlebox that forgot it) would
  // otherwise keep every call on the fallback for as long as the process runs.
  const silent = connection.silent
  const quiet = (lane: Lane, now: number): void => {
    if (silent === undefined) return
    if (lane.silentFrom < 0) lane.silentFrom = now
    else if (now - lane.silentFrom >= silent.after) {
      lane.silentFrom = -1
      runFork(Effect.logWarning(
        `no reply from Redis${lane.id === "" ? "" : ` (${lane.id})`} in ${silent.after} ms while calls were out: ` +
          "closing the connection, the client opens another"
      ))
      silent.reset(lane.id)
    }
  }
  const arm = (at: number): void => {
    if (closed) return
    const previous = watchdog
    wakeAt = at
    watchdog = runFork(
      Effect.andThen(clock.sleep(Duration.millis(Math.max(1, at - clock.currentTimeMillisUnsafe()))), expire)
    )
    previous?.interruptUnsafe()
  }

  // Answers calls, several at once with `answering` set; a timed-out
  // call's late reply changes nothing (each is answered once).
  const answer = (
    entries: ReadonlyArray<Entry>,
    outcome: (e: Entry, i: number) => StoreUnavailable | ReadonlyArray<Reply>
  ): void => {
    if (entries.length === 1) {
      const e = entries[0]
      if (e.answer === undefined) {
        const result = outcome(e, 0)
        if (result === Codec.deferred) again(e)
        else e.complete(result instanceof StoreUnavailable ? Exit.fail(result) : Exit.succeed(result))
      }
      return
    }
    answering = true
    try {
      for (let i = 0; i < entries.length; i++) {
        const e = entries[i]
        if (e.answer !== undefined) continue
        const result = outcome(e, i)
        if (result === Codec.deferred) again(e)
        else e.complete(result instanceof StoreUnavailable ? Exit.fail(result) : Exit.succeed(result))
      }
    } finally {
      answering = false
    }
  }
  // A call the lean entry point left to the batch one (its key is
  // blocked): not answered, it goes again in the next round.
  const again = (e: Entry): void => {
    e.batchOnly = true
    e.lane.pending.push(e)
    if (e.deadline < wakeAt) arm(e.deadline)
  }
  // Sends what waits, on every server with a free slot.
  const fill = (): void => {
    for (let i = 0; i < lanes.length; i++) {
      const lane = lanes[i]
      if (lane.pending.length > 0 && lane.inFlight < maxInFlight) dispatch(lane)
    }
  }

  // One command: the arguments for its entry point and keys.
  const argsOf = (lean: boolean, entries: ReadonlyArray<Entry>): Array<string> => {
    const now = server ? "" : String(clock.currentTimeMillisUnsafe())
    if (lean && entries.length === 1) {
      // a lone call's, made whole (pushing made room for twice as many)
      const e = entries[0]
      const op = e.ops[0]
      return ["", "", "1", e.key, now, keep, e.encoded.leanConfig, leanKind(op), Codec.show(op.cost)]
    }
    // two slots for the command and the function or script (Connection.Runner)
    const args = ["", "", String(entries.length)]
    for (const e of entries) args.push(e.key)
    args.push(now, keep)
    if (lean) {
      args.push(entries[0].encoded.leanConfig)
      for (const e of entries) {
        const op = e.ops[0]
        args.push(leanKind(op), Codec.show(op.cost))
      }
    } else {
      for (const e of entries) args.push(e.encoded.policy, Codec.encodeOps(e.ops))
    }
    return args
  }

  // Runs an entry point; with `replicas`, answered only once its write has
  // reached them (`WAIT` after the script, on the same connection).
  const run = (
    route: Scripts.Route,
    args: Array<string>,
    slot: number,
    done: Connection.Done,
    binaryReply: boolean
  ): void => {
    if (replicas === undefined) runner.run(route, args, done, binaryReply)
    else Connection.replicated(connection, replicas, slot, (d) => runner.run(route, args, d, binaryReply), done)
  }

  // Answers a round's calls from its reply (or its failure), once.
  const settle = (round: Round, reply: unknown, failure: string | undefined): void => {
    const { entries, lean, route } = round
    // (any reply, late ones too: the connection answers)
    round.trip.lane.silentFrom = -1
    try {
      end(round)
      // a binary lean reply is read once for all its keys
      const values = lean && failure === undefined ? Codec.leanValues(reply) : reply
      answer(entries, (e, i) => {
        if (failure !== undefined) return unavailable(failure)
        const replies = lean
          ? Codec.decodeLean(values, i, entries.length, e.encoded.leanWidth)
          : Array.isArray(reply) && reply.length === entries.length
          ? Codec.decodeBatch(reply[i], e.ops.length)
          : undefined
        return replies ?? unavailable(`unexpected reply from the ${route.name} script`)
      })
      // A finished round lets go of its calls: V8 may have moved the
      // arrays of rounds and arguments to the old generation (allocation
      // site pretenuring), and an old array that still points at a call's
      // objects keeps them alive through every scavenge until the next
      // full collection (docs/distributed.md, "calls kept alive by old arrays").
      entries.length = 0
      if (round.trip.out === 0) round.trip.rounds.length = 0
      fill()
    } catch (defect) {
      // whatever happens, every caller in it gets an answer
      answer(entries, () => unavailable(`the round trip failed: ${Connection.reasonOf(defect)}`))
    }
  }

  // Writes a round's command; the reply answers on the stack it arrives
  // on: no promise, no microtask per command of the store's own. One
  // closure a round, the connection's callback (three were a fifth of a
  // lone call's allocations).
  const transmit = (round: Round, then: (() => void) | undefined): void => {
    let args: Array<string> | undefined
    const done: Connection.Done = (reply, failure) => {
      settle(round, reply, failure === undefined ? undefined : Connection.reasonOf(failure))
      // (the command is over, retries included: its arguments can go; see settle)
      if (args !== undefined) args.length = 0
      then?.()
    }
    try {
      const { entries, lean } = round
      // the reply as one string of doubles, when the client can give it back as bytes
      const binaryReply = binary && lean && entries.length > 1
      args = argsOf(lean, entries)
      if (binaryReply) args.push("b")
      run(round.route, args, round.slot, done, binaryReply)
    } catch (error) {
      done(undefined, error)
    }
  }

  // Sends a round's command and answers its calls from the reply.
  const send = (round: Round): void => {
    watched.add(round)
    if (round.deadline < wakeAt) arm(round.deadline)
    const entries = round.entries
    let traced: Context.Context<never> | undefined
    for (let i = 0; i < entries.length && traced === undefined; i++) traced = entries[i].traced
    if (traced === undefined) return transmit(round, undefined)
    // The span, only when a tracer is installed to see it, without a stack
    // trace (a span and its stack trace made a lone caller's round trip
    // 10-20 % slower here; Effect's native tracer keeps spans nowhere).
    runFork(
      Effect.withSpan(
        Effect.callback<void>((resume) => transmit(round, () => resume(Effect.void))),
        "RedisStore.apply",
        {
          attributes: { "tollgate.script": round.route.name, "tollgate.keys": entries.length },
          captureStackTrace: false
        }
      ).pipe(Effect.provideContext(traced))
    )
  }

  // A call that goes out on its own, at once.
  const sendAlone = (e: Entry): void => {
    const trip = new Trip(e.lane)
    e.lane.inFlight++
    send(Round.for(e, trip))
  }

  // What is pending on a server, in as many trips as it has free slots, in
  // call order. On one server a trip is one command, to one entry point
  // (the lean one of a policy, the batch one of an algorithm), of up to
  // `maxBatchKeys` keys; on Redis Cluster, a node's commands sent at once,
  // one per entry point and hash slot, of up to `maxBatchKeys` keys in all.
  // What waits is shared out evenly between the trips it needs (100 calls
  // and 64 keys at most: two of 50, not 64 and 36), so the trips out take
  // turns of one size. A key's calls stay in order: once one of its calls
  // is held back (no free slot, or it would take a command of another
  // entry point), its later ones are too.
  //
  // Each trip is answered on its own replies, and its callers' next calls
  // go out at once while the other trip is still at Redis: with two out
  // (the default), the client answers one while Redis runs the other.
  const dispatch = (lane: Lane): void => {
    const now = clock.currentTimeMillisUnsafe()
    // the calls of each entry point still to send (all of them, on a
    // cluster), for the size of its trips
    const counts = new Map<string, number>()
    let kept = 0
    let pending = lane.pending
    for (const e of pending) {
      if (e.cancelled) continue
      // out of time while it waited for a round: not sent
      if (e.deadline <= now) {
        e.complete(Exit.fail(timedOut(e)))
        continue
      }
      pending[kept++] = e
      const id = cluster ? "" : groupOf(e)
      counts.set(id, (counts.get(id) ?? 0) + 1)
    }
    pending.length = kept
    const free = maxInFlight - lane.inFlight
    const trips: Array<Trip> = []
    // the trip being filled: per entry point on one server, one on a cluster
    const open = new Map<string, Trip>()
    // on a cluster, the command being filled per entry point and slot
    const rounds = new Map<string, Round>()
    const placed = new Map<string, string | undefined>()
    const later: Array<Entry> = []
    for (const e of pending) {
      const group = groupOf(e)
      const id = cluster ? `${group} ${e.slot}` : group
      const at = placed.get(e.key)
      if (at === undefined ? placed.has(e.key) : at !== id) {
        placed.set(e.key, undefined)
        later.push(e)
        continue
      }
      const size = cluster ? "" : group
      let trip = open.get(size)
      if (trip === undefined || trip.keys >= evenly(counts.get(size)!)) {
        if (trips.length >= free) {
          placed.set(e.key, undefined)
          later.push(e)
          continue
        }
        trip = new Trip(lane)
        trips.push(trip)
        open.set(size, trip)
      }
      let round = cluster ? rounds.get(id) : trip.rounds[0]
      if (round === undefined || round.trip !== trip) {
        round = Round.for(e, trip)
        if (cluster) rounds.set(id, round)
      } else round.add(e)
      placed.set(e.key, id)
    }
    lane.pending = later
    pending = later
    lane.inFlight += trips.length
    if (together !== undefined && cluster) {
      together(lane.id, () => {
        for (const trip of trips) {
          for (const round of trip.rounds) send(round)
        }
      })
      return
    }
    for (const trip of trips) {
      for (const round of trip.rounds) send(round)
    }
  }
  // The entry point a call takes (per algorithm for the batch script too,
  // though the library's one function runs them all: a command whose FCALL
  // falls back to EVALSHA then still has the one script for all its keys).
  const groupOf = (e: Entry): string => e.lean ? e.encoded.leanGroup : e.encoded.batch.script.sha
  // The size of each trip when `n` calls share the fewest trips.
  const evenly = (n: number): number => Math.ceil(n / Math.ceil(n / maxBatchKeys))

  // The hot path: plain JavaScript from the caller to the socket, and from
  // the reply to `done` (the caller's one suspension, in `apply` or the
  // limiter's own).
  const applyUnsafe = (
    key: string,
    policy: Limit,
    ops: ReadonlyArray<Op>,
    timeout: number,
    done: (exit: Exit.Exit<ReadonlyArray<Reply>, StoreUnavailable>) => void
  ): (() => void) | undefined => {
    const e = encode(policy)
    if (Predicate.isString(e)) {
      done(Exit.fail(unavailable(e)))
      return undefined
    }
    const fiber = Fiber.getCurrent()
    const full = prefix + key
    const slot = cluster ? Slot.slot(full) : 0
    const lane = laneOf(slot)
    const entry = new Entry(
      full,
      e,
      ops,
      timeout,
      clock.currentTimeMillisUnsafe() + timeout,
      done,
      fiber === undefined || fiber.getRef(Tracer.Tracer) === Tracer.nativeTracer ? undefined : fiber.context,
      slot,
      lane
    )
    // While a round is answering its callers, those that call again join
    // the next round (started when it ends) instead of going out one by one.
    if (lane.pending.length === 0 && lane.inFlight < maxInFlight && !answering) {
      sendAlone(entry)
      return undefined
    }
    lane.pending.push(entry)
    // waits for a round: the watchdog wakes for it if it is the first due
    if (entry.deadline < wakeAt) arm(entry.deadline)
    // (made here, not per call: a call sent at once cannot be withdrawn)
    return () => {
      entry.cancelled = true
    }
  }
  const apply = (key: string, policy: Limit, ops: ReadonlyArray<Op>, timeoutMillis?: number) =>
    Effect.callback<ReadonlyArray<Reply>, StoreUnavailable>((resume) => {
      const cancel = applyUnsafe(key, policy, ops, timeoutMillis ?? defaultTimeout, resume)
      return cancel === undefined ? undefined : Effect.sync(cancel)
    })
  // A take over several keys, all or nothing: one call of the multi entry
  // point, straight to the socket (not batched with other calls: it is
  // atomic over its own keys, and a call of its own keeps it so).
  const applyAll = (entries: ReadonlyArray<Entry_>, timeoutMillis?: number) =>
    Effect.suspend((): Effect.Effect<AllReply, StoreUnavailable> => {
      const args = ["", "", String(entries.length)]
      for (const e of entries) args.push(prefix + e.key)
      args.push(server ? "" : String(clock.currentTimeMillisUnsafe()), keep)
      for (const e of entries) {
        const encodedPolicy = encode(e.policy)
        if (Predicate.isString(encodedPolicy)) return Effect.fail(unavailable(encodedPolicy))
        args.push(encodedPolicy.policy, Codec.show(e.cost))
      }
      const timeout = timeoutMillis ?? defaultTimeout
      const slot = cluster ? Slot.slot(args[3]) : 0
      const sent = Effect.callback<unknown, StoreUnavailable>((resume) => {
        try {
          run(Scripts.multi, args, slot, (reply, failure) =>
            resume(
              failure === undefined ? Effect.succeed(reply) : Effect.fail(unavailable(Connection.reasonOf(failure)))
            ), false)
        } catch (error) {
          resume(Effect.fail(unavailable(Connection.reasonOf(error))))
        }
      })
      return Effect.timeoutOrElse(
        Effect.flatMap(sent, (reply) => {
          const decoded = Codec.decodeMulti(reply, entries.length)
          return decoded === undefined
            ? Effect.fail(unavailable("unexpected reply from the multi script"))
            : Effect.succeed(decoded)
        }),
        {
          duration: Duration.millis(timeout),
          orElse: () => Effect.fail(unavailable(`timed out after ${timeout} ms`))
        }
      )
    })
  const checkKeys = settings.cluster || cluster
    ? (keys: ReadonlyArray<string>) => Slot.crossSlot(keys.map((key) => prefix + key))
    : undefined
  const engine: Engine.Engine = { name: "redis", apply, applyUnsafe, applyAll, checkKeys, timesOut: true }
  const store: Store = Engine.pluggable(engine)
  return store
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
export const layerRedis = (options?: Options): Layer.Layer<CurrentStore, InvalidPolicy, Redis.Redis> =>
  Layer.effect(CurrentStore, make(options))

/**
 * The store as the limiter's `Store.CurrentStore`, on an ioredis client of
 * its own: to `url` (`redis://` or `rediss://`), to a Redis Cluster
 * (`cluster`) or to the primary behind Sentinel (`sentinel`); `client` adds
 * ioredis options. Building it fails with `InvalidPolicy` for options that
 * do not make sense and with `RedisError` when Redis cannot be reached;
 * once connected, it connects again for ever, and while it is disconnected
 * calls fail at once (no offline queue), so the limiter's `fallback`
 * decides.
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
 *
 * // a Redis Cluster, or a primary behind Sentinel
 * const OnCluster = RedisStore.layer({ cluster: { nodes: ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"] } })
 * const BehindSentinel = RedisStore.layer({ sentinel: { name: "mymaster", sentinels: ["redis://10.0.0.1:26379"] } })
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (
  options: LayerOptions = {}
): Layer.Layer<CurrentStore, InvalidPolicy | Redis.RedisError | MissingPackage> =>
  Layer.effectContext(Effect.gen(function*() {
    const where = yield* Connection.where(options)
    const settings = validate({ ...options, cluster: where._tag === "Cluster" }, where._tag === "Cluster")
    if (settings instanceof InvalidPolicy) return yield* settings
    const connectTimeout = yield* bounded(options, "connectTimeout", 5000)
    const closeTimeout = yield* bounded(options, "closeTimeout", 2000)
    const silenceTimeout = yield* bounded(options, "silenceTimeout", 5000)
    // ioredis is an optional peer: loaded here, so `tollgate/redis` loads without it
    const io = yield* OptionalPackage.load(
      "the Redis store's own client (RedisStore.layer)",
      "ioredis",
      () => import("ioredis").then(Result.succeed, Result.fail)
    )
    const connection = yield* Connection.ioredis(
      io,
      () => Connection.client(io, where, options.client),
      connectTimeout,
      closeTimeout,
      silenceTimeout
    )
    return Context.make(CurrentStore, yield* build(connection, settings))
  }))

const bounded = (
  options: LayerOptions,
  field: "connectTimeout" | "closeTimeout" | "silenceTimeout",
  fallback: number
): Effect.Effect<Duration.Duration, InvalidPolicy> => {
  const input = options[field]
  const millis = input === undefined ? fallback : Policy.positiveMillis(input)
  return millis === undefined
    ? Effect.fail(new InvalidPolicy({ field, value: String(input), reason: "must be a positive, finite duration" }))
    : Effect.succeed(Duration.millis(millis))
}
