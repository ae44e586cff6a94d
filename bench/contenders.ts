/**
 * @effect-diagnostics globalDate:off
 *
 * The contenders, each built once per scenario outside the timed section:
 *
 * - `plain`: a lazy-refill token bucket in a `Map`, called synchronously (the floor);
 * - `effect-floor` / `lazy-floor`: the plain bucket inside `Effect.sync` / as a one-object lazy `Effect`;
 * - `ref-floor`: the lazy floor in the actor's shape: a bucket object per key that is the Effect `Ref` of its state;
 * - `mailbox-floor`: the plain bucket in a fiber per key, each call a request through its bounded `Queue` and a
 *   `Deferred` back (the literal actor's floor);
 * - `rlf`: rate-limiter-flexible `RateLimiterMemory`, `await` on every call;
 * - `effect`: Effect 4's own `RateLimiter` from "effect/persistence" over `layerStoreMemory`;
 * - `tollgate`: this project's `acquire`, once per `fastPath` setting when the option exists.
 */
import {
  Deferred,
  Duration,
  Effect,
  Effectable,
  Exit,
  Fiber,
  type Inspectable,
  type MutableRef,
  Queue,
  Ref,
  Scope
} from "effect"
import { RateLimiter as PersistenceRateLimiter } from "effect/persistence"
import type { Pipeable } from "effect/Pipeable"
import { readFileSync } from "node:fs"
import { RateLimiterMemory } from "rate-limiter-flexible"
import * as Policy from "../src/Policy.ts"
import { RateLimiter } from "../src/RateLimiter.ts"
import type { ContenderId } from "./types.ts"

/** The limit every contender enforces in a scenario: a token bucket (rlf: the fixed window of the same mean rate). */
export interface Spec {
  readonly capacity: number
  readonly refillPerSecond: number
}

/** A limiter that is never exhausted within a run. */
export const allowSpec: Spec = { capacity: 1e9, refillPerSecond: 1000 }
/** One token, then one more per hour: every call after the first is denied. */
export const denySpec: Spec = { capacity: 1, refillPerSecond: 1 / 3600 }

/** Keys in the order they are used; every instance walks them round-robin with its own cursor. */
export interface KeyOrder {
  readonly keys: ReadonlyArray<string>
}

/** One contender built for one scenario. */
export interface Instance {
  /** `n` decisions spread over `callers` concurrent callers; resolves with how many allowed. */
  readonly run: (n: number) => Promise<number>
  /** One sequential decision per key, in the order given (untimed: starts the buckets). */
  readonly prime: (keys: ReadonlyArray<string>) => Promise<number>
  /** Frees everything the instance holds (timers, fibers, maps). */
  readonly close: () => Promise<void>
}

export interface Contender {
  readonly id: ContenderId
  readonly label: string
  readonly make: (spec: Spec, order: KeyOrder, callers: number) => Promise<Instance>
}

const sum = (values: ReadonlyArray<number>): number => {
  let total = 0
  for (const v of values) total += v
  return total
}

/** Splits `n` over `callers`: each caller's share (at least 1). */
const share = (n: number, callers: number): number => Math.max(1, Math.round(n / callers))

class Cursor {
  readonly keys: ReadonlyArray<string>
  i = 0
  constructor(keys: ReadonlyArray<string>) {
    this.keys = keys
  }
  next(): string {
    const key = this.keys[this.i]
    if (++this.i === this.keys.length) this.i = 0
    return key
  }
}

// ---------------------------------------------------------------------------
// plain JS

class PlainBucket {
  tokens: number
  last: number
  constructor(tokens: number, now: number) {
    this.tokens = tokens
    this.last = now
  }
}

/** The floor: a lazy-refill token bucket per key in a `Map`, one clock read per decision. */
export class PlainLimiter {
  readonly buckets = new Map<string, PlainBucket>()
  readonly capacity: number
  readonly perMs: number
  constructor(spec: Spec) {
    this.capacity = spec.capacity
    this.perMs = spec.refillPerSecond / 1000
  }
  tryAcquire(key: string, cost = 1): boolean {
    const now = Date.now()
    let bucket = this.buckets.get(key)
    if (bucket === undefined) {
      bucket = new PlainBucket(this.capacity, now)
      this.buckets.set(key, bucket)
    } else if (now > bucket.last) {
      const tokens = bucket.tokens + (now - bucket.last) * this.perMs
      bucket.tokens = tokens > this.capacity ? this.capacity : tokens
      bucket.last = now
    }
    if (bucket.tokens >= cost) {
      bucket.tokens -= cost
      return true
    }
    return false
  }
}

