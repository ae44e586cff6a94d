/**
 * The limiter with its state on Redis decides exactly as the in-process
 * limiter does (random workloads, the same transcript), coalesces a hot key,
 * lets waiters wait their turn, shares one limit between limiters whose
 * clocks disagree (server clock), gives keys the TTLs they need, reloads its
 * scripts after a flush, and refuses algorithms it has no script for.
 */
import { assert, expect } from "@effect/vitest"
import { Clock, Context, Deferred, Duration, Effect, Exit, Fiber, Layer } from "effect"
import { Redis } from "effect/persistence"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import type { Algorithm } from "../../src/internal/algorithm/Algorithm.ts"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"
import * as Policy from "../../src/Policy.ts"
import { RateLimiter } from "../../src/RateLimiter.ts"
import * as Lean from "../../src/redis/internal/lean.ts"
import * as Scripts from "../../src/redis/internal/scripts.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"
import * as Store from "../../src/Store.ts"
import { cleanup, describeRedis, settableClock, uniquePrefix, url } from "./redis.ts"

type Op =
  | { readonly _tag: "acquire"; readonly key: number; readonly cost: number }
  | { readonly _tag: "consume"; readonly key: number; readonly cost: number }
  | { readonly _tag: "peek"; readonly key: number; readonly cost: number }
  | { readonly _tag: "wait"; readonly key: number; readonly cost: number }
  | { readonly _tag: "release"; readonly key: number; readonly cost: number }
  | { readonly _tag: "burst"; readonly key: number; readonly count: number }
  | { readonly _tag: "reset"; readonly key: number }
  | { readonly _tag: "advance"; readonly millis: number }

const policies: ReadonlyArray<Policy.Valid> = [
  Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }),
  Policy.tokenBucket({ capacity: 8, refill: { tokens: 3, per: "2 seconds" }, initialTokens: 2 }),
  Policy.tokenBucket({ capacity: 4, refill: { tokens: 2, per: "1500 millis" }, mode: "interval" }),
  Policy.gcra({ rate: { count: 2, per: "1 second" }, maxBurst: 3 }),
  Policy.fixedWindow({ limit: 4, window: "2 seconds" }),
  Policy.slidingWindow({ limit: 5, window: "3 seconds" }),
  Policy.slidingLog({ limit: 3, window: "2 seconds", countBlocked: true }),
  Policy.concurrency({ capacity: 3 }),
  Policy.all(
    Policy.tokenBucket({ capacity: 4, refill: { tokens: 1, per: "500 millis" } }),
    Policy.fixedWindow({ limit: 6, window: "3 seconds" })
  )
] as ReadonlyArray<Policy.Valid>

const key = fc.integer({ min: 0, max: policies.length - 1 })
const cost = fc.integer({ min: 1, max: 4 })
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ _tag: fc.constant("acquire" as const), key, cost }) },
  { weight: 3, arbitrary: fc.record({ _tag: fc.constant("consume" as const), key, cost }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("peek" as const), key, cost }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("wait" as const), key, cost }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("release" as const), key, cost }) },
  {
    weight: 1,
    arbitrary: fc.record({ _tag: fc.constant("burst" as const), key, count: fc.integer({ min: 2, max: 30 }) })
  },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("reset" as const), key }) },
  {
    weight: 4,
    arbitrary: fc.record({ _tag: fc.constant("advance" as const), millis: fc.integer({ min: 0, max: 3000 }) })
  }
)

const show = (
  d: { allowed: boolean; remaining: number; retryAfter: Duration.Duration; resetAfter: Duration.Duration }
) => `${d.allowed}/${d.remaining}/${Duration.toMillis(d.retryAfter)}/${Duration.toMillis(d.resetAfter)}`

