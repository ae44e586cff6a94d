/**
 * How the lean scripts keep a key's TTL, on a real server with its own
 * clock (`clock: "server"`, the default): a lean write stores the expiry it
 * gave the key after the state, keeps the TTL while that expiry covers what
 * the state needs (`SET … KEEPTTL`), and moves it `refreshMillis` past the
 * need when it does not. The key never expires before its state settles;
 * the batch script reads a state with an expiry after it, and writes its own
 * exact TTL, which the next lean write moves on from.
 */
import { assert, expect } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { Redis } from "effect/persistence"
import * as Engine from "../../src/internal/actor/Engine.ts"
import { Kind as OpKind, type Op } from "../../src/internal/operation/Op.ts"
import * as Policy from "../../src/Policy.ts"
import * as Entries from "../../src/redis/internal/entries.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"
import { cleanup, describeRedis, uniquePrefix } from "./redis.ts"

// 100 tokens, one back every second: each token taken is a second more to settle.
const policy = Policy.tokenBucket({ capacity: 100, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
const take = (cost: number): ReadonlyArray<Op> => [{ kind: OpKind.Take, cost, queued: 0 }]
// two operations in one call: the batch script
const peekAndTake: ReadonlyArray<Op> = [{ kind: OpKind.Peek, cost: 1, queued: 0 }, {
  kind: OpKind.Take,
  cost: 1,
  queued: 0
}]

const pttl = (key: string) => Effect.flatMap(Redis.Redis, (redis) => redis.send<number>("PTTL", key))
const stored = (key: string) => Effect.flatMap(Redis.Redis, (redis) => redis.send<number>("STRLEN", key))

describeRedis("Redis lean scripts keep a key's TTL", (it) => {
  it.effect("a take sets the expiry past the need, later takes within it keep it, a larger need moves it", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("expiry")
      const store = yield* Effect.map(RedisStore.make({ prefix }), Engine.engineOf)
      const key = prefix + "a"

      // one token out: settled in 1 s, expiry moved to 1 s + refreshMillis
      const first = yield* store.apply("a", policy, take(1))
      assert.strictEqual(first[0].remaining, 99)
      const t1 = yield* pttl(key)
      expect(t1).toBeGreaterThan(1000 + Entries.refreshMillis - 500)
      expect(t1).toBeLessThanOrEqual(1000 + Entries.refreshMillis)
      // the state (three doubles) and its expiry after it
      assert.strictEqual(yield* stored(key), 32)

      // two more out: needs 3 s, within the expiry: the TTL is kept, not raised
      yield* store.apply("a", policy, take(2))
      const t2 = yield* pttl(key)
      expect(t2).toBeLessThanOrEqual(t1)
      expect(t2).toBeGreaterThan(3000)

      // the rest: needs 100 s, past it: moved to 100 s + refreshMillis
      const last = yield* store.apply("a", policy, take(97))
      assert.strictEqual(last[0].remaining, 0)
      const t3 = yield* pttl(key)
      expect(t3).toBeGreaterThan(100_000 + Entries.refreshMillis - 500)
      expect(t3).toBeLessThanOrEqual(100_000 + Entries.refreshMillis)
      yield* cleanup(prefix)
    }))

  it.effect("the batch script reads a lean state and writes its exact TTL; the next lean write moves it on", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("expiry")
      const store = yield* Effect.map(RedisStore.make({ prefix }), Engine.engineOf)
      const key = prefix + "b"

      yield* store.apply("b", policy, take(3))
      // the batch script sees the 97 left (the expiry after the state is not read as state)
      const replies = yield* store.apply("b", policy, peekAndTake)
      assert.strictEqual(replies[0].remaining, 97)
      assert.strictEqual(replies[1].remaining, 96)
      // written by the batch script: the state alone, its TTL the exact need (4 s)
      assert.strictEqual(yield* stored(key), 24)
      const exact = yield* pttl(key)
      expect(exact).toBeLessThanOrEqual(4000)
      expect(exact).toBeGreaterThan(3500)

      // a lean write after it: no expiry stored, so it sets one
      const next = yield* store.apply("b", policy, take(1))
      assert.strictEqual(next[0].remaining, 95)
      assert.strictEqual(yield* stored(key), 32)
      expect(yield* pttl(key)).toBeGreaterThan(5000 + Entries.refreshMillis - 500)
      yield* cleanup(prefix)
    }))

  it.effect("a key that never settles has no TTL until it does; keepSettled adds to the need", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("expiry")
      const forever = yield* Effect.map(RedisStore.make({ prefix, keepSettled: Duration.infinity }), Engine.engineOf)
      yield* forever.apply("c", policy, take(1))
      assert.strictEqual(yield* pttl(prefix + "c"), -1)
      // the same key under a store that forgets settled keys: the stored
      // expiry (none) does not cover the need, so the TTL is set
      const forgetting = yield* Effect.map(RedisStore.make({ prefix }), Engine.engineOf)
      yield* forgetting.apply("c", policy, take(1))
      const ttl = yield* pttl(prefix + "c")
      expect(ttl).toBeGreaterThan(2000)
      expect(ttl).toBeLessThanOrEqual(2000 + Entries.refreshMillis)

      const kept = yield* Effect.map(RedisStore.make({ prefix, keepSettled: "1 minute" }), Engine.engineOf)
      yield* kept.apply("d", policy, take(1))
      expect(yield* pttl(prefix + "d")).toBeGreaterThan(61_000 + Entries.refreshMillis - 500)
      yield* cleanup(prefix)
    }))
})
