/**
 * The operations beyond a plain decision (test/beyond.ts) on a real Redis:
 * the same suite as in-process and on MemoryStore, through the scripts (the
 * lean entry point, which leaves a blocked key to the batch one, and the
 * batch entry point), as a Functions library and as EVAL scripts.
 */
import { assert } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { RateLimiter } from "../../src/RateLimiter.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"
import * as Store from "../../src/Store.ts"
import { beyond, focusedWorkload, type Step, transcript, workload, workloadPolicies } from "../beyond.ts"
import { cleanup, describeRedis, uniquePrefix } from "./redis.ts"

for (const functions of [true, false]) {
  describeRedis(`beyond the limit on Redis, ${functions ? "FCALL" : "EVALSHA"}`, (it) => {
    beyond(
      // the limiter's clock is a TestClock; the store reads it (clock: "client")
      { effect: (name, self) => it.effect(name, () => Effect.provide(self(), TestClock.layer())) },
      (options) =>
        Effect.gen(function*() {
          const prefix = uniquePrefix("beyond")
          yield* Effect.addFinalizer(() => Effect.ignore(cleanup(prefix)))
          const store = yield* RedisStore.make({ prefix, clock: "client", functions, keepSettled: Duration.infinity })
          return yield* RateLimiter.make(options).pipe(Effect.provideService(Store.CurrentStore, store))
        }),
      { store: true }
    )

    it.effect("random workloads of every operation decide as in-process", () =>
      Effect.gen(function*() {
        const options: RateLimiter.Options = {
          policy: (k) => workloadPolicies[Number(k.slice(1))],
          idleTimeout: "365 days"
        }
        const prefix = uniquePrefix("beyond-model")
        let n = 0
        // the store reads the run's own clock (clock: "client")
        const run = (steps: ReadonlyArray<Step>, shared: boolean) =>
          Effect.scoped(Effect.gen(function*() {
            yield* TestClock.setTime(1_760_000_000_000)
            const store = shared
              ? yield* RedisStore.make({
                prefix: `${prefix}${n++}:`,
                clock: "client",
                functions,
                keepSettled: Duration.infinity
              })
              : undefined
            const make = RateLimiter.make(options)
            const limiter = yield* (store === undefined ? make : Effect.provideService(make, Store.CurrentStore, store))
            return yield* transcript(limiter, steps, (ms) => TestClock.adjust(ms))
          })).pipe(Effect.provide(TestClock.layer()))
        const runs = Number(process.env.BEYOND_RUNS ?? 40)
        // short runs over every key, and long histories of one or two keys
        const samples = [
          ...fc.sample(workload, { numRuns: runs }),
          ...fc.sample(focusedWorkload(Number(process.env.BEYOND_LENGTH ?? 120)), { numRuns: Math.ceil(runs / 4) })
        ]
        for (const steps of samples) {
          const local = yield* run(steps, false)
          assert.deepStrictEqual(yield* run(steps, true), local, JSON.stringify(steps))
        }
        yield* cleanup(prefix)
      }))
  })
}