// Runs the ops against one limiter, every call awaited, and returns a
// transcript of every outcome.
const transcriptFor = (ops: ReadonlyArray<Op>, store: Store.Store | undefined) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(1_760_000_000_000)
    const limiter = yield* RateLimiter.make({
      policy: (k) => policies[Number(k.slice(1))],
      idleTimeout: "365 days",
      mailboxCapacity: 4096
    }).pipe(Effect.provideService(Store.CurrentStore, store))
    const out: Array<string> = []
    // every outcome, a failure as its tag (a cost above the limit is refused)
    const record = <A, E>(effect: Effect.Effect<A, E>, f: (a: A) => string) =>
      Effect.map(Effect.exit(effect), (exit) =>
        out.push(
          Exit.isSuccess(exit)
            ? f(exit.value)
            : JSON.stringify(exit.cause.reasons.map((r) => r._tag === "Fail" ? (r.error as any)._tag : r._tag))
        ))
    for (const o of ops) {
      const k = "key" in o ? `k${o.key}` : ""
      switch (o._tag) {
        case "acquire":
          yield* record(limiter.acquire(k, { cost: o.cost }), String)
          break
        case "consume":
          yield* record(limiter.consume(k, { cost: o.cost }), show)
          break
        case "peek":
          yield* record(limiter.peek(k, { cost: o.cost }), show)
          break
        case "wait":
          // admitted now, or refused at once: nothing is left waiting
          yield* record(limiter.wait(k, { cost: o.cost, maxWait: 0 }), () => "admitted")
          break
        case "release":
          yield* record(limiter.release(k, o.cost), () => "released")
          break
        case "burst":
          yield* record(
            Effect.forEach(Array.from({ length: o.count }), () => limiter.acquire(k), { concurrency: "unbounded" }),
            (results) => results.map((b) => b ? "1" : "0").join("")
          )
          break
        case "reset":
          yield* record(limiter.reset(k), () => "reset")
          break
        case "advance":
          yield* TestClock.adjust(o.millis)
          break
      }
    }
    return out
  })

