import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Layer, Metric, Option, Queue, Result, Tracer } from "effect"
import {
  FetchHttpClient,
  HttpClient,
  HttpClientRequest,
  HttpRouter,
  HttpServer,
  HttpServerRequest,
  HttpServerResponse
} from "effect/http"
import { RateLimiter as ClientRateLimiter } from "effect/persistence"
import { TestClock } from "effect/testing"
import { createServer } from "node:http"
import { ClientAddress, RateLimitHeaders, RateLimitMiddleware } from "../../src/http/index.ts"
import { Policy, RateLimiter, Store } from "../../src/index.ts"

const bucket = (capacity: number, tokens: number, per: Duration.Input) =>
  Policy.tokenBucket({ capacity, refill: { tokens, per } })

const ok = (text: string) => HttpServerResponse.text(text)

// Serves the app on 127.0.0.1 (NodeHttpServer.layerTest) for the rest of the test.
const serve = <E, R>(app: Layer.Layer<never, E, R>) =>
  HttpRouter.serve(app, { disableLogger: true, disableListenLog: true }).pipe(Layer.build)

const get = (path: string, headers?: Record<string, string>) =>
  HttpClient.get(path, headers === undefined ? undefined : { headers })

const statuses = (path: string, n: number, headers?: Record<string, string>) =>
  Effect.forEach(Array.from({ length: n }), () => Effect.map(get(path, headers), (r) => r.status))

// NodeHttpServer.layerTest, listening on 127.0.0.1 only (layerTest listens on every interface).
const ServerTest = HttpServer.layerTestClient.pipe(
  Layer.provide(
    Layer.fresh(FetchHttpClient.layer).pipe(
      Layer.provide(Layer.succeed(FetchHttpClient.RequestInit)({ keepalive: false }))
    )
  ),
  Layer.provideMerge(NodeHttpServer.layer(createServer, { host: "127.0.0.1", port: 0 }))
)

const provideTest = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.provide(ServerTest), Effect.provideService(Metric.MetricRegistry, new Map()))

describe("RateLimitMiddleware: headers and 429", () => {
  it.effect("allowed responses carry RateLimit and RateLimit-Policy; the first denial is a 429 with Retry-After", () =>
    Effect.gen(function*() {
      yield* serve(
        HttpRouter.add("GET", "/", ok("home")).pipe(
          Layer.provide(RateLimitMiddleware.layer({ name: "home", policy: bucket(3, 1, "2 seconds") }))
        )
      )
      const first = yield* get("/")
      assert.strictEqual(first.status, 200)
      assert.strictEqual(yield* first.text, "home")
      assert.strictEqual(first.headers["ratelimit-policy"], "\"home\";q=3;w=6")
      // 2 left; back to full after 2 seconds (one token at 1 per 2 s)
      assert.strictEqual(first.headers["ratelimit"], "\"home\";r=2;t=2")
      assert.isUndefined(first.headers["retry-after"])
      assert.deepStrictEqual(yield* statuses("/", 2), [200, 200])

      const denied = yield* get("/")
      assert.strictEqual(denied.status, 429)
      assert.strictEqual(denied.headers["retry-after"], "2")
      assert.strictEqual(denied.headers["ratelimit"], "\"home\";r=0;t=6")
      assert.strictEqual(denied.headers["ratelimit-policy"], "\"home\";q=3;w=6")
      assert.strictEqual(denied.headers["content-type"], "application/problem+json")
      const problem = (yield* denied.json) as Record<string, unknown>
      assert.strictEqual(problem.status, 429)
      assert.strictEqual(problem.type, "urn:tollgate:problem:rate-limited")

      // virtual time: one token back after 2 seconds, not before
      yield* TestClock.adjust("1999 millis")
      assert.strictEqual((yield* get("/")).status, 429)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual((yield* get("/")).status, 200)
    }).pipe(provideTest))

  it.effect("a handler's own error response still carries RateLimit (the token was spent)", () =>
    Effect.gen(function*() {
      yield* serve(
        HttpRouter.add("GET", "/boom", Effect.die("boom")).pipe(
          Layer.provide(RateLimitMiddleware.layer({ policy: bucket(5, 1, "1 second") }))
        )
      )
      const response = yield* get("/boom")
      assert.strictEqual(response.status, 500)
      assert.strictEqual(response.headers["ratelimit"], "\"default\";r=4;t=1")
    }).pipe(provideTest))

  it.effect("legacy headers on request: RateLimit-Limit, -Remaining, -Reset", () =>
    Effect.gen(function*() {
      yield* serve(
        HttpRouter.add("GET", "/", ok("home")).pipe(
          Layer.provide(RateLimitMiddleware.layer({ policy: bucket(10, 1, "1 second"), legacyHeaders: true }))
        )
      )
      const response = yield* get("/")
      assert.strictEqual(response.headers["ratelimit-limit"], "10")
      assert.strictEqual(response.headers["ratelimit-remaining"], "9")
      assert.strictEqual(response.headers["ratelimit-reset"], "1")
    }).pipe(provideTest))
})

