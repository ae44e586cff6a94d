/**
 * The owner's side: the partitions of the shards this runner owns. A
 * partition is one shard's keys, decided by an in-process `RateLimiter` of
 * their own (the one interpreter; nothing here decides anything).
 *
 * Its life follows the shard's lock:
 *
 * - **Opening** (the shard's entity starts here, so this runner holds the
 *   lock): it claims the shard in the cluster's storage, sets each key's
 *   records (a policy or rate set by hand, a block), and then either restores
 *   what the last owner handed over (each key's state, then the line: every
 *   waiter and pending reservation submitted again in its order of arrival),
 *   or, when the last owner never handed it over (it crashed), starts
 *   *cold*: a key first used within its recovery time of the claim is
 *   blocked until then (see {@link recovery}). Nothing is served before
 *   that: requests wait for the partition to open. The entity's stop waits
 *   for the opening too (up to the hand-over's timeout) and hands the shard
 *   over, so that a shard that moves away while it opens is never left
 *   claimed and not handed over.
 * - **Closing** (the shard is being released: this runner no longer counts
 *   it among its own, and its lock is still held until the shard's entity
 *   has stopped): operations that come now are answered `Moved`; those in
 *   progress finish; every waiter's place is given up (a waiter admitted in
 *   that instant is answered as admitted) and every reservation not yet due
 *   is cancelled; the keys' states are read, and the lot is written to the
 *   storage as the hand-over, fenced by the claim's epoch. Callers told
 *   `Moved` send their requests again, to the next owner, where their places
 *   are waiting for them.
 *
 * @since 0.3.0
 */
import {
  Clock,
  Context,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  Latch,
  Metric,
  Option,
  Predicate,
  Schedule,
  Scope
} from "effect"
import { ShardId, type Sharding } from "effect/cluster"
import { BucketFailed, type InvalidPolicy } from "../../Errors.ts"
import { Recorder } from "../../internal/Recorder.ts"
import * as Supervisor from "../../internal/supervisor/Supervisor.ts"
import * as Policy from "../../Policy.ts"
import { RateLimiter } from "../../RateLimiter.ts"
import { CurrentStore } from "../../Store.ts"
import type { ClusterStorage } from "../ClusterStorage.ts"
import { apply, type Named } from "./apply.ts"
import * as Codec from "./codec.ts"
import {
  type BatchReply,
  type BatchRequest,
  encodeValue,
  type Failure,
  Kind,
  type Op,
  packResults,
  type Result,
  Tag,
  unpack,
  type WaitRequest,
  type WaitResult
} from "./protocol.ts"

/**
 * What the owner needs.
 *
 * @since 0.3.0
 */
export interface Options {
  /** The limiter's name: its entity's and its storage's. */
  readonly name: string
  /** The options of each partition's in-process limiter (no store, no fallback). */
  readonly limiter: RateLimiter.Options
  /** The policy a key runs unless set by hand. */
  readonly policyFor: (key: string) => Policy.Valid | InvalidPolicy
  readonly named: Named
  readonly storage: ClusterStorage["Service"]
  readonly sharding: Sharding.Sharding["Service"]
  readonly group: string
  /** How long a handed-over place waits for its caller to come back for it. */
  readonly handoffMillis: number
  /** Starts the entity of `shard` here (through the cluster, so that its lock's release waits for it). */
  readonly openEntity: (shard: number) => Effect.Effect<void, unknown>
}

/** A key's record: what was set on it by hand. */
interface KeyRecord {
  /** The named policy it was reconfigured to. */
  p?: string
  /** The rate it was set to (per second). */
  r?: number
  /** Until when it is blocked (the owner's clock). */
  bu?: number
}

/** One place in a key's line on this owner. */
interface Waiter {
  readonly id: string
  readonly req: WaitRequest
  /** When `maxWait` runs out (this owner's clock; Infinity: never). */
  readonly deadline: number
  readonly result: Deferred.Deferred<WaitResult>
  /** A waiter's call to the limiter, while it waits. */
  fiber: Fiber.Fiber<void, RateLimiter.CallError | Failure> | undefined
  /** A reservation's cancel, and when it is due. */
  cancel: Effect.Effect<void> | undefined
  dueAt: number
  /** A caller awaits it (a place handed over waits for its caller until `expiresAt`). */
  attached: boolean
  expiresAt: number
  /** Set while the partition closes: its end is the hand-over's, not the caller's. */
  handing: boolean
  /** How it ended, once it has. */
  answer: WaitResult | undefined
}

