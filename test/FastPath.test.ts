/**
 * The fast path is the actor serving a request at once: the same random
 * workloads, run with the fast path on and off, get identical decisions; with
 * the state in a store, so does the caller-side store path (on and off).
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { MemoryStore, Policy, RateLimiter, Store } from "../src/index.ts"

type Op =
  | { readonly _tag: "acquire"; readonly key: number; readonly cost: number }
  | { readonly _tag: "consume"; readonly key: number; readonly cost: number }
  | { readonly _tag: "peek"; readonly key: number }
  | { readonly _tag: "wait"; readonly key: number; readonly cost: number; readonly maxWait: number }
  | { readonly _tag: "interrupt"; readonly index: number }
  | { readonly _tag: "burst"; readonly key: number; readonly count: number }
  | { readonly _tag: "reset"; readonly key: number }
  | { readonly _tag: "advance"; readonly millis: number }

const key = fc.integer({ min: 0, max: 2 })
const cost = fc.integer({ min: 1, max: 4 })
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ _tag: fc.constant("acquire" as const), key, cost }) },
  { weight: 3, arbitrary: fc.record({ _tag: fc.constant("consume" as const), key, cost }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("peek" as const), key }) },
  {
    weight: 3,
    arbitrary: fc.record({ _tag: fc.constant("wait" as const), key, cost, maxWait: fc.integer({ min: 0, max: 5000 }) })
  },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("interrupt" as const), index: fc.nat() }) },
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

const policies = [
  Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }),
  Policy.tokenBucket({ capacity: 8, refill: { tokens: 3, per: "2 seconds" }, initialTokens: 2 }),
  Policy.tokenBucket({ capacity: 4, refill: { tokens: 0.5, per: "1 second" } })
]

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 10 }))

// Runs the ops against one limiter and returns a transcript of every outcome.
const transcriptFor = (
  ops: ReadonlyArray<Op>,
  mode: "fast" | "actor" | "store" | "store-direct",
  idleTimeout: Duration.Input = "3 seconds"
) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(0)
    const store = mode === "store" || mode === "store-direct" ? yield* MemoryStore.make : undefined
    const limiter = yield* RateLimiter.make({
      policy: (k) => policies[Number(k.slice(1))],
      fastPath: mode === "fast" || mode === "store-direct",
      idleTimeout
    }).pipe((make) => store === undefined ? make : Effect.provideService(make, Store.CurrentStore, store))
    const out: Array<string> = []
    const waiters: Array<Fiber.Fiber<string>> = []
    const describe = (
      d: { allowed: boolean; remaining: number; retryAfter: Duration.Duration; resetAfter: Duration.Duration }
    ) => `${d.allowed}/${d.remaining}/${Duration.toMillis(d.retryAfter)}/${Duration.toMillis(d.resetAfter)}`
    const clock = yield* Clock.Clock
    for (const o of ops) {
      switch (o._tag) {
        case "acquire":
          out.push(String(yield* limiter.acquire(`k${o.key}`, { cost: o.cost })))
          break
        case "consume":
          out.push(describe(yield* limiter.consume(`k${o.key}`, { cost: o.cost })))
          break
        case "peek":
          out.push(describe(yield* limiter.peek(`k${o.key}`)))
          break
        case "reset":
          yield* limiter.reset(`k${o.key}`)
          break
        case "wait": {
          const fiber = yield* limiter.wait(`k${o.key}`, { cost: o.cost, maxWait: o.maxWait }).pipe(
            Effect.exit,
            Effect.map((exit) =>
              Exit.isSuccess(exit)
                ? `admitted@${clock.currentTimeMillisUnsafe()}`
                : JSON.stringify(exit.cause.reasons.map((r) => r._tag === "Fail" ? r.error._tag : r._tag))
            ),
            Effect.forkChild({ startImmediately: true })
          )
          waiters.push(fiber)
          yield* settle
          break
        }
        case "interrupt":
          if (waiters.length > 0) yield* Fiber.interrupt(waiters[o.index % waiters.length])
          yield* settle
          break
        case "burst": {
          const results = yield* Effect.forEach(
            Array.from({ length: o.count }),
            () => limiter.acquire(`k${o.key}`),
            { concurrency: "unbounded" }
          )
          out.push(results.map((b) => b ? "1" : "0").join(""))
          break
        }
        case "advance":
          yield* TestClock.adjust(o.millis)
          yield* settle
          break
      }
    }
    yield* TestClock.adjust("1 minute")
    for (const fiber of waiters) {
      const exit = yield* Fiber.await(fiber)
      out.push(Exit.isSuccess(exit) ? exit.value : "interrupted")
    }
    const stats = yield* limiter.stats
    out.push(`allowed=${stats.allowed} denied=${stats.denied}`)
    return out
  })

describe("fast path and store", () => {
  it.effect("give decisions identical to the actor's on random workloads", () =>
    Effect.gen(function*() {
      const samples = fc.sample(fc.array(op, { minLength: 1, maxLength: 60 }), { numRuns: 150, seed: 42 })
      for (const ops of samples) {
        const fast = yield* Effect.scoped(transcriptFor(ops, "fast"))
        const actor = yield* Effect.scoped(transcriptFor(ops, "actor"))
        assert.deepStrictEqual(fast, actor, JSON.stringify(ops))
        // the same decisions with the state in a store behind the actor (a
        // store forgets keys on its own schedule, so compare with no reaping:
        // forgetting a key that starts below capacity is stricter, never looser)
        const kept = yield* Effect.scoped(transcriptFor(ops, "actor", "365 days"))
        const stored = yield* Effect.scoped(transcriptFor(ops, "store", "365 days"))
        assert.deepStrictEqual(stored.slice(0, -1), kept.slice(0, -1), JSON.stringify(ops))
        // and with idle keys decided by the caller's own store call
        const direct = yield* Effect.scoped(transcriptFor(ops, "store-direct", "365 days"))
        assert.deepStrictEqual(direct, stored, JSON.stringify(ops))
      }
    }))
})