/**
 * The plain bucket's arithmetic in the actor's shape: the table maps a key to
 * a bucket object (its policy, its slot, its actor, its key), and the key's
 * state lives in an Effect `Ref`, read with `Ref.getUnsafe`. As in tollgate,
 * the bucket is that `Ref` and the `Ref`'s cell, so a decision follows two
 * objects (the bucket, then the state) where the plain bucket follows one.
 * This is the least a limiter built that way can cost per decision.
 */
export class PlainRefLimiter {
  readonly buckets = new Map<string, RefBucket>()
  readonly policy: { readonly capacity: number; readonly perMs: number }
  constructor(spec: Spec) {
    this.policy = { capacity: spec.capacity, perMs: spec.refillPerSecond / 1000 }
  }
  tryAcquire(key: string, cost = 1): boolean {
    const now = Date.now()
    let bucket = this.buckets.get(key)
    if (bucket === undefined) {
      bucket = new RefBucket(key, this.policy, new PlainBucket(this.policy.capacity, now))
      this.buckets.set(key, bucket)
    }
    const { capacity, perMs } = bucket.policy
    const state = Ref.getUnsafe(bucket)
    if (now > state.last) {
      const tokens = state.tokens + (now - state.last) * perMs
      state.tokens = tokens > capacity ? capacity : tokens
      state.last = now
    }
    if (state.tokens >= cost) {
      state.tokens -= cost
      return true
    }
    return false
  }
}

class RefBucket implements Ref.Ref<PlainBucket>, MutableRef.MutableRef<PlainBucket> {
  declare readonly "~effect/Ref": Ref.Ref.Variance<PlainBucket>["~effect/Ref"]
  declare readonly "~effect/MutableRef": "~effect/MutableRef"
  declare readonly pipe: Pipeable["pipe"]
  declare readonly toJSON: () => unknown
  declare readonly toString: () => string
  declare readonly [Inspectable.NodeInspectSymbol]: () => unknown
  readonly policy: { readonly capacity: number; readonly perMs: number }
  current: PlainBucket
  slot = 0
  actor: unknown = undefined
  readonly key: string
  constructor(key: string, policy: RefBucket["policy"], state: PlainBucket) {
    this.policy = policy
    this.current = state
    this.key = key
  }
  get ref(): MutableRef.MutableRef<PlainBucket> {
    return this
  }
}
Object.setPrototypeOf(
  RefBucket.prototype,
  Object.assign(Object.create(Object.getPrototypeOf(Ref.makeUnsafe(undefined))), {
    "~effect/MutableRef": "~effect/MutableRef"
  })
)

export const plain: Contender = {
  id: "plain",
  label: "plain JS bucket in a Map (floor)",
  make: (spec, order) => {
    const limiter = new PlainLimiter(spec)
    // A synchronous loop whatever the callers: it is the physical limit of the decision.
    const runner = (cursor: Cursor) => (n: number) => {
      let ok = 0
      for (let i = 0; i < n; i++) if (limiter.tryAcquire(cursor.next())) ok++
      return Promise.resolve(ok)
    }
    return Promise.resolve({
      run: runner(new Cursor(order.keys)),
      prime: (keys) => runner(new Cursor(keys))(keys.length),
      close: () => {
        limiter.buckets.clear()
        return Promise.resolve()
      }
    })
  }
}

// ---------------------------------------------------------------------------
// rate-limiter-flexible

/** rlf's memory limiter is a fixed window: `points` per `duration` seconds, the same mean rate as the bucket. */
export const makeRlf = (spec: Spec): RateLimiterMemory =>
  new RateLimiterMemory({
    points: spec.capacity,
    // setTimeout overflows past 2^31 - 1 ms; stay well below.
    duration: Math.min(1_000_000, Math.max(1, Math.round(spec.capacity / spec.refillPerSecond)))
  })

/** Deletes every key, which also clears its expiry timer (otherwise the timers keep the records alive). */
export const closeRlf = async (limiter: RateLimiterMemory, keys: ReadonlyArray<string>): Promise<void> => {
  for (const key of keys) await limiter.delete(key)
}

