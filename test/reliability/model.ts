/**
 * Model-based random testing of the limiter against a small, independent
 * reference model: a plain-JS token bucket per key with a FIFO line, exact
 * integer arithmetic, and the sweep that reaps idle buckets.
 *
 * Commands (drawn with fast-check from a printed seed): acquire, consume,
 * wait (with and without maxWait), interrupting a waiter, bursts of
 * concurrent acquires, reset, reconfigure, advancing the clock, setting it
 * forwards and backwards, idling past the idle timeout, and shutting the
 * limiter down (closing its scope) mid-run. After every command:
 *
 * - every call that should have completed has completed (none left pending);
 * - its outcome equals the model's (allowed or denied, every figure of a
 *   Decision, the typed error and its field);
 * - every waiter is pending or done exactly as the model says; the admitted
 *   ones at the virtual instant the model predicts, in arrival order per key;
 * - `peek` on every key equals the model's, and its figures are finite
 *   (refunds are exact: an interrupted waiter took nothing);
 * - `stats` (buckets, actors, waiting, queued, allowed, denied, overloaded,
 *   reaped) equal the model's counts.
 *
 * At every shutdown: no limiter fiber is left running and no sleep is left
 * pending on the clock.
 *
 * Replay: TOLLGATE_SEED=<seed> npx vitest run test/reliability
 */
