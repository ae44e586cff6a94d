/**
 * Shutdown under load: the limiter's scope (or layer) closes with 10,000
 * calls in flight and thousands of waiters parked. Every call ends with a
 * decision or `LimiterShutdown`; no limiter fiber is left (counted through
 * Effect's fiber hooks, see probe.ts) and every bucket actor has exited; no
 * sleep is left pending on the clock, and moving the clock ten years ahead
 * afterwards wakes nothing of the limiter's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Duration, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../../src/index.ts"
import { failureOf, isDone, Probe, probed, settle } from "./probe.ts"

const KEYS = 100
const PARKED = 20 // waiters parked per key
const IN_FLIGHT = 10_000

const policy = Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } })

type Limiter = RateLimiter["Service"]

// One call of every kind, by index: decisions, waits, reservations, resets, releases.
const call = (limiter: Limiter, i: number): Effect.Effect<unknown, unknown> => {
  const key = `key-${i % KEYS}`
  switch (Math.floor(i / KEYS) % 8) {
    case 0:
      return limiter.consume(key)
    case 1:
      return limiter.wait(key, { maxWait: "1 minute" })
    case 2:
      return limiter.peek(key)
    case 3:
      return limiter.reserve(key)
    case 4: // a few keys are reset, which admits some of their waiters
      return i % KEYS < 5 ? limiter.reset(key) : limiter.consume(key, { cost: 3 })
    case 5:
      return limiter.withPermit(key)(Effect.void)
    case 6:
      return limiter.acquire(`fresh-${i}`) // a bucket starting as the limiter stops
    default:
      return limiter.acquire(key, { cost: 2 })
  }
}

const isShutdown = (exit: Exit.Exit<unknown, unknown>) => failureOf(exit)?._tag === "LimiterShutdown"

const underLoad = (open: (probe: Probe, scope: Scope.Scope) => Effect.Effect<Limiter, unknown>) =>
  Effect.gen(function*() {
    const probe = new Probe()
    const scope = yield* Scope.make()
    const limiter = yield* open(probe, scope)
    yield* settle()
    assert.isAbove(probe.sleeps, 0, "the sweep sleeps on the probed clock")

    // every key empty, with waiters parked in its line
    const parked: Array<Fiber.Fiber<Exit.Exit<void, unknown>>> = []
    for (let k = 0; k < KEYS; k++) {
      assert.isTrue(yield* limiter.acquire(`key-${k}`, { cost: 5 }))
      for (let j = 0; j < PARKED; j++) {
        parked.push(yield* Effect.forkChild(Effect.exit(limiter.wait(`key-${k}`)), { startImmediately: true }))
      }
    }
    yield* settle()
    assert.strictEqual((yield* limiter.stats).waiting, KEYS * PARKED)

    // calls in flight: half already queued (started at once), half not yet started
    const inFlight: Array<Fiber.Fiber<Exit.Exit<unknown, unknown>>> = []
    for (let i = 0; i < IN_FLIGHT; i++) {
      inFlight.push(yield* Effect.forkChild(Effect.exit(call(limiter, i)), { startImmediately: i % 2 === 0 }))
    }
    const during = yield* limiter.stats
    assert.isAbove(during.queued, 0, "calls are queued when the limiter closes")
    assert.isAbove(probe.fibers, 0)

    yield* Scope.close(scope, Exit.void)
    yield* settle()

    // every call ended: a decision or LimiterShutdown
    const left = [...parked, ...inFlight].filter((fiber) => !isDone(fiber)).length
    assert.strictEqual(left, 0, `${left} calls never ended`)
    // parked waiters: admitted (a reset queued before the close refilled
    // their bucket) or told the limiter shut down
    let parkedShutdown = 0
    for (const exit of yield* Fiber.joinAll(parked)) {
      if (isShutdown(exit)) parkedShutdown++
      else assert.isTrue(Exit.isSuccess(exit), `a parked waiter ended with ${JSON.stringify(failureOf(exit))}`)
    }
    assert.isAbove(parkedShutdown, KEYS * PARKED / 2)
    let decided = 0
    let shutdown = 0
    for (const exit of yield* Fiber.joinAll(inFlight)) {
      // a wait past its maxWait is denied at once: a decision too
      if (Exit.isSuccess(exit) || failureOf(exit)?._tag === "RateLimitExceeded") decided++
      else if (isShutdown(exit)) shutdown++
      else assert.fail(`a call ended with ${JSON.stringify(failureOf(exit))}`)
    }
    assert.strictEqual(decided + shutdown, IN_FLIGHT)
    assert.isAbove(decided, 0, "queued calls were answered with decisions")
    // nothing was refused for overload: every call was queued or decided
    assert.isAbove(shutdown, 0)

    // nothing of the limiter is left running or sleeping
    const stats = yield* limiter.stats
    assert.strictEqual(stats.actors, 0, "every bucket actor has exited")
    assert.strictEqual(stats.buckets, 0)
    assert.strictEqual(stats.waiting, 0)
    assert.strictEqual(stats.queued, 0)
    assert.strictEqual(probe.fibers, 0, `${probe.fibers} limiter fibers still running`)
    assert.strictEqual(probe.sleeps, 0, `${probe.sleeps} sleeps still pending`)

    // ten years later, nothing has moved
    const sleepsStarted = probe.sleepsStarted
    const fibersStarted = probe.fibersStarted
    yield* TestClock.adjust(Duration.days(3650))
    yield* settle()
    assert.deepStrictEqual(yield* limiter.stats, stats)
    assert.strictEqual(probe.sleepsStarted, sleepsStarted, "no new sleep")
    assert.strictEqual(probe.fibersStarted, fibersStarted, "no new fiber")

    // and later calls are refused without starting anything
    for (let i = 0; i < 8; i++) assert.isTrue(isShutdown(yield* Effect.exit(call(limiter, i))))
    assert.strictEqual(probe.fibersStarted, fibersStarted)
    assert.strictEqual((yield* limiter.stats).buckets, 0)
  })

for (const fastPath of [true, false]) {
  const options: RateLimiter.Options = { policy, fastPath, maxWaiters: 128, mailboxCapacity: 4096 }
  describe(`shutdown under load (fastPath: ${fastPath})`, () => {
    it.effect(
      `closing the scope with ${IN_FLIGHT} calls in flight and ${KEYS * PARKED} waiters parked`,
      () => underLoad((probe, scope) => probed(probe, RateLimiter.make(options)).pipe(Scope.provide(scope))),
      {
        timeout: 60_000
      }
    )

    it.effect(
      `releasing the layer with ${IN_FLIGHT} calls in flight and ${KEYS * PARKED} waiters parked`,
      () =>
        underLoad((probe, scope) =>
          probed(probe, Layer.buildWithScope(RateLimiter.layer(options), scope)).pipe(
            Effect.map((context) => Context.get(context, RateLimiter)),
            Effect.orDie
          )
        ),
      { timeout: 60_000 }
    )
  })
}
