/**
 * What the Redis tests share: the server they run against (`REDIS_URL`, set
 * by `.ci/run`), skipping with a clear message when there is none, and a
 * namespace per test file that is removed afterwards.
 */
import { NodeRedis } from "@effect/platform-node"
import { describe, layer, type Vitest } from "@effect/vitest"
import { Clock, Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from "node:child_process"
import * as net from "node:net"

/** The Redis the tests use, or undefined (then they are skipped). */
export const url: string | undefined = process.env.REDIS_URL === "" ? undefined : process.env.REDIS_URL

const skipped = "skipped: REDIS_URL is not set (.ci/run starts a redis-server and sets it)"

/** A prefix no other test run uses. */
export const uniquePrefix = (name: string): string =>
  `tollgate-test:${name}:${process.pid}:${Math.random().toString(36).slice(2, 8)}:`

/** Deletes every key under `prefix`. */
export const cleanup = (prefix: string) =>
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    let cursor = "0"
    do {
      const [next, keys] = yield* redis.send<[string, Array<string>]>(
        "SCAN",
        cursor,
        "MATCH",
        `${prefix}*`,
        "COUNT",
        "1000"
      )
      if (keys.length > 0) yield* redis.send("DEL", ...keys)
      cursor = next
    } while (cursor !== "0")
  })

/**
 * A suite with the `Redis` service. Without a server its every test is still
 * registered, and skipped, and the suite's name says why: the count of
 * skipped tests is what a run without Redis leaves out.
 */
export const describeRedis = (
  name: string,
  body: (it: Vitest.MethodsNonLive<Redis.Redis | NodeRedis.NodeRedis>) => void
): void => {
  // Built with the live services: a TestClock jumping to epoch-sized times
  // would run the client's timers millions of times over.
  const suite = layer(
    NodeRedis.layer({ url: url ?? "redis://127.0.0.1:6379" }) as Layer.Layer<
      Redis.Redis | NodeRedis.NodeRedis,
      unknown
    >,
    { timeout: "10 seconds", excludeTestServices: true }
  )
  if (url !== undefined) return suite(name, body)
  // Skipped: the layer's hooks never run, so nothing connects.
  describe.skip(`${name} (${skipped})`, () => suite(name, body))
}

/** A clock that reads `time.now` (set it at will, backwards too); it never sleeps. */
export const settableClock = (start: number) => {
  const time = { now: start }
  const nanos = () => BigInt(time.now) * 1_000_000n
  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: () => time.now,
    currentTimeMillis: Effect.sync(() => time.now),
    currentTimeNanosUnsafe: nanos,
    currentTimeNanos: Effect.sync(nanos),
    monotonicTimeNanosUnsafe: nanos,
    monotonicTimeNanos: Effect.sync(nanos),
    sleep: () => Effect.never
  }
  return { time, clock } as const
}

// ---------------------------------------------------------------------------
// A redis-server of a test's own (the restart and service-failure tests stop
// and kill it), skipped when the binary is missing.

/** Whether a `redis-server` binary is installed. */
export const hasServer: boolean = spawnSync("redis-server", ["--version"]).status === 0

/** A port nothing listens on at the moment (127.0.0.1). */
export const freePort = Effect.callback<number>((resume) => {
  const server = net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** The port of a TCP server on 127.0.0.1 that accepts connections and never answers (closed with the scope). */
export const silentServer = Effect.acquireRelease(
  Effect.callback<net.Server>((resume) => {
    const server = net.createServer(() => {})
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
  }),
  (server) => Effect.sync(() => server.close())
).pipe(Effect.map((server) => (server.address() as net.AddressInfo).port))

/** A redis-server on 127.0.0.1:port, no persistence; ready when it says so. */
export const startServer = (port: number, dir: string, extra: ReadonlyArray<string> = []) =>
  Effect.callback<ChildProcessWithoutNullStreams>((resume) => {
    const child = spawn("redis-server", [
      "--bind",
      "127.0.0.1",
      "--port",
      String(port),
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir,
      ...extra
    ])
    let out = ""
    const onData = (chunk: unknown) => {
      out += String(chunk)
      if (out.includes("Ready to accept connections")) {
        child.stdout.off("data", onData)
        resume(Effect.succeed(child))
      }
    }
    child.stdout.on("data", onData)
    child.on("exit", (code) => resume(Effect.die(`redis-server exited (${code}): ${out}`)))
  })

/** Kills the server (SIGKILL: a crash, not a clean shutdown) and waits for it to exit. */
export const killServer = (child: ChildProcessWithoutNullStreams) =>
  Effect.callback<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
    child.kill("SIGKILL") // a crash, not a clean shutdown
  })