import { assert } from "@effect/vitest"
import { Cause, Clock, Duration, Effect, Exit, Fiber, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { type Decision, Policy, RateLimiter } from "../../src/index.ts"
import { failureOf, Probe, probed } from "./probe.ts"

// ---------------------------------------------------------------------------
// Policies. `tokens` is num/den per `period` ms. The model counts in units of
// 1/(period * den) of a token, so a refill is `num` units per millisecond and
// every quantity is an integer.

interface Spec {
  readonly capacity: number
  readonly num: number
  readonly den: number
  readonly period: number
  readonly init: number
}

export const specs: ReadonlyArray<Spec> = [
  { capacity: 5, num: 1, den: 1, period: 1000, init: 5 },
  { capacity: 8, num: 3, den: 1, period: 2000, init: 8 },
  { capacity: 4, num: 1, den: 2, period: 1000, init: 4 },
  { capacity: 6, num: 2, den: 1, period: 1000, init: 2 }, // starts below full: a reaped key comes back stricter
  { capacity: 10, num: 7, den: 1, period: 3000, init: 10 } // only reached through reconfigure
]

const policies = specs.map((s) =>
  Policy.tokenBucket({
    capacity: s.capacity,
    refill: { tokens: s.num / s.den, per: Duration.millis(s.period) },
    initialTokens: s.init === s.capacity ? undefined : s.init
  })
)

const KEYS = 4 // key i starts on specs[i]
const keyName = (i: number) => `key-${i}`
const IDLE = 2000 // idleTimeout, ms; the sweep runs every IDLE / 2
const MAX_WAITERS = 3

// Reconfiguring with carry "as-is" while the bucket holds a fractional number
// of tokens loses a rounding error (test/reliability/KNOWN-FAILURES.md, #1):
// the driver switches such commands to "reset" unless this is set.
const fractionalCarry = process.env.TOLLGATE_FRACTIONAL_CARRY === "1"

const ceilDiv = (a: number, b: number) => Math.floor((a + b - 1) / b)

// ---------------------------------------------------------------------------
// The reference model.

type Status =
  | { readonly _tag: "pending" }
  | { readonly _tag: "admitted"; readonly at: number }
  | { readonly _tag: "failed"; readonly error: string; readonly detail?: string | number }
  | { readonly _tag: "interrupted" }

interface Waiter {
  readonly id: number
  readonly key: number
  readonly cost: number
  status: Status
  // a waiter's fiber; for a reservation (a place in line nobody awaits), its cancel
  fiber: Fiber.Fiber<Exit.Exit<Admission, unknown>> | undefined
  cancel: Effect.Effect<void> | undefined
}

interface Admission {
  readonly at: number
  readonly seq: number
}

class Key {
  live = false
  policy: number
  level = 0
  at = 0
  lastActive = 0
  line: Array<Waiter> = []
  constructor(policy: number) {
    this.policy = policy
  }
  get spec(): Spec {
    return specs[this.policy]
  }
  get unit(): number {
    return this.spec.period * this.spec.den
  }
  get rate(): number {
    return this.spec.num
  }
  get full(): number {
    return this.spec.capacity * this.unit
  }
  // `t` is the limiter's time, never before `at`
  levelAt(t: number): number {
    return Math.min(this.full, this.level + (t - this.at) * this.rate)
  }
  // ms on the wall clock until `deficit` more units have
  // come in: the refill's own time, plus `gap` while the limiter's time stands
  // still above the wall clock (it moves again once the wall clock gets there)
  millisFor(deficit: number, gap: number): number {
    return deficit <= 0 ? 0 : ceilDiv(deficit, this.rate) + gap
  }
  lineCost(): number {
    let sum = 0
    for (const w of this.line) sum += w.cost
    return sum
  }
  waitTime(t: number, gap: number, queued: number, cost: number): number {
    return cost > this.spec.capacity ? Infinity : this.millisFor((queued + cost) * this.unit - this.levelAt(t), gap)
  }
  settledAt(): number {
    return this.at + (this.level >= this.full ? 0 : ceilDiv(this.full - this.level, this.rate))
  }
  // The limiter time at which the head of the line can be admitted (Infinity: nobody waits)
  nextWake(t: number): number {
    if (this.line.length === 0) return Infinity
    const need = this.line[0].cost * this.unit
    return this.level >= need ? Math.max(this.at, t) : this.at + ceilDiv(need - this.level, this.rate)
  }
}

interface ModelDecision {
  readonly allowed: boolean
  readonly remaining: number
  readonly retryAfter: number
  readonly resetAfter: number
  readonly limit: number
}

type Expected =
  | { readonly _tag: "ok"; readonly value: unknown }
  | { readonly _tag: "error"; readonly error: string; readonly field?: string }

// Two times: `now` is the wall clock (the TestClock), `time` the limiter's,
// the highest wall reading so far. Every key is kept in the limiter's time;
// when the wall clock steps back, the limiter's time stands still until the
// wall clock passes it again. Durations told to callers are counted on the
// wall clock (the limiter's plus the gap), and whatever is due at limiter time
// T > time happens when the wall clock reaches T.
class Model {
  now: number
  time: number
  nextSweep: number
  readonly keys: Array<Key>
  readonly overrides: Array<number | undefined> = []
  allowed = 0
  denied = 0
  overloaded = 0
  reaped = 0
  constructor(now: number) {
    this.now = now
    this.time = now
    this.nextSweep = now + IDLE / 2
    this.keys = Array.from({ length: KEYS }, (_, i) => new Key(i))
  }

  policyOf(i: number): number {
    return this.overrides[i] ?? i
  }

  ensure(i: number): Key {
    const k = this.keys[i]
    if (!k.live) {
      k.live = true
      k.policy = this.policyOf(i)
      k.level = k.spec.init * k.unit
      k.at = this.time
      k.lastActive = this.time
      k.line = []
    }
    return k
  }

  costError(i: number, cost: number): Expected | undefined {
    return cost > specs[this.policyOf(i)].capacity
      ? { _tag: "error", error: "InvalidRequest", field: "cost" }
      : undefined
  }

  // acquire / consume: decide now
  decide(i: number, cost: number): Expected {
    const invalid = this.costError(i, cost)
    if (invalid) return invalid
    const k = this.ensure(i)
    const t = this.time
    const gap = this.time - this.now
    k.lastActive = t
    if (k.line.length > 0) {
      // nobody jumps the line
      this.denied++
      const queued = k.lineCost()
      return {
        _tag: "ok",
        value: {
          allowed: false,
          remaining: 0,
          retryAfter: k.waitTime(t, gap, queued, cost),
          resetAfter: k.waitTime(t, gap, queued, k.spec.capacity),
          limit: k.spec.capacity
        } satisfies ModelDecision
      }
    }
    const level = k.levelAt(t)
    const need = cost * k.unit
    if (level >= need) {
      const next = level - need
      const decision: ModelDecision = {
        allowed: true,
        remaining: Math.floor(next / k.unit),
        retryAfter: 0,
        resetAfter: k.millisFor(k.full - next, gap),
        limit: k.spec.capacity
      }
      k.level = next
      k.at = Math.max(k.at, t)
      this.allowed++
      return { _tag: "ok", value: decision }
    }
    this.denied++
    return {
      _tag: "ok",
      value: {
        allowed: false,
        remaining: Math.floor(level / k.unit),
        retryAfter: k.millisFor(need - level, gap),
        resetAfter: k.millisFor(k.full - level, gap),
        limit: k.spec.capacity
      } satisfies ModelDecision
    }
  }

  // What peek (cost 1) answers: whether consume would be allowed and its
  // retryAfter; remaining and resetAfter as they stand, nothing taken.
  peek(i: number): ModelDecision {
    const t = this.time
    const gap = this.time - this.now
    const k = this.keys[i]
    if (!k.live) {
      const spec = specs[this.policyOf(i)]
      const fresh = new Key(this.policyOf(i))
      fresh.level = spec.init * fresh.unit
      fresh.at = t
      return peekOf(fresh, t, gap)
    }
    return peekOf(k, t, gap)
  }

  // Returns the delay a reservation is told (0: admitted at once).
  wait(i: number, w: Waiter, maxWait: number): number {
    const invalid = this.costError(i, w.cost)
    if (invalid) {
      w.status = { _tag: "failed", error: "InvalidRequest", detail: "cost" }
      return 0
    }
    const k = this.ensure(i)
    const t = this.time
    const level = k.levelAt(t)
    const need = w.cost * k.unit
    k.lastActive = t
    if (k.line.length === 0 && level >= need) {
      k.level = level - need
      k.at = Math.max(k.at, t)
      this.allowed++
      w.status = { _tag: "admitted", at: this.now }
      return 0
    }
    const wait = k.waitTime(t, this.time - this.now, k.lineCost(), w.cost)
    if (wait > maxWait) {
      this.denied++
      w.status = { _tag: "failed", error: "RateLimitExceeded", detail: wait }
      return 0
    }
    if (k.line.length >= MAX_WAITERS) {
      this.overloaded++
      w.status = { _tag: "failed", error: "Overloaded", detail: "waiters" }
      return 0
    }
    k.line.push(w)
    return wait
  }

  // Gives units back, never above capacity; those in line may now fit. A key
  // with no bucket is fresh: if it starts full there is nothing to give back
  // (and no bucket starts); if not, its bucket starts and takes the units.
  release(i: number, amount: number): void {
    if (!this.keys[i].live && specs[this.policyOf(i)].init >= specs[this.policyOf(i)].capacity) return
    const k = this.ensure(i)
    k.level = Math.min(k.full, k.levelAt(this.time) + amount * k.unit)
    k.at = Math.max(k.at, this.time)
    this.admitLine(k)
  }

  // Admits the head of the line while it fits, at the limiter's time; the
  // waiters resume at the wall clock's.
  admitLine(k: Key): void {
    const t = this.time
    let admitted = false
    while (k.line.length > 0) {
      const head = k.line[0]
      const level = k.levelAt(t)
      const need = head.cost * k.unit
      if (level < need) break
      k.level = level - need
      k.at = Math.max(k.at, t)
      this.allowed++
      head.status = { _tag: "admitted", at: this.now }
      k.line.shift()
      admitted = true
    }
    if (admitted) k.lastActive = t
  }

  interrupt(w: Waiter): void {
    if (w.status._tag !== "pending") return
    w.status = { _tag: "interrupted" }
    const k = this.keys[w.key]
    k.line = k.line.filter((x) => x !== w)
    this.admitLine(k)
  }

  reset(i: number): void {
    const k = this.keys[i]
    if (!k.live) return
    k.level = k.spec.init * k.unit
    k.at = this.time
    this.admitLine(k)
  }

  // Returns the carry actually used.
  reconfigure(i: number, policy: number, carry: "as-is" | "reset"): "as-is" | "reset" {
    this.overrides[i] = policy
    const k = this.keys[i]
    if (!k.live) return carry
    const t = this.time
    const level = k.levelAt(t)
    if (carry === "as-is" && level % k.unit !== 0 && !fractionalCarry) carry = "reset"
    const next = specs[policy]
    const nextUnit = next.period * next.den
    if (carry === "reset") {
      k.level = next.init * nextUnit
      k.at = t
    } else {
      k.level = Math.min(next.capacity * nextUnit, (level / k.unit) * nextUnit)
      k.at = Math.max(k.at, t)
    }
    k.policy = policy
    for (const w of k.line) {
      if (w.cost > next.capacity) w.status = { _tag: "failed", error: "InvalidRequest", detail: "cost" }
    }
    k.line = k.line.filter((w) => w.status._tag === "pending")
    this.admitLine(k)
    return carry
  }

  sweep(t: number): void {
    for (const k of this.keys) {
      if (k.live && k.line.length === 0 && t - k.lastActive >= IDLE && k.settledAt() <= t) {
        k.live = false
        this.reaped++
      }
    }
  }

  // The wall instant at which limiter time `t` falls due: now if it has,
  // else when the wall clock reaches it (the limiter's time is then the wall's).
  wallOf(t: number): number {
    return t <= this.time ? this.now : t
  }

  // The wall clock moves forwards to t1: sweeps (on the wall clock) and
  // admissions fall due in order.
  advanceTo(t1: number): void {
    while (true) {
      let next = this.nextSweep
      for (const k of this.keys) if (k.live) next = Math.min(next, this.wallOf(k.nextWake(this.time)))
      if (next > t1) break
      this.moveTo(Math.max(this.now, next))
      for (const k of this.keys) if (k.live && k.nextWake(this.time) <= this.time) this.admitLine(k)
      if (this.nextSweep <= this.now) {
        this.sweep(this.time)
        this.nextSweep += IDLE / 2
      }
    }
    this.moveTo(t1)
  }

  moveTo(t: number): void {
    this.now = t
    this.time = Math.max(this.time, t)
  }

  setTime(t: number): void {
    if (t > this.now) this.advanceTo(t)
    else this.now = t // backwards: the limiter's time stands still; nothing falls due, nothing refills
  }

  shutdown(): void {
    for (const k of this.keys) {
      for (const w of k.line) w.status = { _tag: "failed", error: "LimiterShutdown" }
      k.line = []
      k.live = false
    }
  }

  live(): number {
    return this.keys.filter((k) => k.live).length
  }
  waiting(): number {
    let n = 0
    for (const k of this.keys) n += k.line.length
    return n
  }
  withWaiters(): number {
    return this.keys.filter((k) => k.live && k.line.length > 0).length
  }
}

const peekOf = (k: Key, t: number, gap: number): ModelDecision => {
  if (k.line.length > 0) {
    const queued = k.lineCost()
    return {
      allowed: false,
      remaining: 0,
      retryAfter: k.waitTime(t, gap, queued, 1),
      resetAfter: k.waitTime(t, gap, queued, k.spec.capacity),
      limit: k.spec.capacity
    }
  }
  const level = k.levelAt(t)
  if (level >= k.unit) {
    return {
      allowed: true,
      remaining: Math.floor(level / k.unit),
      retryAfter: 0,
      resetAfter: k.millisFor(k.full - level, gap), // as it stands: nothing taken
      limit: k.spec.capacity
    }
  }
  return {
    allowed: false,
    remaining: Math.floor(level / k.unit),
    retryAfter: k.millisFor(k.unit - level, gap),
    resetAfter: k.millisFor(k.full - level, gap),
    limit: k.spec.capacity
  }
}

// ---------------------------------------------------------------------------
// Commands.

export type Command =
  | { readonly _tag: "acquire"; readonly key: number; readonly cost: number }
  | { readonly _tag: "consume"; readonly key: number; readonly cost: number }
  | { readonly _tag: "wait"; readonly key: number; readonly cost: number; readonly maxWait: number | undefined }
  | { readonly _tag: "interrupt"; readonly pick: number }
  | { readonly _tag: "reserve"; readonly key: number; readonly cost: number; readonly maxWait: number | undefined }
  | { readonly _tag: "cancel"; readonly pick: number }
  | { readonly _tag: "release"; readonly key: number; readonly amount: number }
  | { readonly _tag: "burst"; readonly key: number; readonly count: number }
  | { readonly _tag: "reset"; readonly key: number }
  | { readonly _tag: "reconfigure"; readonly key: number; readonly policy: number; readonly carry: "as-is" | "reset" }
  | { readonly _tag: "advance"; readonly millis: number }
  | { readonly _tag: "setTime"; readonly delta: number }
  | { readonly _tag: "idle" }
  | { readonly _tag: "shutdown" }

const key = fc.integer({ min: 0, max: KEYS - 1 })
const cost = fc.oneof({ weight: 9, arbitrary: fc.integer({ min: 1, max: 4 }) }, {
  weight: 1,
  arbitrary: fc.integer({ min: 5, max: 11 }) // sometimes above the capacity
})

export const command: fc.Arbitrary<Command> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ _tag: fc.constant("acquire" as const), key, cost }) },
  { weight: 5, arbitrary: fc.record({ _tag: fc.constant("consume" as const), key, cost }) },
  {
    weight: 6,
    arbitrary: fc.record({
      _tag: fc.constant("wait" as const),
      key,
      cost,
      maxWait: fc.option(fc.integer({ min: 0, max: 6000 }), { nil: undefined, freq: 3 })
    })
  },
  { weight: 3, arbitrary: fc.record({ _tag: fc.constant("interrupt" as const), pick: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      _tag: fc.constant("reserve" as const),
      key,
      cost,
      maxWait: fc.option(fc.integer({ min: 0, max: 6000 }), { nil: undefined, freq: 3 })
    })
  },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("cancel" as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({ _tag: fc.constant("release" as const), key, amount: fc.integer({ min: 1, max: 12 }) })
  },
  {
    weight: 1,
    arbitrary: fc.record({ _tag: fc.constant("burst" as const), key, count: fc.integer({ min: 2, max: 12 }) })
  },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("reset" as const), key }) },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("reconfigure" as const),
      key,
      policy: fc.integer({ min: 0, max: specs.length - 1 }),
      carry: fc.constantFrom("as-is" as const, "reset" as const)
    })
  },
  {
    weight: 8,
    arbitrary: fc.record({
      _tag: fc.constant("advance" as const),
      millis: fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 3000 }))
    })
  },
  {
    weight: 3,
    arbitrary: fc.record({
      _tag: fc.constant("setTime" as const),
      delta: fc.oneof(
        { weight: 4, arbitrary: fc.integer({ min: -4000, max: 4000 }) },
        { weight: 1, arbitrary: fc.integer({ min: -10_000_000, max: -4000 }) }, // far back
        { weight: 1, arbitrary: fc.integer({ min: 4000, max: 40_000 }) }
      )
    })
  },
  { weight: 1, arbitrary: fc.constant({ _tag: "idle" as const }) },
  { weight: 1, arbitrary: fc.constant({ _tag: "shutdown" as const }) }
)

