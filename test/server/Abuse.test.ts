// The service under abuse: requests Node's parser refuses are answered (414,
// 431, 408, 400 as problem+json), never reset; a request that never arrives
// whole is cut at the configured timeout; a key that is not valid UTF-8 is
// refused at every door where bytes become a key, naming the field, and
// never decoded into another key.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import * as http from "node:http"
import * as net from "node:net"
import * as ServiceConfig from "../../src/server/ServiceConfig.ts"
import { metrics, post, request, sample, type Service, start } from "./harness.ts"

interface Raw {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly json: any
  /** Milliseconds from the first byte written to the connection's close. */
  readonly elapsed: number
}

// One request written as raw bytes on a connection of its own (the service is told to close it after the
// answer); the answer is read until the connection closes. A reset is a failure, with what was read.
const raw = (service: Service, bytes: Buffer, options?: { readonly keepOpen?: boolean }): Effect.Effect<Raw> =>
  Effect.callback<Raw>((resume) => {
    const url = new URL(service.url)
    const socket = net.connect(Number(url.port), url.hostname)
    const chunks: Array<Buffer> = []
    const started = performance.now()
    socket.on("data", (chunk) => chunks.push(chunk))
    socket.on(
      "error",
      (error) => resume(Effect.die(new Error(`${error.message} after ${Buffer.concat(chunks).length} bytes`)))
    )
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("latin1")
      const head = text.slice(0, text.indexOf("\r\n\r\n"))
      const [statusLine, ...lines] = head.split("\r\n")
      const headers: Record<string, string> = {}
      for (const line of lines) {
        const colon = line.indexOf(":")
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
      }
      const body = Buffer.concat(chunks).subarray(Buffer.byteLength(head, "latin1") + 4).toString("utf8")
      let json: unknown = undefined
      try {
        json = JSON.parse(body)
      } catch {
        json = body
      }
      resume(Effect.succeed({
        status: Number(statusLine.split(" ")[1]),
        headers,
        json,
        elapsed: performance.now() - started
      }))
    })
    if (options?.keepOpen === true) socket.write(bytes)
    else socket.end(bytes)
    return Effect.sync(() => socket.destroy())
  })

const bytes = (...parts: ReadonlyArray<string | ReadonlyArray<number>>): Buffer =>
  Buffer.concat(parts.map((p) => typeof p === "string" ? Buffer.from(p, "latin1") : Buffer.from(p)))

// A whole HTTP/1.1 request with `Connection: close`; the body is sent as given, with its length.
const httpRequest = (line: Buffer | string, headers: ReadonlyArray<Buffer | string> = [], body?: Buffer) =>
  Buffer.concat([
    typeof line === "string" ? Buffer.from(line, "latin1") : line,
    Buffer.from("\r\nhost: tollgate\r\nconnection: close\r\n", "latin1"),
    ...headers.map((h) => Buffer.concat([typeof h === "string" ? Buffer.from(h, "latin1") : h, Buffer.from("\r\n")])),
    body === undefined
      ? Buffer.from("\r\n")
      : Buffer.from(`content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`),
    body ?? Buffer.alloc(0)
  ])

const assertProblem = (reply: Raw, status: number, type: string, detail: string, name = type) => {
  assert.strictEqual(reply.status, status, `${name}: ${JSON.stringify(reply.json)}`)
  assert.strictEqual(reply.headers["content-type"], "application/problem+json", name)
  assert.strictEqual(reply.json.type, `urn:tollgate:problem:${type}`, name)
  assert.strictEqual(reply.json.status, status, name)
  assert.include(reply.json.detail, detail, name)
}

// GET over node:http, reporting a reset as such.
const get = (service: Service, path: string, headers?: Record<string, string>) =>
  Effect.callback<{ readonly status: number; readonly type: string | undefined; readonly json: any } | string>(
    (resume) => {
      const req = http.get(new URL(path, service.url), { headers, agent: false }, (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (chunk: string) => (text += chunk))
        res.on("end", () =>
          resume(Effect.succeed({
            status: res.statusCode ?? 0,
            type: res.headers["content-type"],
            json: JSON.parse(text)
          })))
      })
      req.on("error", (error) => resume(Effect.succeed(`${(error as NodeJS.ErrnoException).code}: ${error.message}`)))
      return Effect.sync(() => req.destroy())
    }
  )

const hour = (capacity: number) => ({ kind: "tokenBucket", capacity, refill: { tokens: 1, per: "1 hour" } })

