// End to end behind a real nginx: the service (docs/gateway/tollgate.json), a tiny
// upstream app, and nginx with docs/gateway/nginx.conf (its addresses replaced by
// this test's free ports), all on 127.0.0.1. nginx asks tollgate with
// auth_request; requests over the limit get nginx's 429 with RateLimit,
// RateLimit-Policy and Retry-After.
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Schedule } from "effect"
import { spawn, spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { freePort } from "../redis/redis.ts"
import { start } from "../server/harness.ts"

const docs = fileURLToPath(new URL("../../docs/gateway/", import.meta.url))

const nginxBinary = (): string | undefined => {
  for (const candidate of ["nginx", "/usr/sbin/nginx"]) {
    const probe = spawnSync(candidate, ["-v"], { stdio: "ignore" })
    if (probe.status === 0) return candidate
  }
  return undefined
}
const nginx = nginxBinary()
// CI installs nginx (.ci/run): there, a missing nginx is a failure, not a skip.
const runIt = nginx !== undefined || process.env.CI === "true"
  ? it.live
  : (name: string, self: Parameters<typeof it.live>[1]) =>
    it.live.skip(`${name} (skipped: nginx is not installed; .ci/run installs it)`, self)

// A tiny upstream: answers "app <path>" and counts what reached it.
const upstream = Effect.acquireRelease(
  Effect.callback<{ server: Server; port: number; hits: () => number }>((resume) => {
    let hits = 0
    const server = createServer((request, response) => {
      hits++
      response.setHeader("content-type", "text/plain")
      response.end(`app ${request.url}`)
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      resume(
        Effect.succeed({ server, port: typeof address === "object" && address ? address.port : 0, hits: () => hits })
      )
    })
  }),
  ({ server }) =>
    Effect.callback<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
)

// nginx with the documented configuration, in a prefix of its own; stopped by its PID.
const startNginx = (tollgatePort: number, appPort: number) =>
  Effect.gen(function*() {
    if (nginx === undefined) return yield* Effect.die(new Error("nginx is not installed (.ci/run installs it)"))
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "tollgate-nginx-"))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
    const port = yield* freePort
    const documented = readFileSync(join(docs, "nginx.conf"), "utf8")
    const site = documented
      .replace("server 127.0.0.1:8080;", `server 127.0.0.1:${tollgatePort};`)
      .replace("server 127.0.0.1:3000;", `server 127.0.0.1:${appPort};`)
      .replace("listen 127.0.0.1:8000;", `listen 127.0.0.1:${port};`)
    assert.notStrictEqual(site, documented)
    mkdirSync(join(dir, "tmp"))
    writeFileSync(join(dir, "tollgate.conf"), site)
    writeFileSync(
      join(dir, "nginx.conf"),
      [
        "daemon off;",
        "worker_processes 1;",
        `pid ${join(dir, "nginx.pid")};`,
        `error_log ${join(dir, "error.log")} warn;`,
        "events { worker_connections 256; }",
        "http {",
        "  access_log off;",
        ...["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map((t) => `  ${t}_temp_path ${join(dir, "tmp", t)};`),
        `  include ${join(dir, "tollgate.conf")};`,
        "}"
      ].join("\n")
    )
    const exited = yield* Deferred.make<number | null>()
    let output = ""
    const child = spawn(nginx, ["-p", dir, "-c", join(dir, "nginx.conf")], { stdio: ["ignore", "pipe", "pipe"] })
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.on("exit", (code) => Deferred.doneUnsafe(exited, Exit.succeed(code)))
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGQUIT")
        return Deferred.await(exited).pipe(
          Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.sync(() => child.kill("SIGKILL")) })
        )
      })
    )
    // Ready once it answers.
    const url = `http://127.0.0.1:${port}`
    yield* Effect.tryPromise(() => fetch(`${url}/.ready`)).pipe(
      Effect.retry({ times: 100, schedule: Schedule.spaced("50 millis") }),
      Effect.tapError(() => Effect.sync(() => console.error(output))),
      Effect.orDie,
      Effect.raceFirst(
        Effect.flatMap(Deferred.await(exited), (code) => Effect.die(new Error(`nginx exited with ${code}: ${output}`)))
      )
    )
    return { url, errors: () => readFileSync(join(dir, "error.log"), "utf8") }
  })

