/**
 * What the multi-process cluster tests share: the Postgres they run against
 * (`TOLLGATE_PG_URL`, set by `.ci/run`; the tests are skipped, visibly,
 * without it), a database of their own per test, runner processes
 * (test/cluster/fixtures/runner.ts) on it, and a client-only node in the
 * test's own process.
 */
import { PgClient } from "@effect/sql-pg"
import { describe, it } from "@effect/vitest"
import { Context, type Duration, Effect, Layer, Redacted, Schema, type Scope } from "effect"
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import * as net from "node:net"
import * as path from "node:path"
import * as readline from "node:readline"
import { ClusterLimiter, ClusterRunner } from "../../src/cluster/index.ts"
import { RateLimiter } from "../../src/index.ts"
import { options, sharding } from "./fixtures/policies.ts"

/** The Postgres server the tests use, or undefined (then they are skipped). */
export const url: string | undefined = process.env.TOLLGATE_PG_URL === "" ? undefined : process.env.TOLLGATE_PG_URL

const skipped = "TOLLGATE_PG_URL is not set: cluster tests on Postgres skipped (.ci/run starts Postgres and sets it)"
if (url === undefined) console.warn(skipped)

/** A suite that needs Postgres, or a skipped one that says why. */
export const describePostgres = (name: string, body: () => void): void => {
  if (url === undefined) {
    describe.skip(`${name} (${skipped})`, () => {
      it("needs a Postgres server", () => {})
    })
    return
  }
  describe(name, body)
}

const withDatabase = (database: string) => {
  const u = new URL(url!)
  u.pathname = `/${database}`
  return u.toString()
}

/** A database of its own for one test, dropped when the scope closes. */
export const database = Effect.gen(function*() {
  const name = `tollgate_test_${process.pid}_${Math.random().toString(36).slice(2, 8)}`
  const admin = Layer.orDie(PgClient.layer({ url: Redacted.make(url!) }))
  const run = (statement: string) =>
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      yield* sql.unsafe(statement)
    }).pipe(Effect.provide(admin), Effect.orDie)
  yield* Effect.acquireRelease(
    run(`CREATE DATABASE ${name}`),
    () => Effect.ignore(run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  )
  return withDatabase(name)
})

/** A port nobody listens on now. */
export const freePort = Effect.callback<number>((resume) => {
  const server = net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

const fixture = path.join(import.meta.dirname, "fixtures", "runner.ts")

/** A runner process that exited before it was ready. */
export class RunnerFailed extends Schema.TaggedError<RunnerFailed>()("RunnerFailed", {
  code: Schema.NullOr(Schema.Number),
  output: Schema.String
}) {}

/** A runner process. */
export interface Runner {
  readonly port: number
  readonly child: ChildProcessWithoutNullStreams
  /** Stops it gracefully (its shards are handed over) and waits for it to exit. */
  readonly stop: Effect.Effect<void>
  /** Kills it with SIGKILL: a crash. */
  readonly kill: Effect.Effect<void>
  /** What it wrote on stderr so far. */
  readonly log: () => string
}

const exited = (child: ChildProcessWithoutNullStreams) =>
  Effect.callback<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
  })

/** Starts a runner on `db` and waits for it to say "ready"; stopped (gracefully) with the scope. */
export const startRunner = (db: string, fallback: "deny" | "local" = "deny") =>
  Effect.gen(function*() {
    const port = yield* freePort
    const child = spawn(process.execPath, [fixture], {
      env: { ...process.env, TOLLGATE_PG_URL: db, PORT: String(port), FALLBACK: fallback }
    })
    let stderr = ""
    child.stderr.on("data", (chunk) => (stderr += String(chunk)))
    const stop = Effect.suspend(() => {
      if (child.exitCode !== null || child.signalCode !== null) return Effect.void
      child.kill("SIGTERM")
      return exited(child).pipe(
        Effect.timeoutOrElse({
          duration: "30 seconds",
          orElse: () => Effect.sync(() => child.kill("SIGKILL"))
        })
      )
    })
    const runner: Runner = {
      port,
      child,
      stop,
      kill: Effect.suspend(() => {
        child.kill("SIGKILL")
        return exited(child)
      }),
      log: () => stderr
    }
    yield* Effect.addFinalizer(() => stop)
    let stdout = ""
    yield* Effect.callback<void, RunnerFailed>((resume) => {
      const lines = readline.createInterface({ input: child.stdout })
      lines.on("line", (line) => {
        stdout += line + "\n"
        if (line.trim() === "ready") resume(Effect.void)
      })
      child.once("close", (code) => resume(Effect.fail(new RunnerFailed({ code, output: stdout + stderr }))))
    })
    return runner
  })

/** A client-only node in this process: the tests' limiter, calling the runners on `db`. */
export const client = (
  db: string,
  mode: "deny" | "local" | "error" = "deny",
  timeout?: Duration.Input,
  handoffTimeout?: Duration.Input
) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const base = options(mode)
    const withTimeout = timeout === undefined ? base : { ...base, fallback: { ...base.fallback, timeout } }
    const context = yield* Layer.buildWithScope(
      ClusterLimiter.layer(handoffTimeout === undefined ? withTimeout : { ...withTimeout, handoffTimeout }).pipe(
        Layer.provide(ClusterRunner.layerPostgres({ url: db, sharding }))
      ),
      scope
    )
    return Context.get(context, RateLimiter)
  })

/** Waits until every shard answers a call (each runner has taken its shards). */
export const warm = (limiter: RateLimiter["Service"], keys: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < 120; attempt++) {
      const before = (yield* limiter.stats).degraded
      yield* Effect.forEach(keys, (key) => Effect.ignore(limiter.peek(key)), { concurrency: 50 })
      if ((yield* limiter.stats).degraded === before) return
      yield* Effect.sleep("500 millis")
    }
    return yield* Effect.die(new Error("the cluster never answered every shard"))
  })

export type { Scope }
