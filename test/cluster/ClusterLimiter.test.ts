/**
 * The cluster limiter in one process (a cluster of one, TestClock): the same
 * decisions as the in-process limiter, by the owner's partitions directly
 * and through messages; hand-overs across a graceful stop; a crash's cold
 * start never admitting beyond the limit; FIFO lines and interrupted
 * waiters through messages; checks of what a cluster refuses; the deadline
 * and the fallback while an owner does not answer.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Latch, Option, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { ClusterLimiter, type ClusterStorage } from "../../src/cluster/index.ts"
import { Policy, RateLimiter } from "../../src/index.ts"
import { type Limiter, memoryStorage, plain, runner, settle } from "./local.ts"

const tb = Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } })
const fw = Policy.fixedWindow({ limit: 4, window: "3 seconds" })
const sl = Policy.slidingLog({ limit: 3, window: "2 seconds" })
const gcra = Policy.gcra({ rate: { count: 2, per: "1 second" }, maxBurst: 2 })
const conc = Policy.concurrency({ capacity: 3 })
const both = Policy.all(
  Policy.tokenBucket({ capacity: 4, refill: { tokens: 2, per: "1 second" } }),
  Policy.fixedWindow({ limit: 6, window: "5 seconds" })
)
const strict = Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "2 seconds" } })
const policies = { tb, fw, sl, gcra, conc, both, strict }
const policyFor = (key: string): Policy.Policy => {
  const prefix = key.replace(/^\{/, "").split(/[:}]/)[0]
  return (policies as Record<string, Policy.Policy>)[prefix] ?? tb
}
const options: ClusterLimiter.Options = { policy: policyFor, policies, fallback: { mode: "deny" } }

type Op =
  | {
    readonly _tag: "acquire" | "consume" | "peek" | "force" | "consumeUpTo"
    readonly key: string
    readonly cost: number
  }
  | { readonly _tag: "add" | "set" | "release"; readonly key: string; readonly n: number }
  | { readonly _tag: "reset" | "fill" | "get" | "delete"; readonly key: string }
  | { readonly _tag: "block"; readonly key: string; readonly millis: number }
  | { readonly _tag: "wait"; readonly key: string; readonly cost: number }
  | { readonly _tag: "setRate"; readonly key: string; readonly rate: number }
  | { readonly _tag: "reconfigure"; readonly key: string; readonly to: "tb" | "strict" }
  | { readonly _tag: "all"; readonly tag: string; readonly cost: number }
  | { readonly _tag: "advance"; readonly millis: number }

const keys = ["tb:a", "tb:b", "fw:a", "sl:a", "gcra:a", "conc:a", "both:a"]
const keyArb = fc.constantFrom(...keys)
const cost = fc.integer({ min: 0, max: 3 })
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ _tag: fc.constantFrom("acquire", "consume"), key: keyArb, cost }) },
  { weight: 2, arbitrary: fc.record({ _tag: fc.constantFrom("peek", "force", "consumeUpTo"), key: keyArb, cost }) },
  {
    weight: 2,
    arbitrary: fc.record({
      _tag: fc.constantFrom("add", "set", "release"),
      key: keyArb,
      n: fc.integer({ min: 0, max: 4 })
    })
  },
  { weight: 2, arbitrary: fc.record({ _tag: fc.constantFrom("reset", "fill", "get", "delete"), key: keyArb }) },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("block" as const),
      key: keyArb,
      millis: fc.integer({ min: 1, max: 3000 })
    })
  },
  {
    weight: 2,
    arbitrary: fc.record({ _tag: fc.constant("wait" as const), key: keyArb, cost: fc.integer({ min: 1, max: 2 }) })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("setRate" as const),
      key: fc.constant("tb:a"),
      rate: fc.integer({ min: 1, max: 5 })
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("reconfigure" as const),
      key: keyArb,
      to: fc.constantFrom("tb", "strict")
    })
  },
  { weight: 2, arbitrary: fc.record({ _tag: fc.constant("all" as const), tag: fc.constantFrom("x", "y"), cost }) },
  {
    weight: 4,
    arbitrary: fc.record({ _tag: fc.constant("advance" as const), millis: fc.integer({ min: 0, max: 2500 }) })
  }
)

// One op on a limiter: its outcome, as plain data.
const step = (limiter: Limiter, o: Op): Effect.Effect<unknown> => {
  switch (o._tag) {
    case "advance":
      return Effect.as(TestClock.adjust(o.millis), "advanced")
    case "acquire":
      return Effect.map(Effect.exit(limiter.acquire(o.key, { cost: o.cost })), plain)
    case "consume":
      return Effect.map(Effect.exit(limiter.consume(o.key, { cost: o.cost })), plain)
    case "peek":
      return Effect.map(Effect.exit(limiter.peek(o.key, { cost: o.cost })), plain)
    case "force":
      return Effect.map(Effect.exit(limiter.force(o.key, { cost: o.cost })), plain)
    case "consumeUpTo":
      return Effect.map(Effect.exit(limiter.consumeUpTo(o.key, { cost: Math.max(1, o.cost) })), plain)
    case "add":
      return Effect.map(Effect.exit(limiter.add(o.key, o.n)), plain)
    case "set":
      return Effect.map(Effect.exit(limiter.set(o.key, o.n)), plain)
    case "release":
      return Effect.map(Effect.exit(limiter.release(o.key, Math.max(1, o.n))), plain)
    case "reset":
      return Effect.map(Effect.exit(limiter.reset(o.key)), plain)
    case "fill":
      return Effect.map(Effect.exit(limiter.fill(o.key)), plain)
    case "get":
      return Effect.map(Effect.exit(limiter.get(o.key)), plain)
    case "delete":
      return Effect.map(Effect.exit(limiter.delete(o.key)), plain)
    case "block":
      return Effect.map(Effect.exit(limiter.block(o.key, o.millis)), plain)
    case "wait":
      return Effect.map(Effect.exit(limiter.wait(o.key, { cost: o.cost, maxWait: 0 })), plain)
    case "setRate":
      return Effect.map(Effect.exit(limiter.setRate(o.key, o.rate)), plain)
    case "reconfigure":
      return Effect.map(Effect.exit(limiter.reconfigure(o.key, policies[o.to], { carry: "as-is" })), plain)
    case "all":
      return Effect.map(
        Effect.exit(limiter.consume([`{${o.tag}}:one`, `{${o.tag}}:two`], { cost: o.cost })),
        plain
      )
  }
}

const transcript = (limiter: Limiter, ops: ReadonlyArray<Op>) =>
  Effect.gen(function*() {
    const out: Array<unknown> = []
    for (const o of ops) out.push(yield* step(limiter, o))
    return out
  })

// A fresh cluster of one in a scope of its own, at time 0.
const cluster = <A, E>(f: (limiters: { host: Limiter; caller: Limiter }) => Effect.Effect<A, E>, o = options) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(0)
    const storage = yield* memoryStorage
    const scope = yield* Scope.make()
    const limiters = yield* runner(o, storage, scope)
    const result = yield* f(limiters)
    yield* Scope.close(scope, Exit.void)
    return result
  })

describe("ClusterLimiter, one process", () => {
  it.effect(
    "random workloads: the same decisions as the in-process limiter, on the owner and through messages",
    () =>
      Effect.gen(function*() {
        const samples = fc.sample(fc.array(op, { minLength: 10, maxLength: 60 }), { numRuns: 40, seed: 27 })
        for (const ops of samples) {
          yield* TestClock.setTime(0)
          const expected = yield* Effect.scoped(
            Effect.flatMap(RateLimiter.make({ policy: policyFor }), (limiter) => transcript(limiter, ops))
          )
          const viaHost = yield* cluster(({ host }) => transcript(host, ops))
          assert.deepStrictEqual(viaHost, expected, JSON.stringify(ops))
          const viaMessages = yield* cluster(({ caller }) => transcript(caller, ops))
          assert.deepStrictEqual(viaMessages, expected, JSON.stringify(ops))
        }
      }),
    120_000
  )

  it.effect("calls through messages are batched per destination", () =>
    cluster(({ caller }) =>
      Effect.gen(function*() {
        yield* Effect.forEach(Array.from({ length: 40 }, (_, i) => `tb:${i}`), (key) => caller.acquire(key))
        const warm = yield* caller.stats
        const results = yield* Effect.forEach(
          Array.from({ length: 400 }, (_, i) => `tb:${i % 40}`),
          (key) => caller.acquire(key),
          { concurrency: "unbounded" }
        )
        const stats = yield* caller.stats
        assert.strictEqual(results.filter(Boolean).length, 160) // 4 left per key
        assert.strictEqual(stats.storeOps - warm.storeOps, 400)
        // one destination runner, two rounds out at a time: a handful of messages
        assert.isAtMost(stats.storeCalls - warm.storeCalls, 10)
        assert.strictEqual(stats.degraded, 0)
      })
    ))

  it.effect("a cluster refuses keys of one call on different shards, and unnamed policies", () =>
    cluster(({ host }) =>
      Effect.gen(function*() {
        // "tb:a" and "tb:b" hash to different shards of 30 (checked below)
        const keys = Array.from({ length: 20 }, (_, i) => `tb:${i}`)
        const e = yield* Effect.flip(host.acquire(keys))
        assert.strictEqual(e._tag, "InvalidRequest")
        if (e._tag === "InvalidRequest") assert.match(e.reason, /hash tag/)
        // with a common hash tag they share a shard: all or nothing
        assert.isTrue(yield* host.acquire(["{u1}:a", "{u1}:b"], { cost: 5 }))
        assert.isFalse(yield* host.acquire(["{u1}:a", "{u1}:c"]))
        assert.isTrue(yield* host.acquire("{u1}:c", { cost: 5 }))
        const unnamed = Policy.tokenBucket({ capacity: 9, refill: { tokens: 1, per: "1 second" } })
        const r = yield* Effect.flip(host.reconfigure("tb:a", unnamed))
        assert.strictEqual(r._tag, "InvalidPolicy")
        const bad = yield* Effect.flip(host.acquire(""))
        assert.strictEqual(bad._tag, "InvalidRequest")
        const cost = yield* Effect.flip(host.acquire("tb:a", { cost: -1 }))
        assert.strictEqual(cost._tag, "InvalidRequest")
        if (cost._tag === "InvalidRequest") assert.strictEqual(cost.field, "cost")
      })
    ))

  it.effect("ClusterLimiter.make refuses bad options, naming them", () =>
    Effect.gen(function*() {
      const storage = yield* memoryStorage
      const scope = yield* Scope.make()
      const e = yield* Effect.flip(runner({ policy: tb, maxBatch: 0 }, storage, scope))
      assert.strictEqual(e._tag, "InvalidPolicy")
      assert.strictEqual(e.field, "maxBatch")
      const f = yield* Effect.flip(runner({ policy: tb, handoffTimeout: "soon" as Duration.Input }, storage, scope))
      assert.strictEqual(f.field, "handoffTimeout")
      const g = yield* Effect.flip(runner({ policy: tb, fallback: { share: 2 } }, storage, scope))
      assert.strictEqual(g.field, "fallback.share")
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("waiters through messages: one FIFO line on the owner; an interrupted waiter gives its place up", () =>
    cluster(({ caller, host }) =>
      Effect.gen(function*() {
        const admitted: Array<string> = []
        // drain the bucket (5 tokens, 1 per second)
        assert.isTrue(yield* host.acquire("tb:line", { cost: 5 }))
        const fibers: Array<Fiber.Fiber<void, unknown>> = []
        for (const name of ["a", "b", "c", "d"]) {
          const limiter = name === "b" ? host : caller
          fibers.push(
            yield* Effect.forkChild(
              Effect.andThen(limiter.wait("tb:line", { cost: 1 }), Effect.sync(() => void admitted.push(name)))
            )
          )
          yield* settle
        }
        // a decide-now call may not jump the line
        assert.isFalse(yield* caller.acquire("tb:line"))
        yield* Fiber.interrupt(fibers[1]) // "b" leaves: it takes nothing
        yield* settle
        yield* TestClock.adjust("1 second")
        yield* settle
        assert.deepStrictEqual(admitted, ["a"])
        yield* TestClock.adjust("1 second")
        yield* settle
        assert.deepStrictEqual(admitted, ["a", "c"])
        yield* TestClock.adjust("1 second")
        yield* settle
        assert.deepStrictEqual(admitted, ["a", "c", "d"])
        // the line is empty and nothing was taken for "b"
        assert.isFalse(yield* caller.acquire("tb:line"))
        yield* TestClock.adjust("1 second")
        assert.isTrue(yield* caller.acquire("tb:line"))
      })
    ))

  it.effect("maxWait through messages: a turn past it fails at once with RateLimitExceeded", () =>
    cluster(({ caller }) =>
      Effect.gen(function*() {
        assert.isTrue(yield* caller.acquire("tb:w", { cost: 5 }))
        const e = yield* Effect.flip(caller.wait("tb:w", { cost: 2, maxWait: "1 second" }))
        assert.strictEqual(e._tag, "RateLimitExceeded")
        const fiber = yield* Effect.forkChild(caller.wait("tb:w", { cost: 2, maxWait: "2 seconds" }))
        yield* settle
        yield* TestClock.adjust("2 seconds")
        yield* settle
        assert.isTrue(Exit.isSuccess(yield* Fiber.await(fiber)))
        // reservations: a place now, a delay, and a cancel that gives it back
        const r = yield* caller.reserve("tb:w", { cost: 1 })
        assert.strictEqual(Duration.toMillis(r.delay), 1000)
        yield* r.cancel
        const d = yield* caller.consume("tb:w")
        assert.isFalse(d.allowed)
        assert.strictEqual(Duration.toMillis(d.retryAfter), 1000)
      })
    ))

  it.effect("a graceful stop hands every key over: states, records and blocks survive the next owner", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const storage = yield* memoryStorage
      const first = yield* Scope.make()
      const one = yield* runner(options, storage, first)
      assert.isTrue(yield* one.caller.acquire("tb:k", { cost: 4 }))
      assert.isTrue(yield* one.host.acquire("fw:k", { cost: 3 }))
      yield* one.caller.reconfigure("tb:r", strict)
      yield* one.caller.block("gcra:b", "10 seconds")
      yield* Scope.close(first, Exit.void)
      const second = yield* Scope.make()
      const two = yield* runner(options, storage, second)
      const tbk = yield* two.caller.consume("tb:k")
      assert.isTrue(tbk.allowed)
      assert.strictEqual(tbk.remaining, 0)
      assert.isFalse(yield* two.caller.acquire("tb:k"))
      const fwk = yield* two.host.consume("fw:k")
      assert.strictEqual(fwk.remaining, 0)
      // the reconfigured key runs its named policy (capacity 2)
      assert.strictEqual((yield* two.caller.peek("tb:r")).limit, 2)
      assert.isFalse(yield* two.caller.acquire("gcra:b"))
      yield* TestClock.adjust("10 seconds")
      assert.isTrue(yield* two.caller.acquire("gcra:b"))
      yield* Scope.close(second, Exit.void)
    }))

  it.effect("after a crash (no hand-over), a key admits nothing until it would have recovered, then starts afresh", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const storage = yield* memoryStorage
      const crashing = crashingStorage(storage)
      const first = yield* Scope.make()
      const one = yield* runner(options, crashing, first)
      assert.isTrue(yield* one.caller.acquire("{k}:used", { cost: 5 }))
      yield* Scope.close(first, Exit.void) // its hand-over is lost
      const second = yield* Scope.make()
      const two = yield* runner(options, storage, second)
      // tb: 5 tokens at 1 per second recover in 5 s; a key of the shard never seen counts too
      assert.isFalse(yield* two.caller.acquire("{k}:used"))
      assert.isFalse(yield* two.caller.acquire("{k}:never"))
      const d = yield* two.caller.consume("{k}:never")
      assert.isTrue(d.degraded === undefined)
      assert.strictEqual(Duration.toMillis(d.retryAfter), 5000)
      // a composite's slowest part decides: 6 units in a 5 s window, 4 at 2 per second: 5 s
      const composite = yield* two.caller.consume("both:{k}")
      assert.isFalse(composite.allowed)
      assert.strictEqual(Duration.toMillis(composite.retryAfter), 5000)
      yield* TestClock.adjust("4999 millis")
      assert.isFalse(yield* two.caller.acquire("{k}:used"))
      yield* TestClock.adjust("1 millis")
      assert.isTrue(yield* two.caller.acquire("{k}:used", { cost: 5 }))
      // a key of the shard first used after its recovery time starts full at once
      assert.isTrue(yield* two.caller.acquire("{k}:late", { cost: 5 }))
      yield* Scope.close(second, Exit.void)
    }))

  it.effect("a stop while a shard is still being opened hands it over: the next owner does not start cold", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const storage = yield* memoryStorage
      const { gate, stop, call } = yield* stopWhileOpening(options, storage)
      yield* gate.open // the claim lands while the runner stops
      yield* Fiber.join(stop)
      yield* Fiber.interrupt(call)
      const second = yield* Scope.make()
      const two = yield* runner(options, storage, second)
      // handed over (nothing used): full at once, not blocked for a cold start's 5 s
      const d = yield* two.caller.consume("{k}:b", { cost: 5 })
      assert.isTrue(d.allowed, JSON.stringify({ retryAfter: Duration.toMillis(d.retryAfter) }))
      yield* Scope.close(second, Exit.void)
    }))

  it.effect("a stop waits for an opening no longer than handoffTimeout; a claim that lands later hands nothing over", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const storage = yield* memoryStorage
      const { gate, stop, call } = yield* stopWhileOpening({ ...options, handoffTimeout: "3 seconds" }, storage)
      yield* TestClock.adjust("2999 millis")
      yield* settle
      assert.isUndefined(stop.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      yield* settle
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(stop)))
      yield* Fiber.interrupt(call)
      // the next owner claims the shard and empties a key; then the first claim lands
      const second = yield* Scope.make()
      const two = yield* runner(options, storage, second)
      assert.isTrue(yield* two.caller.acquire("{k}:a", { cost: 5 }))
      yield* gate.open
      yield* settle
      yield* Scope.close(second, Exit.void) // its hand-over is refused: the late claim came after its own
      // had the late claim handed its (empty) opening over, the emptied key would admit again at once
      const third = yield* Scope.make()
      const three = yield* runner(options, storage, third)
      assert.isFalse(yield* three.caller.acquire("{k}:a"))
      yield* Scope.close(third, Exit.void)
    }))

  it.effect(
    "property: across a crash, a token bucket never admits more than capacity + rate x T in any window",
    () =>
      Effect.gen(function*() {
        const workloads = fc.sample(
          fc.record({
            before: fc.array(
              fc.record({ wait: fc.integer({ min: 0, max: 700 }), cost: fc.integer({ min: 1, max: 3 }) }),
              {
                minLength: 5,
                maxLength: 40
              }
            ),
            after: fc.array(
              fc.record({ wait: fc.integer({ min: 0, max: 700 }), cost: fc.integer({ min: 1, max: 3 }) }),
              {
                minLength: 5,
                maxLength: 40
              }
            ),
            down: fc.integer({ min: 0, max: 3000 })
          }),
          { numRuns: 25, seed: 4 }
        )
        for (const w of workloads) {
          yield* TestClock.setTime(0)
          const storage = yield* memoryStorage
          const admitted: Array<readonly [number, number]> = []
          const drive = (limiter: Limiter, calls: ReadonlyArray<{ readonly wait: number; readonly cost: number }>) =>
            Effect.gen(function*() {
              for (const c of calls) {
                yield* TestClock.adjust(c.wait)
                if (yield* limiter.acquire("tb:p", { cost: c.cost })) {
                  admitted.push([yield* Effect.clockWith((clock) => clock.currentTimeMillis), c.cost])
                }
              }
            })
          const first = yield* Scope.make()
          const one = yield* runner(options, crashingStorage(storage), first)
          yield* drive(one.caller, w.before)
          yield* Scope.close(first, Exit.void)
          yield* TestClock.adjust(w.down)
          const second = yield* Scope.make()
          const two = yield* runner(options, storage, second)
          yield* drive(two.caller, w.after)
          yield* Scope.close(second, Exit.void)
          // capacity 5, 1 per second: every window [t, t + T] admits at most 5 + T/1000
          for (const [start] of admitted) {
            for (const [end] of admitted) {
              if (end < start) continue
              const inWindow = admitted.filter(([t]) => t >= start && t <= end).reduce((n, [, c]) => n + c, 0)
              assert.isAtMost(inWindow, 5 + (end - start) / 1000, JSON.stringify({ w, admitted, start, end }))
            }
          }
        }
      }),
    120_000
  )

  it.effect("while an owner does not answer, calls end at their deadline with the fallback's answer, flagged", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const storage = yield* memoryStorage
      const scope = yield* Scope.make()
      const { caller } = yield* runner(
        { ...options, fallback: { mode: "deny", timeout: "250 millis", retryAfter: "1 second" } },
        stalledStorage(storage),
        scope
      )
      const fiber = yield* Effect.forkChild(caller.consume("tb:z"))
      yield* settle
      yield* TestClock.adjust("249 millis")
      yield* settle
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      yield* settle
      const d = yield* Fiber.join(fiber)
      assert.isFalse(d.allowed)
      assert.isTrue(d.degraded)
      // the shard is skipped for retryAfter: answered at once
      const again = yield* caller.consume("tb:z")
      assert.isTrue(again.degraded)
      const stats = yield* caller.stats
      assert.strictEqual(stats.degraded, 2)
      assert.strictEqual(stats.storeFailures, 1)
      // waits too: the fallback denies at maxWait + timeout
      const waiter = yield* Effect.forkChild(Effect.flip(caller.wait("tb:y", { maxWait: "1 second" })))
      yield* settle
      yield* TestClock.adjust("1250 millis")
      yield* settle
      const e = yield* Fiber.join(waiter)
      assert.strictEqual(e._tag, "RateLimitExceeded")
      // (its runner is left as it is: its partition never opens)
    }))
})

// A storage whose hand-overs are lost: the next claim finds the shard still
// owned, as after a crash.
const crashingStorage = (
  storage: ClusterStorage.ClusterStorage["Service"]
): ClusterStorage.ClusterStorage["Service"] => ({
  ...storage,
  release: () => Effect.succeed(true)
})

// A runner whose claims wait for the gate, stopped (forked) while a call
// has it opening the shard of "{k}:a".
const stopWhileOpening = (opts: ClusterLimiter.Options, storage: ClusterStorage.ClusterStorage["Service"]) =>
  Effect.gen(function*() {
    const gate = yield* Latch.make(false)
    const slow: ClusterStorage.ClusterStorage["Service"] = {
      ...storage,
      claim: (name, shard, owner) => Effect.andThen(gate.await, storage.claim(name, shard, owner))
    }
    const scope = yield* Scope.make()
    const { caller } = yield* runner(opts, slow, scope)
    const call = yield* Effect.forkChild(caller.acquire("{k}:a"))
    yield* settle
    const stop = yield* Effect.forkChild(Scope.close(scope, Exit.void))
    yield* settle
    return { gate, stop, call }
  })

// A storage that never answers a claim: no partition opens, no owner answers.
const stalledStorage = (
  storage: ClusterStorage.ClusterStorage["Service"]
): ClusterStorage.ClusterStorage["Service"] => ({
  ...storage,
  claim: () => Effect.never
})

void Option
void ClusterLimiter