const get = (url: string, headers: Record<string, string> = {}, method = "GET") =>
  Effect.promise(async () => {
    const response = await fetch(url, { method, headers })
    return { status: response.status, headers: response.headers, text: await response.text() }
  })

describe("behind nginx (auth_request, docs/gateway/nginx.conf)", () => {
  runIt(
    "requests over the limit get nginx's 429 with RateLimit, RateLimit-Policy and Retry-After",
    () =>
      Effect.gen(function*() {
        const app = yield* upstream
        const service = yield* start({
          env: { TOLLGATE_CONFIG: join(docs, "tollgate.json"), TOLLGATE_RLS_PORT: "0" }
        })
        const tollgatePort = Number(new URL(service.url).port)
        const proxy = yield* startNginx(tollgatePort, app.port)

        // "per-client": 5 at once per client address (X-Forwarded-For, appended by nginx, read
        // because nginx is a trusted proxy), then 1 per 10 s.
        const client = { "x-forwarded-for": "203.0.113.5" }
        for (let i = 0; i < 5; i++) {
          const ok = yield* get(`${proxy.url}/items?page=${i}`, client)
          assert.strictEqual(ok.status, 200)
          assert.strictEqual(ok.text, `app /items?page=${i}`)
          assert.strictEqual(ok.headers.get("ratelimit"), `"per-client";r=${4 - i};t=${10 * (i + 1)}`)
          assert.strictEqual(ok.headers.get("ratelimit-policy"), "\"per-client\";q=5;w=50")
        }
        const hitsBefore = app.hits()
        const denied = yield* get(`${proxy.url}/items`, client)
        assert.strictEqual(denied.status, 429)
        assert.strictEqual(denied.headers.get("ratelimit"), "\"per-client\";r=0;t=50")
        assert.strictEqual(denied.headers.get("ratelimit-policy"), "\"per-client\";q=5;w=50")
        const retryAfter = Number(denied.headers.get("retry-after"))
        assert.isAtLeast(retryAfter, 9)
        assert.isAtMost(retryAfter, 10)
        assert.strictEqual(denied.headers.get("content-type"), "application/problem+json")
        assert.strictEqual(JSON.parse(denied.text).status, 429)
        assert.strictEqual(app.hits(), hitsBefore, "a denied request never reaches the app")

        // Another client has its own limit; so do other rules (login: 3 a minute, POST /login only).
        assert.strictEqual((yield* get(`${proxy.url}/items`, { "x-forwarded-for": "203.0.113.6" })).status, 200)
        const logins = []
        for (let i = 0; i < 4; i++) logins.push((yield* get(`${proxy.url}/login`, client, "POST")).status)
        assert.deepStrictEqual(logins, [200, 200, 200, 429])
        // The path is normalised: a client cannot step around the login rule.
        assert.strictEqual((yield* get(`${proxy.url}//x/../login`, client, "POST")).status, 429)

        // API keys: per key, whatever the address.
        const keyed = yield* get(`${proxy.url}/api/orders`, { ...client, "x-api-key": "k-1" })
        assert.strictEqual(keyed.status, 200)
        assert.match(keyed.headers.get("ratelimit") ?? "", /^"api-key";r=\d+;t=\d+$/)
      })
  )

  runIt("tollgate down: nginx fails closed with 503, as configured", () =>
    Effect.gen(function*() {
      const app = yield* upstream
      const closed = yield* freePort
      const proxy = yield* startNginx(closed, app.port)
      const reply = yield* get(`${proxy.url}/items`)
      assert.strictEqual(reply.status, 503)
      assert.strictEqual(app.hits(), 0)
    }))
})