describe("RateLimitMiddleware: cost and policy per route", () => {
  it.effect("each route has its own policy and cost; one middleware layer shared by two routes shares its limiter", () =>
    Effect.gen(function*() {
      const shared = RateLimitMiddleware.layer({ name: "shared", policy: bucket(4, 1, "1 hour") })
      yield* serve(Layer.mergeAll(
        HttpRouter.add("GET", "/heavy", ok("heavy")).pipe(
          Layer.provide(RateLimitMiddleware.layer({ name: "heavy", policy: bucket(10, 1, "1 hour"), cost: 5 }))
        ),
        HttpRouter.add("GET", "/light", ok("light")).pipe(
          Layer.provide(RateLimitMiddleware.layer({ name: "light", policy: bucket(3, 1, "1 hour") }))
        ),
        HttpRouter.add("GET", "/a", ok("a")).pipe(Layer.provide(shared)),
        HttpRouter.add("GET", "/b", ok("b")).pipe(Layer.provide(shared)),
        HttpRouter.add("GET", "/free", ok("free"))
      ))
      // cost 5 out of 10: two requests
      assert.deepStrictEqual(yield* statuses("/heavy", 3), [200, 200, 429])
      // a separate bucket with its own policy: three requests
      assert.deepStrictEqual(yield* statuses("/light", 4), [200, 200, 200, 429])
      // /a and /b draw on one bucket of 4
      assert.deepStrictEqual(yield* statuses("/a", 2), [200, 200])
      assert.deepStrictEqual(yield* statuses("/b", 3), [200, 200, 429])
      assert.deepStrictEqual(yield* statuses("/a", 1), [429])
      // routes without the middleware are not limited
      assert.deepStrictEqual(yield* statuses("/free", 20), Array.from({ length: 20 }, () => 200))
    }).pipe(provideTest))

  it.effect("without a policy the middleware uses the RateLimiter service (its policy function sees the key)", () =>
    Effect.gen(function*() {
      yield* serve(Layer.mergeAll(
        HttpRouter.add("GET", "/search", ok("s")).pipe(
          Layer.provide(RateLimitMiddleware.layer({ prefix: "search|", key: { header: "x-api-key" } }))
        )
      ))
      // the service gives "pro" keys 5, everyone else 2
      assert.deepStrictEqual(yield* statuses("/search", 3, { "x-api-key": "free-1" }), [200, 200, 429])
      assert.deepStrictEqual(
        yield* statuses("/search", 6, { "x-api-key": "pro-1" }),
        [200, 200, 200, 200, 200, 429]
      )
      const response = yield* get("/search", { "x-api-key": "pro-2" })
      // without a policy of its own, the quota is the decision's limit and no window
      assert.strictEqual(response.headers["ratelimit-policy"], "\"default\";q=5")
    }).pipe(
      Effect.provide(RateLimiter.layer({
        policy: (key) => key.startsWith("search|x-api-key:pro-") ? bucket(5, 1, "1 hour") : bucket(2, 1, "1 hour")
      })),
      provideTest
    ))
})

