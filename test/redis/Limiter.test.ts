/**
 * The limiter with its state on Redis decides exactly as the in-process
 * limiter does and coalesces a hot key (workloads.ts, on one server here),
 * lets waiters wait their turn, shares one limit between limiters whose
 * clocks disagree (server clock), gives keys the TTLs they need, reloads its
 * scripts after a flush, and refuses algorithms it has no script for.
 */
import { assert, expect } from "@effect/vitest"
import { Clock, Context, Deferred, Effect, Exit, Fiber, Layer } from "effect"
import { Redis } from "effect/persistence"
import { TestClock } from "effect/testing"
import * as Engine from "../../src/internal/actor/Engine.ts"
import type { Algorithm } from "../../src/internal/algorithm/Algorithm.ts"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"
import { Kind as OpKind } from "../../src/internal/operation/Op.ts"
import * as Policy from "../../src/Policy.ts"
import { RateLimiter } from "../../src/RateLimiter.ts"
import * as Entries from "../../src/redis/internal/entries.ts"
import * as Scripts from "../../src/redis/internal/scripts.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"
import * as Store from "../../src/Store.ts"
import { cleanup, describeRedis, server, settableClock, uniquePrefix, url } from "./redis.ts"
import { workloads } from "./workloads.ts"

workloads(server)