// ---------------------------------------------------------------------------
// The driver.

const seedFromEnv = (): number => {
  const env = process.env.TOLLGATE_SEED
  if (env !== undefined && env !== "") return Number(env)
  return Math.floor(Math.random() * 0x7fffffff)
}

const showDecision = (d: Decision.Decision): ModelDecision => ({
  allowed: d.allowed,
  remaining: d.remaining,
  retryAfter: Duration.toMillis(d.retryAfter),
  resetAfter: Duration.toMillis(d.resetAfter),
  limit: d.limit
})

// The outcome of a call, in the same shape as the model's.
const actualOf = (exit: Exit.Exit<unknown, unknown>): Expected => {
  if (Exit.isSuccess(exit)) {
    const v = exit.value
    return { _tag: "ok", value: typeof v === "object" && v !== null ? showDecision(v as Decision.Decision) : v }
  }
  const error = failureOf(exit)
  return error?.field === undefined
    ? { _tag: "error", error: String(error?._tag) }
    : { _tag: "error", error: String(error._tag), field: String(error.field) }
}

export interface RunSummary {
  readonly commands: number
  readonly waiters: number
  readonly admitted: number
  readonly interrupted: number
  readonly shutdowns: number
  readonly reaped: number
  readonly backwards: number
  readonly reservations: number
}

