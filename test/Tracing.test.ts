/**
 * Traces: with a tracer installed, each public operation of the limiter is
 * a span with the limiter's name, the key's policy, the cost and the
 * decision (the key only when `traceKeys` is set). The spans are collected
 * through Effect's own `Tracer`. (Without a tracer installed no span is made;
 * that is a matter of cost, measured by bench:quick.)
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Duration, Effect, Exit, Scope, Tracer } from "effect"
import { TestClock } from "effect/testing"
import { Policy, RateLimiter } from "../src/index.ts"
import * as Trace from "../src/internal/Trace.ts"

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

  it.effect("calls over several keys and a permit are spans of their own names, with the call's cost and keys", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recording()
      yield* Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({
          policy: (key) => {
            if (key === "broken") throw new Error("no policy")
            return policy
          },
          traceKeys: true
        })
        assert.isTrue((yield* limiter.consume(["a", "b"], { cost: 2 })).allowed)
        yield* TestClock.adjust("2 seconds")
        yield* limiter.wait(["a", "b"], { cost: 2 })
        yield* TestClock.adjust("2 seconds")
        yield* limiter.withPermit("c")(Effect.void)
        yield* Effect.flip(limiter.acquire("broken"))
      }).pipe(Effect.withTracer(tracer))
      assert.deepStrictEqual(spans.map((s) => s.name), [
        "RateLimiter.consume",
        "RateLimiter.wait",
        "RateLimiter.withPermit",
        "RateLimiter.acquire"
      ])
      assert.deepInclude(attributes(spans[0]), { "tollgate.cost": 2, "tollgate.key": "a b" })
      assert.deepInclude(attributes(spans[1]), { "tollgate.cost": 2, "tollgate.key": "a b" })
      assert.deepInclude(attributes(spans[3]), { "tollgate.policy": "invalid", "tollgate.key": "broken" })
    }))
})

// The stack frames a failure was annotated with (innermost first): a span
// adds one named after it, with or without a stack trace.
const framesOf = (cause: Cause.Cause<unknown>) => {
  const frames: Array<{ readonly name: string; readonly stack: boolean }> = []
  let frame = Context.getOrUndefined(Cause.annotations(cause), Cause.StackTrace)
  while (frame !== undefined) {
    frames.push({ name: frame.name, stack: frame.stack() !== undefined })
    frame = frame.parent
  }
  return frames
}

// A call that fails (RateLimitExceeded), and the frames its failure carries.
const refusedWait = Effect.gen(function*() {
  const limiter = yield* RateLimiter.make({ policy })
  assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
  const exit = yield* Effect.exit(limiter.wait("k", { maxWait: 0 }))
  assert.isTrue(Exit.isFailure(exit))
  return Exit.isFailure(exit) ? framesOf(exit.cause) : []
})

describe("traces: how a call ended", () => {
  it.effect("a reservation's span says how long to wait before acting", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recording()
      yield* Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ policy })
        yield* limiter.reserve("k", { cost: 2 })
        const later = yield* limiter.reserve("k", { maxWait: "10 seconds" })
        assert.strictEqual(Duration.toMillis(later.delay), 1000)
      }).pipe(Effect.withTracer(tracer))
      assert.deepStrictEqual(spans.map((s) => s.name), ["RateLimiter.reserve", "RateLimiter.reserve"])
      assert.deepInclude(attributes(spans[0]), { "tollgate.allowed": true, "tollgate.delay_ms": 0 })
      assert.deepInclude(attributes(spans[1]), { "tollgate.allowed": true, "tollgate.delay_ms": 1000 })
    }))

  it.effect("an admitted decision says no retry; an admitted wait or limit says only that it was admitted", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recording()
      yield* Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ policy })
        assert.isTrue((yield* limiter.consume("k")).allowed)
        yield* limiter.wait("k")
        yield* limiter.limit("other")(Effect.void)
        assert.isFalse(yield* limiter.acquire("k"))
      }).pipe(Effect.withTracer(tracer))
      assert.deepStrictEqual(spans.map((s) => s.name), [
        "RateLimiter.consume",
        "RateLimiter.wait",
        "RateLimiter.limit",
        "RateLimiter.acquire"
      ])
      assert.deepInclude(attributes(spans[0]), { "tollgate.allowed": true, "tollgate.retry_after_ms": 0 })
      for (const span of spans.slice(1, 3)) {
        const outcome = Object.keys(attributes(span)).filter((k) =>
          k === "tollgate.allowed" || k === "tollgate.retry_after_ms" || k === "tollgate.delay_ms"
        )
        assert.deepStrictEqual(outcome, ["tollgate.allowed"], span.name)
        assert.strictEqual(attributes(span)["tollgate.allowed"], true)
      }
      assert.strictEqual(attributes(spans[3])["tollgate.allowed"], false)
      assert.notProperty(attributes(spans[3]), "tollgate.retry_after_ms", "acquire answers a boolean only")
    }))

  it.effect("a call that fails with an error says the error's tag, and no decision", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recording()
      yield* Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({
          policy: (key) => {
            if (key === "boom") throw new Error("no policy")
            return policy
          }
        })
        assert.strictEqual((yield* Effect.flip(limiter.acquire("boom")))._tag, "InvalidPolicy")
        const scope = yield* Scope.make()
        const closed = yield* RateLimiter.make({ policy }).pipe(Scope.provide(scope))
        yield* Scope.close(scope, Exit.void)
        assert.strictEqual((yield* Effect.flip(closed.consume("k")))._tag, "LimiterShutdown")
      }).pipe(Effect.withTracer(tracer))
      assert.deepStrictEqual(spans.map((s) => attributes(s)["tollgate.error"]), ["InvalidPolicy", "LimiterShutdown"])
      for (const span of spans) assert.notProperty(attributes(span), "tollgate.allowed")
    }))

  it.effect("a defect is named as such, a tagless failure by its lack of a tag", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recording()
      yield* Effect.gen(function*() {
        yield* Effect.exit(Trace.span("defect", () => ({}), Effect.die(new Error("bug"))))
        yield* Effect.exit(Trace.span("tagless", () => ({}), Effect.fail({ reason: "no tag" })))
      }).pipe(Effect.withTracer(tracer))
      assert.deepStrictEqual(spans.map((s) => [s.name, attributes(s)["tollgate.error"]]), [
        ["defect", "defect"],
        ["tagless", "defect"]
      ])
    }))

  it.effect("a span carries no stack trace: a failure inside it is annotated with the span's frame, without a stack", () =>
    Effect.gen(function*() {
      const { tracer } = recording()
      const frames = yield* refusedWait.pipe(Effect.withTracer(tracer))
      assert.deepStrictEqual(frames[0], { name: "RateLimiter.wait", stack: false })
    }))

  it.effect("without a tracer to see them (Effect's native one, or tracing disabled) a call adds no span", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recording()
      const ours = (frames: ReadonlyArray<{ readonly name: string }>) =>
        frames.filter((f) => f.name.startsWith("RateLimiter."))
      assert.deepStrictEqual(ours(yield* refusedWait), [], "the default tracer")
      assert.deepStrictEqual(ours(yield* refusedWait.pipe(Effect.withTracer(Tracer.nativeTracer))), [], "native")
      assert.deepStrictEqual(
        ours(yield* refusedWait.pipe(Effect.withTracer(tracer), Effect.withTracerEnabled(false))),
        [],
        "tracing disabled"
      )
      assert.deepStrictEqual(spans, [])
    }))
})