describeRedis("the limiter on Redis", (it) => {
  it.effect("idle keys go by the caller's own call; concurrent calls on one key stay in order", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("direct")
      const store = yield* Effect.map(RedisStore.make({ prefix }), Engine.engineOf)
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 hour" } })
      }).pipe(Effect.provideService(Store.CurrentStore, Engine.pluggable(store)))
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
      const store = yield* Effect.map(RedisStore.make({ prefix, clock: "client", maxBatchKeys: 7 }), Engine.engineOf)
      const policies = [
        Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "1 hour" } }),
        Policy.gcra({ rate: { count: 1, per: "1 hour" }, maxBurst: 2 }),
        Policy.slidingLog({ limit: 3, window: "1 hour" })
      ] as ReadonlyArray<Policy.Valid>
      const take = (key: string, policy: Policy.Valid) =>
        Effect.map(store.apply(key, policy, [{ kind: OpKind.Take, cost: 1, queued: 0 }]), ([r]) => r.allowed)
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
      const [after] = yield* store.apply("interrupted", policies[0], [{ kind: OpKind.Peek, cost: 3, queued: 0 }])
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
      const store = yield* Effect.map(RedisStore.make({ prefix, clock: "client" }), Engine.engineOf)
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } })
      }).pipe(Effect.provideService(Store.CurrentStore, Engine.pluggable(store)))
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
          const store = yield* Effect.map(RedisStore.make({ prefix }), Engine.engineOf)
          return yield* RateLimiter.make({ policy }).pipe(
            Effect.provideService(Store.CurrentStore, Engine.pluggable(store)),
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
      const store = yield* Effect.map(RedisStore.make({ prefix, clock: "client" }), Engine.engineOf)
      const bucket = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
      const take = (key: string, policy: Policy.Valid, cost: number) =>
        store.apply(key, policy, [{ kind: OpKind.Take, cost, queued: 0 }])
      const pttl = (key: string) => redis.send<number>("PTTL", prefix + key)

      yield* store.apply("peeked", bucket, [{ kind: OpKind.Peek, cost: 1, queued: 0 }])
      assert.strictEqual(yield* pttl("peeked"), -2, "a peek gives a key no state")
      // a lean write moves the expiry refreshMillis past the need (Expiry.test.ts)
      yield* take("tb", bucket, 1)
      let ttl = yield* pttl("tb")
      expect(ttl).toBeGreaterThan(900 + Entries.refreshMillis)
      expect(ttl).toBeLessThanOrEqual(1000 + Entries.refreshMillis) // one token short: full again in 1 s
      // empty: full again in 10 s, which the expiry set a moment ago covers
      yield* take("tb", bucket, 9)
      ttl = yield* pttl("tb")
      expect(ttl).toBeGreaterThan(9900)
      expect(ttl).toBeLessThanOrEqual(1000 + Entries.refreshMillis)
      // the batch script (a peek beside the take) sets the exact need
      yield* store.apply("tb", bucket, [{ kind: OpKind.Peek, cost: 1, queued: 0 }, {
        kind: OpKind.Release,
        cost: 1,
        queued: 0
      }])
      ttl = yield* pttl("tb")
      expect(ttl).toBeGreaterThan(8900)
      expect(ttl).toBeLessThanOrEqual(9000)
      yield* store.apply("tb", bucket, [{ kind: OpKind.Release, cost: 9, queued: 0 }])
      assert.strictEqual(yield* pttl("tb"), -2, "a full bucket is deleted at once")

      const permits = Policy.concurrency({ capacity: 2 }) as Policy.Valid
      yield* take("cc", permits, 1)
      assert.strictEqual(yield* pttl("cc"), -1, "units out: the key must never be forgotten")
      yield* store.apply("cc", permits, [{ kind: OpKind.Release, cost: 1, queued: 0 }])
      assert.strictEqual(yield* pttl("cc"), -2)

      const kept = yield* Effect.map(
        RedisStore.make({ prefix, clock: "client", keepSettled: "1 minute" }),
        Engine.engineOf
      )
      yield* kept.apply("kept", bucket, [{ kind: OpKind.Take, cost: 1, queued: 0 }])
      ttl = yield* pttl("kept")
      expect(ttl).toBeGreaterThan(60_900 + Entries.refreshMillis)
      expect(ttl).toBeLessThanOrEqual(61_000 + Entries.refreshMillis)
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
        const store = yield* Effect.map(
          RedisStore.make({ prefix: `${prefix}${functions}:`, functions }),
          Engine.engineOf
        )
        const take = store.apply("k", policy, [{ kind: OpKind.Take, cost: 1, queued: 0 }])
        const twice = store.apply("k", policy, [
          { kind: OpKind.Peek, cost: 1, queued: 0 },
          { kind: OpKind.Take, cost: 1, queued: 0 }
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
      const take = [{ kind: OpKind.Take, cost: 1, queued: 0 }]
      const peekTake = [{ kind: OpKind.Peek, cost: 1, queued: 0 }, ...take]
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* Layer.build(RedisStore.layer({ url: at.toString(), prefix, clock: "client" })).pipe(
          Effect.map((context) => Engine.engineOf(Context.get(context, Store.CurrentStore)))
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
      const store = yield* Effect.map(RedisStore.make({ prefix }), Engine.engineOf)
      const custom: Algorithm<TokenBucket.Config, TokenBucket.State> = { ...TokenBucket.algorithm, name: "custom" }
      const policy = {
        ...(Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid),
        algorithm: custom
      } as Policy.Valid
      assert.isFalse(RedisStore.supports(policy))
      assert.isTrue(RedisStore.supports(Policy.slidingLog({ limit: 1, window: "1 second" }) as Policy.Valid))
      const error = yield* Effect.flip(store.apply("k", policy, [{ kind: OpKind.Take, cost: 1, queued: 0 }]))
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.include(error.reason, "no script for the \"custom\" algorithm")
      const limiter = yield* RateLimiter.make({ policy, fallback: { mode: "error" } }).pipe(
        Effect.provideService(Store.CurrentStore, Engine.pluggable(store))
      )
      const exit = yield* Effect.exit(limiter.acquire("k"))
      assert.isTrue(Exit.isFailure(exit) && String(exit.cause).includes("no script for the \"custom\" algorithm"))
    }))

  it.effect("RedisStore.layer runs on an ioredis client of its own, with the ioredis options given (client)", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("client")
      const redis = yield* Redis.Redis
      const name = `tollgate-client-${process.pid}`
      const policy = Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 hour" } }) as Policy.Valid
      const take = [{ kind: OpKind.Take, cost: 1, queued: 0 }]
      const named = (list: string) => list.split("\n").filter((line) => line.includes(` name=${name} `))
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* Layer.build(RedisStore.layer({ url, prefix, client: { connectionName: name } })).pipe(
          Effect.map((context) => Engine.engineOf(Context.get(context, Store.CurrentStore)))
        )
        assert.isTrue((yield* store.apply("k", policy, take))[0].allowed)
        assert.isFalse((yield* store.apply("k", policy, take))[0].allowed)
        const mine = named(yield* redis.send<string>("CLIENT", "LIST"))
        assert.strictEqual(mine.length, 1)
        assert.include(mine[0], "cmd=fcall")
      }))
      // closed with its scope
      assert.strictEqual(named(yield* redis.send<string>("CLIENT", "LIST")).length, 0)
      yield* cleanup(prefix)
    }))

  it.effect("bad options name the field", () =>
    Effect.gen(function*() {
      const clock = yield* Effect.flip(Effect.map(RedisStore.make({ clock: "local" as never }), Engine.engineOf))
      assert.strictEqual(clock.field, "clock")
      const keep = yield* Effect.flip(Effect.map(RedisStore.make({ keepSettled: -1 }), Engine.engineOf))
      assert.strictEqual(keep.field, "keepSettled")
      const inFlight = yield* Effect.flip(Effect.map(RedisStore.make({ maxInFlight: 0 }), Engine.engineOf))
      assert.strictEqual(inFlight.field, "maxInFlight")
      const functions = yield* Effect.flip(Effect.map(RedisStore.make({ functions: "yes" as never }), Engine.engineOf))
      assert.strictEqual(functions.field, "functions")
      assert.strictEqual(functions.value, "yes")
    }))
})
