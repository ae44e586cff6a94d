/**
 * The caller's side: every operation goes to the owner of its key's shard.
 *
 * - **On this runner**: straight to the partition, no message.
 * - **Elsewhere**: into the queue of its destination, the runner that owns
 *   the shard as far as this router knows (learnt from replies: each reply
 *   names its runner and, when this router's view of it is out of date,
 *   every shard it serves). A queue sends a round (one `Batch` message with
 *   all it holds) straight away while fewer than `maxInFlight` of its rounds
 *   are out; what arrives meanwhile goes in the next round (coalescing, as
 *   the Redis store's rounds do). A shard whose owner is not known yet has a
 *   queue of its own, sent to its own entity.
 * - **Moves**: an operation answered `Moved` (its shard is being handed
 *   over) or `NotHere` (it went to a runner that does not own it) is sent
 *   again to the shard's next owner; while a shard is moving, its
 *   operations wait up to `handoffMillis` for the next owner instead of
 *   falling back.
 * - **Deadlines**: an operation not answered within `timeoutMillis` (a
 *   waiter: its `maxWait` plus that) is answered by the fallback, and its
 *   shard is skipped for `retryMillis`, so that while a crashed runner's
 *   shards have no owner no call waits for their locks to expire.
 *
 * @since 0.3.0
 */
import { Clock, Effect, Exit, Fiber, Option } from "effect"
import { Overloaded, type RateLimitExceeded } from "../../Errors.ts"
import type { RateLimiter } from "../../RateLimiter.ts"
import type { Owner } from "./owner.ts"
import {
  type BatchReply,
  decodeValue,
  type Failure,
  type Kind,
  type Op,
  type Result,
  Tag,
  unpackResults,
  type WaitRequest,
  type WaitResult
} from "./protocol.ts"

/**
 * What answers when the owner does not.
 *
 * @since 0.3.0
 */
export interface Fallback {
  readonly decide: (op: Op, reason: string) => Effect.Effect<unknown, RateLimiter.CallError>
  readonly wait: (
    req: WaitRequest,
    maxWait: number,
    reason: string
  ) => Effect.Effect<WaitResult, RateLimiter.CallError | RateLimitExceeded>
}

/**
 * What the router needs.
 *
 * @since 0.3.0
 */
export interface Options {
  readonly owner: Owner
  readonly batch: (entityId: string, ops: ReadonlyArray<Op>, version: number) => Effect.Effect<BatchReply, unknown>
  readonly waitCall: (entityId: string, req: WaitRequest) => Effect.Effect<WaitResult, unknown>
  /** An entity id on a shard (its partition's). */
  readonly entityIdOf: (shard: number) => string
  readonly timeoutMillis: number
  readonly retryMillis: number
  readonly handoffMillis: number
  readonly maxInFlight: number
  readonly maxBatch: number
  readonly fallback: Fallback
}

/**
 * Counts of the router's work.
 *
 * @since 0.3.0
 */
export interface Counts {
  /** Rounds sent (messages). */
  calls: number
  /** Operations they carried. */
  ops: number
  /** Operations that hit their deadline. */
  failures: number
  /** Answers the fallback gave. */
  degraded: number
}

interface Item {
  readonly op: Op
  readonly resume: (result: Result | undefined) => void
  deadline: number
  /** The latest its deadline may move to while its shard moves: its timeout plus `handoffMillis`. */
  readonly latest: number
  tries: number
  done: boolean
  /** Its last message failed (it waits to be sent again). */
  failed: boolean
}

interface Queue {
  readonly key: string
  readonly items: Array<Item>
  /** Rounds out, and one about to start (it takes what is queued when it starts). */
  out: number
  starting: boolean
  /** When a round to it was last answered. */
  answered: number
}

