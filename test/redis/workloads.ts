/**
 * Workloads the store must run alike wherever Redis is (one server, a Redis
 * Cluster, a primary behind Sentinel): the limiter with its state on Redis
 * decides exactly as the in-process limiter does on random workloads (the
 * same transcript), a hot key is coalesced into few round trips, and calls
 * for many keys made at once (on a cluster, keys of every node) are each
 * applied atomically and in order. Declared once per deployment.
 */
import { assert, expect } from "@effect/vitest"
import { Duration, Effect, Exit, Tracer } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { Kind as OpKind } from "../../src/internal/operation/Op.ts"
import * as Policy from "../../src/Policy.ts"
import { RateLimiter } from "../../src/RateLimiter.ts"
import * as Slot from "../../src/redis/internal/slot.ts"
import * as Store from "../../src/Store.ts"
import { Admin, type Deployment, describeOn, engineOn, storeOn, uniquePrefix } from "./redis.ts"

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
    }).pipe((make) => store === undefined ? make : Effect.provideService(make, Store.CurrentStore, store))
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

// A tracer that keeps the `RedisStore.apply` spans (one per command, with its keys).
const commands = () => {
  const started: Array<Tracer.Span> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = new Tracer.NativeSpan(options)
      if (options.name === "RedisStore.apply") started.push(span)
      return span
    }
  })
  return { tracer, keys: () => started.map((s) => Number(s.attributes.get("tollgate.keys"))) }
}

/** Declares the workloads on a deployment. */
export const workloads = (deployment: Deployment): void =>
  describeOn(deployment, "the limiter on Redis", (it) => {
    it.effect("decides exactly as in-process on random workloads", () =>
      Effect.gen(function*() {
        const prefix = uniquePrefix("limiter")
        const samples = fc.sample(fc.array(op, { minLength: 1, maxLength: 40 }), {
          numRuns: Number(process.env.LIMITER_RUNS ?? 30)
        })
        let n = 0
        for (const ops of samples) {
          const local = yield* Effect.scoped(transcriptFor(ops, undefined))
          const remote = yield* Effect.scoped(Effect.flatMap(
            storeOn(deployment, { prefix: `${prefix}${n++}:`, clock: "client", keepSettled: Duration.infinity }),
            (store) => transcriptFor(ops, store)
          ))
          assert.deepStrictEqual(remote, local, JSON.stringify(ops))
        }
        yield* (yield* Admin).cleanup(prefix)
      }).pipe(Effect.provide(TestClock.layer())))

    it.effect("coalesces a hot key into few round trips and admits exactly the capacity", () =>
      Effect.gen(function*() {
        const prefix = uniquePrefix("hot")
        const store = yield* storeOn(deployment, { prefix })
        const limiter = yield* RateLimiter.make({
          policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 1, per: "1 hour" } }),
          mailboxCapacity: 4096,
          // about coalescing, not the fallback: a busy machine must not time a call out (250 ms by default)
          fallback: { timeout: "10 seconds" }
        }).pipe(Effect.provideService(Store.CurrentStore, store))
        const results = yield* Effect.forEach(Array.from({ length: 2000 }), () => limiter.acquire("hot"), {
          concurrency: "unbounded"
        })
        assert.strictEqual(results.filter(Boolean).length, 100)
        const stats = yield* limiter.stats
        assert.strictEqual(stats.storeOps, 2000)
        expect(stats.storeCalls).toBeLessThanOrEqual(20)
        assert.strictEqual(stats.degraded, 0)
        yield* (yield* Admin).cleanup(prefix)
      }))

    it.effect("calls for many keys at once: each key atomic and in order, keys of one slot in one command", () =>
      Effect.gen(function*() {
        const prefix = uniquePrefix("many")
        const store = yield* engineOn(deployment, { prefix, clock: "client" })
        const policy = Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "1 hour" } }) as Policy.Valid
        const take = (key: string) =>
          Effect.map(store.apply(key, policy, [{ kind: OpKind.Take, cost: 1, queued: 0 }]), ([r]) => r.allowed)
        // 300 keys (on a cluster, of every node), each taken 5 times, all at once
        const keys = Array.from({ length: 300 }, (_, i) => `k${i}`)
        const slots = new Set(keys.map((k) => Slot.slot(prefix + k)))
        expect(slots.size).toBeGreaterThan(200)
        const calls = Array.from({ length: 5 }, () => keys).flat()
        const results = yield* Effect.forEach(calls, take, { concurrency: "unbounded" })
        for (let k = 0; k < keys.length; k++) {
          const mine = results.filter((_, i) => i % keys.length === k)
          assert.deepStrictEqual(mine, [true, true, true, false, false], keys[k])
        }
        // 200 keys with one {hash tag} (one slot, so one node), called at
        // once: they share commands (at most 64 keys in each)
        const traced = commands()
        const tagged = Array.from({ length: 200 }, (_, i) => `{org:a}:user:${i}`)
        const admitted = yield* Effect.withTracer(
          Effect.forEach(tagged, take, { concurrency: "unbounded" }),
          traced.tracer
        )
        assert.isTrue(admitted.every(Boolean))
        // (the callers are answered before their command's span ends)
        yield* Effect.sleep("50 millis")
        const sizes = traced.keys()
        assert.strictEqual(sizes.reduce((a, b) => a + b, 0), 200)
        expect(sizes.length).toBeLessThanOrEqual(10)
        expect(Math.max(...sizes)).toBeLessThanOrEqual(64)
        yield* (yield* Admin).cleanup(prefix)
      }))
  })
