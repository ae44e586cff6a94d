/**
 * Traces: with a tracer installed, each public operation of the limiter is
 * a span with the limiter's name, the key's policy, the cost and the
 * decision (the key only when `traceKeys` is set). The spans are collected
 * through Effect's own `Tracer`. (Without a tracer installed no span is made;
 * that is a matter of cost, measured by bench:quick.)
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Tracer } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../src/index.ts"

// A tracer that keeps every span it makes.
const recording = () => {
  const spans: Array<Tracer.Span> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = Tracer.nativeTracer.span(options)
      spans.push(span)
      return span
    }
  })
  return { spans, tracer } as const
}

const policy = Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } })

const attributes = (span: Tracer.Span) => Object.fromEntries(span.attributes)

describe("traces", () => {
  it.effect("each operation is a span with the policy, the cost and the decision; no key by default", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recording()
      yield* Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ policy, name: "api" })
        assert.isTrue(yield* limiter.acquire("user:42", { cost: 2 }))
        const denied = yield* limiter.consume("user:42")
        assert.isFalse(denied.allowed)
        const exceeded = yield* Effect.flip(limiter.wait("user:42", { maxWait: "100 millis" }))
        assert.strictEqual(exceeded._tag, "RateLimitExceeded")
        yield* TestClock.adjust("2 seconds")
        yield* limiter.limit("user:42")(Effect.void)
        yield* limiter.acquire(["a", "b"])
      }).pipe(Effect.withTracer(tracer))
      const names = spans.map((s) => s.name)
      assert.deepStrictEqual(names, [
        "RateLimiter.acquire",
        "RateLimiter.consume",
        "RateLimiter.wait",
        "RateLimiter.limit",
        "RateLimiter.acquire"
      ])
      assert.deepInclude(attributes(spans[0]), {
        "tollgate.limiter": "api",
        "tollgate.policy": "token-bucket",
        "tollgate.cost": 2,
        "tollgate.allowed": true
      })
      assert.deepInclude(attributes(spans[1]), {
        "tollgate.allowed": false,
        "tollgate.retry_after_ms": 1000
      })
      assert.deepInclude(attributes(spans[2]), { "tollgate.allowed": false, "tollgate.retry_after_ms": 1000 })
      assert.deepInclude(attributes(spans[4]), { "tollgate.policy": "several keys", "tollgate.allowed": true })
      for (const span of spans) {
        assert.notProperty(attributes(span), "tollgate.key", "keys are left out unless asked for")
        assert.strictEqual(span.status._tag, "Ended")
      }
    }))

  it.effect("traceKeys adds the key", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recording()
      yield* Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ policy, traceKeys: true })
        yield* limiter.acquire("user:42")
      }).pipe(Effect.withTracer(tracer))
      assert.strictEqual(attributes(spans[0])["tollgate.key"], "user:42")
    }))
})
