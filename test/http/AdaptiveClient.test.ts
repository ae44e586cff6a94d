import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Layer, Metric, Queue } from "effect"
import { FetchHttpClient, HttpClient, HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import { TestClock } from "effect/testing"
import { createServer } from "node:http"
import { AdaptiveClient } from "../../src/http/index.ts"
import { Policy, RateLimiter } from "../../src/index.ts"

// An upstream on 127.0.0.1 that answers the statuses given, in order (then 200).
const upstream = (replies: Array<[number, Record<string, string>]>) =>
  HttpRouter.serve(
    HttpRouter.add(
      "GET",
      "/items",
      Effect.sync(() => {
        const [status, headers] = replies.shift() ?? [200, {}]
        return HttpServerResponse.text("items", { status, headers })
      })
    ),
    { disableLogger: true, disableListenLog: true }
  ).pipe(Layer.build)

const ServerTest = HttpServer.layerTestClient.pipe(
  Layer.provide(
    Layer.fresh(FetchHttpClient.layer).pipe(
      Layer.provide(Layer.succeed(FetchHttpClient.RequestInit)({ keepalive: false }))
    )
  ),
  Layer.provideMerge(NodeHttpServer.layer(createServer, { host: "127.0.0.1", port: 0 }))
)

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 50 }))

// 4 a second to start with, between 1 and 8, +1 per success, halved on a 429.
const policy = Policy.adaptive({ capacity: 1, rate: { tokens: 4, per: "1 second" }, floor: 1, ceiling: 8, increase: 1 })

// Three requests in a row through the helper; each response's status and
// the time it was sent are reported.
const run = (limiter: RateLimiter["Service"], options: AdaptiveClient.Options) =>
  Effect.gen(function*() {
    const sent = yield* Queue.unbounded<readonly [number, number]>()
    const client = (yield* HttpClient.HttpClient).pipe(AdaptiveClient.make(limiter, options))
    const fiber = yield* Effect.forEach([1, 2, 3], () =>
      Effect.gen(function*() {
        const response = yield* client.get("/items")
        yield* Queue.offer(sent, [response.status, yield* Clock.currentTimeMillis])
        return response.status
      })).pipe(Effect.forkChild)
    return { sent, fiber }
  })

describe("AdaptiveClient: effect's HttpClient paced by an adaptive key", () => {
  it.effect("a 429 with Retry-After cuts the rate and holds the next request until then", () =>
    Effect.gen(function*() {
      yield* upstream([[429, { "retry-after": "2" }]])
      const limiter = yield* RateLimiter.make({ policy })
      const { fiber, sent } = yield* run(limiter, { key: "upstream" })
      assert.deepStrictEqual(yield* Queue.take(sent), [429, 0])
      yield* settle
      yield* TestClock.adjust("1999 millis")
      yield* settle
      assert.strictEqual(yield* Queue.size(sent), 0)
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Queue.take(sent), [200, 2000])
      // cut to 2 a second by the 429, +1 by the 200: the next token in 334 ms
      yield* settle
      yield* TestClock.adjust("333 millis")
      yield* settle
      assert.strictEqual(yield* Queue.size(sent), 0)
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Queue.take(sent), [200, 2334])
      assert.deepStrictEqual(yield* Fiber.join(fiber), [429, 200, 200])
    }).pipe(Effect.provide(ServerTest), Effect.provideService(Metric.MetricRegistry, new Map())))

  it.effect("successes raise the rate; a 503 without Retry-After cuts it; a 500 says nothing", () =>
    Effect.gen(function*() {
      yield* upstream([[200, {}], [503, {}], [500, {}]])
      const limiter = yield* RateLimiter.make({ policy })
      const { fiber, sent } = yield* run(limiter, { key: "upstream" })
      assert.deepStrictEqual(yield* Queue.take(sent), [200, 0])
      // 5 a second after the 200: 200 ms
      yield* settle
      yield* TestClock.adjust("200 millis")
      assert.deepStrictEqual(yield* Queue.take(sent), [503, 200])
      // halved to 2.5 a second by the 503: 400 ms
      yield* settle
      yield* TestClock.adjust("399 millis")
      yield* settle
      assert.strictEqual(yield* Queue.size(sent), 0)
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Queue.take(sent), [500, 600])
      assert.deepStrictEqual(yield* Fiber.join(fiber), [200, 503, 500])
      // the 500 changed nothing: still 2.5 a second (the next token 400 ms after 600)
      yield* TestClock.adjust("399 millis")
      assert.isFalse(yield* limiter.acquire("upstream"))
      yield* TestClock.adjust("1 millis")
      assert.isTrue(yield* limiter.acquire("upstream"))
    }).pipe(Effect.provide(ServerTest), Effect.provideService(Metric.MetricRegistry, new Map())))

  it.effect("a key with a fixed rate: the request fails with InvalidRequest (feedback needs Policy.adaptive)", () =>
    Effect.gen(function*() {
      yield* upstream([])
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } })
      })
      const client = (yield* HttpClient.HttpClient).pipe(AdaptiveClient.make(limiter, { key: "fixed" }))
      const e = yield* Effect.flip(client.get("/items"))
      assert.strictEqual(e._tag, "InvalidRequest")
    }).pipe(Effect.provide(ServerTest), Effect.provideService(Metric.MetricRegistry, new Map())))

  it.effect("past maxWait the request fails with RateLimitExceeded, unsent", () =>
    Effect.gen(function*() {
      const replies: Array<[number, Record<string, string>]> = [[429, { "retry-after": "60" }]]
      yield* upstream(replies)
      const limiter = yield* RateLimiter.make({ policy })
      const client = (yield* HttpClient.HttpClient).pipe(
        AdaptiveClient.make(limiter, { key: "upstream", maxWait: "5 seconds" })
      )
      assert.strictEqual((yield* client.get("/items")).status, 429)
      const e = yield* Effect.flip(client.get("/items"))
      assert.strictEqual(e._tag, "RateLimitExceeded")
    }).pipe(Effect.provide(ServerTest), Effect.provideService(Metric.MetricRegistry, new Map())))
})