// A round takes its queue `gatherTurns` turns of the event loop after it is
// asked for. Each turn reads the replies that have come in and resumes their
// callers, whose next calls then go in this round rather than the next.
// Messages, not operations, are what the cluster spends: with 100 callers on
// 10 000 keys and three runners, one turn made 25 operations a message and
// 131 000 decisions a second, two 30 and 164 000, four 30 and 165 000–171 000,
// six 171 000, eight 155 000 (and in bench:cluster, against the Redis store:
// one turn 0.41–0.45x, two 0.50–0.53x, four 0.54–0.58x). Waiting longer
// keeps the cores idle. A turn costs a lone caller about 1 µs.
const gatherTurns = 4

const afterTurns = (turns: number): Effect.Effect<void> =>
  turns <= 1 ? Effect.yieldNow : Effect.andThen(Effect.yieldNow, afterTurns(turns - 1))

const gathering = afterTurns(gatherTurns)

/** How long an operation told Moved waits before it is sent again (ms). */
const movedPause = 20

/**
 * The router's interface.
 *
 * @since 0.3.0
 */
export interface Router {
  readonly decide: (op: Op) => Effect.Effect<unknown, RateLimiter.CallError>
  readonly wait: (
    req: WaitRequest,
    maxWait: number
  ) => Effect.Effect<WaitResult, RateLimiter.CallError | RateLimitExceeded>
  readonly counts: Counts
}

/**
 * Makes the router, in the current scope (its rounds run in it).
 *
 * @since 0.3.0
 */