describe("service under abuse: sizes", () => {
  it.live("a 100 KB URL is answered 414 and 100 KB of headers 431, as problem+json naming what was too long", () =>
    Effect.gen(function*() {
      const service = yield* start()
      const url = yield* get(service, "/v1/peek?key=" + "k".repeat(100_000))
      assert.isObject(url, `the 100 KB URL was not answered: ${String(url)}`)
      if (typeof url === "object") {
        assert.strictEqual(url.status, 414)
        assert.strictEqual(url.type, "application/problem+json")
        assert.strictEqual(url.json.type, "urn:tollgate:problem:uri-too-long")
        assert.include(url.json.detail, "the request line (method and URL) is longer than 16384 bytes")
        assert.strictEqual(url.json.limit, 16384)
      }
      const header = yield* get(service, "/v1/peek?key=k", { "x-padding": "p".repeat(100_000) })
      assert.isObject(header, `the 100 KB header was not answered: ${String(header)}`)
      if (typeof header === "object") {
        assert.strictEqual(header.status, 431)
        assert.strictEqual(header.type, "application/problem+json")
        assert.strictEqual(header.json.type, "urn:tollgate:problem:headers-too-large")
        assert.include(header.json.detail, "the request line and headers are larger than 16384 bytes")
      }
      // and the service goes on answering
      assert.strictEqual((yield* request(service, "GET", "/v1/peek?key=k")).status, 200)
    }))

  it.live("malformed HTTP (a raw byte over 0x7F in the path) is answered 400 as problem+json", () =>
    Effect.gen(function*() {
      const service = yield* start()
      const reply = yield* raw(service, httpRequest(bytes("GET /v1/check/a", [0xff], " HTTP/1.1")))
      assertProblem(reply, 400, "malformed-request", "the request is not valid HTTP/1.1")
      assert.include(reply.json.detail, "HPE_INVALID_URL")
    }))
})

const TIMEOUTS = { TOLLGATE_REQUEST_TIMEOUT: "400 millis", TOLLGATE_HEADERS_TIMEOUT: "300 millis" }
// Node looks for late requests every quarter of the shorter timeout (75 ms here); a second more for a busy machine.
const SLACK = 1_000

describe("service under abuse: requests that never arrive whole", () => {
  it.live(
    "a body shorter than its Content-Length is answered 408 once requestTimeout (400 ms) has passed, not before",
    () =>
      Effect.gen(function*() {
        const service = yield* start({ env: TIMEOUTS })
        const reply = yield* raw(
          service,
          bytes(
            "POST /v1/consume HTTP/1.1\r\nhost: tollgate\r\ncontent-type: application/json\r\n",
            "content-length: 100\r\n\r\n{\"key\":"
          ),
          { keepOpen: true }
        ).pipe(Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.die("no answer within 5 s") }))
        assertProblem(reply, 408, "request-timeout", "the whole request within 400 ms")
        assert.strictEqual(reply.json.requestTimeout, 400)
        assert.isAtLeast(reply.elapsed, 350)
        assert.isBelow(reply.elapsed, 400 + SLACK)
        // nothing was decided for the request that never arrived
        assert.strictEqual(
          sample(yield* metrics(service), "tollgate_bucket_events_total{limiter=\"service\",event=\"started\"}"),
          0
        )
      })
  )

  it.live("headers that stop coming, or a connection that sends nothing, get 408 once headersTimeout (300 ms) passed", () =>
    Effect.gen(function*() {
      const service = yield* start({ env: TIMEOUTS })
      const within = <A>(effect: Effect.Effect<A>) =>
        effect.pipe(Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.die("no answer within 5 s") }))
      const partial = yield* within(
        raw(service, bytes("GET /v1/peek?key=k HTTP/1.1\r\nhost: tollgate\r\n"), { keepOpen: true })
      )
      assertProblem(partial, 408, "request-timeout", "headers within 300 ms")
      assert.isAtLeast(partial.elapsed, 250)
      assert.isBelow(partial.elapsed, 300 + SLACK)
      const silent = yield* within(raw(service, Buffer.alloc(0), { keepOpen: true }))
      assertProblem(silent, 408, "request-timeout", "headers within 300 ms")
      assert.isBelow(silent.elapsed, 300 + SLACK)
    }))

  it.live("a request that arrived whole is not cut while it is answered: a 1.2 s wait under a 400 ms requestTimeout", () =>
    Effect.gen(function*() {
      const service = yield* start({
        env: TIMEOUTS,
        config: {
          policies: { default: { kind: "tokenBucket", capacity: 1, refill: { tokens: 1, per: "1200 millis" } } }
        }
      })
      assert.strictEqual((yield* post(service, "/v1/consume", { key: "w" })).json.allowed, true)
      const waited = yield* post(service, "/v1/wait", { key: "w", maxWait: 5_000 })
      assert.strictEqual(waited.status, 200)
      assert.strictEqual(waited.json.allowed, true)
      assert.isAbove(waited.json.waited, 800)
    }))

  it.effect("the timeouts are read from the file and the environment, and a bad one is named with its value", () =>
    Effect.gen(function*() {
      const defaults = yield* ServiceConfig.resolve({})
      assert.strictEqual(defaults.limits.requestTimeoutMillis, 10_000)
      assert.strictEqual(defaults.limits.headersTimeoutMillis, 5_000)
      const file = yield* ServiceConfig.resolve({ file: { limits: { requestTimeout: "2 seconds" } } })
      // the headers' timeout is never longer than the request's
      assert.deepStrictEqual([file.limits.requestTimeoutMillis, file.limits.headersTimeoutMillis], [2_000, 2_000])
      const env = yield* ServiceConfig.resolve({
        file: { limits: { requestTimeout: "2 seconds", headersTimeout: 1_000 } },
        env: { TOLLGATE_REQUEST_TIMEOUT: "30 seconds", TOLLGATE_HEADERS_TIMEOUT: "20 seconds" }
      })
      assert.deepStrictEqual([env.limits.requestTimeoutMillis, env.limits.headersTimeoutMillis], [30_000, 20_000])

      const message = (input: ServiceConfig.Input) =>
        Effect.map(
          Effect.exit(ServiceConfig.resolve(input)),
          (exit) => Exit.isFailure(exit) ? String(exit.cause) : "accepted"
        )
      assert.include(
        yield* message({ env: { TOLLGATE_REQUEST_TIMEOUT: "soon" } }),
        "TOLLGATE_REQUEST_TIMEOUT = \"soon\": must be a positive duration"
      )
      assert.include(
        yield* message({ file: { limits: { headersTimeout: "0 seconds" } } }),
        "limits.headersTimeout = \"0 seconds\": must be a positive duration"
      )
      assert.include(
        yield* message({ file: { limits: { requestTimeout: "2 hours" } } }),
        "limits.requestTimeout = \"2 hours\": must be a positive duration of at most 1 hour"
      )
      assert.include(
        yield* message({ file: { limits: { requestTimeout: "1 second", headersTimeout: "2 seconds" } } }),
        "limits.headersTimeout = \"2 seconds\": must not be longer than the request timeout (limits.requestTimeout: 1000 ms)"
      )
      assert.include(
        yield* message({ env: { TOLLGATE_HEADERS_TIMEOUT: "20 seconds" } }),
        "TOLLGATE_HEADERS_TIMEOUT = \"20 seconds\": must not be longer than the request timeout"
      )
    }))
})