describe("RateLimitMiddleware: a shared store that fails", () => {
  // A store that never answers: with fallback "error" the limiter fails the
  // call with StoreUnavailable, which the client should see as a 503 it may retry.
  const down: Store.Store = {
    name: "down",
    apply: () => Effect.fail(new Store.StoreUnavailable({ store: "down", reason: "connection refused" }))
  }

  it.effect("fallback \"error\": a 503 store-unavailable with Retry-After, not a 500", () =>
    Effect.gen(function*() {
      yield* serve(
        HttpRouter.add("GET", "/a", ok("a")).pipe(
          // no policy of its own: the RateLimiter service below, on the failing store
          Layer.provide(RateLimitMiddleware.layer({}))
        )
      )
      const response = yield* get("/a")
      assert.strictEqual(response.status, 503)
      assert.strictEqual(response.headers["retry-after"], "1")
      const body = (yield* response.json) as { type: string }
      assert.include(body.type, "store-unavailable")
    }).pipe(
      Effect.provide(RateLimiter.layer({ policy: bucket(5, 1, "1 hour"), fallback: { mode: "error" } })),
      Effect.provideService(Store.CurrentStore, down),
      provideTest
    ))
})

describe("RateLimitMiddleware: keys", () => {
  it.effect("header key: each API key has its own bucket; requests without it fall back to the client address", () =>
    Effect.gen(function*() {
      yield* serve(
        HttpRouter.add("GET", "/", ok("home")).pipe(
          Layer.provide(RateLimitMiddleware.layer({ policy: bucket(2, 1, "1 hour"), key: { header: "X-Api-Key" } }))
        )
      )
      assert.deepStrictEqual(yield* statuses("/", 3, { "x-api-key": "alice" }), [200, 200, 429])
      assert.deepStrictEqual(yield* statuses("/", 3, { "x-api-key": "bob" }), [200, 200, 429])
      assert.deepStrictEqual(yield* statuses("/", 3), [200, 200, 429])
    }).pipe(provideTest))

  it.effect("an oversized header key is a 400 that names the header, and takes nothing", () =>
    Effect.gen(function*() {
      yield* serve(
        HttpRouter.add("GET", "/", ok("home")).pipe(
          Layer.provide(RateLimitMiddleware.layer({ policy: bucket(1, 1, "1 hour"), key: { header: "x-api-key" } }))
        )
      )
      const response = yield* get("/", { "x-api-key": "k".repeat(600) })
      assert.strictEqual(response.status, 400)
      const problem = (yield* response.json) as Record<string, unknown>
      assert.include(String(problem.detail), "x-api-key header")
      assert.strictEqual((yield* get("/", { "x-api-key": "short" })).status, 200)
    }).pipe(provideTest))

  it.effect("a key function: its key, or undefined to let the request through unlimited", () =>
    Effect.gen(function*() {
      yield* serve(
        HttpRouter.add("GET", "/*", ok("any")).pipe(
          Layer.provide(RateLimitMiddleware.layer({
            policy: bucket(1, 1, "1 hour"),
            key: (request) => request.url.startsWith("/internal") ? undefined : Effect.succeed(`path:${request.url}`)
          }))
        )
      )
      assert.deepStrictEqual(yield* statuses("/x", 2), [200, 429])
      assert.deepStrictEqual(yield* statuses("/y", 2), [200, 429])
      assert.deepStrictEqual(yield* statuses("/internal/health", 5), [200, 200, 200, 200, 200])
    }).pipe(provideTest))

  it.effect("bad options fail the layer with InvalidPolicy naming the field", () =>
    Effect.gen(function*() {
      const build = (options: RateLimitMiddleware.Options & { readonly policy: Policy.Policy }) =>
        Effect.flip(serve(HttpRouter.add("GET", "/", ok("x")).pipe(Layer.provide(RateLimitMiddleware.layer(options)))))
      const policy = bucket(1, 1, "1 second")
      assert.strictEqual((yield* build({ policy, cost: 0 })).field, "cost")
      assert.strictEqual((yield* build({ policy, name: "naïve" })).field, "name")
      assert.strictEqual(
        (yield* build({ policy, clientAddress: { trustedProxies: ["10.0.0.0/33"] } })).field,
        "trustedProxies[0]"
      )
      assert.strictEqual((yield* build({ policy: bucket(-1, 1, "1 second") })).field, "capacity")
    }).pipe(provideTest))
})