describeRedis("the limiter on Redis", (it) => {
  it.effect("decides exactly as in-process on random workloads", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("limiter")
      const samples = fc.sample(fc.array(op, { minLength: 1, maxLength: 40 }), {
        numRuns: Number(process.env.LIMITER_RUNS ?? 30)
      })
      let n = 0
      for (const ops of samples) {
        const local = yield* Effect.scoped(transcriptFor(ops, undefined))
        const store = yield* RedisStore.make({
          prefix: `${prefix}${n++}:`,
          clock: "client",
          keepSettled: Duration.infinity
        })
        const remote = yield* Effect.scoped(transcriptFor(ops, store))
        assert.deepStrictEqual(remote, local, JSON.stringify(ops))
      }
      yield* cleanup(prefix)
    }).pipe(Effect.provide(TestClock.layer())))

  it.effect("coalesces a hot key into few round trips and admits exactly the capacity", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("hot")
      const store = yield* RedisStore.make({ prefix })
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 1, per: "1 hour" } }),
        mailboxCapacity: 4096
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      const results = yield* Effect.forEach(Array.from({ length: 2000 }), () => limiter.acquire("hot"), {
        concurrency: "unbounded"
      })
      assert.strictEqual(results.filter(Boolean).length, 100)
      const stats = yield* limiter.stats
      assert.strictEqual(stats.storeOps, 2000)
      expect(stats.storeCalls).toBeLessThanOrEqual(20)
      assert.strictEqual(stats.degraded, 0)
      yield* cleanup(prefix)
    }))

  it.effect("idle keys go by the caller's own call; concurrent calls on one key stay in order", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("direct")
      const store = yield* RedisStore.make({ prefix })
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 hour" } })
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      // 300 idle keys at once: each decided by its caller's call (no actor),
      // the store batching them into a few round trips
      const many = yield* Effect.forEach(Array.from({ length: 300 }, (_, i) => `k${i}`), (k) => limiter.acquire(k), {
        concurrency: "unbounded"
      })
      assert.isTrue(many.every(Boolean))
      let stats = yield* limiter.stats
      assert.strictEqual(stats.storeCalls, 300)
      assert.strictEqual(stats.actors, 0)
      // one key, 20 callers at once: the first goes out alone, the others
      // queue behind it and go in one call after it, in call order
      const decisions = yield* Effect.forEach(Array.from({ length: 20 }), () => limiter.consume("one"), {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual(decisions.map((d) => d.allowed), Array.from({ length: 20 }, (_, i) => i < 5))
      assert.deepStrictEqual(decisions.slice(0, 5).map((d) => d.remaining), [4, 3, 2, 1, 0])
      stats = yield* limiter.stats
      assert.strictEqual(stats.storeCalls, 302)
      assert.strictEqual(stats.storeOps, 320)
      assert.strictEqual(stats.degraded, 0)
      yield* cleanup(prefix)
    }))

  it.effect("calls for many keys at once share round trips, each key applied atomically and in order", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("batch")
      const store = yield* RedisStore.make({ prefix, clock: "client", maxBatchKeys: 7 })
      const policies = [
        Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "1 hour" } }),
        Policy.gcra({ rate: { count: 1, per: "1 hour" }, maxBurst: 2 }),
        Policy.slidingLog({ limit: 3, window: "1 hour" })
      ] as ReadonlyArray<Policy.Valid>
      const take = (key: string, policy: Policy.Valid) =>
        Effect.map(store.apply(key, policy, [{ kind: Store.OpKind.Take, cost: 1, queued: 0 }]), ([r]) => r.allowed)
      // 50 keys of three algorithms (three scripts), each taken 5 times, all at once
      const calls = Array.from({ length: 250 }, (_, i) => ({ key: `k${i % 50}`, policy: policies[i % 50 % 3] }))
      const results = yield* Effect.forEach(calls, (c) => take(c.key, c.policy), { concurrency: "unbounded" })
      for (let k = 0; k < 50; k++) {
        const mine = results.filter((_, i) => i % 50 === k)
        assert.deepStrictEqual(mine, [true, true, true, false, false], `key k${k}`)
      }
      // a call interrupted while it waits for its round trip takes nothing
      // (rounds out: the next call waits for one to end)
      const busy = yield* Effect.forEach(
        [0, 1, 2, 3],
        (i) => take(`busy${i}`, policies[0]).pipe(Effect.forkChild({ startImmediately: true }))
      )
      const fiber = yield* take("interrupted", policies[0]).pipe(Effect.forkChild({ startImmediately: true }))
      yield* Fiber.interrupt(fiber)
      yield* Fiber.joinAll(busy)
      const [after] = yield* store.apply("interrupted", policies[0], [{ kind: Store.OpKind.Peek, cost: 3, queued: 0 }])
      assert.isTrue(after.allowed)
      // one key's calls in one round, under two policies (two scripts): in order
      const strict = Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 hour" } }) as Policy.Valid
      const other = Policy.fixedWindow({ limit: 1, window: "1 hour" }) as Policy.Valid
      const held = yield* Effect.forEach(
        [0, 1, 2, 3],
        (i) => take(`held${i}`, policies[0]).pipe(Effect.forkChild({ startImmediately: true }))
      )
      const interleaved = yield* Effect.forEach(
        [strict, other, strict, strict],
        (policy) => take("switching", policy).pipe(Effect.forkChild({ startImmediately: true }))
      )
      yield* Fiber.joinAll(held)
      // a state of the other algorithm reads as none: taken, taken, taken afresh, then denied
      assert.deepStrictEqual(yield* Fiber.joinAll(interleaved), [true, true, true, false])
      yield* cleanup(prefix)
    }))

  it.effect("waiters wait their turn against Redis, in order", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("wait")
      const store = yield* RedisStore.make({ prefix, clock: "client" })
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } })
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      const order: Array<number> = []
      // each waiter says when it is admitted: the test waits for that, not for a while
      const admitted = [yield* Deferred.make<void>(), yield* Deferred.make<void>(), yield* Deferred.make<void>()]
      const fibers: Array<Fiber.Fiber<void, unknown>> = []
      for (const i of [0, 1, 2]) {
        fibers.push(
          yield* limiter.wait("k").pipe(
            Effect.tap(() => Effect.sync(() => order.push(i))),
            Effect.tap(() => Deferred.succeed(admitted[i], undefined)),
            Effect.forkChild({ startImmediately: true })
          )
        )
      }
      yield* Deferred.await(admitted[0])
      assert.deepStrictEqual(order, [0])
      // the others are in line once the store has told them how long to wait
      // (a round trip to Redis, in real time: nothing signals it but the count)
      for (let i = 0; i < 500 && (yield* limiter.stats).waiting < 2; i++) {
        yield* TestClock.withLive(Effect.sleep("2 millis"))
      }
      yield* TestClock.adjust("1 second")
      yield* Deferred.await(admitted[1])
      assert.deepStrictEqual(order, [0, 1])
      yield* TestClock.adjust("1 second")
      yield* Deferred.await(admitted[2])
      yield* Fiber.joinAll(fibers)
      assert.deepStrictEqual(order, [0, 1, 2])
      yield* cleanup(prefix)
    }).pipe(Effect.provide(TestClock.layer())))

  it.effect("with the server's clock, limiters whose clocks disagree by an hour share one limit", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("skew")
      const policy = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 minute" } })
      const limiterAt = (offset: number) =>
        Effect.gen(function*() {
          const { clock } = settableClock(1_760_000_000_000 + offset)
          const store = yield* RedisStore.make({ prefix })
          return yield* RateLimiter.make({ policy }).pipe(
            Effect.provideService(Store.CurrentStore, store),
            Effect.provideService(Clock.Clock, clock)
          )
        })
      const a = yield* limiterAt(0)
      const b = yield* limiterAt(3_600_000)
      let allowed = 0
      for (let i = 0; i < 40; i++) if (yield* (i % 2 === 0 ? a : b).acquire("shared")) allowed++
      assert.strictEqual(allowed, 10)
      yield* cleanup(prefix)
    }))

  it.effect("a key lives until it has settled, and no longer", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("ttl")
      const redis = yield* Redis.Redis
      const store = yield* RedisStore.make({ prefix, clock: "client" })
      const bucket = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
      const take = (key: string, policy: Policy.Valid, cost: number) =>
        store.apply(key, policy, [{ kind: Store.OpKind.Take, cost, queued: 0 }])
      const pttl = (key: string) => redis.send<number>("PTTL", prefix + key)

      yield* store.apply("peeked", bucket, [{ kind: Store.OpKind.Peek, cost: 1, queued: 0 }])
      assert.strictEqual(yield* pttl("peeked"), -2, "a peek gives a key no state")
      // a lean write moves the expiry refreshMillis past the need (Expiry.test.ts)
      yield* take("tb", bucket, 1)
      let ttl = yield* pttl("tb")
      expect(ttl).toBeGreaterThan(900 + Lean.refreshMillis)
      expect(ttl).toBeLessThanOrEqual(1000 + Lean.refreshMillis) // one token short: full again in 1 s
      // empty: full again in 10 s, which the expiry set a moment ago covers
      yield* take("tb", bucket, 9)
      ttl = yield* pttl("tb")
      expect(ttl).toBeGreaterThan(9900)
      expect(ttl).toBeLessThanOrEqual(1000 + Lean.refreshMillis)
      // the batch script (a peek beside the take) sets the exact need
      yield* store.apply("tb", bucket, [{ kind: Store.OpKind.Peek, cost: 1, queued: 0 }, {
        kind: Store.OpKind.Release,
        cost: 1,
        queued: 0
      }])
      ttl = yield* pttl("tb")
      expect(ttl).toBeGreaterThan(8900)
      expect(ttl).toBeLessThanOrEqual(9000)
      yield* store.apply("tb", bucket, [{ kind: Store.OpKind.Release, cost: 9, queued: 0 }])
      assert.strictEqual(yield* pttl("tb"), -2, "a full bucket is deleted at once")

      const permits = Policy.concurrency({ capacity: 2 }) as Policy.Valid
      yield* take("cc", permits, 1)
      assert.strictEqual(yield* pttl("cc"), -1, "units out: the key must never be forgotten")
      yield* store.apply("cc", permits, [{ kind: Store.OpKind.Release, cost: 1, queued: 0 }])
      assert.strictEqual(yield* pttl("cc"), -2)

      const kept = yield* RedisStore.make({ prefix, clock: "client", keepSettled: "1 minute" })
      yield* kept.apply("kept", bucket, [{ kind: Store.OpKind.Take, cost: 1, queued: 0 }])
      ttl = yield* pttl("kept")
      expect(ttl).toBeGreaterThan(60_900 + Lean.refreshMillis)
      expect(ttl).toBeLessThanOrEqual(61_000 + Lean.refreshMillis)
      yield* cleanup(prefix)
    }))

  it.effect("after FUNCTION DELETE or SCRIPT FLUSH (or a restarted server) the scripts are loaded again", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("noscript")
      const redis = yield* Redis.Redis
      // (the server's clock: a slow rate, so that the seconds a busy machine
      // takes between the calls refill nothing)
      const policy = Policy.gcra({ rate: { count: 1, per: "1 hour" }, maxBurst: 1 }) as Policy.Valid
      for (const functions of [true, false]) {
        const store = yield* RedisStore.make({ prefix: `${prefix}${functions}:`, functions })
        const take = store.apply("k", policy, [{ kind: Store.OpKind.Take, cost: 1, queued: 0 }])
        const twice = store.apply("k", policy, [
          { kind: Store.OpKind.Peek, cost: 1, queued: 0 },
          { kind: Store.OpKind.Take, cost: 1, queued: 0 }
        ])
        assert.isTrue((yield* take)[0].allowed)
        // (other test files share the library and the scripts: they load them again too)
        if (functions) yield* redis.send("FUNCTION", "DELETE", Scripts.library.name)
        else yield* redis.send("SCRIPT", "FLUSH")
        assert.isTrue((yield* take)[0].allowed)
        if (functions) yield* redis.send("FUNCTION", "DELETE", Scripts.library.name)
        else yield* redis.send("SCRIPT", "FLUSH")
        const [peeked, taken] = yield* twice
        assert.isFalse(peeked.allowed)
        assert.isFalse(taken.allowed)
      }
      yield* cleanup(prefix)
    }))

  it.effect("a Redis that refuses Functions (an ACL without FCALL and FUNCTION): the same decisions by EVALSHA", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("noFunctions")
      const redis = yield* Redis.Redis
      const user = `tollgate-test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
      yield* redis.send("ACL", "SETUSER", user, "on", "nopass", "~*", "&*", "+@all", "-fcall", "-fcall_ro", "-function")
      const at = new URL(url!)
      at.username = user
      at.password = "any"
      const policy = Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 hour" } }) as Policy.Valid
      const take = [{ kind: Store.OpKind.Take, cost: 1, queued: 0 }]
      const peekTake = [{ kind: Store.OpKind.Peek, cost: 1, queued: 0 }, ...take]
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* Layer.build(RedisStore.layer({ url: at.toString(), prefix, clock: "client" })).pipe(
          Effect.map((context) => Context.get(context, Store.CurrentStore)!)
        )
        assert.isTrue((yield* store.apply("k", policy, take))[0].allowed) // lean
        const [peeked, taken] = yield* store.apply("k", policy, peekTake) // batch
        assert.isTrue(peeked.allowed)
        assert.isTrue(taken.allowed)
        assert.isFalse((yield* store.apply("k", policy, take))[0].allowed)
      }))
      // the refusals the server logged: FCALL once, and nothing after it
      const log = yield* redis.send<Array<unknown>>("ACL", "LOG", "100")
      const text = (entry: unknown) => JSON.stringify(entry, (_, v) => v instanceof Map ? [...v.entries()] : v)
      const mine = log.map(text).filter((entry) => entry.includes(user))
      assert.strictEqual(mine.length, 1, mine.join("\n"))
      assert.include(mine[0], "fcall")
      yield* redis.send("ACL", "DELUSER", user)
      yield* cleanup(prefix)
    }))

  it.effect("an algorithm without a script fails clearly, and the limiter's fallback sees it", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("unsupported")
      const store = yield* RedisStore.make({ prefix })
      const custom: Algorithm<TokenBucket.Config, TokenBucket.State> = { ...TokenBucket.algorithm, name: "custom" }
      const policy = {
        ...(Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid),
        algorithm: custom
      } as Policy.Valid
      assert.isFalse(RedisStore.supports(policy))
      assert.isTrue(RedisStore.supports(Policy.slidingLog({ limit: 1, window: "1 second" }) as Policy.Valid))
      const error = yield* Effect.flip(store.apply("k", policy, [{ kind: Store.OpKind.Take, cost: 1, queued: 0 }]))
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.include(error.reason, "no script for the \"custom\" algorithm")
      const limiter = yield* RateLimiter.make({ policy, fallback: { mode: "error" } }).pipe(
        Effect.provideService(Store.CurrentStore, store)
      )
      const exit = yield* Effect.exit(limiter.acquire("k"))
      assert.isTrue(Exit.isFailure(exit) && String(exit.cause).includes("no script for the \"custom\" algorithm"))
    }))

  it.effect("RedisStore.layer given node-redis options of its own (client) runs on node-redis's client", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("nodeRedis")
      const redis = yield* Redis.Redis
      const name = `tollgate-node-redis-${process.pid}`
      const policy = Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 hour" } }) as Policy.Valid
      const take = [{ kind: Store.OpKind.Take, cost: 1, queued: 0 }]
      const named = (list: string) => list.split("\n").filter((line) => line.includes(` name=${name} `))
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* Layer.build(RedisStore.layer({ url, prefix, client: { name } })).pipe(
          Effect.map((context) => Context.get(context, Store.CurrentStore)!)
        )
        assert.isTrue((yield* store.apply("k", policy, take))[0].allowed)
        assert.isFalse((yield* store.apply("k", policy, take))[0].allowed)
        const mine = named(yield* redis.send<string>("CLIENT", "LIST"))
        assert.strictEqual(mine.length, 1)
        assert.include(mine[0], "cmd=fcall")
      }))
      // and without: its own connection, which names itself nothing
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* Layer.build(RedisStore.layer({ url, prefix })).pipe(
          Effect.map((context) => Context.get(context, Store.CurrentStore)!)
        )
        assert.isFalse((yield* store.apply("k", policy, take))[0].allowed)
        assert.strictEqual(named(yield* redis.send<string>("CLIENT", "LIST")).length, 0)
      }))
      yield* cleanup(prefix)
    }))

  it.effect("bad options name the field", () =>
    Effect.gen(function*() {
      const clock = yield* Effect.flip(RedisStore.make({ clock: "local" as never }))
      assert.strictEqual(clock.field, "clock")
      const keep = yield* Effect.flip(RedisStore.make({ keepSettled: -1 }))
      assert.strictEqual(keep.field, "keepSettled")
      const inFlight = yield* Effect.flip(RedisStore.make({ maxInFlight: 0 }))
      assert.strictEqual(inFlight.field, "maxInFlight")
      const functions = yield* Effect.flip(RedisStore.make({ functions: "yes" as never }))
      assert.strictEqual(functions.field, "functions")
      assert.strictEqual(functions.value, "yes")
    }))
})
