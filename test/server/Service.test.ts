// End-to-end tests of the stand-alone service: each test starts the real
// process (`node src/server/main.ts`) on 127.0.0.1 with an ephemeral port.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, Schedule } from "effect"
import * as http from "node:http"
import { metrics, post, request, sample, type Service, start, startFailing } from "./harness.ts"

const hour = (capacity: number) => ({ kind: "tokenBucket", capacity, refill: { tokens: 1, per: "1 hour" } })

const config = {
  policies: {
    default: hour(5),
    "per-ip": hour(2),
    tight: hour(50),
    fast: { kind: "tokenBucket", capacity: 1, refill: { tokens: 1, per: "200 millis" } },
    slow: { kind: "tokenBucket", capacity: 1, refill: { tokens: 1, per: "5 seconds" } }
  },
  rules: [{ prefix: "ip:", policy: "per-ip" }],
  limits: { maxBodyBytes: 1024, maxKeyLength: 64, maxWait: 60_000 }
}

const ADMIN_TOKEN = "test-admin-token-0123456789"

const consume = (service: Service, body: unknown, headers?: Record<string, string>) =>
  post(service, "/v1/consume", body, headers)

const allowedCount = (service: Service, body: unknown, n: number) =>
  Effect.map(
    Effect.forEach(Array.from({ length: n }), () => consume(service, body)),
    (replies) => replies.filter((r) => r.json.allowed === true).length
  )

describe("service: the JSON API", () => {
  it.live("consume, acquire, peek and wait; a denial is a 200 with allowed=false", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      const first = yield* consume(service, { key: "user:1" })
      assert.strictEqual(first.status, 200)
      assert.strictEqual(first.headers.get("content-type"), "application/json")
      assert.deepStrictEqual(first.json, {
        allowed: true,
        remaining: 4,
        retryAfter: 0,
        resetAfter: 3_600_000,
        limit: 5,
        policy: "default"
      })
      const heavy = yield* consume(service, { key: "user:1", cost: 4 })
      assert.strictEqual(heavy.json.remaining, 0)
      const denied = yield* consume(service, { key: "user:1" })
      assert.strictEqual(denied.status, 200)
      assert.strictEqual(denied.json.allowed, false)
      assert.strictEqual(denied.json.remaining, 0)
      assert.isAbove(denied.json.retryAfter, 3_500_000)
      assert.isAtMost(denied.json.retryAfter, 3_600_000)

      const acquired = yield* post(service, "/v1/acquire", { key: "user:2" })
      assert.deepStrictEqual(acquired.json, { allowed: true, policy: "default" })

      // peek takes nothing: GET with a query, or POST
      const peeked = yield* request(service, "GET", "/v1/peek?key=user:2&cost=2")
      assert.strictEqual(peeked.status, 200)
      assert.strictEqual(peeked.json.allowed, true)
      assert.strictEqual(peeked.json.remaining, 4)
      const peekedPost = yield* post(service, "/v1/peek", { key: "user:2" })
      assert.strictEqual(peekedPost.json.remaining, 4)

      // wait: admitted once the bucket refills (200 ms), or refused at once past maxWait
      assert.strictEqual((yield* consume(service, { key: "w", policy: "fast" })).json.allowed, true)
      const waited = yield* post(service, "/v1/wait", { key: "w", policy: "fast", maxWait: 2000 })
      assert.strictEqual(waited.status, 200)
      assert.strictEqual(waited.json.allowed, true)
      assert.isAtLeast(waited.json.waited, 100)
      const tooLong = yield* post(service, "/v1/wait", { key: "user:1", maxWait: 0 })
      assert.strictEqual(tooLong.status, 200)
      assert.strictEqual(tooLong.json.allowed, false)
      assert.isAbove(tooLong.json.retryAfter, 0)
    }))

  it.live("policies: prefix rules, a named policy, and the same key under two policies is two limits", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      // "ip:" keys use per-ip (capacity 2)
      const ip = yield* consume(service, { key: "ip:203.0.113.7" })
      assert.strictEqual(ip.json.policy, "per-ip")
      assert.strictEqual(ip.json.limit, 2)
      assert.strictEqual(yield* allowedCount(service, { key: "ip:203.0.113.7" }, 3), 1)
      // the same key under the default policy is a separate bucket
      assert.strictEqual(yield* allowedCount(service, { key: "ip:203.0.113.7", policy: "default" }, 6), 5)
      // naming the policy the rule would pick is the same bucket
      assert.strictEqual(yield* allowedCount(service, { key: "ip:203.0.113.7", policy: "per-ip" }, 1), 0)
    }))

  it.live("health, readiness, 404 and 405 as problem+json", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      assert.deepStrictEqual((yield* request(service, "GET", "/healthz")).json, { status: "ok" })
      const ready = yield* request(service, "GET", "/readyz")
      assert.strictEqual(ready.status, 200)
      assert.deepStrictEqual(ready.json, { status: "ready" })
      const missing = yield* request(service, "GET", "/v2/nothing")
      assert.strictEqual(missing.status, 404)
      assert.strictEqual(missing.headers.get("content-type"), "application/problem+json")
      const wrongMethod = yield* request(service, "GET", "/v1/consume")
      assert.strictEqual(wrongMethod.status, 405)
      assert.strictEqual(wrongMethod.headers.get("allow"), "POST")
    }))
})