describe("RateLimitMiddleware: client address and forwarding headers", () => {
  it.effect("without trusted proxies, X-Forwarded-For and Forwarded are ignored: a client cannot pick another key", () =>
    Effect.gen(function*() {
      yield* serve(
        HttpRouter.add("GET", "/", ok("home")).pipe(
          Layer.provide(RateLimitMiddleware.layer({ policy: bucket(2, 1, "1 hour") }))
        )
      )
      assert.strictEqual((yield* get("/", { "x-forwarded-for": "198.51.100.1" })).status, 200)
      assert.strictEqual((yield* get("/", { "x-forwarded-for": "198.51.100.2" })).status, 200)
      // every spoofed address so far drew on the same bucket: the socket's
      assert.strictEqual((yield* get("/", { "x-forwarded-for": "198.51.100.3" })).status, 429)
      assert.strictEqual((yield* get("/", { forwarded: "for=198.51.100.4" })).status, 429)
      assert.strictEqual((yield* get("/")).status, 429)
    }).pipe(provideTest))

  it.effect("behind a trusted proxy: the proxy's entry is the client; entries the client wrote itself are ignored", () =>
    Effect.gen(function*() {
      yield* serve(
        HttpRouter.add("GET", "/", ok("home")).pipe(
          Layer.provide(RateLimitMiddleware.layer({
            policy: bucket(1, 1, "1 hour"),
            clientAddress: { trustedProxies: ["127.0.0.1", "10.0.0.0/8"] }
          }))
        )
      )
      // the (trusted) test client plays the proxy: it appends the real client's address
      assert.strictEqual((yield* get("/", { "x-forwarded-for": "203.0.113.9" })).status, 200)
      assert.strictEqual((yield* get("/", { "x-forwarded-for": "203.0.113.9" })).status, 429)
      // 203.0.113.9 prepends a made-up address: the proxy still appended the real one, which is what counts
      assert.strictEqual((yield* get("/", { "x-forwarded-for": "192.0.2.77, 203.0.113.9" })).status, 429)
      // a chain of trusted proxies is skipped
      assert.strictEqual((yield* get("/", { "x-forwarded-for": "203.0.113.9, 10.1.2.3" })).status, 429)
      // another client
      assert.strictEqual((yield* get("/", { "x-forwarded-for": "203.0.113.10" })).status, 200)
      // Forwarded is not the configured header: ignored, so the key is the proxy's own address
      assert.strictEqual((yield* get("/", { forwarded: "for=203.0.113.11" })).status, 200)
      assert.strictEqual((yield* get("/", { forwarded: "for=203.0.113.12" })).status, 429)
    }).pipe(provideTest))

  it.effect("RFC 7239 Forwarded, when configured, with IPv6 clients grouped by /64", () =>
    Effect.gen(function*() {
      yield* serve(
        HttpRouter.add("GET", "/", ok("home")).pipe(
          Layer.provide(RateLimitMiddleware.layer({
            policy: bucket(1, 1, "1 hour"),
            clientAddress: { trustedProxies: ["127.0.0.1"], forwardedHeader: "forwarded" }
          }))
        )
      )
      assert.strictEqual((yield* get("/", { forwarded: "for=\"[2001:db8:cafe::17]:4711\";proto=https" })).status, 200)
      // another address in the same /64: same client
      assert.strictEqual((yield* get("/", { forwarded: "for=\"[2001:db8:cafe:0:1::99]\"" })).status, 429)
      assert.strictEqual((yield* get("/", { forwarded: "for=\"[2001:db8:beef::1]\"" })).status, 200)
      assert.strictEqual((yield* get("/", { forwarded: "for=192.0.2.60;proto=http;by=203.0.113.43" })).status, 200)
      assert.strictEqual((yield* get("/", { forwarded: "For=\"192.0.2.60:8080\"" })).status, 429)
      // X-Forwarded-For is not the configured header
      assert.strictEqual((yield* get("/", { "x-forwarded-for": "192.0.2.61" })).status, 200)
      assert.strictEqual((yield* get("/", { "x-forwarded-for": "192.0.2.62" })).status, 429)
    }).pipe(provideTest))
})