export const rlf: Contender = {
  id: "rlf",
  label: "rate-limiter-flexible Memory",
  make: (spec, order, callers) => {
    const limiter = makeRlf(spec)
    const loop = async (cursor: Cursor, count: number): Promise<number> => {
      let ok = 0
      for (let i = 0; i < count; i++) {
        try {
          await limiter.consume(cursor.next())
          ok++
        } catch (e) {
          // A denial rejects with a RateLimiterRes; anything else is a real failure.
          if (e instanceof Error) throw e
        }
      }
      return ok
    }
    const cursor = new Cursor(order.keys)
    return Promise.resolve({
      run: (n) =>
        callers === 1
          ? loop(cursor, n)
          : Promise.all(Array.from({ length: callers }, () => loop(cursor, share(n, callers)))).then(sum),
      prime: (keys) => loop(new Cursor(keys), keys.length),
      close: () => closeRlf(limiter, order.keys)
    })
  }
}

// ---------------------------------------------------------------------------
// Effect loops (shared by effect-persistence and tollgate)

const effectRunner = (
  decide: (key: string) => Effect.Effect<boolean, unknown>,
  cursor: Cursor,
  callers: number
): (n: number) => Promise<number> => {
  const loop = (count: number) =>
    Effect.gen(function*() {
      let ok = 0
      for (let i = 0; i < count; i++) if (yield* decide(cursor.next())) ok++
      return ok
    })
  const slots = Array.from({ length: callers }, (_, i) => i)
  return (n) =>
    callers === 1
      ? Effect.runPromise(loop(n))
      : Effect.runPromise(
        Effect.map(Effect.forEach(slots, () => loop(share(n, callers)), { concurrency: callers }), sum)
      )
}

/** The plain bucket behind an Effect-returning `decide`, in the same Effect loop as tollgate. */
const plainInEffect = <L extends PlainLimiter | PlainRefLimiter>(
  id: ContenderId,
  label: string,
  wrap: (limiter: L, key: string) => Effect.Effect<boolean>,
  make: (spec: Spec) => L
): Contender => ({
  id,
  label,
  make: (spec, order, callers) => {
    const limiter = make(spec)
    const decide = (key: string) => wrap(limiter, key)
    return Promise.resolve({
      run: effectRunner(decide, new Cursor(order.keys), callers),
      prime: (keys) => effectRunner(decide, new Cursor(keys), 1)(keys.length),
      close: () => {
        limiter.buckets.clear()
        return Promise.resolve()
      }
    })
  }
})

/**
 * The Effect floor: the same plain bucket, decided inside `Effect.sync` in the
 * same Effect loop as tollgate. The least any Effect-returning `acquire` can
 * cost here.
 */
export const effectFloor: Contender = plainInEffect(
  "effect-floor",
  "plain JS bucket inside Effect.sync (the Effect floor)",
  (limiter, key) => Effect.sync(() => limiter.tryAcquire(key)),
  (spec) => new PlainLimiter(spec)
)

const exitTrue = Exit.succeed(true)
const exitFalse = Exit.succeed(false)

/**
 * A decision on the plain bucket as the program holds it: one object whose
 * prototype's `evaluate` (Effect's `Effectable.Prototype`) decides when the
 * fiber runs it, answering with a shared `Exit`. One class per limiter class,
 * so each floor's `evaluate` sees one shape.
 */
const floorCall = <L extends PlainLimiter | PlainRefLimiter>(label: string) => {
  class Call implements Effect.Effect<boolean> {
    declare readonly "~effect/Effect": Effect.Variance<boolean, never, never>
    declare readonly [Symbol.iterator]: () => Effect.EffectIterator<Effect.Effect<boolean>>
    declare readonly pipe: Pipeable["pipe"]
    declare readonly toJSON: () => unknown
    declare readonly toString: () => string
    declare readonly [Inspectable.NodeInspectSymbol]: () => unknown
    readonly limiter: L
    readonly key: string
    constructor(limiter: L, key: string) {
      this.limiter = limiter
      this.key = key
    }
  }
  Object.setPrototypeOf(
    Call.prototype,
    Effectable.Prototype<Call>({
      label,
      evaluate() {
        return this.limiter.tryAcquire(this.key) ? exitTrue : exitFalse
      }
    })
  )
  return (limiter: L, key: string): Effect.Effect<boolean> => new Call(limiter, key)
}

