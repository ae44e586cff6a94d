/**
 * tollgate/persistence is a drop-in for Effect's `layerStoreMemory` for any
 * program, not only for effects built and run at once: each program below
 * runs on both stores under one TestClock and must give the same answers.
 * Effect's `RateLimiter.consume` calls the store while it builds its effect,
 * so a store that acted when called (not when run) would take once and
 * replay that answer, take for effects never run, and decide at build time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Layer, Ref } from "effect"
import { HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import { RateLimiter } from "effect/persistence"
import { TestClock } from "effect/testing"
import { RateLimiterStore } from "../../src/persistence/index.ts"

const stores = {
  effect: RateLimiter.layerStoreMemory,
  tollgate: RateLimiterStore.layer()
} as const

// Runs `program` on each store, each from a clock at 0, and returns both answers.
const sideBySide = <A, E>(program: Effect.Effect<A, E, RateLimiter.RateLimiter>) =>
  Effect.gen(function*() {
    const out: Record<string, Exit.Exit<A, E>> = {}
    for (const [name, store] of Object.entries(stores)) {
      yield* TestClock.setTime(0)
      out[name] = yield* Effect.exit(
        Effect.scoped(program.pipe(Effect.provide(RateLimiter.layer.pipe(Layer.provide(store)))))
      )
    }
    return out as { readonly effect: Exit.Exit<A, E>; readonly tollgate: Exit.Exit<A, E> }
  })

const fw = { key: "k", limit: 2, window: "1 minute" } as const

const remaining = (exit: Exit.Exit<RateLimiter.ConsumeResult, RateLimiter.RateLimiterError>) => {
  if (Exit.isSuccess(exit)) return exit.value.remaining
  const reason = exit.cause.reasons[0]
  return reason?._tag === "Fail" ? reason.error.reason._tag : String(exit.cause)
}

// Lets every forked fiber run as far as it can at the current instant.
const settle = Effect.repeat(Effect.yieldNow, { times: 20 })

describe("tollgate/persistence: an effect acts when it runs, not when it is built", () => {
  it.effect("consume built once and repeated takes each time", () =>
    Effect.gen(function*() {
      const { effect, tollgate } = yield* sideBySide(Effect.gen(function*() {
        const limiter = yield* RateLimiter.RateLimiter
        const consume = limiter.consume({ ...fw, limit: 10 })
        const seen: Array<number> = []
        yield* Effect.repeat(Effect.tap(consume, (r) => Effect.sync(() => seen.push(r.remaining))), { times: 4 })
        return seen
      }))
      assert.deepStrictEqual(tollgate, effect)
      assert.deepStrictEqual(Exit.isSuccess(tollgate) ? tollgate.value : undefined, [9, 8, 7, 6, 5])
    }))

  it.effect("the same consume value yielded twice takes twice", () =>
    Effect.gen(function*() {
      const { effect, tollgate } = yield* sideBySide(Effect.gen(function*() {
        const limiter = yield* RateLimiter.RateLimiter
        const consume = limiter.consume({ ...fw, algorithm: "token-bucket" })
        const first = yield* Effect.exit(consume)
        const second = yield* Effect.exit(consume)
        const third = yield* Effect.exit(consume)
        return [remaining(first), remaining(second), remaining(third)]
      }))
      assert.deepStrictEqual(tollgate, effect)
      assert.deepStrictEqual(Exit.isSuccess(tollgate) ? tollgate.value : undefined, [1, 0, "RateLimitExceeded"])
    }))

  it.effect("makeWithRateLimiter run 5 times at limit 2 runs the effect twice", () =>
    Effect.gen(function*() {
      const { effect, tollgate } = yield* sideBySide(Effect.gen(function*() {
        const withLimiter = yield* RateLimiter.makeWithRateLimiter
        const runs = yield* Ref.make(0)
        const limited = withLimiter(fw)(Ref.update(runs, (n) => n + 1))
        for (let i = 0; i < 5; i++) yield* Effect.ignore(limited)
        return yield* Ref.get(runs)
      }))
      assert.deepStrictEqual(tollgate, effect)
      assert.deepStrictEqual(tollgate, Exit.succeed(2))
    }))

  it.effect("a RateLimiter.sleep loop at 2 per minute throttles", () =>
    Effect.gen(function*() {
      const { effect, tollgate } = yield* sideBySide(Effect.gen(function*() {
        const limiter = yield* RateLimiter.RateLimiter
        const done = yield* Ref.make(0)
        const sleep = RateLimiter.sleep(limiter, { key: "loop", limit: 2, window: "1 minute" })
        const fiber = yield* Effect.forkChild(
          Effect.forever(Effect.andThen(sleep, Ref.update(done, (n) => n + 1)))
        )
        const counts: Array<number> = []
        for (let minute = 0; minute < 4; minute++) {
          yield* settle
          counts.push(yield* Ref.get(done))
          yield* TestClock.adjust("1 minute")
        }
        yield* Fiber.interrupt(fiber)
        return counts
      }))
      assert.deepStrictEqual(tollgate, effect)
      // two at once, then two a minute
      assert.deepStrictEqual(tollgate, Exit.succeed([2, 4, 6, 8]))
    }))

  it.effect("effects built and never run take nothing", () =>
    Effect.gen(function*() {
      const { effect, tollgate } = yield* sideBySide(Effect.gen(function*() {
        const limiter = yield* RateLimiter.RateLimiter
        const dropped = [1, 2, 3].map(() => limiter.consume({ ...fw, limit: 5 })) // built, never run
        assert.strictEqual(dropped.length, 3)
        return (yield* limiter.consume({ ...fw, limit: 5 })).remaining
      }))
      assert.deepStrictEqual(tollgate, effect)
      assert.deepStrictEqual(tollgate, Exit.succeed(4))
    }))

  it.effect("an effect built at t=0 and run later is decided when it runs", () =>
    Effect.gen(function*() {
      const { effect, tollgate } = yield* sideBySide(Effect.gen(function*() {
        const limiter = yield* RateLimiter.RateLimiter
        yield* limiter.consume({ ...fw, limit: 1 })
        const later = limiter.consume({ ...fw, limit: 1 }) // built while the window is used up
        yield* TestClock.adjust("2 minutes")
        return remaining(yield* Effect.exit(later))
      }))
      assert.deepStrictEqual(tollgate, effect)
      assert.deepStrictEqual(tollgate, Exit.succeed(0))
    }))

  it.effect("durations count the gap when the clock steps back (a fixed window's retryAfter)", () =>
    Effect.gen(function*() {
      const { effect, tollgate } = yield* sideBySide(Effect.gen(function*() {
        const limiter = yield* RateLimiter.RateLimiter
        yield* TestClock.setTime(100_000)
        yield* limiter.consume({ ...fw, limit: 1 })
        yield* TestClock.setTime(40_000)
        const e = yield* Effect.flip(limiter.consume({ ...fw, limit: 1 }))
        return e.reason._tag === "RateLimitExceeded" ? Duration.toMillis(e.reason.retryAfter) : -1
      }))
      assert.deepStrictEqual(tollgate, effect)
      assert.deepStrictEqual(tollgate, Exit.succeed(120_000))
    }))

  it.effect("HttpClient.withRateLimiter sends at the limiter's pace", () =>
    Effect.gen(function*() {
      const { effect, tollgate } = yield* sideBySide(Effect.gen(function*() {
        const limiter = yield* RateLimiter.RateLimiter
        const sent = yield* Ref.make(0)
        const client = HttpClient.make((request) =>
          Effect.as(
            Ref.update(sent, (n) => n + 1),
            HttpClientResponse.fromWeb(request, new Response("ok", { status: 200 }))
          )
        ).pipe(HttpClient.withRateLimiter({ limiter, key: "api", limit: 2, window: "1 minute" }))
        const get = client.execute(HttpClientRequest.get("http://127.0.0.1/"))
        const fiber = yield* Effect.forkChild(Effect.forEach([1, 2, 3, 4, 5], () => get, { discard: true }))
        const counts: Array<number> = []
        for (let minute = 0; minute < 3; minute++) {
          yield* settle
          counts.push(yield* Ref.get(sent))
          yield* TestClock.adjust("1 minute")
        }
        yield* Fiber.join(fiber)
        return counts
      }))
      assert.deepStrictEqual(tollgate, effect)
      assert.deepStrictEqual(tollgate, Exit.succeed([2, 4, 5]))
    }))

  it.effect("layer() cannot fail, and Effect's error code type-checks against it", () =>
    Effect.gen(function*() {
      // `layer()` is a Layer<RateLimiterStore> like layerStoreMemory: code
      // written for Effect's store compiles unchanged against it.
      const layer: Layer.Layer<RateLimiter.RateLimiterStore> = RateLimiterStore.layer()
      const tag = yield* Effect.gen(function*() {
        const limiter = yield* RateLimiter.RateLimiter
        yield* limiter.consume({ ...fw, limit: 1 })
        return yield* limiter.consume({ ...fw, limit: 1 })
      }).pipe(
        Effect.catch((error) => Effect.succeed(error.reason._tag)),
        Effect.provide(RateLimiter.layer.pipe(Layer.provide(layer)))
      )
      assert.strictEqual(tag, "RateLimitExceeded")
      const bad = yield* Effect.flip(Layer.build(RateLimiterStore.layerWith({ idleTimeout: 0 })))
      assert.strictEqual(bad.field, "idleTimeout")
    }))
})