// A Clock that reports every sleep before it starts, so a test can advance the
// TestClock exactly when a client is asleep (no real-time waiting).
const reportingSleeps = (clock: Clock.Clock, sleeps: Queue.Queue<Duration.Duration>): Clock.Clock => ({
  currentTimeMillisUnsafe: () => clock.currentTimeMillisUnsafe(),
  currentTimeMillis: clock.currentTimeMillis,
  currentTimeNanosUnsafe: () => clock.currentTimeNanosUnsafe(),
  currentTimeNanos: clock.currentTimeNanos,
  monotonicTimeNanosUnsafe: () => clock.monotonicTimeNanosUnsafe(),
  monotonicTimeNanos: clock.monotonicTimeNanos,
  sleep: (duration) => Effect.andThen(Queue.offer(sleeps, duration), clock.sleep(duration))
})

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 50 }))

describe("RateLimitMiddleware: round trip with effect's HttpClient.withRateLimiter", () => {
  const App = (legacyHeaders: boolean) =>
    HttpRouter.add("GET", "/api", ok("data")).pipe(
      // 2 at once, then one every 2 seconds
      Layer.provide(RateLimitMiddleware.layer({ name: "api", policy: bucket(2, 1, "2 seconds"), legacyHeaders }))
    )

  const client = (seen: Queue.Queue<number>) =>
    Effect.gen(function*() {
      const limiter = yield* ClientRateLimiter.RateLimiter
      return (yield* HttpClient.HttpClient).pipe(
        HttpClient.tap((response) => Queue.offer(seen, response.status)),
        HttpClient.withRateLimiter({
          limiter,
          key: "api",
          limit: 100,
          window: "1 minute",
          times: 3,
          disableAdaptiveLearning: true
        })
      )
    })

  const run = (legacyHeaders: boolean) =>
    Effect.gen(function*() {
      yield* serve(App(legacyHeaders))
      const seen = yield* Queue.unbounded<number>()
      const sleeps = yield* Queue.unbounded<Duration.Duration>()
      const http = yield* client(seen)
      const clock = yield* Clock.Clock
      const fiber = yield* Effect.forEach(
        [1, 2, 3],
        () => http.execute(HttpClientRequest.get("/api")).pipe(Effect.map((r) => r.status))
      ).pipe(Effect.provideService(Clock.Clock, reportingSleeps(clock, sleeps)), Effect.forkChild)
      return { seen, sleeps, fiber }
    })

  it.effect("draft headers only: the client gets one 429, sleeps exactly Retry-After, retries and succeeds", () =>
    Effect.gen(function*() {
      const { fiber, seen, sleeps } = yield* run(false)
      assert.deepStrictEqual([yield* Queue.take(seen), yield* Queue.take(seen), yield* Queue.take(seen)], [
        200,
        200,
        429
      ])
      const slept = yield* Queue.take(sleeps)
      assert.strictEqual(Duration.toMillis(slept), 2000) // Retry-After: 2
      yield* settle
      yield* TestClock.adjust(slept)
      assert.deepStrictEqual(yield* Fiber.join(fiber), [200, 200, 200])
      assert.strictEqual(yield* Queue.take(seen), 200)
      assert.strictEqual(yield* Queue.size(sleeps), 0)
    }).pipe(
      Effect.provide(ClientRateLimiter.layer.pipe(Layer.provide(ClientRateLimiter.layerStoreMemory))),
      provideTest
    ))

  it.effect("with legacy headers: the client paces itself from RateLimit-Remaining/-Reset and never sees a 429", () =>
    Effect.gen(function*() {
      const { fiber, seen, sleeps } = yield* run(true)
      assert.deepStrictEqual([yield* Queue.take(seen), yield* Queue.take(seen)], [200, 200])
      // remaining 0, reset in 4 s (two tokens at one per 2 s): the client waits before the third request
      const slept = yield* Queue.take(sleeps)
      assert.strictEqual(Duration.toMillis(slept), 4000)
      assert.strictEqual(yield* Queue.size(seen), 0)
      yield* settle
      yield* TestClock.adjust(slept)
      assert.deepStrictEqual(yield* Fiber.join(fiber), [200, 200, 200])
      assert.strictEqual(yield* Queue.take(seen), 200)
    }).pipe(
      Effect.provide(ClientRateLimiter.layer.pipe(Layer.provide(ClientRateLimiter.layerStoreMemory))),
      provideTest
    ))
})