// One POST over node:http that sends `Expect: 100-continue` and its body only once the 100 has come.
const postAfterContinue = (service: Service, path: string, body: string) =>
  Effect.callback<{ readonly continued: boolean; readonly status: number | undefined; readonly text: string }>(
    (resume) => {
      const url = new URL(path, service.url)
      let continued = false
      const req = http.request(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "content-length": String(Buffer.byteLength(body)),
          expect: "100-continue"
        }
      })
      req.on("continue", () => {
        continued = true
        req.end(body)
      })
      req.on("response", (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (chunk: string) => (text += chunk))
        res.on("end", () => resume(Effect.succeed({ continued, status: res.statusCode, text })))
      })
      req.on("error", (error) => resume(Effect.die(error)))
      req.flushHeaders()
      return Effect.sync(() => req.destroy())
    }
  )

describe("service: how bodies arrive", () => {
  it.live("a client that waits for 100 Continue gets it, then its decision", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      const reply = yield* postAfterContinue(service, "/v1/consume", JSON.stringify({ key: "continue" })).pipe(
        Effect.timeoutOption("10 seconds")
      )
      assert.isTrue(Option.isSome(reply), "no answer: the 100 Continue never came")
      if (Option.isSome(reply)) {
        assert.isTrue(reply.value.continued)
        assert.strictEqual(reply.value.status, 200)
        assert.strictEqual(JSON.parse(reply.value.text).allowed, true)
      }
    }))

  it.live("a body in several chunks, with or without Content-Length, is read whole", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      const text = JSON.stringify({ key: "chunks", cost: 2 })
      const chunks = () =>
        new ReadableStream<Uint8Array>({
          start(controller) {
            const bytes = new TextEncoder().encode(text)
            for (let i = 0; i < bytes.length; i += 5) controller.enqueue(bytes.slice(i, i + 5))
            controller.close()
          }
        })
      // chunked (no Content-Length): effect's reader
      const chunked = yield* request(service, "POST", "/v1/consume", { body: chunks() })
      assert.strictEqual(chunked.status, 200)
      assert.strictEqual(chunked.json.remaining, 3)
      // a declared length, the body written in pieces: read straight from the request stream
      const declared = yield* Effect.callback<{ status: number | undefined; text: string }>((resume) => {
        const req = http.request(new URL("/v1/consume", service.url), {
          method: "POST",
          headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(text)) }
        })
        req.on("response", (res) => {
          let body = ""
          res.setEncoding("utf8")
          res.on("data", (chunk: string) => (body += chunk))
          res.on("end", () => resume(Effect.succeed({ status: res.statusCode, text: body })))
        })
        req.on("error", (error) => resume(Effect.die(error)))
        for (let i = 0; i < text.length; i += 5) req.write(text.slice(i, i + 5))
        req.end()
        return Effect.sync(() => req.destroy())
      })
      assert.strictEqual(declared.status, 200)
      assert.strictEqual(JSON.parse(declared.text).remaining, 1)
      // a byte order mark before the JSON is not part of it (as effect's reader decodes)
      const bom = yield* post(service, "/v1/consume", "\uFEFF" + JSON.stringify({ key: "bom" }))
      assert.strictEqual(bom.status, 200)
    }))
})

