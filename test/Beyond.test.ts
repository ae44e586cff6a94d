/**
 * The operations beyond a plain decision (docs/algorithms.md, "Beyond the
 * limit"), through the limiter's API: in-process (the caller-side fast path
 * on and off) and on a shared store (MemoryStore; test/redis/Beyond.test.ts
 * runs the same on a real Redis).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { MemoryStore, Policy, RateLimiter, Store } from "../src/index.ts"
import { beyond, focusedWorkload, type Step, transcript, workload, workloadPolicies } from "./beyond.ts"

const modes: ReadonlyArray<
  [string, (options: RateLimiter.Options) => Effect.Effect<RateLimiter["Service"], unknown, any>]
> = [
  ["in-process, fast path", (options) => RateLimiter.make({ fastPath: true, ...options })],
  ["in-process, actor only", (options) => RateLimiter.make({ fastPath: false, ...options })],
  [
    "MemoryStore",
    (options) =>
      Effect.flatMap(
        MemoryStore.make,
        (store) => RateLimiter.make(options).pipe(Effect.provideService(Store.CurrentStore, store))
      )
  ]
]

for (const [name, make] of modes) {
  describe(`beyond the limit: ${name}`, () => {
    beyond(it, make, { store: name === "MemoryStore" })
  })
}

describe("beyond the limit: random workloads", () => {
  // The three share each algorithm's arithmetic (checked against independent
  // models in test/algorithm); what they do not share is the path: the
  // caller's fast path, the actor's batches and line, the store's ops. The
  // Redis runs (test/redis/Beyond.test.ts) compare with the scripts.
  const options: RateLimiter.Options = {
    policy: (k) => workloadPolicies[Number(k.slice(1))],
    idleTimeout: "365 days"
  }
  const run = (steps: ReadonlyArray<Step>, make: Effect.Effect<RateLimiter["Service"], unknown, any>) =>
    Effect.scoped(Effect.gen(function*() {
      yield* TestClock.setTime(1_760_000_000_000)
      return yield* transcript(yield* make, steps, (ms) => TestClock.adjust(ms))
    })).pipe(Effect.provide(TestClock.layer()))
  const compare = (samples: ReadonlyArray<ReadonlyArray<Step>>) =>
    Effect.gen(function*() {
      const outcomes = new Set<string>()
      for (const steps of samples) {
        const fast = yield* run(steps, RateLimiter.make({ ...options, fastPath: true }))
        const actor = yield* run(steps, RateLimiter.make({ ...options, fastPath: false }))
        const stored = yield* run(
          steps,
          Effect.flatMap(
            MemoryStore.make,
            (store) => RateLimiter.make(options).pipe(Effect.provideService(Store.CurrentStore, store))
          )
        )
        assert.deepStrictEqual(actor, fast, JSON.stringify(steps))
        assert.deepStrictEqual(stored, fast, JSON.stringify(steps))
        for (const line of fast) outcomes.add(line.split("/")[0])
      }
      // the runs reached admissions, denials and typed failures alike
      assert.includeMembers([...outcomes], ["true", "false"])
      assert.isTrue([...outcomes].some((o) => o !== "true" && o !== "false"), [...outcomes].join(", "))
    })

  it.effect("in-process (both paths) and on MemoryStore, every operation decides the same", () =>
    compare(fc.sample(workload, { numRuns: Number(process.env.BEYOND_RUNS ?? 150) })))

  it.effect("long histories of one or two keys decide the same on every path", () =>
    compare(
      fc.sample(focusedWorkload(Number(process.env.BEYOND_LENGTH ?? 120)), {
        numRuns: Math.ceil(Number(process.env.BEYOND_RUNS ?? 150) / 3)
      })
    ))
})

describe("beyond the limit: in-process only", () => {
  it.effect("a key deleted by the actor has no state: its next use starts from the initial state then", () =>
    Effect.gen(function*() {
      // Found by the random workloads: the actor wrote the initial state at the
      // delete, which then refilled, while the caller's fiber and the stores
      // forget the key. Both paths must agree.
      for (const fastPath of [true, false]) {
        const limiter = yield* RateLimiter.make({
          fastPath,
          policy: Policy.tokenBucket({ capacity: 4, refill: { tokens: 2, per: "1500 millis" }, initialTokens: 1 })
        })
        assert.isTrue(yield* limiter.acquire("k"))
        assert.isTrue(yield* limiter.delete("k"))
        yield* TestClock.adjust("10 seconds")
        const added = yield* limiter.add("k", 5, { overLimit: true })
        assert.strictEqual(added.remaining, 6, `fastPath: ${fastPath}`)
      }
    }))

  it.effect("get answers none for a settled key, as for one never seen", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } })
      })
      assert.isTrue(yield* limiter.acquire("k"))
      assert.isTrue(Option.isSome(yield* limiter.get("k")))
      yield* TestClock.adjust("1 second")
      assert.isTrue(Option.isNone(yield* limiter.get("k")))
      assert.strictEqual(Duration.toMillis((yield* limiter.peek("k")).resetAfter), 0)
    }))
})
