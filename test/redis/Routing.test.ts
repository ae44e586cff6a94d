/**
 * Which command the Redis store sends for which call, on a `Redis` service of
 * the test's own that records every command and answers it: a lone Take or
 * Admit takes its algorithm's lean script, anything else the batch script;
 * calls made together share one command per script; a key's calls stay in
 * order across scripts; and the store finds its way on servers that lack
 * something (no Functions, a library or script not loaded yet).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { Redis } from "effect/persistence"
import * as Engine from "../../src/internal/actor/Engine.ts"
import { Kind as OpKind, type Op } from "../../src/internal/operation/Op.ts"
import * as Policy from "../../src/Policy.ts"
import * as Scripts from "../../src/redis/internal/scripts.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"

const tokenBucket = Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
const gcra = Policy.gcra({ rate: { count: 10, per: "1 second" }, maxBurst: 2 }) as Policy.Valid
const both = Policy.all(
  Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }),
  Policy.fixedWindow({ limit: 5, window: "1 second" })
) as Policy.Valid
const encoded = (policy: Policy.Valid) => Scripts.forPolicy(policy.algorithm, policy.config) as Scripts.Encoded
const tb = encoded(tokenBucket)
const take: ReadonlyArray<Op> = [{ kind: OpKind.Take, cost: 1, queued: 0 }]
const admit: ReadonlyArray<Op> = [{ kind: OpKind.Admit, cost: 2, queued: 0 }]
const peek: ReadonlyArray<Op> = [{ kind: OpKind.Peek, cost: 1, queued: 0 }]

// Answers like the scripts would (every call admitted), or with an error
// given for the next command of a name.
const recordingRedis = Effect.sync(() => {
  const sent: Array<ReadonlyArray<string>> = []
  const errors = new Map<string, Array<string>>()
  // each lean script's name, and the values it answers per key (a shaper's delay sixth)
  const leans = new Map(
    [tokenBucket, gcra].flatMap((p) => {
      const e = encoded(p)
      return [[e.lean!.fn, e.leanWidth], [e.lean!.script.sha, e.leanWidth]] as const
    })
  )
  const reply = (name: string, args: ReadonlyArray<string>): unknown => {
    const keys = Number(args[0])
    const width = leans.get(name)
    if (width !== undefined) return Array.from({ length: keys }, () => [1, 0, 0, 0, 5, 0].slice(0, width)).flat()
    // the batch script: one reply per key, `*n` for its n ops
    return Array.from({ length: keys }, (_, i) => {
      const ops = args[1 + keys + 2 + 2 * i + 1].split(" ").map(Number)
      let count = 0
      for (let j = 4; j < ops.length; j += 5) count += ops[j]
      return `1 0 0 0 5 *${count}`
    })
  }
  const send = <A>(command: string, ...args: ReadonlyArray<string>): Effect.Effect<A, Redis.RedisError> =>
    Effect.suspend(() => {
      sent.push([command, ...args])
      const error = errors.get(command)?.shift()
      if (error !== undefined) return Effect.fail(new Redis.RedisError({ cause: new Error(error) }))
      if (command === "FCALL" || command === "EVALSHA") return Effect.succeed(reply(args[0], args.slice(1)) as A)
      return Effect.succeed("OK" as A)
    })
  const failNext = (command: string, message: string) => {
    const queue = errors.get(command) ?? []
    queue.push(message)
    errors.set(command, queue)
  }
  return { sent, failNext, redis: { send } as unknown as Redis.Redis["Service"] } as const
})

const commands = (sent: ReadonlyArray<ReadonlyArray<string>>) => sent.map((s) => `${s[0]} ${s[1]} ${s[2]}`)

describe("RedisStore routing", () => {
  it.effect("a lone Take or Admit takes the lean script with the policy as numbers; anything else the batch script", () =>
    Effect.gen(function*() {
      const { redis, sent } = yield* recordingRedis
      const store = yield* Effect.map(RedisStore.make({ prefix: "p:" }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, redis)
      )
      yield* store.apply("a", tokenBucket, take)
      yield* store.apply("a", tokenBucket, admit)
      yield* store.apply("a", tokenBucket, peek)
      yield* store.apply("a", tokenBucket, [...take, ...take])
      yield* store.apply("b", both, take)
      assert.deepStrictEqual(sent[0], ["FCALL", tb.lean!.fn, "1", "p:a", "", "0", tb.leanConfig, "0", "1"])
      assert.deepStrictEqual(sent[1], ["FCALL", tb.lean!.fn, "1", "p:a", "", "0", tb.leanConfig, "5", "2"])
      assert.deepStrictEqual(sent[2], ["FCALL", tb.batch.fn, "1", "p:a", "", "0", tb.policy, "1 1 0 0 1"])
      assert.deepStrictEqual(sent[3], ["FCALL", tb.batch.fn, "1", "p:a", "", "0", tb.policy, "0 1 0 0 2"])
      // a composite has no lean script
      assert.strictEqual(encoded(both).lean, undefined)
      assert.deepStrictEqual(sent[4].slice(0, 4), ["FCALL", tb.batch.fn, "1", "p:b"])
      assert.strictEqual(sent.length, 5)
    }))

  it.effect("calls made together share one command per script (and per policy, for the lean one), in order", () =>
    Effect.gen(function*() {
      const { redis, sent } = yield* recordingRedis
      // one command out at a time: each goes when the one before is answered
      const store = yield* Effect.map(RedisStore.make({ prefix: "", maxInFlight: 1 }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, redis)
      )
      const calls: ReadonlyArray<readonly [string, Policy.Valid, ReadonlyArray<Op>]> = [
        ["first", tokenBucket, take], // goes out alone, at once
        ["k1", tokenBucket, take],
        ["k2", gcra, take],
        ["k3", tokenBucket, peek],
        ["k4", tokenBucket, admit],
        ["k5", gcra, take],
        ["k6", both, take]
      ]
      yield* Effect.forEach(calls, ([key, policy, ops]) => store.apply(key, policy, ops), {
        concurrency: "unbounded",
        discard: true
      })
      const g = encoded(gcra)
      assert.deepStrictEqual(commands(sent), [
        `FCALL ${tb.lean!.fn} 1`,
        `FCALL ${tb.lean!.fn} 2`,
        `FCALL ${g.lean!.fn} 2`,
        `FCALL ${tb.batch.fn} 2`
      ])
      assert.deepStrictEqual(sent[1].slice(3, 5), ["k1", "k4"])
      assert.deepStrictEqual(sent[1].slice(-4), ["0", "1", "5", "2"])
      assert.deepStrictEqual(sent[2].slice(3, 5), ["k2", "k5"])
      // one batch command for every policy: one function runs them all, and
      // so does the one EVAL script (it carries every compiled module)
      assert.deepStrictEqual(sent[3].slice(3, 5), ["k3", "k6"])
      assert.strictEqual(encoded(both).batch, tb.batch)
    }))

  it.effect("a key whose later call would take another script in the same round waits for the next round", () =>
    Effect.gen(function*() {
      const { redis, sent } = yield* recordingRedis
      const store = yield* Effect.map(RedisStore.make({ prefix: "" }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, redis)
      )
      yield* Effect.forEach(
        [["busy", take], ["k", peek], ["k", take], ["k", peek]] as const,
        ([key, ops]) => store.apply(key, tokenBucket, ops),
        { concurrency: "unbounded", discard: true }
      )
      assert.deepStrictEqual(commands(sent), [
        `FCALL ${tb.lean!.fn} 1`,
        // k's Peek goes, its Take (lean) would pass it in another command: it and all after it wait
        `FCALL ${tb.batch.fn} 1`,
        `FCALL ${tb.lean!.fn} 1`,
        `FCALL ${tb.batch.fn} 1`
      ])
    }))

  it.effect("maxBatchKeys splits a round's keys into commands of at most that many", () =>
    Effect.gen(function*() {
      const { redis, sent } = yield* recordingRedis
      const store = yield* Effect.map(RedisStore.make({ prefix: "", maxBatchKeys: 3, maxInFlight: 1 }), Engine.engineOf)
        .pipe(
          Effect.provideService(Redis.Redis, redis)
        )
      yield* Effect.forEach(
        Array.from({ length: 9 }, (_, i) => `k${i}`),
        (key) => store.apply(key, tokenBucket, take),
        {
          concurrency: "unbounded",
          discard: true
        }
      )
      // 8 waiting: 3 + 3 + 2, the most that fit (3 of 8 now, then 3 of 5)
      assert.deepStrictEqual(sent.map((s) => s[2]), ["1", "3", "3", "2"])
    }))

  it.effect("two commands out by default; what waits is shared out evenly between the commands it needs", () =>
    Effect.gen(function*() {
      const { redis, sent } = yield* recordingRedis
      const store = yield* Effect.map(RedisStore.make({ prefix: "" }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, redis)
      )
      yield* Effect.forEach(
        Array.from({ length: 100 }, (_, i) => `k${i}`),
        (key) => store.apply(key, tokenBucket, take),
        { concurrency: "unbounded", discard: true }
      )
      // the first two go out at once; the other 98 need two commands of at
      // most 64 keys: 49 and 49 (not 64 and 34), one in each slot as it frees
      assert.deepStrictEqual(sent.map((s) => s[2]), ["1", "1", "49", "49"])
      // every key once, in call order
      assert.deepStrictEqual(
        sent.flatMap((s) => s.slice(3, 3 + Number(s[2]))),
        Array.from({ length: 100 }, (_, i) => `k${i}`)
      )
    }))

  it.effect("a round's commands fall back one by one, each with its own script", () =>
    Effect.gen(function*() {
      const { failNext, redis, sent } = yield* recordingRedis
      const store = yield* Effect.map(RedisStore.make({ prefix: "" }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, redis)
      )
      const first = yield* store.apply("first", tokenBucket, take).pipe(Effect.forkChild({ startImmediately: true }))
      failNext("FCALL", "ERR unknown command 'FCALL'")
      failNext("FCALL", "ERR unknown command 'FCALL'")
      const later = yield* Effect.forEach(
        [["a", tokenBucket], ["b", gcra]] as const,
        ([key, policy]) => store.apply(key, policy, peek).pipe(Effect.forkChild({ startImmediately: true }))
      )
      yield* Fiber.join(first)
      for (const reply of yield* Fiber.joinAll(later)) assert.isTrue(reply[0].allowed)
      assert.deepStrictEqual(commands(sent).slice(1), [
        `FCALL ${tb.batch.fn} 1`,
        `FCALL ${tb.batch.fn} 1`,
        `EVALSHA ${tb.batch.script.sha} 1`,
        `EVALSHA ${encoded(gcra).batch.script.sha} 1`
      ])
    }))

  it.effect("without Functions (FCALL unknown): EVALSHA from then on, the same scripts as EVAL scripts", () =>
    Effect.gen(function*() {
      const { failNext, redis, sent } = yield* recordingRedis
      failNext("FCALL", "ERR unknown command 'FCALL', with args beginning with: 'tollgate'")
      const store = yield* Effect.map(RedisStore.make({ prefix: "" }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, redis)
      )
      const [reply] = yield* store.apply("a", tokenBucket, take)
      assert.isTrue(reply.allowed)
      yield* store.apply("a", tokenBucket, peek)
      assert.deepStrictEqual(commands(sent), [
        `FCALL ${tb.lean!.fn} 1`,
        `EVALSHA ${tb.lean!.script.sha} 1`,
        `EVALSHA ${tb.batch.script.sha} 1`
      ])
    }))

  it.effect("a library not loaded yet is loaded, and a script not loaded yet too (then the call is sent again)", () =>
    Effect.gen(function*() {
      const { failNext, redis, sent } = yield* recordingRedis
      failNext("FCALL", "ERR Function not found")
      const store = yield* Effect.map(RedisStore.make({ prefix: "" }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, redis)
      )
      assert.isTrue((yield* store.apply("a", tokenBucket, take))[0].allowed)
      assert.deepStrictEqual(sent.map((s) => s.slice(0, 2).join(" ")), [
        `FCALL ${tb.lean!.fn}`,
        "FUNCTION LOAD",
        `FCALL ${tb.lean!.fn}`
      ])
      assert.strictEqual(sent[1][2], Scripts.library.lua)
      assert.isTrue(Scripts.library.lua.startsWith(`#!lua name=${Scripts.library.name}\n`))

      const evalsha = yield* recordingRedis
      evalsha.failNext("EVALSHA", "NOSCRIPT No matching script. Please use EVAL.")
      const scripted = yield* Effect.map(RedisStore.make({ prefix: "", functions: false }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, evalsha.redis)
      )
      assert.isTrue((yield* scripted.apply("a", tokenBucket, take))[0].allowed)
      assert.deepStrictEqual(evalsha.sent.map((s) => s.slice(0, 2).join(" ")), [
        `EVALSHA ${tb.lean!.script.sha}`,
        "SCRIPT LOAD",
        `EVALSHA ${tb.lean!.script.sha}`
      ])
      assert.strictEqual(evalsha.sent[1][2], tb.lean!.script.lua)
    }))

  it.effect("a library another process loaded meanwhile is used as it is; a refused FUNCTION LOAD means EVALSHA", () =>
    Effect.gen(function*() {
      const loaded = yield* recordingRedis
      loaded.failNext("FCALL", "ERR Function not found")
      loaded.failNext("FUNCTION", `ERR Library '${Scripts.library.name}' already exists`)
      const store = yield* Effect.map(RedisStore.make({ prefix: "" }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, loaded.redis)
      )
      assert.isTrue((yield* store.apply("a", tokenBucket, take))[0].allowed)
      assert.deepStrictEqual(commands(loaded.sent).map((c) => c.split(" ").slice(0, 2).join(" ")), [
        `FCALL ${tb.lean!.fn}`,
        "FUNCTION LOAD",
        `FCALL ${tb.lean!.fn}`
      ])

      const refused = yield* recordingRedis
      refused.failNext("FCALL", "ERR Function not found")
      refused.failNext("FUNCTION", "NOPERM this user has no permissions to run the 'function|load' command")
      const other = yield* Effect.map(RedisStore.make({ prefix: "" }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, refused.redis)
      )
      assert.isTrue((yield* other.apply("a", tokenBucket, take))[0].allowed)
      yield* other.apply("b", tokenBucket, take)
      assert.deepStrictEqual(refused.sent.map((s) => s.slice(0, 2).join(" ")), [
        `FCALL ${tb.lean!.fn}`,
        "FUNCTION LOAD",
        `EVALSHA ${tb.lean!.script.sha}`,
        `EVALSHA ${tb.lean!.script.sha}`
      ])
    }))

  it.effect("any other error fails the call with StoreUnavailable, and the next call is sent as usual", () =>
    Effect.gen(function*() {
      const { failNext, redis, sent } = yield* recordingRedis
      failNext("FCALL", "OOM command not allowed when used memory > 'maxmemory'")
      const store = yield* Effect.map(RedisStore.make({ prefix: "" }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, redis)
      )
      const error = yield* Effect.flip(store.apply("a", tokenBucket, take))
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.include(error.reason, "OOM command not allowed")
      assert.isTrue((yield* store.apply("a", tokenBucket, take))[0].allowed)
      assert.deepStrictEqual(commands(sent), [`FCALL ${tb.lean!.fn} 1`, `FCALL ${tb.lean!.fn} 1`])
    }))

  it.effect("a caller interrupted while its call waits for a round: the call is never sent", () =>
    Effect.gen(function*() {
      const { redis, sent } = yield* recordingRedis
      const store = yield* Effect.map(RedisStore.make({ prefix: "", maxInFlight: 1 }), Engine.engineOf).pipe(
        Effect.provideService(Redis.Redis, redis)
      )
      const first = yield* store.apply("first", tokenBucket, take).pipe(Effect.forkChild({ startImmediately: true }))
      const waiting = yield* store.apply("gone", tokenBucket, take).pipe(Effect.forkChild({ startImmediately: true }))
      yield* Fiber.interrupt(waiting)
      yield* Fiber.join(first)
      yield* store.apply("after", tokenBucket, take)
      assert.deepStrictEqual(sent.map((s) => s[3]), ["first", "after"])
    }))
})