const lazyCall = floorCall<PlainLimiter>("bench/lazy-floor")
const refCall = floorCall<PlainRefLimiter>("bench/ref-floor")

/**
 * The lazy floor: the same plain bucket as a lazy `Effect` of one object,
 * whose `evaluate` decides and answers with a shared `Exit`. This is the
 * cheapest shape an `acquire` can take that is still a lazy description able
 * to fail with a typed error and to wait in line: an `Effect.sync` can do
 * neither, and `Effect.suspend` makes three objects a call (the effect, a
 * closure and what it captures). tollgate's single-key calls have this shape,
 * so the gap between the two is tollgate's own work.
 */
export const lazyFloor: Contender = plainInEffect(
  "lazy-floor",
  "plain JS bucket as a one-object lazy Effect (the lazy floor)",
  lazyCall,
  (spec) => new PlainLimiter(spec)
)

/**
 * The Ref floor: the lazy floor in the actor's shape (a bucket object per key,
 * which is the Effect `Ref` holding its state). tollgate ÷ this floor is tollgate's own work
 * against a limiter of the same shape doing nothing but the decision; the
 * lazy floor ÷ this floor is what the shape itself costs.
 */
export const refFloor: Contender = plainInEffect(
  "ref-floor",
  "plain JS bucket object that is the Effect Ref of its state, as a one-object lazy Effect (the Ref floor)",
  refCall,
  (spec) => new PlainRefLimiter(spec)
)

/**
 * The mailbox floor: the literal actor's least cost. Each key is a fiber
 * that takes what waits in its bounded `Queue` (all of it at once) and
 * answers each request through its `Deferred`, deciding with the plain
 * bucket's arithmetic; a call offers its request and awaits the reply.
 * tollgate's `fastPath: false` has this shape (plus its own work), so this
 * floor ÷ the fast path is the most any limiter that sends every call to
 * its key's fiber can reach on Effect's `Queue` and `Deferred`.
 */
export const mailboxFloor: Contender = {
  id: "mailbox-floor",
  label: "plain JS bucket in a fiber per key, a bounded Queue in and a Deferred back (the mailbox floor)",
  make: (spec, order, callers) => {
    const limiter = new PlainLimiter(spec)
    interface Request {
      readonly key: string
      readonly reply: Deferred.Deferred<boolean>
    }
    const boxes = new Map<string, Queue.Queue<Request>>()
    const fibers: Array<Fiber.Fiber<never>> = []
    const serve = (box: Queue.Queue<Request>) =>
      Effect.forever(
        Effect.flatMap(Queue.takeAll(box), (requests) =>
          Effect.sync(() => {
            for (const r of requests) Deferred.doneUnsafe(r.reply, Exit.succeed(limiter.tryAcquire(r.key)))
          }))
      )
    const boxOf = (key: string): Queue.Queue<Request> => {
      let box = boxes.get(key)
      if (box === undefined) {
        box = Effect.runSync(Queue.bounded<Request>(Math.max(64, 2 * callers)))
        boxes.set(key, box)
        fibers.push(Effect.runFork(serve(box)))
      }
      return box
    }
    const decide = (key: string): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        const reply = Deferred.makeUnsafe<boolean>()
        return Effect.andThen(Queue.offer(boxOf(key), { key, reply }), Deferred.await(reply))
      })
    return Promise.resolve({
      run: effectRunner(decide, new Cursor(order.keys), callers),
      prime: (keys) => effectRunner(decide, new Cursor(keys), 1)(keys.length),
      close: async () => {
        await Effect.runPromise(Fiber.interruptAll(fibers))
        boxes.clear()
        limiter.buckets.clear()
      }
    })
  }
}

// ---------------------------------------------------------------------------
// effect/persistence RateLimiter

/** Builds Effect's limiter over a fresh in-memory store. */
export const makeEffectPersistence = (): Promise<PersistenceRateLimiter.RateLimiter> =>
  Effect.runPromise(PersistenceRateLimiter.make.pipe(Effect.provide(PersistenceRateLimiter.layerStoreMemory)))