describe("RateLimitHeaders", () => {
  it("formats the draft's structured fields and parses them back", () => {
    const decision = {
      allowed: false,
      remaining: 0,
      limit: 100,
      retryAfter: Duration.millis(1),
      resetAfter: Duration.millis(29_001)
    }
    const headers = RateLimitHeaders.make({ name: "default", limit: 100, windowSeconds: 60 }, decision)
    assert.deepStrictEqual(headers, {
      "ratelimit": "\"default\";r=0;t=30",
      "ratelimit-policy": "\"default\";q=100;w=60",
      "retry-after": "1"
    })
    assert.deepStrictEqual(RateLimitHeaders.parse(headers.ratelimit), [{ name: "default", params: { r: 0, t: 30 } }])
    assert.deepStrictEqual(RateLimitHeaders.parse("\"a\\\"b\";q=1, \"c\";q=2;w=3"), [
      { name: "a\"b", params: { q: 1 } },
      { name: "c", params: { q: 2, w: 3 } }
    ])
    assert.strictEqual(RateLimitHeaders.sfString("a\"b\\c"), "\"a\\\"b\\\\c\"")
    assert.isDefined(RateLimitHeaders.checkName("new\nline"))
  })

  it("a token bucket's quota: capacity, and the seconds to refill from empty", () => {
    const policy = bucket(100, 10, "1 second")
    assert.strictEqual(policy._tag, "TokenBucket")
    if (policy._tag === "TokenBucket") {
      assert.deepStrictEqual(RateLimitHeaders.quotaOf("p", policy), { name: "p", limit: 100, windowSeconds: 10 })
    }
    const slow = bucket(1000, 1000, "1 hour")
    if (slow._tag === "TokenBucket") {
      assert.deepStrictEqual(RateLimitHeaders.quotaOf("p", slow), { name: "p", limit: 1000, windowSeconds: 3600 })
    }
  })
})