describe("service: bad input never reaches a bucket", () => {
  it.live("every bad body is a 400 or 413 problem that names the field; no decision is made", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      const cases: ReadonlyArray<readonly [string, unknown, number, string]> = [
        ["missing key", {}, 400, "key: is required"],
        ["key of the wrong type", { key: 42 }, 400, "key = 42: expected string"],
        ["empty key", { key: "" }, 400, "key = \"\""],
        ["oversized key", { key: "k".repeat(65) }, 400, "key = \"kkk"],
        ["cost of the wrong type", { key: "a", cost: "2" }, 400, "cost = \"2\""],
        ["zero cost", { key: "a", cost: 0 }, 400, "cost = 0"],
        ["fractional cost", { key: "a", cost: 1.5 }, 400, "cost = 1.5"],
        ["cost above the policy's capacity", { key: "a", cost: 6 }, 400, "cost = 6"],
        ["unknown policy", { key: "a", policy: "gold" }, 400, "policy = \"gold\": no such policy"],
        ["policy of the wrong type", { key: "a", policy: 7 }, 400, "policy = 7"],
        ["unknown field", { key: "a", cots: 1 }, 400, "cots = 1: is not a known field"],
        ["not an object", [1, 2], 400, "expected"],
        ["malformed JSON", "{\"key\": ", 400, "not valid JSON"],
        ["empty body", "", 400, "is empty"],
        ["body over the limit", { key: "a", pad: "x".repeat(2000) }, 413, "larger than 1024 bytes"]
      ]
      for (const [name, body, status, detail] of cases) {
        const reply = yield* consume(service, body)
        assert.strictEqual(reply.status, status, name)
        assert.strictEqual(reply.headers.get("content-type"), "application/problem+json", name)
        assert.include(reply.json.detail, detail, name)
        assert.strictEqual(reply.json.status, status, name)
      }
      // a chunked body (no Content-Length) that runs past the limit is cut off with 413 too
      const chunks = new ReadableStream<Uint8Array>({
        start(controller) {
          const chunk = new TextEncoder().encode("x".repeat(512))
          for (let i = 0; i < 8; i++) controller.enqueue(chunk)
          controller.close()
        }
      })
      assert.strictEqual((yield* request(service, "POST", "/v1/consume", { body: chunks })).status, 413)
      // wait: maxWait above the configured limit
      const wait = yield* post(service, "/v1/wait", { key: "a", maxWait: 60_001 })
      assert.strictEqual(wait.status, 400)
      assert.include(wait.json.detail, "maxWait = 60001")
      // peek's query is validated the same way
      const peek = yield* request(service, "GET", "/v1/peek?cost=2")
      assert.strictEqual(peek.status, 400)
      assert.include(peek.json.detail, "key: is required")

      const text = yield* metrics(service)
      assert.strictEqual(sample(text, "tollgate_decisions_total{limiter=\"service\",outcome=\"allowed\"}"), 0)
      assert.strictEqual(sample(text, "tollgate_decisions_total{limiter=\"service\",outcome=\"denied\"}"), 0)
      // not even a bucket was started
      assert.strictEqual(sample(text, "tollgate_bucket_events_total{limiter=\"service\",event=\"started\"}"), 0)
    }))

  it.live("forwarding headers are not keys: X-Forwarded-For and Forwarded change nothing", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      assert.strictEqual(
        (yield* consume(service, { key: "ip:198.51.100.1" }, { "x-forwarded-for": "10.0.0.1" })).json.allowed,
        true
      )
      assert.strictEqual(
        (yield* consume(service, { key: "ip:198.51.100.1" }, { "x-forwarded-for": "10.0.0.2" })).json.allowed,
        true
      )
      // per-ip allows 2: spoofed headers did not spread the requests over other buckets
      assert.strictEqual(
        (yield* consume(service, { key: "ip:198.51.100.1" }, { forwarded: "for=10.0.0.3" })).json.allowed,
        false
      )
      const text = yield* metrics(service)
      assert.strictEqual(sample(text, "tollgate_bucket_events_total{limiter=\"service\",event=\"started\"}"), 1)
    }))
})