/**
 * Runs `runs` random command lists of up to `length` commands with the fast
 * path on or off. Fails with the seed, the run and the commands up to the
 * first disagreement.
 */
export const check = (options: {
  readonly fastPath: boolean
  readonly runs: number
  readonly length: number
  readonly seed?: number | undefined
}) =>
  Effect.gen(function*() {
    const seed = options.seed ?? seedFromEnv()
    const samples = fc.sample(fc.array(command, { minLength: options.length / 2, maxLength: options.length }), {
      numRuns: options.runs,
      seed
    })
    const totals = {
      commands: 0,
      waiters: 0,
      admitted: 0,
      interrupted: 0,
      shutdowns: 0,
      reaped: 0,
      backwards: 0,
      reservations: 0
    }
    for (let run = 0; run < samples.length; run++) {
      const result = yield* Effect.exit(runOne(samples[run], options.fastPath, totals))
      if (Exit.isFailure(result)) {
        const error = failureOf(result)
        const at = error instanceof Disagreement ? error.index : samples[run].length
        const message = [
          `model disagreement (fastPath: ${options.fastPath}) — replay with TOLLGATE_SEED=${seed}`,
          `run ${run}, command ${at}: ${error instanceof Disagreement ? error.message : Cause.pretty(result.cause)}`,
          `commands: ${JSON.stringify(samples[run].slice(0, at + 1))}`
        ].join("\n")
        console.error(message)
        assert.fail(message)
      }
    }
    return { seed, ...totals }
  })