describe("ClientAddress", () => {
  const requestFrom = (peer: string | undefined, headers: Record<string, string> = {}) =>
    HttpServerRequest.fromWeb(new Request("http://app.test/", { headers })).modify({
      remoteAddress: peer === undefined ? Option.none() : Option.some(peer)
    })
  const resolver = (options?: ClientAddress.Options) => Result.getOrThrow(ClientAddress.make(options))

  it("the socket's peer, IPv4-mapped IPv6 as IPv4, IPv6 by /64 (or per address)", () => {
    const resolve = resolver()
    assert.strictEqual(resolve(requestFrom("203.0.113.7")), "203.0.113.7")
    assert.strictEqual(resolve(requestFrom("::ffff:203.0.113.7")), "203.0.113.7")
    assert.strictEqual(resolve(requestFrom("2001:db8:1:2:3:4:5:6")), "2001:db8:1:2::/64")
    assert.strictEqual(resolver({ ipv6PrefixLength: 128 })(requestFrom("2001:db8::5")), "2001:db8::5")
    assert.isUndefined(resolve(requestFrom(undefined)))
    // no trusted proxies: headers are ignored
    assert.strictEqual(resolve(requestFrom("203.0.113.7", { "x-forwarded-for": "192.0.2.1" })), "203.0.113.7")
  })

  it("behind trusted proxies: walks the configured header from the right", () => {
    const resolve = resolver({ trustedProxies: ["10.0.0.0/8", "::ffff:192.168.0.1"] })
    const via = (xff: string, peer = "10.0.0.1") => resolve(requestFrom(peer, { "x-forwarded-for": xff }))
    assert.strictEqual(via("192.0.2.1"), "192.0.2.1")
    assert.strictEqual(via("6.6.6.6, 192.0.2.1"), "192.0.2.1") // the client's own entry is ignored
    assert.strictEqual(via("192.0.2.1, 10.9.9.9"), "192.0.2.1") // a second trusted proxy is skipped
    assert.strictEqual(via("192.0.2.1", "192.168.0.1"), "192.0.2.1") // a trusted proxy given as a mapped address
    assert.strictEqual(via("192.0.2.1", "198.51.100.1"), "198.51.100.1") // an untrusted peer's header is ignored
    assert.strictEqual(via("unknown"), "10.0.0.1") // garbage from a trusted proxy: key on that proxy
    assert.strictEqual(via("10.0.0.7, 10.0.0.8"), "10.0.0.7") // every hop trusted: the leftmost
    assert.strictEqual(via("[2001:db8::1]:443"), "2001:db8::/64")
  })

  it("remembered resolutions answer as fresh ones, also after the memory has turned over", () => {
    const options = { trustedProxies: ["10.0.0.0/8"] }
    const resolve = resolver(options)
    const via = (r: ClientAddress.Resolver, i: number) =>
      r(requestFrom(`10.0.${i % 7}.1`, { "x-forwarded-for": `192.0.${(i >> 8) & 255}.${i & 255}, 10.1.1.${i % 3}` }))
    // more distinct clients than both generations hold, then the first ones again
    for (let i = 0; i < 10_000; i++) via(resolve, i)
    for (const i of [0, 1, 4095, 4096, 8191, 8192, 9_999]) {
      assert.strictEqual(via(resolve, i), via(resolver(options), i))
      assert.strictEqual(via(resolve, i), via(resolve, i))
    }
    assert.strictEqual(via(resolve, 258), "192.0.1.2")
    // a long header is resolved without being remembered
    const long = Array.from({ length: 40 }, (_, i) => `10.2.0.${i}`).join(", ")
    assert.strictEqual(resolve(requestFrom("10.0.0.1", { "x-forwarded-for": long })), "10.2.0.0")
  })

  it("Forwarded (RFC 7239): quoted values, ports, several elements and parameters", () => {
    const resolve = resolver({ trustedProxies: ["10.0.0.1"], forwardedHeader: "forwarded" })
    const via = (forwarded: string) => resolve(requestFrom("10.0.0.1", { forwarded }))
    assert.strictEqual(via("for=192.0.2.43"), "192.0.2.43")
    assert.strictEqual(via("for=\"192.0.2.43:8080\";proto=https;by=10.0.0.1"), "192.0.2.43")
    assert.strictEqual(via("for=6.6.6.6, for=192.0.2.43"), "192.0.2.43")
    assert.strictEqual(via("for=\"[2001:db8:cafe::17]:4711\""), "2001:db8:cafe::/64")
    assert.strictEqual(via("for=_hidden"), "10.0.0.1")
    // X-Forwarded-For is not the configured header
    assert.strictEqual(resolve(requestFrom("10.0.0.1", { "x-forwarded-for": "192.0.2.9" })), "10.0.0.1")
  })

  it("bad options name the field", () => {
    const failure = (options: ClientAddress.Options) => {
      const result = ClientAddress.make(options)
      return Result.isFailure(result) ? result.failure.field : undefined
    }
    assert.strictEqual(failure({ trustedProxies: ["10.0.0.0/8", "not-an-ip"] }), "trustedProxies[1]")
    assert.strictEqual(failure({ trustedProxies: ["10.0.0.1/8"] }), "trustedProxies[0]") // host bits set
    assert.strictEqual(failure({ ipv6PrefixLength: 0 }), "ipv6PrefixLength")
  })
})