/** A hand-over: what the storage keeps between two owners. */
interface Handoff {
  readonly states: ReadonlyArray<readonly [key: string, state: unknown, blockedFor: number]>
  readonly line: ReadonlyArray<{ readonly req: WaitRequest; readonly mw: number }>
  readonly done: ReadonlyArray<{ readonly id: string; readonly result: WaitResult }>
}

/**
 * One shard's keys on this runner.
 *
 * @since 0.3.0
 */
export class Partition {
  status: "opening" | "open" | "closing" | "closed" = "opening"
  readonly opened = Latch.makeUnsafe(false)
  closing: Deferred.Deferred<void> | undefined = undefined
  /** A stop gave up waiting for the opening (the storage did not answer): it serves nothing, hands nothing over. */
  abandoned = false
  limiter: RateLimiter["Service"] | undefined = undefined
  supervisor: Supervisor.Supervisor | undefined = undefined
  scope: Scope.Closeable | undefined = undefined
  epoch = 0
  /** Operations being served now. */
  inflight = 0
  readonly drained = Latch.makeUnsafe(true)
  readonly waiters = new Map<string, Waiter>()
  readonly records = new Map<string, KeyRecord>()
  /** Set when the last owner did not hand the shard over: when it was claimed. */
  coldSince: number | undefined = undefined
  readonly shard: number
  readonly shardId: ShardId.ShardId
  constructor(shard: number, group: string) {
    this.shard = shard
    this.shardId = ShardId.make(group, shard)
  }
}

/**
 * How long a key of `policy` that has used all it may takes to recover
 * completely, from `now` (ms): after a crash, a key first used within this
 * time of the claim is blocked until it has passed, which is stricter than
 * the key having been emptied at the crash. Every part of a composite
 * counts. A concurrency limit recovers through releases, not time: 0 (it
 * starts afresh; see docs/distributed.md).
 *
 * @since 0.3.0
 */
export const recovery = (policy: Policy.Valid, now: number): number => {
  switch (policy._tag) {
    case "All":
      return policy.parts.reduce((most, part) => Math.max(most, recovery(part, now)), 0)
    case "Burst":
      return Math.max(recovery(policy.base, now), recovery(policy.burst, now))
    case "Unlimited":
    case "Concurrency":
      return 0
    default: {
      const rule = policy.rule
      if (!Number.isFinite(rule.maxCost)) return 0
      const at = rule.settledAt(rule.force(rule.full(now), now, rule.maxCost))
      return Number.isFinite(at) ? Math.max(0, at - now) : 0
    }
  }
}

/**
 * The owner's interface.
 *
 * @since 0.3.0
 */
export interface Owner {
  /** The open partition of `shard`, if this runner serves it now. */
  readonly local: (shard: number) => Partition | undefined
  /** Serves one operation on an open partition. */
  readonly run: (partition: Partition, op: Op) => Effect.Effect<Result>
  readonly batch: (batch: BatchRequest) => Effect.Effect<BatchReply>
  readonly wait: (req: WaitRequest) => Effect.Effect<WaitResult>
  /** Starts opening `shard`'s partition (its entity starts here), without waiting for it. */
  readonly begin: (shard: number) => Partition
  /** Opens `shard`'s partition, or waits for the opening under way. */
  readonly open: (shard: number) => Effect.Effect<Partition>
  /** Hands `shard`'s partition over (its entity stops here). */
  readonly close: (shard: number) => Effect.Effect<void>
  /** Hands every partition over and opens no more: the runner is stopping. */
  readonly closeAll: Effect.Effect<void>
  /** Every partition's limiter's counts, added up. */
  readonly stats: Effect.Effect<RateLimiter.Stats>
  /** Each open partition's limiter's counters (what the limiter's metrics add up). */
  readonly recorders: () => Array<Recorder>
  /** This runner's address, as replies name it (known once a shard's entity starts here). */
  readonly runnerIs: (address: string) => void
}