class Disagreement extends Error {
  readonly index: number
  constructor(index: number, message: string) {
    super(message)
    this.index = index
  }
}

const runOne = (
  commands: ReadonlyArray<Command>,
  fastPath: boolean,
  totals: { -readonly [K in keyof RunSummary]: RunSummary[K] }
) =>
  Effect.gen(function*() {
    const clock = yield* Clock.Clock
    const start = 1_000_000 + (commands.length * 7919) % 100_000
    yield* TestClock.setTime(start)
    let probe = new Probe()
    let scope = yield* Scope.make()
    const open = () =>
      probed(
        probe,
        RateLimiter.make({
          policy: (k) => policies[Number(k.slice(4))],
          fastPath,
          idleTimeout: IDLE,
          maxWaiters: MAX_WAITERS
        })
      ).pipe(Scope.provide(scope))
    let limiter = yield* open()
    yield* Effect.repeat(Effect.yieldNow, { times: 3 }) // the sweep starts its first sleep now
    let model = new Model(start)
    const waiters: Array<Waiter> = []
    let waiterId = 0
    let seq = 0
    let index = 0
    const fail = (message: string) => Effect.fail(new Disagreement(index, message))

    // Lets the limiter run until nothing is queued, every call the model
    // says is over has ended and every actor with nobody in line has
    // hibernated (an actor gives the caller it answered a turn first).
    const quiesce = Effect.gen(function*() {
      for (let i = 0; i < 200; i++) {
        const stats = yield* limiter.stats
        const pending = waiters.some((w) =>
          w.status._tag !== "pending" && w.fiber !== undefined && w.fiber.pollUnsafe() === undefined
        )
        if (stats.queued === 0 && !pending && stats.actors === model.withWaiters() && i >= 2) return
        yield* Effect.yieldNow
      }
    })

    // Runs one call to completion; a call left pending is a hang.
    const call = <A, E>(effect: Effect.Effect<A, E>) =>
      Effect.gen(function*() {
        const fiber = yield* Effect.forkChild(Effect.exit(effect), { startImmediately: true })
        for (let i = 0; i < 200 && fiber.pollUnsafe() === undefined; i++) yield* Effect.yieldNow
        const exit = fiber.pollUnsafe()
        if (exit === undefined) {
          yield* Fiber.interrupt(fiber)
          return yield* fail("a call never completed")
        }
        return (exit as Exit.Success<Exit.Exit<A, E>>).value
      })

    const expectSame = (what: string, actual: unknown, expected: unknown) =>
      JSON.stringify(actual) === JSON.stringify(expected)
        ? Effect.void
        : fail(`${what}: got ${JSON.stringify(actual)}, the model says ${JSON.stringify(expected)}`)

    const checkAll = Effect.gen(function*() {
      yield* quiesce
      // every waiter pending or done exactly as the model says
      const admittedSeq: Array<Array<[number, number]>> = Array.from({ length: KEYS }, () => [])
      for (const w of waiters) {
        if (w.fiber === undefined) continue // a reservation: seen through peek and stats
        const exit = w.fiber.pollUnsafe()
        const expected = w.status
        if (expected._tag === "pending") {
          if (exit !== undefined) {
            const inner = Exit.isSuccess(exit) ? actualOf(exit.value) : "interrupted"
            return yield* fail(`waiter ${w.id} ended (${JSON.stringify(inner)}), the model says pending`)
          }
          continue
        }
        if (exit === undefined) return yield* fail(`waiter ${w.id} still pending, the model says ${expected._tag}`)
        const inner = Exit.isSuccess(exit) ? exit.value : undefined
        if (inner === undefined) {
          // the fiber itself was interrupted
          if (expected._tag !== "interrupted") return yield* fail(`waiter ${w.id} interrupted, model: ${expected._tag}`)
          continue
        }
        if (expected._tag === "admitted") {
          if (!Exit.isSuccess(inner)) {
            return yield* fail(`waiter ${w.id} failed ${JSON.stringify(actualOf(inner))}, the model admits it`)
          }
          if (inner.value.at !== expected.at) {
            return yield* fail(`waiter ${w.id} admitted at ${inner.value.at}, the model says ${expected.at}`)
          }
          admittedSeq[w.key].push([w.id, inner.value.seq])
        } else if (expected._tag === "failed") {
          const error = Exit.isFailure(inner) ? failureOf(inner) : undefined
          if (error?._tag !== expected.error) {
            return yield* fail(`waiter ${w.id}: ${JSON.stringify(actualOf(inner))}, the model says ${expected.error}`)
          }
          if (expected.error === "RateLimitExceeded" && Duration.toMillis(error.retryAfter) !== expected.detail) {
            return yield* fail(
              `waiter ${w.id}: retryAfter ${Duration.toMillis(error.retryAfter)}, the model says ${expected.detail}`
            )
          }
          if (expected.error === "Overloaded" && error.reason !== expected.detail) {
            return yield* fail(`waiter ${w.id}: Overloaded ${error.reason}, the model says ${expected.detail}`)
          }
          if (expected.error === "InvalidRequest" && error.field !== expected.detail) {
            return yield* fail(`waiter ${w.id}: InvalidRequest on ${error.field}`)
          }
        } else {
          return yield* fail(`waiter ${w.id} ended (${JSON.stringify(actualOf(inner))}), the model says interrupted`)
        }
      }
      // admitted in arrival order, key by key
      for (const list of admittedSeq) {
        for (let i = 1; i < list.length; i++) {
          if (list[i][1] < list[i - 1][1]) {
            return yield* fail(`waiter ${list[i][0]} admitted before waiter ${list[i - 1][0]} that arrived first`)
          }
        }
      }
      // peek on every key: the model's figures, all finite
      for (let i = 0; i < KEYS; i++) {
        const exit = yield* call(limiter.peek(keyName(i)))
        if (Exit.isFailure(exit)) return yield* fail(`peek ${i} failed: ${JSON.stringify(actualOf(exit))}`)
        const d = showDecision(exit.value)
        for (const figure of [d.remaining, d.retryAfter, d.resetAfter, d.limit]) {
          if (!Number.isFinite(figure)) return yield* fail(`peek ${i} has a figure that is not finite: ${figure}`)
        }
        yield* expectSame(`peek key ${i} at ${model.now}`, d, model.peek(i))
      }
      // the counts, once the actors the peeks woke have hibernated again
      yield* quiesce
      const stats = yield* limiter.stats
      yield* expectSame("stats", {
        buckets: stats.buckets,
        actors: stats.actors,
        waiting: stats.waiting,
        queued: stats.queued,
        allowed: stats.allowed,
        denied: stats.denied,
        overloaded: stats.overloaded,
        reaped: stats.reaped
      }, {
        buckets: model.live(),
        // every actor hibernates once nobody waits in its line
        actors: model.withWaiters(),
        waiting: model.waiting(),
        queued: 0,
        allowed: model.allowed,
        denied: model.denied,
        overloaded: model.overloaded,
        reaped: model.reaped
      })
    })

    // Closes the limiter: every pending waiter ends with LimiterShutdown, no
    // limiter fiber or sleep is left, and later calls fail with LimiterShutdown.
    const shutdown = Effect.gen(function*() {
      yield* Scope.close(scope, Exit.void)
      model.shutdown()
      yield* quiesce
      const stats = yield* limiter.stats
      if (stats.actors !== 0 || stats.buckets !== 0 || stats.waiting !== 0 || stats.queued !== 0) {
        return yield* fail(`after shutdown: ${JSON.stringify(stats)}`)
      }
      if (probe.fibers !== 0) return yield* fail(`after shutdown ${probe.fibers} limiter fibers still run`)
      if (probe.sleeps !== 0) return yield* fail(`after shutdown ${probe.sleeps} sleeps are still pending`)
      const after = yield* call(limiter.acquire(keyName(0)))
      yield* expectSame("a call after shutdown", actualOf(after), { _tag: "error", error: "LimiterShutdown" })
      totals.reaped += model.reaped
      totals.shutdowns++
    })

    for (; index < commands.length; index++) {
      const c = commands[index]
      totals.commands++
      switch (c._tag) {
        case "acquire":
        case "consume": {
          const expected = model.decide(c.key, c.cost)
          const exit = c._tag === "acquire"
            ? yield* call(limiter.acquire(keyName(c.key), { cost: c.cost }))
            : yield* call(limiter.consume(keyName(c.key), { cost: c.cost }))
          const want = c._tag === "acquire" && expected._tag === "ok"
            ? { _tag: "ok", value: (expected.value as ModelDecision).allowed }
            : expected
          yield* expectSame(c._tag, actualOf(exit), want)
          break
        }
        case "burst": {
          const expected: Array<unknown> = []
          for (let i = 0; i < c.count; i++) {
            const e = model.decide(c.key, 1)
            expected.push(e._tag === "ok" ? (e.value as ModelDecision).allowed : e)
          }
          const exit = yield* call(
            Effect.forEach(Array.from({ length: c.count }), () => limiter.acquire(keyName(c.key)), {
              concurrency: "unbounded"
            })
          )
          yield* expectSame("burst", Exit.isSuccess(exit) ? exit.value : actualOf(exit), expected)
          break
        }
        case "wait": {
          const w: Waiter = {
            id: waiterId++,
            key: c.key,
            cost: c.cost,
            status: { _tag: "pending" },
            fiber: undefined,
            cancel: undefined
          }
          waiters.push(w)
          totals.waiters++
          model.wait(c.key, w, c.maxWait ?? Infinity)
          w.fiber = yield* limiter.wait(keyName(c.key), {
            cost: c.cost,
            ...(c.maxWait === undefined ? {} : { maxWait: c.maxWait })
          }).pipe(
            Effect.map((): Admission => ({ at: clock.currentTimeMillisUnsafe(), seq: seq++ })),
            Effect.exit,
            Effect.forkChild({ startImmediately: true })
          )
          break
        }
        case "reserve": {
          const w: Waiter = {
            id: waiterId++,
            key: c.key,
            cost: c.cost,
            status: { _tag: "pending" },
            fiber: undefined,
            cancel: undefined
          }
          const delay = model.wait(c.key, w, c.maxWait ?? Infinity)
          const exit = yield* call(limiter.reserve(keyName(c.key), {
            cost: c.cost,
            ...(c.maxWait === undefined ? {} : { maxWait: c.maxWait })
          }))
          const expected: Expected = w.status._tag === "failed"
            ? {
              _tag: "error",
              error: w.status.error,
              ...(w.status.error === "InvalidRequest" ? { field: "cost" } : {})
            }
            : { _tag: "ok", value: delay }
          const actual = Exit.isSuccess(exit)
            ? { _tag: "ok", value: Duration.toMillis(exit.value.delay) }
            : actualOf(exit)
          yield* expectSame("reserve", actual, expected)
          if (w.status._tag === "pending" && Exit.isSuccess(exit)) {
            w.cancel = exit.value.cancel
            waiters.push(w)
          }
          break
        }
        case "cancel": {
          const reservations = waiters.filter((w) => w.cancel !== undefined)
          if (reservations.length === 0) break
          const w = reservations[c.pick % reservations.length]
          model.interrupt(w) // nothing if its turn has come
          yield* w.cancel!
          break
        }
        case "release": {
          model.release(c.key, c.amount)
          const exit = yield* call(limiter.release(keyName(c.key), c.amount))
          yield* expectSame("release", actualOf(exit), { _tag: "ok" })
          break
        }
        case "interrupt": {
          const pending = waiters.filter((w) => w.fiber !== undefined && w.status._tag === "pending")
          const pool = pending.length > 0 ? pending : waiters.filter((w) => w.fiber !== undefined)
          if (pool.length === 0) break
          const w = pool[c.pick % pool.length]
          if (w.status._tag === "pending") totals.interrupted++
          model.interrupt(w)
          yield* Fiber.interrupt(w.fiber!)
          break
        }
        case "reset": {
          model.reset(c.key)
          const exit = yield* call(limiter.reset(keyName(c.key)))
          yield* expectSame("reset", actualOf(exit), { _tag: "ok" })
          break
        }
        case "reconfigure": {
          const carry = model.reconfigure(c.key, c.policy, c.carry)
          const exit = yield* call(limiter.reconfigure(keyName(c.key), policies[c.policy], { carry }))
          yield* expectSame("reconfigure", actualOf(exit), { _tag: "ok" })
          break
        }
        case "advance": {
          model.advanceTo(model.now + c.millis)
          yield* TestClock.adjust(c.millis)
          break
        }
        case "idle": {
          const millis = IDLE * 3 + 17
          model.advanceTo(model.now + millis)
          yield* TestClock.adjust(millis)
          break
        }
        case "setTime": {
          const to = Math.max(0, model.now + c.delta)
          if (to < model.now) totals.backwards++
          model.setTime(to)
          yield* TestClock.setTime(to)
          break
        }
        case "shutdown": {
          yield* shutdown
          // and carry on with a fresh limiter
          probe = new Probe()
          scope = yield* Scope.make()
          limiter = yield* open()
          yield* Effect.repeat(Effect.yieldNow, { times: 3 })
          model = new Model(model.now)
          break
        }
      }
      yield* checkAll
    }
    yield* shutdown
    totals.admitted += waiters.filter((w) => w.status._tag === "admitted").length
    totals.reservations += waiters.filter((w) => w.cancel !== undefined).length
    for (const w of waiters) {
      if (w.fiber !== undefined && w.fiber.pollUnsafe() === undefined) return yield* fail(`waiter ${w.id} never ended`)
    }
  })