describe("service: clients that give up", () => {
  it.live("a waiter whose client disconnects leaves the line", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      assert.strictEqual(yield* allowedCount(service, { key: "gone", policy: "slow" }, 1), 1)
      // interrupting the request's fiber aborts the fetch: the client disconnects
      const fiber = yield* post(service, "/v1/wait", { key: "gone", policy: "slow", maxWait: 60_000 }).pipe(
        Effect.forkChild
      )
      const poll = Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 250 })
      const gauges = Effect.map(metrics(service), (text) => [
        sample(text, "tollgate_http_waiting"),
        sample(text, "tollgate_waiting{limiter=\"service\"}")
      ])
      yield* gauges.pipe(Effect.filterOrFail(([http, limiter]) => http === 1 && limiter === 1, String), poll)
      yield* Fiber.interrupt(fiber)
      // the service notices the disconnect: the waiter is gone from the line
      yield* gauges.pipe(Effect.filterOrFail(([http, limiter]) => http === 0 && limiter === 0, String), poll)
    }))
})

describe("service: admin", () => {
  it.live("reset is disabled (403) without TOLLGATE_ADMIN_TOKEN", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      const reply = yield* post(service, "/v1/reset", { key: "user:1" }, {
        authorization: "Bearer anything-at-all-here"
      })
      assert.strictEqual(reply.status, 403)
      assert.include(reply.json.detail, "TOLLGATE_ADMIN_TOKEN")
    }))

  it.live("reset needs the bearer token: none or a wrong one is a 401 that echoes neither", () =>
    Effect.gen(function*() {
      const service = yield* start({ config, env: { TOLLGATE_ADMIN_TOKEN: ADMIN_TOKEN } })
      assert.strictEqual(yield* allowedCount(service, { key: "user:9" }, 6), 5)

      const none = yield* post(service, "/v1/reset", { key: "user:9" })
      assert.strictEqual(none.status, 401)
      assert.strictEqual(none.headers.get("www-authenticate"), "Bearer realm=\"tollgate\"")
      const wrongToken = "wrong-token-that-must-not-be-echoed"
      for (
        const authorization of [`Bearer ${wrongToken}`, `Bearer ${ADMIN_TOKEN}x`, `Basic ${ADMIN_TOKEN}`, ADMIN_TOKEN]
      ) {
        const wrong = yield* post(service, "/v1/reset", { key: "user:9" }, { authorization })
        assert.strictEqual(wrong.status, 401, authorization)
        assert.notInclude(wrong.text, wrongToken)
        assert.notInclude(wrong.text, ADMIN_TOKEN)
      }
      // still empty: the refused resets did nothing
      assert.strictEqual(yield* allowedCount(service, { key: "user:9" }, 1), 0)

      const ok = yield* post(service, "/v1/reset", { key: "user:9" }, { authorization: `Bearer ${ADMIN_TOKEN}` })
      assert.strictEqual(ok.status, 200)
      assert.deepStrictEqual(ok.json, { reset: true, policy: "default" })
      assert.strictEqual(yield* allowedCount(service, { key: "user:9" }, 6), 5)
      assert.notInclude(service.output(), ADMIN_TOKEN)
      assert.notInclude(service.output(), wrongToken)
    }))
})

