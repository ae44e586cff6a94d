/**
 * tollgate's RateLimiterStore side by side with Effect's layerStoreMemory:
 * the same random calls of Effect's RateLimiter under one TestClock give the
 * same results (delays, remaining, resetAfter, retryAfter, failures), for
 * fixed-window and token-bucket, delay and fail, and the adaptive calls; and
 * idle keys are reaped without changing a decision.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Layer } from "effect"
import { RateLimiter } from "effect/persistence"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { RateLimiterStore } from "../../src/persistence/index.ts"

// Each key keeps one configuration, as an app's call sites do.
const keys = [
  { key: "fw-a", algorithm: "fixed-window", limit: 5, window: "1 second" },
  { key: "fw-b", algorithm: "fixed-window", limit: 3, window: "2500 millis" },
  { key: "tb-a", algorithm: "token-bucket", limit: 4, window: "1 second" },
  { key: "tb-b", algorithm: "token-bucket", limit: 7, window: "3 seconds" },
  { key: "shared", algorithm: "token-bucket", limit: 2, window: "700 millis" }
] as const

type Step =
  | { readonly _tag: "consume"; readonly key: number; readonly tokens: number; readonly delay: boolean }
  | { readonly _tag: "advance"; readonly millis: number }
  | { readonly _tag: "adaptiveConsume"; readonly key: number; readonly tokens: number }
  | {
    readonly _tag: "feedback"
    readonly key: number
    readonly tokens: number
    readonly status: number
    readonly retryAfter: number | undefined
    readonly epoch: "last" | number
  }

const key = fc.integer({ min: 0, max: keys.length - 1 })
const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      _tag: fc.constant("consume" as const),
      key,
      tokens: fc.integer({ min: 1, max: 8 }),
      delay: fc.boolean()
    })
  },
  {
    weight: 3,
    arbitrary: fc.record({
      _tag: fc.constant("advance" as const),
      millis: fc.oneof(fc.integer({ min: 0, max: 1500 }), fc.constant(0), fc.integer({ min: 60_000, max: 200_000 }))
    })
  },
  {
    weight: 2,
    arbitrary: fc.record({
      _tag: fc.constant("adaptiveConsume" as const),
      key,
      tokens: fc.integer({ min: 1, max: 3 })
    })
  },
  {
    weight: 2,
    arbitrary: fc.record({
      _tag: fc.constant("feedback" as const),
      key,
      tokens: fc.integer({ min: 1, max: 3 }),
      status: fc.constantFrom(200, 429, 429, 503),
      retryAfter: fc.option(fc.integer({ min: 0, max: 5000 }), { nil: undefined }),
      epoch: fc.oneof(fc.constant("last" as const), fc.integer({ min: 0, max: 3 }))
    })
  }
)

const ms = (d: Duration.Duration) => Duration.toMillis(d)

// What one limiter answers to the steps: a transcript to compare.
const transcript = (steps: ReadonlyArray<Step>, store: Layer.Layer<RateLimiter.RateLimiterStore, unknown>) =>
  Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(RateLimiter.layer.pipe(Layer.provideMerge(store)))
    const limiter = context.mapUnsafe.get(RateLimiter.RateLimiter.key) as RateLimiter.RateLimiter
    const storeService = context.mapUnsafe.get(RateLimiter.RateLimiterStore.key) as RateLimiter.RateLimiterStore[
      "Service"
    ]
    const epochs = new Map<string, number>()
    const out: Array<unknown> = []
    for (const s of steps) {
      switch (s._tag) {
        case "advance":
          yield* TestClock.adjust(s.millis)
          break
        case "consume": {
          const k = keys[s.key]
          const exit = yield* Effect.exit(limiter.consume({
            key: k.key,
            algorithm: k.algorithm,
            limit: k.limit,
            window: k.window,
            tokens: s.tokens,
            onExceeded: s.delay ? "delay" : "fail"
          }))
          if (Exit.isSuccess(exit)) {
            const r = exit.value
            out.push(["ok", ms(r.delay), r.limit, r.remaining, ms(r.resetAfter)])
          } else {
            const error = exit.cause.reasons[0]
            const e = error !== undefined && error._tag === "Fail" ? error.error : undefined
            const reason = e?.reason
            out.push(
              reason !== undefined && reason._tag === "RateLimitExceeded"
                ? ["exceeded", ms(reason.retryAfter), reason.limit, reason.remaining]
                : ["error", String(exit.cause)]
            )
          }
          break
        }
        case "adaptiveConsume": {
          const k = keys[s.key]
          const r = yield* storeService.adaptiveConsume({
            key: k.key,
            tokens: s.tokens,
            fallbackLimit: k.limit,
            fallbackWindow: Duration.fromInputUnsafe(k.window)
          })
          epochs.set(k.key, r.epoch)
          out.push(["adaptive", ms(r.delay), r.epoch, r.phase])
          break
        }
        case "feedback": {
          const k = keys[s.key]
          yield* storeService.adaptiveFeedback({
            key: k.key,
            epoch: s.epoch === "last" ? epochs.get(k.key) ?? 0 : s.epoch,
            tokens: s.tokens,
            status: s.status,
            retryAfter: s.retryAfter === undefined ? undefined : Duration.millis(s.retryAfter)
          })
          break
        }
      }
    }
    return out
  }))

describe("tollgate/persistence RateLimiterStore", () => {
  for (const idleTimeout of ["1 minute", "1 second"] as const) {
    it.effect(`decides as Effect's layerStoreMemory on random calls (idleTimeout ${idleTimeout})`, () =>
      Effect.gen(function*() {
        const samples = fc.sample(fc.array(step, { minLength: 1, maxLength: 60 }), { numRuns: 200, seed: 5 })
        for (const steps of samples) {
          const effect = yield* transcript(steps, RateLimiter.layerStoreMemory)
          const tollgate = yield* transcript(steps, RateLimiterStore.layerWith({ idleTimeout }))
          assert.deepStrictEqual(tollgate, effect, JSON.stringify(steps))
        }
      }))
  }

  it.effect("fixed-window, fail: the limit, then RateLimitExceeded with the counter's retryAfter", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.RateLimiter
      const options = { key: "k", limit: 2, window: "1 second" } as const
      assert.strictEqual((yield* limiter.consume(options)).remaining, 1)
      assert.strictEqual((yield* limiter.consume(options)).remaining, 0)
      const e = yield* Effect.flip(limiter.consume(options))
      assert.strictEqual(e.reason._tag, "RateLimitExceeded")
      assert.strictEqual(Duration.toMillis((e.reason as RateLimiter.RateLimitExceeded).retryAfter), 1000)
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* limiter.consume(options)).remaining, 1)
    }).pipe(Effect.provide(RateLimiter.layer.pipe(Layer.provide(RateLimiterStore.layer())))))

  it.effect("token-bucket, delay: each call past the bucket is spaced by the refill interval", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.RateLimiter
      const options = {
        key: "k",
        limit: 2,
        window: "1 second",
        algorithm: "token-bucket",
        onExceeded: "delay"
      } as const
      const delays: Array<number> = []
      for (let i = 0; i < 5; i++) delays.push(Duration.toMillis((yield* limiter.consume(options)).delay))
      assert.deepStrictEqual(delays, [0, 0, 500, 1000, 1500])
    }).pipe(Effect.provide(RateLimiter.layer.pipe(Layer.provide(RateLimiterStore.layer())))))

  it.effect("bad options name the field", () =>
    Effect.gen(function*() {
      for (
        const [options, field] of [
          [{ idleTimeout: "soon" }, "idleTimeout"],
          [{ idleTimeout: 0 }, "idleTimeout"],
          [{ maxBuckets: 0 }, "maxBuckets"],
          [{ mailboxCapacity: 1.5 }, "mailboxCapacity"]
        ] as const
      ) {
        const e = yield* Effect.flip(RateLimiterStore.make(options as RateLimiterStore.Options))
        assert.strictEqual(e.field, field)
      }
    }))
})
