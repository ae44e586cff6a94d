/**
 * The Redis store's deadlines, on a `Redis` service of the test's own whose
 * replies come when the test says (so `TestClock` can drive every timeout):
 * a call that gets no reply fails at its deadline, the round behind it goes
 * out anyway, a late reply changes nothing, a call waiting behind a silent
 * round fails at its own (shorter) deadline without being sent, and a call
 * that brings no timeout gets the store's. The real server's side of this
 * (a stopped redis-server) is in Restart.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer } from "effect"
import { Redis } from "effect/persistence"
import { TestClock } from "effect/testing"
import * as Engine from "../../src/internal/actor/Engine.ts"
import { Kind as OpKind } from "../../src/internal/operation/Op.ts"
import * as Policy from "../../src/Policy.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"

const policy = Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
const take = [{ kind: OpKind.Take, cost: 1, queued: 0 }]
const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

// Every script call (FCALL or EVALSHA) waits for its own reply, given by
// `answer(i)`; the reply is not one the store can decode, so an answered call
// fails "unexpected reply", which tells it apart from a timed-out one.
const silentRedis = Effect.sync(() => {
  const sent: Array<{ readonly keys: ReadonlyArray<string>; readonly reply: Deferred.Deferred<unknown> }> = []
  const send = <A>(command: string, ...args: ReadonlyArray<string>): Effect.Effect<A, Redis.RedisError> =>
    Effect.suspend(() => {
      if (command !== "FCALL" && command !== "EVALSHA") return Effect.succeed("OK" as A)
      const count = Number(args[1])
      const reply = Deferred.makeUnsafe<unknown>()
      sent.push({ keys: args.slice(2, 2 + count), reply })
      return Deferred.await(reply) as Effect.Effect<A>
    })
  const answer = (i: number) => Deferred.succeed(sent[i].reply, "not a reply")
  return { sent, answer, redis: { send } as unknown as Redis.Redis["Service"] } as const
})

const failure = (exit: Exit.Exit<unknown, unknown> | undefined): string =>
  exit !== undefined && Exit.isFailure(exit) ? String(exit.cause) : `not failed: ${String(exit)}`

describe("RedisStore deadlines", () => {
  it.effect("a round without a reply: its call times out, the next round goes out, the late reply changes nothing", () =>
    Effect.gen(function*() {
      const { answer, redis, sent } = yield* silentRedis
      const store = yield* Effect.map(RedisStore.make({ clock: "client", prefix: "", maxInFlight: 1 }), Engine.engineOf)
        .pipe(
          Effect.provideService(Redis.Redis, redis)
        )
      const call = (key: string, timeout?: number) =>
        store.apply(key, policy, take, timeout).pipe(Effect.exit, Effect.forkChild({ startImmediately: true }))

      const a = yield* call("a", 1000)
      yield* TestClock.adjust("999 millis")
      assert.isUndefined(a.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.include(failure(yield* Fiber.join(a)), "timed out after 1000 ms")

      // its slot is free although its reply never came
      const b = yield* call("b", 1000)
      assert.deepStrictEqual(sent.map((s) => s.keys), [["a"], ["b"]])
      yield* answer(0) // a's late reply
      yield* settle
      assert.isUndefined(b.pollUnsafe())
      yield* answer(1)
      assert.include(failure(yield* Fiber.join(b)), "unexpected reply")

      // one slot, not two: with a round out, the next call waits for it
      const c = yield* call("c", 1000)
      const d = yield* call("d", 1000)
      assert.strictEqual(sent.length, 3)
      yield* answer(2)
      assert.include(failure(yield* Fiber.join(c)), "unexpected reply")
      // (c's caller is answered first, then the round behind it goes out)
      yield* settle
      assert.deepStrictEqual(sent.map((s) => s.keys), [["a"], ["b"], ["c"], ["d"]])
      yield* answer(3)
      assert.include(failure(yield* Fiber.join(d)), "unexpected reply")
    }))

  it.effect("a call waiting behind a silent round fails at its own deadline, unsent; no timeout given: the store's", () =>
    Effect.gen(function*() {
      const { redis, sent } = yield* silentRedis
      const store = yield* Effect.map(
        RedisStore.make({ clock: "client", prefix: "", timeout: "5 seconds", maxInFlight: 1 }),
        Engine.engineOf
      ).pipe(
        Effect.provideService(Redis.Redis, redis)
      )
      const call = (key: string, timeout?: number) =>
        store.apply(key, policy, take, timeout).pipe(Effect.exit, Effect.forkChild({ startImmediately: true }))

      const slow = yield* call("slow") // the store's 5 s
      const quick = yield* call("quick", 100)
      yield* TestClock.adjust("100 millis")
      assert.include(failure(yield* Fiber.join(quick)), "timed out after 100 ms")
      assert.deepStrictEqual(sent.map((s) => s.keys), [["slow"]])
      yield* TestClock.adjust("4899 millis")
      assert.isUndefined(slow.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.include(failure(yield* Fiber.join(slow)), "timed out after 5000 ms")
    }))

  it.effect("two commands out by default: a call goes out beside a silent one; the next waits for a free slot", () =>
    Effect.gen(function*() {
      const { answer, redis, sent } = yield* silentRedis
      const store = yield* Effect.map(RedisStore.make({ clock: "client", prefix: "" }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, redis)
      )
      const call = (key: string) =>
        store.apply(key, policy, take, 1000).pipe(Effect.exit, Effect.forkChild({ startImmediately: true }))
      const a = yield* call("a")
      const b = yield* call("b")
      const c = yield* call("c")
      const d = yield* call("d")
      assert.deepStrictEqual(sent.map((s) => s.keys), [["a"], ["b"]])
      // b's reply first: c and d go out together in b's slot, a's still out
      yield* answer(1)
      assert.include(failure(yield* Fiber.join(b)), "unexpected reply")
      yield* settle
      assert.deepStrictEqual(sent.map((s) => s.keys), [["a"], ["b"], ["c", "d"]])
      assert.isUndefined(a.pollUnsafe())
      yield* answer(0)
      yield* answer(2)
      for (const f of [a, c, d]) assert.include(failure(yield* Fiber.join(f)), "unexpected reply")
    }))

  it.effect("one key per command (Redis Cluster): 128 commands out at once by default", () =>
    Effect.gen(function*() {
      const { redis, sent } = yield* silentRedis
      const store = yield* Effect.map(
        RedisStore.make({ clock: "client", prefix: "", maxBatchKeys: 1 }),
        Engine.engineOf
      ).pipe(
        Effect.provideService(Redis.Redis, redis)
      )
      const calls = yield* Effect.forEach(
        Array.from({ length: 130 }, (_, i) => `k${i}`),
        (key) => store.apply(key, policy, take, 1000).pipe(Effect.exit, Effect.forkChild({ startImmediately: true }))
      )
      yield* settle
      assert.strictEqual(sent.length, 128)
      assert.isTrue(sent.every((s) => s.keys.length === 1))
      yield* TestClock.adjust("1 second")
      for (const f of calls) assert.include(failure(yield* Fiber.join(f)), "timed out after 1000 ms")
    }))

  it.effect("a timeout that is not a positive duration is refused, naming the field and the value", () =>
    Effect.gen(function*() {
      const { redis } = yield* silentRedis
      const exit = yield* Effect.map(RedisStore.make({ timeout: "soon" as never }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, redis),
        Effect.exit
      )
      assert.include(failure(exit), "InvalidPolicy")
      assert.include(failure(exit), "timeout")
      assert.include(failure(exit), "soon")
      // and the layer's own bounds, before it connects anywhere
      for (const field of ["connectTimeout", "closeTimeout"] as const) {
        const refused = yield* Layer.build(RedisStore.layer({ [field]: -1 })).pipe(Effect.exit)
        assert.include(failure(refused), "InvalidPolicy")
        assert.include(failure(refused), field)
        assert.include(failure(refused), "-1")
      }
    }))
})