export const make = Effect.fnUntraced(function*(options: Options) {
  const clock = yield* Clock.Clock
  const now = () => clock.currentTimeMillisUnsafe()
  const context = yield* Effect.context<never>()
  const runFork = Effect.runForkWith(context)
  const scope = yield* Effect.scope
  const fibers = new Set<Fiber.Fiber<unknown, unknown>>()
  yield* Effect.addFinalizer(() => Fiber.interruptAll(fibers))
  const fork = <A, E>(effect: Effect.Effect<A, E>) => {
    const fiber = runFork(effect)
    fibers.add(fiber)
    fiber.addObserver(() => fibers.delete(fiber))
    return fiber
  }
  void scope

  // `effect`, or None once `millis` have passed. Unlike `Effect.timeout`, it
  // does not wait for `effect` to stop: a message to a shard whose entity is
  // still starting cannot be interrupted until it has, and a caller's
  // deadline must not wait for that.
  const within = <A, E>(effect: Effect.Effect<A, E>, millis: number): Effect.Effect<Option.Option<A>, E> =>
    Effect.callback<Option.Option<A>, E>((resume) => {
      let done = false
      const fiber = runFork(effect)
      const timer = runFork(Effect.sleep(millis))
      fiber.addObserver((exit) => {
        if (done) return
        done = true
        timer.interruptUnsafe()
        resume(Exit.isSuccess(exit) ? Effect.succeedSome(exit.value) : Effect.failCause(exit.cause))
      })
      timer.addObserver((exit) => {
        if (done || !Exit.isSuccess(exit)) return
        done = true
        fiber.interruptUnsafe()
        resume(Effect.succeedNone)
      })
      return Effect.sync(() => {
        done = true
        fiber.interruptUnsafe()
        timer.interruptUnsafe()
      })
    })

  const counts: Counts = { calls: 0, ops: 0, failures: 0, degraded: 0 }
  /** shard -> the runner serving it, as last heard */
  const owners = new Map<number, string>()
  /** runner -> the version of its shards this router knows */
  const versions = new Map<string, number>()
  const queues = new Map<string, Queue>()
  /** shard -> until when it is being handed over (ms) */
  const moving = new Map<number, number>()
  /** shard -> until when it is skipped (its owner did not answer) */
  const down = new Map<number, number>()

  const isDown = (shard: number, t: number): boolean => {
    const until = down.get(shard)
    if (until === undefined) return false
    if (t < until) return true
    down.delete(shard)
    return false
  }
  const movingUntil = (shard: number, t: number): number => {
    const until = moving.get(shard)
    if (until === undefined) return 0
    if (t < until) return until
    moving.delete(shard)
    return 0
  }

  // Its shard is moving until `until`: the item waits for the next owner,
  // but never past its latest deadline (a runner that keeps answering Moved
  // does not hold a call for ever).
  const extend = (item: Item, until: number) => {
    const deadline = Math.min(until, item.latest)
    if (deadline > item.deadline) item.deadline = deadline
  }
  // Its runner says the shard is moving: it is, until the end a move under
  // way already has (answered again and again, a move does not go on for
  // ever), else `handoffMillis` from `t`. Returns that end.
  const moves = (shard: number, t: number): number => {
    owners.delete(shard)
    const until = movingUntil(shard, t) || t + options.handoffMillis
    moving.set(shard, until)
    return until
  }
  // A shard whose owner did not answer in time is left alone (its calls
  // answered by the fallback at once) for `retryMillis`, unless it is moving.
  const skip = (shard: number, t: number) => {
    if (movingUntil(shard, t) === 0) down.set(shard, t + options.retryMillis)
  }

  const queueOf = (shard: number): Queue => {
    const runner = owners.get(shard)
    const key = runner ?? `#${shard}`
    let q = queues.get(key)
    if (q === undefined) queues.set(key, q = { key, items: [], out: 0, starting: false, answered: 0 })
    return q
  }

  // A runner's shards, when its reply says they changed. One it served and
  // no longer does is being handed over (a runner closes a partition only
  // when its shard leaves it): calls for it wait for the next owner.
  const learn = (reply: BatchReply, t: number) => {
    const runner = reply.owner
    if (reply.open !== undefined) {
      const open = new Set(reply.open)
      for (const [shard, r] of owners) {
        if (r !== runner) continue
        owners.delete(shard)
        if (!open.has(shard)) moving.set(shard, t + options.handoffMillis)
      }
      for (const shard of reply.open) owners.set(shard, runner)
    }
    versions.set(runner, reply.v)
  }

  const expire = (item: Item) => {
    if (item.done) return
    item.done = true
    counts.failures++
    item.resume(undefined)
  }

  const enqueue = (item: Item): void => {
    const q = queueOf(item.op.s)
    q.items.push(item)
    if (!q.starting && q.out < options.maxInFlight) send(q)
  }

  const again = (item: Item, pause: boolean): void => {
    if (item.done) return
    item.tries++
    if (!pause && item.tries < 4) return enqueue(item)
    fork(Effect.andThen(Effect.sleep(movedPause), Effect.sync(() => enqueue(item))))
  }

  // A round starts `gatherTurns` turns after it is asked for, with
  // everything queued by then: calls made meanwhile go together, and a lone
  // call waits only those turns (about 1 µs each).
  //
  // A round goes to the entity of one of its shards (its gateway), and
  // waits while that shard has no owner. A gateway moving to another runner
  // can stall a round whose other shards are fine; the runner itself still
  // answers other rounds. So a round out for half the timeout gives its slot
  // up (the next round goes through another gateway), and one out at its
  // deadline falls back only if its runner has answered nothing since it
  // was sent (it is down); otherwise its gateway is moving, and it waits for
  // the gateway's next owner (up to `handoffMillis`), which sends back what
  // it does not own.
  const send = (q: Queue): void => {
    q.out++
    q.starting = true
    const round = Effect.suspend(() => {
      q.starting = false
      const t = now()
      const items: Array<Item> = []
      while (q.items.length > 0 && items.length < options.maxBatch) {
        const item = q.items.shift()!
        if (item.done) continue
        if (item.deadline <= t) {
          // (it waited out its pause after a failed message: its owner did not answer)
          if (item.failed) skip(item.op.s, t)
          expire(item)
          continue
        }
        items.push(item)
      }
      if (items.length === 0) {
        released(q)
        return Effect.void
      }
      counts.calls++
      counts.ops += items.length
      const ops = items.map((i) => i.op)
      let gateway = items[0].op.s
      for (const i of items) {
        if (movingUntil(i.op.s, t) === 0) {
          gateway = i.op.s
          break
        }
      }
      const runner = owners.get(gateway)
      const known = runner === undefined ? 0 : versions.get(runner) ?? 0
      let soonest = Infinity
      for (const i of items) if (i.deadline < soonest) soonest = i.deadline
      return Effect.callback<void>((resume) => {
        let finished = false
        let stalled = false
        let extended = false
        const rpc = runFork(options.batch(options.entityIdOf(gateway), ops, known))
        let timer: Fiber.Fiber<void> | undefined
        const arm = (at: number) => {
          timer = runFork(Effect.sleep(Math.max(0, at - now())))
          timer.addObserver((exit) => {
            if (finished || !Exit.isSuccess(exit)) return
            const at = now()
            if (!stalled && at < soonest) {
              stalled = true
              released(q)
              return arm(soonest)
            }
            if (!extended && (q.answered > t || movingUntil(gateway, at) > 0)) {
              extended = true
              const until = Math.max(t + options.handoffMillis, movingUntil(gateway, at))
              moving.set(gateway, until)
              for (const i of items) extend(i, until)
              return arm(until)
            }
            finished = true
            rpc.interruptUnsafe()
            done(Exit.succeed(Option.none()))
          })
        }
        const done = (exit: Exit.Exit<Option.Option<BatchReply>, unknown>) => {
          timer?.interruptUnsafe()
          if (Exit.isSuccess(exit) && Option.isSome(exit.value)) q.answered = now()
          // the callers answered first, so that the next round, started
          // behind them, carries their next calls to this runner
          answer(items, exit)
          if (!stalled) released(q)
          resume(Effect.void)
        }
        rpc.addObserver((exit) => {
          if (finished) return
          finished = true
          done(Exit.isSuccess(exit) ? Exit.succeed(Option.some(exit.value)) : Exit.failCause(exit.cause))
        })
        arm(Math.min(soonest, t + options.timeoutMillis / 2))
        return Effect.sync(() => {
          finished = true
          rpc.interruptUnsafe()
          timer?.interruptUnsafe()
        })
      })
    })
    // Started once the fibers that can run now have queued their calls (a
    // microtask runs when the scheduler's current batch of fibers is done),
    // then `gatherTurns` turns later: behind the callers a round's answer has
    // just resumed, and those the next replies resume.
    queueMicrotask(() => fork(Effect.andThen(gathering, round)))
  }

  // A round no longer holds its slot: the next goes out if anything waits.
  const released = (q: Queue): void => {
    q.out--
    if (q.items.length > 0 && !q.starting && q.out < options.maxInFlight) send(q)
    else if (q.items.length === 0 && q.out === 0 && q.key.startsWith("#")) queues.delete(q.key)
  }

  const answer = (items: ReadonlyArray<Item>, exit: Exit.Exit<Option.Option<BatchReply>, unknown>): void => {
    const t = now()
    if (Exit.isSuccess(exit) && Option.isSome(exit.value)) {
      const reply = exit.value.value
      learn(reply, t)
      const results = unpackResults(reply)
      for (let i = 0; i < items.length; i++) {
        const item = items[i]
        const result = results[i]
        if (item.done) continue
        item.failed = false
        if (result.t === Tag.Moved) {
          extend(item, moves(item.op.s, t))
          again(item, true)
        } else if (result.t === Tag.NotHere) {
          // It left the runner that served it: it is moving (otherwise this
          // router's map of it was only out of date).
          if (owners.get(item.op.s) === reply.owner) extend(item, moves(item.op.s, t))
          again(item, false)
        } else {
          item.done = true
          owners.set(item.op.s, reply.owner)
          item.resume(result)
        }
      }
      return
    }
    // No answer: the deadline passed, or the message failed (its runner
    // died with it out, its mailbox was full).
    const mailboxFull = Exit.isFailure(exit) &&
      exit.cause.reasons.some((r) =>
        r._tag === "Fail" && (r.error as { readonly _tag?: unknown })?._tag === "MailboxFull"
      )
    for (const item of items) {
      if (item.done) continue
      if (mailboxFull) {
        item.done = true
        item.resume({
          t: Tag.Failed,
          e: new Overloaded({ key: item.op.key, reason: "mailbox", capacity: 0 })
        })
        continue
      }
      owners.delete(item.op.s)
      if (item.deadline <= t) {
        skip(item.op.s, t)
        expire(item)
      } else {
        item.failed = true
        again(item, true)
      }
    }
  }

  const remote = (op: Op, t: number): Effect.Effect<unknown, RateLimiter.CallError> =>
    Effect.flatMap(
      Effect.callback<Result | undefined>((resume) => {
        const item: Item = {
          op,
          resume: (r) => resume(Effect.succeed(r)),
          deadline: Math.max(t + options.timeoutMillis, movingUntil(op.s, t)),
          latest: t + options.timeoutMillis + options.handoffMillis,
          tries: 0,
          done: false,
          failed: false
        }
        enqueue(item)
        return Effect.sync(() => {
          item.done = true
        })
      }),
      (result) => settle(op, result, "did not answer in time")
    )

  const settle = (
    op: Op,
    result: Result | undefined,
    reason: string
  ): Effect.Effect<unknown, RateLimiter.CallError> => {
    if (result === undefined) {
      counts.degraded++
      return options.fallback.decide(op, `the owner of shard ${op.s} ${reason}`)
    }
    // a decide-now operation never ends with RateLimitExceeded
    if (result.t === Tag.Failed) return Effect.fail(result.e as RateLimiter.CallError)
    return Effect.succeed(decodeValue(op.k as Kind, result))
  }

  const decide = (op: Op): Effect.Effect<unknown, RateLimiter.CallError> =>
    Effect.suspend(() => {
      const t = now()
      const p = options.owner.local(op.s)
      if (p !== undefined) {
        return Effect.flatMap(options.owner.run(p, op), (result) =>
          result.t === Tag.Moved || result.t === Tag.NotHere
            ? remote(op, t)
            : settle(op, result, ""))
      }
      if (isDown(op.s, t)) {
        counts.degraded++
        return options.fallback.decide(op, `the owner of shard ${op.s} did not answer lately`)
      }
      return remote(op, t)
    })

  const wait = (
    req: WaitRequest,
    maxWait: number
  ): Effect.Effect<WaitResult, RateLimiter.CallError | RateLimitExceeded> =>
    Effect.gen(function*() {
      const start = now()
      let deadline = maxWait + options.timeoutMillis + start
      // however long its shard keeps moving (as for a decision)
      const latest = deadline + options.handoffMillis
      let current = req
      while (true) {
        const t = now()
        const p = options.owner.local(current.s)
        let result: WaitResult | undefined
        if (p !== undefined) {
          result = yield* options.owner.wait(current)
        } else {
          if (!current.resume && isDown(current.s, t)) break
          const until = Math.min(movingUntil(current.s, t), latest)
          if (until > deadline) deadline = until
          if (deadline <= t) {
            // its time is up (its shard kept moving): the fallback answers
            counts.failures++
            break
          }
          const exit = yield* Effect.exit(
            within(options.waitCall(options.entityIdOf(current.s), current), Math.max(0, deadline - t))
          )
          if (Exit.isSuccess(exit)) {
            if (Option.isNone(exit.value)) {
              skip(current.s, now())
              counts.failures++
              break
            }
            result = exit.value.value
          } else if (
            exit.cause.reasons.some((r) =>
              r._tag === "Fail" && (r.error as { readonly _tag?: unknown })?._tag === "MailboxFull"
            )
          ) {
            return yield* new Overloaded({ key: current.key, reason: "waiters", capacity: 0 })
          }
          // otherwise its runner stopped with it out, or interrupted it
          // while handing the shard over: ask the next owner for the place
        }
        if (result !== undefined && result.t !== Tag.Moved) {
          if (result.t === Tag.Failed) return yield* (result.e as Failure)
          return result
        }
        deadline = Math.max(deadline, Math.min(moves(current.s, now()), latest))
        current = current.resume ? current : { ...current, resume: true }
        yield* Effect.sleep(movedPause)
      }
      counts.degraded++
      return yield* options.fallback.wait(
        current,
        Math.max(0, start + maxWait - now()),
        `the owner of shard ${current.s} did not answer in time`
      )
    })

  const router: Router = { decide, wait, counts }
  return router
})
