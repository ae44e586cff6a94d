// The service as a process: how it starts from `npm start`, stops on a
// signal sent to npm, says why it cannot listen, takes its arguments,
// answers HEAD, and which modules it loads.
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import * as Module from "node:module"
import { fileURLToPath } from "node:url"
import { post, request, start, startFailing } from "./harness.ts"

// `npm start` as the README runs it, on the npm that runs these tests.
const npmStart: readonly [string, ...Array<string>] = process.env.npm_execpath !== undefined &&
    process.env.npm_execpath.endsWith(".js")
  ? [process.execPath, process.env.npm_execpath, "start"]
  : ["npm", "start"]

const manifest: { readonly version: string } = JSON.parse(
  readFileSync(new URL("../../package.json", import.meta.url), "utf8")
)

// Reports the modules a start-up loads (Node's synchronous module hooks: Node 22.15 and later).
const loadedHook = fileURLToPath(new URL("fixtures/loaded.mjs", import.meta.url))
// The Redis clients, Effect Cluster, tollgate's cluster and Redis store, which the in-process service has no use
// for; on Redis it needs ioredis and the Redis store alone. Effect's own Effect module is matched too, to show that
// the hook reports.
const watched = String.raw`/node_modules/(redis|@redis/[^/]+)/|/node_modules/ioredis/built/index\.js$|` +
  String.raw`/effect/dist/cluster/|/src/cluster/|/src/redis/RedisStore\.ts$|/effect/dist/Effect\.js$`

// The watched modules a service loaded by the time it answered a consume, sorted.
const loadedBy = (env: Record<string, string>) =>
  Effect.gen(function*() {
    const service = yield* start({
      command: [process.execPath, "--import", loadedHook, "src/server/main.ts"],
      env: { ...env, TOLLGATE_TEST_LOADED: watched }
    })
    assert.strictEqual((yield* post(service, "/v1/consume", { key: "k" })).status, 200)
    return service.output().split("\n").filter((line) => line.startsWith("loaded ")).map((line) =>
      line.replace(/^loaded .*\/node_modules\//, "").replace(/^loaded .*\/src\//, "src/")
    ).sort()
  }).pipe(Effect.scoped)

const refused = (url: string) => Effect.promise(() => fetch(url).then(() => false, () => true))

describe("service: the process", () => {
  it.live("SIGTERM or SIGINT sent to the npm start process stops the service (npm exits 0, the port closes)", () =>
    Effect.forEach(["SIGTERM", "SIGINT"] as const, (signal) =>
      Effect.scoped(Effect.gen(function*() {
        const service = yield* start({ command: npmStart })
        assert.strictEqual((yield* request(service, "GET", "/healthz")).status, 200)
        service.child.kill(signal)
        const code = yield* service.exited.pipe(
          Effect.timeoutOrElse({
            duration: "20 seconds",
            orElse: () => Effect.fail(`npm start still running after ${signal}:\n${service.output()}`)
          })
        )
        assert.strictEqual(code, 0, `${signal}: npm exited with ${code}:\n${service.output()}`)
        assert.include(service.output(), "draining")
        assert.isTrue(yield* refused(service.url + "/healthz"), `${signal}: the service still answers`)
      }))))

  it.live("a port in use stops the start with one line naming the host and port", () =>
    Effect.gen(function*() {
      const first = yield* start()
      const port = new URL(first.url).port
      const second = yield* startFailing({ env: { PORT: port } })
      assert.strictEqual(second.code, 1)
      assert.strictEqual(second.output, `tollgate: cannot listen on 127.0.0.1:${port}: the port is in use\n`)
    }))

  it.live("the bin answers --help and --version, and any other argument stops it with one line (exit 1)", () =>
    Effect.gen(function*() {
      const run = (...args: ReadonlyArray<string>) =>
        startFailing({ command: [process.execPath, "src/server/main.ts", ...args] })
      const help = yield* run("--help")
      assert.strictEqual(help.code, 0)
      assert.match(help.output, /^Usage: tollgate \[--help \| --version\]\n/)
      assert.include(help.output, "TOLLGATE_CONFIG")
      const version = yield* run("--version")
      assert.strictEqual(version.code, 0)
      assert.strictEqual(version.output, `${manifest.version}\n`)
      const port = yield* run("--port", "9000")
      assert.strictEqual(port.code, 1)
      assert.strictEqual(
        port.output,
        "tollgate: unknown arguments \"--port 9000\": the service is configured by environment variables and " +
          "TOLLGATE_CONFIG (tollgate --help)\n"
      )
    }))

  it.live("HEAD answers wherever GET does, with no body; elsewhere 404 or 405 with Allow", () =>
    Effect.gen(function*() {
      const service = yield* start()
      for (const path of ["/healthz", "/readyz", "/metrics", "/v1/peek?key=k"]) {
        const head = yield* request(service, "HEAD", path)
        assert.strictEqual(head.status, 200, `HEAD ${path}`)
        assert.strictEqual(head.text, "", `HEAD ${path}`)
      }
      const post = yield* request(service, "HEAD", "/v1/consume")
      assert.strictEqual(post.status, 405)
      assert.strictEqual(post.headers.get("allow"), "POST")
      assert.strictEqual((yield* request(service, "HEAD", "/v2/nothing")).status, 404)
    }))

  it.live.skipIf(!("registerHooks" in Module))(
    "on the in-process default, the service loads neither a Redis client nor Effect Cluster",
    () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* loadedBy({}), ["effect/dist/Effect.js"])
      })
  )

  it.live.skipIf(!("registerHooks" in Module) || process.env.REDIS_URL === undefined)(
    "on Redis, the service loads ioredis and the Redis store, not node-redis nor Effect Cluster (REDIS_URL)",
    () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* loadedBy({ REDIS_URL: process.env.REDIS_URL ?? "" }), [
          "effect/dist/Effect.js",
          "ioredis/built/index.js",
          "src/redis/RedisStore.ts"
        ])
      })
  )
})