const moved: Result = { t: Tag.Moved }
const notHere: Result = { t: Tag.NotHere }
const waitMoved: WaitResult = { t: Tag.Moved }

const failed = (e: unknown): Result => ({ t: Tag.Failed, e: e as Failure })
const answeredTrue: Result = { t: Tag.Ok, b: true }
const answeredFalse: Result = { t: Tag.Ok, b: false }
const failedExit = (exit: Exit.Exit<unknown, unknown>): Result => {
  const reason = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail") : undefined
  return reason === undefined
    ? { t: Tag.Failed, e: new BucketFailed({ key: "", defect: "no answer" }) }
    : failed(reason.error)
}
// `{ cost }` objects for the usual costs, made once
const costs: Array<{ readonly cost: number }> = []
const costOf = (n: number | undefined): { readonly cost?: number } | undefined =>
  n === undefined ? undefined : Number.isInteger(n) && n >= 0 && n < 64 ? (costs[n] ??= { cost: n }) : { cost: n }

// Operations that set a key by hand, and so its record.
const setsRecord = (k: number): boolean =>
  k === Kind.Reconfigure || k === Kind.SetRate || k === Kind.Block || k === Kind.Reset || k === Kind.Fill ||
  k === Kind.Set || k === Kind.Delete

const durationMillis = (input: number | string | undefined): number => {
  if (input === undefined) return Infinity
  const d = Duration.fromInput(input as Duration.Input)
  return Option.isSome(d) ? Duration.toMillis(d.value) : Infinity
}

/**
 * Makes the owner, in the current scope: closing it hands every partition
 * over first.
 *
 * @since 0.3.0
 */