describe("service under abuse: keys that are not valid UTF-8", () => {
  const config = {
    policies: { default: hour(1) },
    forwardAuth: {
      rules: [
        { name: "h", pathPrefix: "/h/", policy: "default", key: [{ header: "x-api-key" }] },
        { name: "p", pathPrefix: "/p/", policy: "default", key: ["path"] }
      ]
    }
  }
  const consume = (key: ReadonlyArray<number> | string, path = "/v1/consume") =>
    httpRequest(`POST ${path} HTTP/1.1`, [], bytes("{\"key\":\"", key, "\"}"))

  it.live("in a JSON body (consume, the batch, consume-all, wait's tenant, chunked): 400 naming the field", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      // 0xFF and 0xFE would both decode to "b\uFFFD": one key for two byte strings
      for (const key of [bytes("b", [0xff]), bytes("b", [0xfe]), bytes("b", [0xc3]), bytes("b", [0xed, 0xa0, 0x80])]) {
        const reply = yield* raw(service, consume([...key]))
        assertProblem(reply, 400, "invalid-request", "key = \"b\uFFFD", `key bytes ${key.toString("hex")}`)
        assert.strictEqual(reply.json.errors[0].field, "key")
        assert.include(reply.json.errors[0].reason, "is not valid UTF-8")
      }
      const batch = yield* raw(
        service,
        httpRequest(
          "POST /v1/batch HTTP/1.1",
          [],
          bytes("{\"requests\":[{\"key\":\"ok\"},{\"key\":\"b", [0xff], "\"}]}")
        )
      )
      assertProblem(batch, 400, "invalid-request", "requests[1].key = ")
      const all = yield* raw(
        service,
        httpRequest("POST /v1/consume-all HTTP/1.1", [], bytes("{\"keys\":[\"a\",\"b", [0xfe], "\"]}"))
      )
      assertProblem(all, 400, "invalid-request", "keys[1] = ")
      const tenant = yield* raw(
        service,
        httpRequest("POST /v1/wait HTTP/1.1", [], bytes("{\"key\":\"w\",\"tenant\":\"t", [0xff], "\"}"))
      )
      assertProblem(tenant, 400, "invalid-request", "tenant = ")
      // a chunked body is read another way, and refused the same
      const chunked = yield* raw(
        service,
        Buffer.concat([
          bytes("POST /v1/consume HTTP/1.1\r\nhost: tollgate\r\nconnection: close\r\n"),
          bytes("content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"),
          bytes("c\r\n{\"key\":\"b", [0xff], "\"}\r\n0\r\n\r\n")
        ])
      )
      assertProblem(chunked, 400, "invalid-request", "key = \"b\uFFFD")
      // a lone surrogate written as a JSON escape: valid JSON, but as UTF-8 (in Redis) it is U+FFFD too
      const lone = yield* post(service, "/v1/consume", "{\"key\":\"b\\ud800\"}")
      assert.strictEqual(lone.status, 400)
      assert.include(lone.json.detail, "key = \"b\\ud800\": expected a key of whole Unicode characters")
      const loneInBatch = yield* post(service, "/v1/batch", "{\"requests\":[{\"key\":\"\\udfff\"}]}")
      assert.strictEqual(loneInBatch.json.results[0].error.status, 400)
      // U+FFFD itself, sent as valid UTF-8, is a key like any other
      const replacement = yield* raw(service, consume([...Buffer.from("b\uFFFD", "utf8")]))
      assert.strictEqual(replacement.status, 200)
      assert.strictEqual(replacement.json.allowed, true)
      const text = yield* metrics(service)
      assert.strictEqual(sample(text, "tollgate_bucket_events_total{limiter=\"service\",event=\"started\"}"), 1)
    }))

  it.live("in a query parameter (GET /v1/peek, GET /v1/get): 400 naming it; %25FF is the key \"%FF\"", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      for (const path of ["/v1/peek?key=q%FF", "/v1/get?key=q%FE", "/v1/peek?key=q%ED%A0%80", "/v1/peek?key=q%ZZ"]) {
        const reply = yield* request(service, "GET", path)
        assert.strictEqual(reply.status, 400, path)
        assert.strictEqual(reply.headers.get("content-type"), "application/problem+json", path)
        assert.include(
          reply.json.detail,
          `key = "${path.slice(path.indexOf("q"))}": is not valid percent-encoded UTF-8`
        )
      }
      // the router's own decoding kept "q%FF" as written: it was the key "q%FF", as "q%25FF" is
      assert.strictEqual((yield* post(service, "/v1/consume", { key: "q%FF" })).json.allowed, true)
      const literal = yield* request(service, "GET", "/v1/peek?key=q%25FF")
      assert.strictEqual(literal.status, 200)
      assert.strictEqual(literal.json.allowed, false)
      const encoded = yield* request(service, "GET", "/v1/get?key=caf%C3%A9+x")
      assert.strictEqual(encoded.status, 200)
      assert.deepStrictEqual(encoded.json, { found: false, policy: "default" })
    }))

  it.live("in a path segment (/v1/check/<path>): 400 naming the path, as problem+json", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      const reply = yield* request(service, "GET", "/v1/check/p/a%FF")
      assert.strictEqual(reply.status, 400)
      assert.strictEqual(reply.headers.get("content-type"), "application/problem+json")
      assert.include(reply.json.detail, "path = \"/v1/check/p/a%FF\": is not valid percent-encoded UTF-8")
      // a valid encoding is a key as before
      assert.strictEqual((yield* request(service, "GET", "/v1/check/p/caf%C3%A9")).json.allowed, true)
    }))

  it.live("in a header a rule keys on (and X-Forwarded-Uri): each byte string is a key of its own", () =>
    Effect.gen(function*() {
      // Node reads header values byte for byte (Latin-1), so no two byte strings become one key, and a
      // gateway's sub-request is decided rather than refused.
      const service = yield* start({ config })
      const check = (header: Buffer) => raw(service, httpRequest("GET /v1/check/h/x HTTP/1.1", [header]))
      const viaUri = (header: Buffer) => raw(service, httpRequest("GET /v1/check HTTP/1.1", [header]))
      for (const send of [check, viaUri]) {
        const name = send === check ? "x-api-key: " : "x-forwarded-uri: /p/"
        const ff = bytes(name, "a", [0xff])
        const fe = bytes(name, "a", [0xfe])
        assert.strictEqual((yield* send(ff)).json.allowed, true, name)
        assert.strictEqual((yield* send(fe)).json.allowed, true, `${name}: 0xFE shared 0xFF's key`)
        assert.strictEqual((yield* send(ff)).status, 429, name)
        assert.strictEqual((yield* send(fe)).status, 429, name)
      }
    }))
})