/** `consume` as a boolean: its denial is a failure (`RateLimiterError` with reason `RateLimitExceeded`). */
export const effectDecide = (limiter: PersistenceRateLimiter.RateLimiter, spec: Spec) => {
  const window = Duration.seconds(spec.capacity / spec.refillPerSecond)
  let unexpected: unknown = undefined
  const decide = (key: string): Effect.Effect<boolean> =>
    Effect.match(
      limiter.consume({ key, limit: spec.capacity, window, algorithm: "token-bucket", onExceeded: "fail" }),
      {
        onFailure: (error) => {
          if (error.reason._tag !== "RateLimitExceeded") unexpected = error
          return false
        },
        onSuccess: () => true
      }
    )
  const check = () => {
    if (unexpected !== undefined) throw new Error(`effect/persistence failed: ${String(unexpected)}`)
  }
  return { decide, check }
}

export const effectPersistence: Contender = {
  id: "effect",
  label: "effect/persistence RateLimiter (memory store)",
  make: async (spec, order, callers) => {
    const limiter = await makeEffectPersistence()
    const { check, decide } = effectDecide(limiter, spec)
    const checked = (run: (n: number) => Promise<number>) => async (n: number) => {
      const ok = await run(n)
      check()
      return ok
    }
    return {
      run: checked(effectRunner(decide, new Cursor(order.keys), callers)),
      prime: (keys) => checked(effectRunner(decide, new Cursor(keys), 1))(keys.length),
      // The store lives in the limiter's closure: dropping the instance frees it.
      close: () => Promise.resolve()
    }
  }
}

// ---------------------------------------------------------------------------
// tollgate

/**
 * Whether `RateLimiter.make` takes a `fastPath` option: read from the
 * `Options` interface of src/RateLimiter.ts, so the harness follows the
 * source as it is when the run starts.
 */
export const hasFastPathOption = (): boolean => {
  const source = readFileSync(new URL("../src/RateLimiter.ts", import.meta.url), "utf8")
  const start = source.indexOf("export interface Options")
  if (start < 0) return false
  const end = source.indexOf("\n}", start)
  return /\breadonly\s+fastPath\??\s*:/.test(source.slice(start, end < 0 ? undefined : end))
}

export interface TollgateVariant {
  readonly id: ContenderId
  readonly label: string
  /** Extra options passed to `RateLimiter.make` (`{ fastPath }` when the option exists). */
  readonly extra: Readonly<Record<string, unknown>>
}

export const tollgateVariants = (fastPath: boolean): ReadonlyArray<TollgateVariant> =>
  fastPath
    ? [
      { id: "tollgate-nofast", label: "tollgate acquire (fastPath: false)", extra: { fastPath: false } },
      { id: "tollgate-fast", label: "tollgate acquire (fastPath: true)", extra: { fastPath: true } }
    ]
    : [{ id: "tollgate", label: "tollgate acquire", extra: {} }]

export interface TollgateHandle {
  readonly limiter: RateLimiter["Service"]
  readonly close: () => Promise<void>
}

/** Builds a tollgate limiter on a long-lived scope of its own. */
export const makeTollgate = async (
  variant: TollgateVariant,
  policy: Policy.Policy,
  options: { readonly idleTimeout?: Duration.Input; readonly maxWaiters?: number } = {}
): Promise<TollgateHandle> => {
  const scope = Scope.makeUnsafe()
  const limiterOptions: RateLimiter.Options = {
    policy,
    idleTimeout: options.idleTimeout ?? "1 hour",
    ...(options.maxWaiters === undefined ? {} : { maxWaiters: options.maxWaiters }),
    ...variant.extra
  }
  const limiter = await Effect.runPromise(Scope.provide(scope)(RateLimiter.make(limiterOptions)))
  return { limiter, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

export const tollgatePolicy = (spec: Spec): Policy.Policy =>
  Policy.tokenBucket({ capacity: spec.capacity, refill: { tokens: spec.refillPerSecond, per: "1 second" } })

export const tollgate = (variant: TollgateVariant): Contender => ({
  id: variant.id,
  label: variant.label,
  make: async (spec, order, callers) => {
    const handle = await makeTollgate(variant, tollgatePolicy(spec))
    const decide = (key: string) => handle.limiter.acquire(key)
    return {
      run: effectRunner(decide, new Cursor(order.keys), callers),
      prime: (keys) => effectRunner(decide, new Cursor(keys), 1)(keys.length),
      close: handle.close
    }
  }
})