describe("RateLimitMiddleware: several keys per request", () => {
  it.effect("a key function may name several keys: all or nothing, the headers report the most restrictive", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: (key) => key.startsWith("api:user:") ? bucket(2, 1, "1 hour") : bucket(3, 1, "1 hour")
      })
      yield* serve(
        HttpRouter.add("GET", "/", ok("home")).pipe(
          Layer.provide(
            RateLimitMiddleware.layer({
              name: "api",
              prefix: "api:",
              key: (request) => [`user:${request.headers["x-user"]}`, "org:acme"]
            })
          ),
          Layer.provide(Layer.succeed(RateLimiter)(limiter))
        )
      )
      const as = (user: string) => get("/", { "x-user": user })
      assert.strictEqual((yield* as("ann")).status, 200)
      const second = yield* as("ann")
      assert.strictEqual(second.status, 200)
      assert.strictEqual(second.headers["ratelimit"], "\"api\";r=0;t=7200") // ann: none left, full in 2 hours
      const third = yield* as("ann")
      assert.strictEqual(third.status, 429)
      // ann's denied request cost the organisation nothing: one unit is left for ben
      assert.strictEqual((yield* as("ben")).status, 200)
      assert.strictEqual((yield* as("ben")).status, 429)
      const left = yield* limiter.peek("api:org:acme")
      assert.strictEqual(left.remaining, 0)
      assert.strictEqual((yield* limiter.peek("api:user:ben")).remaining, 1)
    }).pipe(provideTest))
})

describe("RateLimitMiddleware: traces", () => {
  it.effect("with a tracer installed, each decision is a span with the method, the path and the decision", () =>
    Effect.gen(function*() {
      const spans: Array<Tracer.Span> = []
      const tracer = Tracer.make({
        span: (options) => {
          const span = Tracer.nativeTracer.span(options)
          spans.push(span)
          return span
        }
      })
      yield* Effect.gen(function*() {
        yield* serve(
          HttpRouter.add("GET", "/", ok("home")).pipe(
            Layer.provide(RateLimitMiddleware.layer({ name: "home", policy: bucket(1, 1, "1 minute") }))
          )
        )
        assert.deepStrictEqual(yield* statuses("/?page=2", 2), [200, 429])
      }).pipe(Effect.withTracer(tracer))
      const decisions = spans.filter((s) => s.name === "RateLimitMiddleware.decide").map((s) =>
        Object.fromEntries(s.attributes)
      )
      assert.strictEqual(decisions.length, 2)
      assert.deepInclude(decisions[0], {
        "tollgate.middleware": "home",
        "http.request.method": "GET",
        "url.path": "/",
        "tollgate.allowed": true
      })
      assert.deepInclude(decisions[1], { "tollgate.allowed": false, "tollgate.retry_after_ms": 60_000 })
      // the limiter's own span under it
      assert.isTrue(spans.some((s) => s.name === "RateLimiter.consume"))
    }).pipe(provideTest))
})