describe("service: beyond a plain decision", () => {
  const beyondConfig = {
    ...config,
    policies: {
      ...config.policies,
      trial: { kind: "fixedWindow", limit: 1, window: "1 hour", dryRun: true },
      login: { kind: "fixedWindow", limit: 2, window: "1 hour", blockDuration: "2 hours" }
    }
  }
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` }

  it.live("penalty, reward, take, get; set, delete, block and fill for the admin; dry run and blockDuration", () =>
    Effect.gen(function*() {
      const service = yield* start({ config: beyondConfig, env: { TOLLGATE_ADMIN_TOKEN: ADMIN_TOKEN } })
      // get: nothing for a key never seen
      const unseen = yield* request(service, "GET", "/v1/get?key=u")
      assert.deepStrictEqual(unseen.json, { found: false, policy: "default" })
      // penalty into debt: the delay until the key is within its limit
      const penalty = yield* post(service, "/v1/penalty", { key: "u", cost: 6 })
      assert.strictEqual(penalty.status, 200)
      assert.strictEqual(penalty.json.allowed, true)
      assert.strictEqual(penalty.json.remaining, 0)
      assert.isAbove(penalty.json.delay, 3_500_000)
      const reward = yield* post(service, "/v1/reward", { key: "u", cost: 3 })
      assert.strictEqual(reward.json.remaining, 2)
      const taken = yield* post(service, "/v1/take", { key: "u", cost: 5 })
      assert.strictEqual(taken.json.taken, 2)
      assert.strictEqual(taken.json.remaining, 0)
      const got = yield* post(service, "/v1/get", { key: "u" })
      assert.strictEqual(got.json.remaining, 0)
      // the admin's operations need the token
      assert.strictEqual((yield* post(service, "/v1/fill", { key: "u" })).status, 401)
      assert.strictEqual((yield* post(service, "/v1/fill", { key: "u" }, admin)).json.remaining, 5)
      assert.strictEqual((yield* post(service, "/v1/set", { key: "u", used: 4 }, admin)).json.remaining, 1)
      const blocked = yield* post(service, "/v1/block", { key: "u", duration: 60_000 }, admin)
      assert.strictEqual(blocked.json.allowed, false)
      assert.strictEqual(blocked.json.retryAfter, 60_000)
      const refused = yield* consume(service, { key: "u" })
      assert.strictEqual(refused.json.allowed, false)
      assert.isAtMost(refused.json.retryAfter, 60_000)
      assert.isAbove(refused.json.retryAfter, 50_000)
      const forever = yield* post(service, "/v1/block", { key: "u", duration: null }, admin)
      assert.strictEqual(forever.json.retryAfter, null)
      assert.deepStrictEqual((yield* post(service, "/v1/delete", { key: "u" }, admin)).json, {
        deleted: true,
        policy: "default"
      })
      assert.deepStrictEqual((yield* post(service, "/v1/delete", { key: "u" }, admin)).json, {
        deleted: false,
        policy: "default"
      })
      assert.strictEqual((yield* consume(service, { key: "u" })).json.remaining, 4)
      // a bad duration names the field
      const bad = yield* post(service, "/v1/block", { key: "u", duration: 0 }, admin)
      assert.strictEqual(bad.status, 400)
      assert.include(bad.json.detail, "duration")

      // dry run: refusals let through, flagged, and counted in the metrics
      assert.strictEqual((yield* consume(service, { key: "t", policy: "trial" })).json.allowed, true)
      const dry = yield* consume(service, { key: "t", policy: "trial" })
      assert.strictEqual(dry.json.allowed, true)
      assert.strictEqual(dry.json.dryRun, true)
      assert.isAbove(dry.json.retryAfter, 3_500_000)
      const dryAcquire = yield* post(service, "/v1/acquire", { key: "t", policy: "trial" })
      assert.deepStrictEqual(dryAcquire.json, { allowed: true, policy: "trial", dryRun: true })
      assert.strictEqual(sample(yield* metrics(service), "tollgate_dry_run_total{limiter=\"service\"}"), 2)

      // blockDuration: the refusal blocks the key for two hours
      yield* consume(service, { key: "l", policy: "login" })
      yield* consume(service, { key: "l", policy: "login" })
      const locked = yield* consume(service, { key: "l", policy: "login" })
      assert.strictEqual(locked.json.allowed, false)
      assert.strictEqual(locked.json.retryAfter, 7_200_000)
    }))
})

describe("service: concurrency and metrics", () => {
  it.live("200 concurrent requests on one key of capacity 50 (no refill during the test): exactly 50 admitted", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      const replies = yield* Effect.forEach(
        Array.from({ length: 200 }),
        () => consume(service, { key: "hot", policy: "tight" }),
        { concurrency: "unbounded" }
      )
      assert.isTrue(replies.every((r) => r.status === 200))
      assert.strictEqual(replies.filter((r) => r.json.allowed === true).length, 50)
      assert.strictEqual(replies.filter((r) => r.json.allowed === false).length, 150)
      // every admitted request saw a distinct remaining count: 49, 48, ..., 0
      const remaining = replies.filter((r) => r.json.allowed === true).map((r) => r.json.remaining as number)
      assert.deepStrictEqual([...remaining].sort((a, b) => b - a), Array.from({ length: 50 }, (_, i) => 49 - i))

      const response = yield* request(service, "GET", "/metrics")
      assert.strictEqual(response.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8")
      const text = response.text
      assert.strictEqual(sample(text, "tollgate_decisions_total{limiter=\"service\",outcome=\"allowed\"}"), 50)
      assert.strictEqual(sample(text, "tollgate_decisions_total{limiter=\"service\",outcome=\"denied\"}"), 150)
      assert.strictEqual(sample(text, "tollgate_buckets{limiter=\"service\"}"), 1)
      assert.strictEqual(sample(text, "tollgate_bucket_events_total{limiter=\"service\",event=\"started\"}"), 1)
      assert.strictEqual(sample(text, "tollgate_overloaded_total{limiter=\"service\"}"), 0)
      assert.strictEqual(sample(text, "tollgate_http_requests_total{route=\"/v1/consume\",status=\"200\"}"), 200)
      assert.strictEqual(sample(text, "tollgate_http_waiting"), 0)
      assert.include(text, "# TYPE tollgate_decisions_total counter")
    }))
})

describe("service: graceful shutdown", () => {
  it.live("SIGTERM with requests in flight: every accepted request is answered, then exit code 0", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      // empty the bucket, then park 10 waiters on it (one is admitted every 5 s: they would wait up to 50 s)
      assert.strictEqual(yield* allowedCount(service, { key: "parked", policy: "slow" }, 1), 1)
      const waiters = yield* Effect.forEach(
        Array.from({ length: 10 }),
        () => post(service, "/v1/wait", { key: "parked", policy: "slow", maxWait: 60_000 }).pipe(Effect.forkChild)
      )
      // and one request whose body is still arriving when the signal lands
      let release: () => void = () => {}
      const rest = new Promise<void>((resolve) => {
        release = resolve
      })
      const encoder = new TextEncoder()
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(encoder.encode("{\"key\": \"slow\","))
        },
        async pull(controller) {
          await rest
          controller.enqueue(encoder.encode(" \"cost\": 2}"))
          controller.close()
        }
      })
      const slow = yield* request(service, "POST", "/v1/consume", { body }).pipe(Effect.forkChild)

      // poll (bounded) until all 11 are being handled by the service
      const poll = Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 250 })
      yield* metrics(service).pipe(
        Effect.map((text) => [sample(text, "tollgate_http_in_flight"), sample(text, "tollgate_http_waiting")]),
        Effect.filterOrFail(([inFlight, waiting]) => inFlight === 11 && waiting === 10, (n) => `in flight: ${n}`),
        poll
      )
      service.child.kill("SIGTERM")
      yield* Effect.sync(() => service.output()).pipe(
        Effect.filterOrFail((output) => output.includes("draining"), () => "not draining yet"),
        poll
      )
      // the server no longer accepts connections, but finishes what it accepted
      release()
      const slowReply = yield* Fiber.join(slow)
      assert.strictEqual(slowReply.status, 200)
      assert.strictEqual(slowReply.json.allowed, true)
      assert.strictEqual(slowReply.json.remaining, 3)
      for (const waiter of waiters) {
        const reply = yield* Fiber.join(waiter)
        assert.strictEqual(reply.status, 503)
        assert.strictEqual(reply.json.type, "urn:tollgate:problem:shutting-down")
        assert.strictEqual(reply.headers.get("retry-after"), "1")
      }
      assert.strictEqual(yield* service.exited, 0)
    }))
})

describe("service: configuration", () => {
  it.live("a bad config file stops the service with exit code 1 and a message naming the field and value", () =>
    Effect.gen(function*() {
      const badCapacity = yield* startFailing({ config: { policies: { default: { ...hour(5), capacity: -1 } } } })
      assert.strictEqual(badCapacity.code, 1)
      assert.include(badCapacity.output, "policies.default.capacity = -1")

      const badKind = yield* startFailing({ config: { policies: { default: { kind: "fancyBucket", capacity: 1 } } } })
      assert.strictEqual(badKind.code, 1)
      assert.include(badKind.output, "policies.default = {\"kind\":\"fancyBucket\"")
      assert.include(badKind.output, "\"tokenBucket\"")

      const badRule = yield* startFailing({ config: { ...config, rules: [{ prefix: "ip:", policy: "per-ipp" }] } })
      assert.include(badRule.output, "rules[0].policy = \"per-ipp\": no such policy")

      const notJson = yield* startFailing({ config: "{ policies: " })
      assert.strictEqual(notJson.code, 1)
      assert.include(notJson.output, "TOLLGATE_CONFIG")
      assert.include(notJson.output, "is not valid JSON")
    }))

  it.live("bad environment values are named; the admin token is never shown", () =>
    Effect.gen(function*() {
      const badPort = yield* startFailing({ env: { PORT: "eighty" } })
      assert.strictEqual(badPort.code, 1)
      assert.include(badPort.output, "PORT = \"eighty\"")

      const shortToken = yield* startFailing({ env: { TOLLGATE_ADMIN_TOKEN: "hunter2" } })
      assert.strictEqual(shortToken.code, 1)
      assert.include(shortToken.output, "TOLLGATE_ADMIN_TOKEN: must be at least 16 characters")
      assert.notInclude(shortToken.output, "hunter2")

      const badRules = yield* startFailing({ env: { TOLLGATE_RULES: "ip:=nobody" } })
      assert.include(badRules.output, "TOLLGATE_RULES[0].policy = \"nobody\"")
    }))

  it.live("policies from the environment alone (TOLLGATE_POLICIES, TOLLGATE_DEFAULT_POLICY, TOLLGATE_RULES)", () =>
    Effect.gen(function*() {
      const service = yield* start({
        env: {
          TOLLGATE_POLICIES: JSON.stringify({ std: hour(3), ip: hour(1) }),
          TOLLGATE_DEFAULT_POLICY: "std",
          TOLLGATE_RULES: "ip:=ip"
        }
      })
      assert.strictEqual((yield* consume(service, { key: "user:1" })).json.policy, "std")
      assert.strictEqual(yield* allowedCount(service, { key: "user:1" }, 5), 2)
      assert.strictEqual((yield* consume(service, { key: "ip:192.0.2.1" })).json.policy, "ip")
    }))
})