export const make = Effect.fnUntraced(function*(options: Options) {
  const { sharding, storage, name, named } = options
  const clock = yield* Clock.Clock
  const now = () => clock.currentTimeMillisUnsafe()
  const scope = yield* Effect.scope
  const context = yield* Effect.context<never>()
  const runFork = Effect.runForkWith(context)
  const partitions = new Map<number, Partition>()
  const opening = new Map<number, Fiber.Fiber<void, unknown>>()
  // The counts of partitions handed over (counters only go up).
  const retired = new Recorder()
  let shuttingDown = false
  let runner = ""
  let version = 1
  let openList: Array<number> | undefined = undefined
  const changed = () => {
    version++
    openList = undefined
  }
  const openShards = (): Array<number> => {
    if (openList !== undefined) return openList
    const list: Array<number> = []
    for (const p of partitions.values()) if (p.status === "open") list.push(p.shard)
    return openList = list
  }

  // --- A key's record ------------------------------------------------------

  const saveRecord = (p: Partition, key: string, record: KeyRecord) => {
    const empty = record.p === undefined && record.r === undefined && record.bu === undefined
    if (empty) p.records.delete(key)
    else p.records.set(key, record)
    return storage.saveKey(name, p.shard, key, empty ? undefined : Codec.encode(record))
  }

  // What an operation that sets a key by hand leaves in its record, or
  // undefined when the record stays as it was.
  const nextRecord = (p: Partition, op: Op): KeyRecord | undefined => {
    const before = p.records.get(op.key) ?? {}
    switch (op.k) {
      case Kind.Reconfigure: {
        const next: KeyRecord = {}
        if (op.p !== undefined && named.get(op.p) !== options.policyFor(op.key)) next.p = op.p
        if (before.bu !== undefined) next.bu = before.bu
        return next
      }
      case Kind.SetRate:
        return op.n === undefined ? undefined : { ...before, r: op.n }
      case Kind.Block: {
        const millis = durationMillis(op.d)
        return { ...before, bu: now() + millis }
      }
      default: {
        // reset, fill, set and delete end a block
        if (before.bu === undefined) return undefined
        const { bu: _, ...rest } = before
        return rest
      }
    }
  }

  // --- Serving ---------------------------------------------------------------

  // A key of a partition that was not handed over, used for the first time
  // within its recovery time: blocked until then.
  const cold = (p: Partition, key: string): Effect.Effect<unknown, RateLimiter.CallError> | undefined => {
    const since = p.coldSince
    if (since === undefined || p.supervisor!.bucket(key) !== undefined) return undefined
    // (the limiter's policies are the user's Policy values, seen by the core as limits)
    const policy = p.supervisor!.policyOf(key)
    if (!Policy.isPolicy(policy)) return undefined
    const t = now()
    const left = since + recovery(policy, since) - t
    return left > 0 ? p.limiter!.block(key, left) : undefined
  }

  const runOp = (p: Partition, op: Op): Effect.Effect<Result> => {
    const limiter = p.limiter!
    if (op.k === Kind.Cancel) return Effect.as(cancel(p, op.p ?? ""), { t: Tag.Ok })
    let run: Effect.Effect<unknown, RateLimiter.CallError> = apply(limiter, op, named)
    if (p.coldSince !== undefined) {
      const keys = op.keys ?? [op.key]
      const first = keys.map((key) => cold(p, key)).filter(Predicate.isNotUndefined)
      if (first.length > 0) run = Effect.andThen(Effect.all(first, { discard: true }), run)
    }
    const answered = Effect.matchEffect(run, {
      onFailure: (e) => Effect.succeed(failed(e)),
      onSuccess: (value) => {
        const result = encodeValue(op.k as Kind, value)
        if (!setsRecord(op.k)) return Effect.succeed(result)
        const record = nextRecord(p, op)
        if (record === undefined) return Effect.succeed(result)
        // (not interrupted halfway: a statement cut off can wedge its connection)
        return saveRecord(p, op.key, record).pipe(
          Effect.as(result),
          Effect.catch((e) => Effect.succeed(failed(e))),
          Effect.uninterruptible
        )
      }
    })
    return answered
  }

  const enter = (p: Partition) => {
    if (p.inflight++ === 0) p.drained.closeUnsafe()
  }
  const leave = (p: Partition) => {
    if (--p.inflight === 0) p.drained.openUnsafe()
  }

  const run = (p: Partition, op: Op): Effect.Effect<Result> =>
    Effect.suspend(() => {
      if (p.status !== "open") return Effect.succeed(moved)
      enter(p)
      return Effect.ensuring(runOp(p, op), Effect.sync(() => leave(p)))
    })

  // The partition of `shard` for an operation that came here: open, opened
  // now (this runner owns the shard), or none (Moved / NotHere).
  const partitionFor = (shard: number): Effect.Effect<Partition | Result> =>
    Effect.suspend(() => {
      const p = partitions.get(shard)
      if (p !== undefined) {
        if (p.status === "open") return Effect.succeed(p)
        if (p.status === "opening" && !p.abandoned) return Effect.as(p.opened.await, p)
        if (p.status === "closing" || sharding.hasShardId(p.shardId) === false) return Effect.succeed(moved)
      }
      if (shuttingDown) return Effect.succeed(moved)
      if (!sharding.hasShardId(ShardId.make(options.group, shard))) return Effect.succeed(notHere)
      // owned here and not open: start its entity, which opens it
      let fiber = opening.get(shard)
      if (fiber === undefined) {
        fiber = runFork(options.openEntity(shard))
        opening.set(shard, fiber)
        fiber.addObserver(() => opening.delete(shard))
      }
      return Fiber.await(fiber).pipe(
        Effect.map((): Partition | Result => {
          const opened = partitions.get(shard)
          return opened?.status === "open" ? opened : notHere
        }),
        Effect.timeoutOrElse({ duration: options.handoffMillis, orElse: () => Effect.succeed(notHere) })
      )
    })

  // A batch: each operation in order, on its shard's partition (opened
  // first if this runner owns it). Not interruptible: its operations are
  // decided, or not, as a whole message; the partitions' in-flight counts
  // are kept without a finalizer per operation.
  const batch = (request: BatchRequest): Effect.Effect<BatchReply> =>
    Effect.gen(function*() {
      const ops = unpack(request)
      const results: Array<Result> = []
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i]
        let p = partitions.get(op.s)
        if (p === undefined || p.status !== "open") {
          const found = yield* partitionFor(op.s)
          if (!(found instanceof Partition)) {
            results.push(found)
            continue
          }
          p = found
        }
        if (p.status !== "open") {
          results.push(moved)
          continue
        }
        enter(p)
        // the common case, without the general path's wrappers
        if (op.k === Kind.Acquire && p.coldSince === undefined) {
          const exit = yield* Effect.exit(p.limiter!.acquire(op.key, costOf(op.n)))
          results.push(Exit.isSuccess(exit) ? (exit.value ? answeredTrue : answeredFalse) : failedExit(exit))
        } else {
          results.push(yield* runOp(p, op))
        }
        leave(p)
      }
      return packResults(results, runner, version, request.v === version ? undefined : openShards())
    }).pipe(Effect.uninterruptible)

  // --- The line --------------------------------------------------------------

  const complete = (w: Waiter, result: WaitResult) => {
    if (w.answer !== undefined) return
    w.answer = result
    Deferred.doneUnsafe(w.result, Exit.succeed(result))
  }

  // Starts a waiter's call to the limiter (a reservation's: answered at once).
  const start = (p: Partition, w: Waiter): Effect.Effect<void> => {
    const req = w.req
    const limiter = p.limiter!
    const keys = req.keys ?? [req.key]
    const firstUse = p.coldSince === undefined
      ? []
      : keys.map((key) => cold(p, key)).filter(Predicate.isNotUndefined)
    const maxWait = w.deadline === Infinity ? undefined : Math.max(0, w.deadline - now())
    if (req.reserve) {
      return Effect.andThen(Effect.all(firstUse, { discard: true }), limiter.reserve(req.key, { cost: req.n, maxWait }))
        .pipe(
          Effect.match({
            onFailure: (e) => {
              p.waiters.delete(w.id)
              complete(w, { t: Tag.Failed, e: e as Failure })
            },
            onSuccess: (reservation) => {
              const delay = Duration.toMillis(reservation.delay)
              w.cancel = reservation.cancel
              w.dueAt = now() + delay
              if (!(delay > 0)) p.waiters.delete(w.id)
              complete(w, { t: Tag.Ok, dl: delay })
            }
          })
        )
    }
    const waitOptions: RateLimiter.WaitOptions = {
      cost: req.n,
      maxWait,
      priority: req.pr,
      tenant: req.tn,
      weight: req.wt
    }
    const call = Effect.andThen(
      Effect.all(firstUse, { discard: true }),
      limiter.wait(req.keys ?? req.key, waitOptions)
    )
    return Effect.map(Effect.forkIn(call, p.scope!, { startImmediately: true }), (fiber) => {
      w.fiber = fiber
      fiber.addObserver((exit) => {
        if (w.handing) return // the hand-over decides
        w.fiber = undefined
        if (Exit.isSuccess(exit)) complete(w, { t: Tag.Ok })
        else {
          const e = exit.cause.reasons.find((r) => r._tag === "Fail")
          complete(w, e === undefined ? waitMoved : { t: Tag.Failed, e: e.error as Failure })
        }
        if (w.attached) p.waiters.delete(w.id)
      })
    })
  }

  const newWaiter = (req: WaitRequest, deadline: number, attached: boolean): Waiter => ({
    id: req.id,
    req,
    deadline,
    result: Deferred.makeUnsafe<WaitResult>(),
    fiber: undefined,
    cancel: undefined,
    dueAt: 0,
    attached,
    expiresAt: attached ? Infinity : now() + options.handoffMillis,
    handing: false,
    answer: undefined
  })

  // The caller left: its place is given up (unless the shard is being handed
  // over, where the place goes with it).
  const leaveLine = (p: Partition, w: Waiter): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (w.handing || !sharding.hasShardId(p.shardId) || p.status !== "open") return Effect.void
      p.waiters.delete(w.id)
      const fiber = w.fiber
      return fiber === undefined ? Effect.void : Fiber.interrupt(fiber)
    })

  const cancel = (p: Partition, id: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      const w = p.waiters.get(id)
      if (w === undefined) return Effect.void
      p.waiters.delete(id)
      if (w.cancel !== undefined && w.dueAt > now()) return w.cancel
      return w.fiber === undefined ? Effect.void : Fiber.interrupt(w.fiber)
    })

  const awaitPlace = (p: Partition, w: Waiter): Effect.Effect<WaitResult> =>
    Deferred.await(w.result).pipe(
      Effect.tap((r) =>
        Effect.sync(() => {
          if (!w.req.reserve || r.t !== Tag.Ok || !((r.dl ?? 0) > 0)) p.waiters.delete(w.id)
        })
      ),
      Effect.onInterrupt(() => leaveLine(p, w))
    )

  const wait = (req: WaitRequest): Effect.Effect<WaitResult> =>
    Effect.gen(function*() {
      const found = yield* partitionFor(req.s)
      // (a Wait goes to its shard's entity: a runner that does not serve the shard is handing it over)
      if (!(found instanceof Partition)) return waitMoved
      const p = found
      if (req.resume) {
        const w = p.waiters.get(req.id)
        if (w !== undefined) {
          w.attached = true
          w.expiresAt = Infinity
          return yield* awaitPlace(p, w)
        }
      }
      if (p.status !== "open") return waitMoved
      const mw = durationMillis(req.mw)
      const w = newWaiter(req, mw === Infinity ? Infinity : now() + mw, true)
      p.waiters.set(req.id, w)
      yield* start(p, w)
      return yield* awaitPlace(p, w)
    })

  // --- Opening and closing ------------------------------------------------

  // Opening runs on a fiber of its own, and the entity's start does not wait
  // for it: the cluster waits for a started entity to stop before it lets
  // the shard's lock go, but not for one still starting. So the entity is
  // started at once, its stop (`close`) waits for the opening and hands the
  // shard over, and the next owner cannot claim the shard before that. While
  // the shard is still this runner's, a failed opening (the storage did not
  // answer) is tried again; once it is not, the partition is closed without
  // serving.
  const begin = (shard: number): Partition => {
    const found = partitions.get(shard)
    if (found !== undefined && !found.abandoned && (found.status === "open" || found.status === "opening")) {
      return found
    }
    const p = new Partition(shard, options.group)
    partitions.set(shard, p)
    if (shuttingDown) {
      p.status = "closed"
      p.opened.openUnsafe()
      return p
    }
    const attempt: Effect.Effect<void> = Effect.suspend(() => {
      if (shuttingDown || p.abandoned || !sharding.hasShardId(p.shardId)) {
        p.status = "closed"
        p.opened.openUnsafe()
        return Effect.void
      }
      return openPartition(p).pipe(
        Effect.catchCause((cause) =>
          Effect.logWarning(`tollgate cluster: could not open shard ${shard}; trying again`, cause).pipe(
            Effect.andThen(Effect.sleep(250)),
            Effect.andThen(attempt)
          )
        )
      )
    })
    runFork(attempt)
    return p
  }

  const open = (shard: number): Effect.Effect<Partition> =>
    Effect.suspend(() => {
      const p = begin(shard)
      return Effect.as(p.opened.await, p)
    })

  const openPartition = Effect.fnUntraced(function*(p: Partition) {
    const partitionScope = yield* Scope.make()
    let supervisor: Supervisor.Supervisor | undefined
    const limiter = yield* RateLimiter.make(options.limiter).pipe(
      Effect.provideService(Supervisor.OnMake, (s) => {
        supervisor = s
      }),
      // a partition's keys live in its buckets, whatever store the app has
      Effect.updateContext((context: Context.Context<Scope.Scope>) => Context.omit(CurrentStore)(context)),
      // each partition's limiter counts for itself; the owner adds them up
      Effect.provideService(Metric.MetricRegistry, new Map()),
      Scope.provide(partitionScope),
      Effect.orDie
    )
    const claim = yield* storage.claim(name, p.shard, runner).pipe(
      Effect.onError(() => Scope.close(partitionScope, Exit.void))
    )
    if (p.abandoned) {
      // A stop gave up waiting, and the lock went: the shard may be another
      // runner's by now, so this late claim serves nothing and hands nothing
      // over (its next owner starts cold: fail closed, never from a stale
      // hand-over).
      p.status = "closed"
      if (partitions.get(p.shard) === p) partitions.delete(p.shard)
      yield* Scope.close(partitionScope, Exit.void)
      return yield* Effect.logWarning(
        `tollgate cluster: shard ${p.shard} claimed after its stop gave up waiting; not handed over`
      )
    }
    p.scope = partitionScope
    p.limiter = limiter
    p.supervisor = supervisor
    p.epoch = claim.epoch
    // what was set on keys by hand, before their states
    for (const { key, record } of claim.keys) {
      const r = Codec.decode(record) as KeyRecord
      p.records.set(key, r)
      const policy = r.p === undefined ? undefined : named.get(r.p)
      if (policy !== undefined) yield* Effect.ignore(limiter.reconfigure(key, policy, { carry: "reset" }))
      if (r.r !== undefined) yield* Effect.ignore(limiter.setRate(key, r.r))
      if (claim.previous !== "released" && r.bu !== undefined && r.bu > now()) {
        yield* Effect.ignore(limiter.block(key, r.bu - now()))
      }
    }
    if (claim.previous === "released" && claim.handoff !== undefined) {
      const handoff = Codec.decode(claim.handoff) as Handoff
      for (const [key, state, blockedFor] of handoff.states) {
        supervisor!.restore(key, state)
        if (blockedFor > 0) yield* Effect.ignore(limiter.block(key, blockedFor))
      }
      p.status = "open" // for the line's calls
      for (const { req, mw } of handoff.line) {
        const w = newWaiter(req, mw === Infinity ? Infinity : now() + mw, false)
        p.waiters.set(req.id, w)
        yield* start(p, w)
      }
      for (const { id, result } of handoff.done) {
        const w = newWaiter({ ...handoffDoneReq, id }, Infinity, false)
        complete(w, result)
        p.waiters.set(id, w)
      }
    } else if (claim.previous === "owned") {
      p.coldSince = now()
    }
    p.status = "open"
    changed()
    p.opened.openUnsafe()
    // The shard left this runner while it was being opened: it is handed
    // over at once (the entity's stop, waiting for this, would too), what it
    // was handed included, so that the next owner starts from it rather than
    // from this claim, never handed over (cold). (`closePartition` marks it
    // closing before any call that waited for the opening runs: those are
    // told Moved.)
    if (!sharding.hasShardId(p.shardId)) yield* closePartition(p)
  })

  // The first to close a partition hands it over; the others wait for that.
  // A partition still opening is waited for, then handed over, up to the
  // hand-over's timeout: a storage that does not answer must not hold a stop
  // for good (the opening is then given up: it serves nothing and hands
  // nothing over).
  const close = (shard: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      const p = partitions.get(shard)
      return p === undefined ? Effect.void : closePartition(p)
    })

  const closePartition = (p: Partition): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (p.closing !== undefined) return Deferred.await(p.closing)
      if (p.status === "opening") {
        if (p.abandoned) return Effect.void
        return p.opened.await.pipe(
          Effect.timeoutOrElse({
            duration: options.handoffMillis,
            // (calls waiting for it are let go: they find it not open, and are told Moved)
            orElse: () =>
              Effect.sync(() => {
                p.abandoned = true
                p.opened.openUnsafe()
              })
          }),
          Effect.andThen(Effect.suspend(() => p.abandoned ? Effect.void : closePartition(p)))
        )
      }
      if (p.status !== "open") {
        p.status = "closed"
        return Effect.void
      }
      p.status = "closing"
      changed()
      const closing = Deferred.makeUnsafe<void>()
      p.closing = closing
      return handOver(p).pipe(
        Effect.ensuring(Deferred.succeed(closing, undefined)),
        Effect.uninterruptible
      )
    })

  const handOver = (p: Partition): Effect.Effect<void> =>
    Effect.gen(function*() {
      yield* p.drained.await
      const waiters = Array.from(p.waiters.values())
      for (const w of waiters) w.handing = true
      yield* Fiber.interruptAll(waiters.flatMap((w) => w.fiber === undefined ? [] : [w.fiber]))
      const t = now()
      const line: Array<{ req: WaitRequest; mw: number }> = []
      const done: Array<{ id: string; result: WaitResult }> = []
      for (const w of waiters) {
        if (w.req.reserve) {
          if (w.cancel !== undefined && w.dueAt > t) {
            yield* w.cancel
            line.push({ req: w.req, mw: Infinity })
          }
          continue
        }
        if (w.answer !== undefined) {
          if (!w.attached) done.push({ id: w.id, result: w.answer })
          continue
        }
        const exit = w.fiber?.pollUnsafe()
        if (exit !== undefined && Exit.isSuccess(exit)) {
          if (w.attached) complete(w, { t: Tag.Ok })
          else done.push({ id: w.id, result: { t: Tag.Ok } })
          continue
        }
        const error = exit === undefined ? undefined : exit.cause.reasons.find((r) => r._tag === "Fail")
        if (error !== undefined) {
          const result: WaitResult = { t: Tag.Failed, e: error.error as Failure }
          if (w.attached) complete(w, result)
          else done.push({ id: w.id, result })
          continue
        }
        line.push({ req: w.req, mw: w.deadline === Infinity ? Infinity : Math.max(0, w.deadline - t) })
        complete(w, waitMoved)
      }
      p.waiters.clear()
      const states = p.supervisor!.snapshot().map((h) => [h.key, h.state, h.blockedFor] as const)
      const handoff: Handoff = { states, line, done }
      const released = yield* storage.release(name, p.shard, p.epoch, Codec.encode(handoff)).pipe(
        Effect.catch((e) =>
          Effect.as(Effect.logWarning(`tollgate cluster: shard ${p.shard} not handed over`, e), false)
        )
      )
      if (!released) yield* Effect.logWarning(`tollgate cluster: shard ${p.shard} was claimed again meanwhile`)
      p.status = "closed"
      changed()
      if (partitions.get(p.shard) === p) partitions.delete(p.shard)
      const counted = p.supervisor!.limiter.recorder
      retired.allowed += counted.allowed
      retired.denied += counted.denied
      retired.overloaded += counted.overloaded
      retired.started += counted.started
      retired.reaped += counted.reaped
      retired.dryRun += counted.dryRun
      yield* Scope.close(p.scope!, Exit.void)
    })

  // --- Housekeeping --------------------------------------------------------

  // A shard this runner no longer counts as its own is handed over at once
  // (its lock is held until its entity has stopped, which waits for this);
  // a handed-over place whose caller never came back is given up.
  yield* Effect.sync(() => {
    const t = now()
    for (const p of partitions.values()) {
      if (p.status !== "open") continue
      if (!sharding.hasShardId(p.shardId)) {
        runFork(closePartition(p))
        continue
      }
      for (const w of p.waiters.values()) {
        if (w.attached || w.expiresAt > t) continue
        p.waiters.delete(w.id)
        if (w.fiber !== undefined) runFork(Fiber.interrupt(w.fiber))
        else if (w.cancel !== undefined && w.dueAt > t) runFork(w.cancel)
      }
    }
  }).pipe(
    Effect.repeat(Schedule.spaced(20)),
    Effect.forkIn(scope)
  )

  // Stopping hands every partition over while their locks are held (and
  // the runner still answers: calls meanwhile are told Moved).
  const closeAll = Effect.suspend(() => {
    shuttingDown = true
    changed()
    return Effect.all(Array.from(partitions.keys(), close), { concurrency: "unbounded", discard: true })
  })
  yield* Effect.addFinalizer(() => closeAll)

  const stats = Effect.suspend(() => {
    const each = Array.from(partitions.values()).flatMap((p) =>
      p.limiter === undefined || p.status === "closed" ? [] : [p.limiter.stats]
    )
    return Effect.map(Effect.all(each), (all) => {
      const sum = { ...noStats }
      for (const s of all) for (const k of statsKeys) sum[k] += s[k]
      return sum
    })
  })

  const owner: Owner = {
    local: (shard) => {
      const p = partitions.get(shard)
      return p !== undefined && p.status === "open" ? p : undefined
    },
    run,
    batch,
    wait,
    begin,
    open,
    close,
    closeAll,
    stats,
    recorders: () => {
      const out: Array<Recorder> = [retired]
      for (const p of partitions.values()) if (p.supervisor !== undefined) out.push(p.supervisor.limiter.recorder)
      return out
    },
    runnerIs: (address) => {
      runner = address
    }
  }
  return owner
})

const noStats: { -readonly [K in keyof RateLimiter.Stats]: number } = {
  buckets: 0,
  actors: 0,
  started: 0,
  reaped: 0,
  allowed: 0,
  denied: 0,
  overloaded: 0,
  queued: 0,
  waiting: 0,
  overrides: 0,
  dryRun: 0,
  storeCalls: 0,
  storeOps: 0,
  storeFailures: 0,
  degraded: 0
}
const statsKeys = Object.keys(noStats) as ReadonlyArray<keyof RateLimiter.Stats>

const handoffDoneReq: WaitRequest = { id: "", s: 0, key: "", reserve: false, resume: false }
