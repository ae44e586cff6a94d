// Runs the real service (`node src/server/main.ts`) as a child process on
// 127.0.0.1 with an ephemeral port (PORT=0), and talks to it over HTTP.
import { Deferred, Effect, Exit, Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))

export interface Service {
  readonly url: string
  readonly child: ChildProcess
  /** Everything the process wrote so far (stdout and stderr). */
  readonly output: () => string
  /** Completes with the exit code when the process exits. */
  readonly exited: Effect.Effect<number | null>
}

export interface Options {
  readonly env?: Record<string, string> | undefined
  /** Written to a temporary file whose path is passed as TOLLGATE_CONFIG. */
  readonly config?: unknown
  /** What to run, from the repository's root (default: `node src/server/main.ts` on this Node). */
  readonly command?: readonly [string, ...Array<string>] | undefined
}

// The parent's environment without anything the service reads (REDIS_URL
// too: a service uses Redis only when its test says so).
const baseEnv = (): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (
      value === undefined || name === "PORT" || name === "HOST" || name.startsWith("TOLLGATE_") ||
      name.startsWith("REDIS_")
    ) continue
    env[name] = value
  }
  return env
}

const launch = (options: Options) =>
  Effect.gen(function*() {
    const env: Record<string, string> = { ...baseEnv(), PORT: "0", HOST: "127.0.0.1", ...options.env }
    if (options.config !== undefined) {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "tollgate-test-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const file = join(dir, "tollgate.json")
      writeFileSync(file, typeof options.config === "string" ? options.config : JSON.stringify(options.config))
      env.TOLLGATE_CONFIG = file
    }
    let output = ""
    const listening = yield* Deferred.make<string, string>()
    const exit = yield* Deferred.make<number | null>()
    const [command, ...args] = options.command ?? [process.execPath, "src/server/main.ts"]
    // A process group of its own, so that whatever it started goes too (`npm start` runs the service as its child).
    const child = spawn(command, args, { cwd: root, env, stdio: ["ignore", "pipe", "pipe"], detached: true })
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      const match = /Listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)
      if (match !== null) Deferred.doneUnsafe(listening, Exit.succeed(match[1]))
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.on("exit", (code) => {
      Deferred.doneUnsafe(exit, Exit.succeed(code))
      Deferred.doneUnsafe(listening, Exit.fail(`exited with ${code} before listening:\n${output}`))
    })
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        try {
          process.kill(-child.pid!, "SIGKILL")
        } catch {
          // the group is gone already
        }
        return Deferred.await(exit)
      })
    )
    return { child, listening, exited: Deferred.await(exit), output: () => output }
  })

/** Starts the service and waits (at most 20 s) until it listens. */
export const start = (options: Options = {}): Effect.Effect<Service, string, Scope.Scope> =>
  Effect.gen(function*() {
    const { child, exited, listening, output } = yield* launch(options)
    const url = yield* Deferred.await(listening).pipe(
      Effect.timeoutOrElse({
        duration: "20 seconds",
        orElse: () => Effect.fail(`the service did not listen within 20 s:\n${output()}`)
      })
    )
    return { url, child, output, exited }
  })

/** Runs the service expecting it to refuse to start; returns its exit code and output. */
export const startFailing = (
  options: Options
): Effect.Effect<{ code: number | null; output: string }, string, Scope.Scope> =>
  Effect.gen(function*() {
    const { exited, output } = yield* launch(options)
    const code = yield* exited.pipe(
      Effect.timeoutOrElse({ duration: "20 seconds", orElse: () => Effect.fail(`still running:\n${output()}`) })
    )
    return { code, output: output() }
  })

export interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly json: any
}

/** One HTTP request; a body that is not a string is sent as JSON. */
export const request = (
  service: Service,
  method: string,
  path: string,
  options?: {
    readonly body?: unknown
    readonly headers?: Record<string, string> | undefined
  }
): Effect.Effect<Reply> =>
  Effect.promise(async (signal) => {
    const body = options?.body
    const init: RequestInit & { duplex?: "half" } = {
      method,
      signal,
      headers: { "content-type": "application/json", ...options?.headers },
      ...(body === undefined
        ? {}
        : body instanceof ReadableStream
        ? { body, duplex: "half" }
        : { body: typeof body === "string" ? body : JSON.stringify(body) })
    }
    const response = await fetch(service.url + path, init)
    const text = await response.text()
    let json: unknown = undefined
    try {
      json = JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: response.status, headers: response.headers, text, json }
  })

export const post = (service: Service, path: string, body: unknown, headers?: Record<string, string>) =>
  request(service, "POST", path, { body, headers })

/** The value of one Prometheus sample (`name{labels}`), or undefined. */
export const sample = (metrics: string, series: string): number | undefined => {
  for (const line of metrics.split("\n")) {
    if (line.startsWith(series + " ")) return Number(line.slice(series.length + 1))
  }
  return undefined
}

export const metrics = (service: Service) => Effect.map(request(service, "GET", "/metrics"), (r) => r.text)
