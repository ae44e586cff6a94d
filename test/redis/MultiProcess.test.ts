/**
 * Three Node processes on one Redis, each firing 200 concurrent acquires for
 * the same key of capacity 100 (and a refill too slow to matter): exactly
 * 100 are admitted in total, none by a fallback.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import * as path from "node:path"
import * as readline from "node:readline"
import { cleanup, describeRedis, uniquePrefix, url } from "./redis.ts"

interface Result {
  readonly allowed: number
  readonly denied: number
  readonly degraded: number
  readonly failed: number
  readonly storeCalls: number
  readonly storeOps: number
}

const fixture = path.join(import.meta.dirname, "fixtures", "acquire.ts")

// Each line the child prints, in order; the exit as the last "line".
const lines = (child: ChildProcessWithoutNullStreams) => {
  const queue: Array<string> = []
  const waiting: Array<(line: string) => void> = []
  const push = (line: string) => {
    const w = waiting.shift()
    if (w !== undefined) w(line)
    else queue.push(line)
  }
  readline.createInterface({ input: child.stdout }).on("line", push)
  let stderr = ""
  child.stderr.on("data", (chunk) => (stderr += String(chunk)))
  child.on("exit", (code) => push(`exit ${code}: ${stderr}`))
  return () =>
    Effect.callback<string>((resume) => {
      const line = queue.shift()
      if (line !== undefined) resume(Effect.succeed(line))
      else waiting.push((line) => resume(Effect.succeed(line)))
    })
}

describeRedis("several processes on one Redis", (it) => {
  it.effect("admit exactly the global limit between them", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("processes")
      const children = yield* Effect.acquireRelease(
        Effect.sync(() =>
          [0, 1, 2].map(() =>
            spawn(process.execPath, [fixture], {
              env: { ...process.env, REDIS_URL: url, PREFIX: prefix, KEY: "shared", COUNT: "200", CAPACITY: "100" }
            })
          )
        ),
        (children) =>
          Effect.sync(() => {
            for (const child of children) if (child.exitCode === null) child.kill()
          })
      )
      const next = children.map(lines)
      for (const line of next) assert.strictEqual(yield* line(), "ready")
      for (const child of children) child.stdin.write("go\n")
      const results: Array<Result> = []
      for (const line of next) {
        const out = yield* line()
        assert.isTrue(out.startsWith("{"), out)
        results.push(JSON.parse(out))
      }
      const total = (f: (r: Result) => number) => results.reduce((n, r) => n + f(r), 0)
      assert.strictEqual(total((r) => r.failed), 0)
      assert.strictEqual(total((r) => r.degraded), 0)
      assert.strictEqual(total((r) => r.allowed + r.denied), 600)
      assert.strictEqual(total((r) => r.allowed), 100)
      // each process coalesced its 200 requests into a few round trips
      for (const r of results) assert.isAtMost(r.storeCalls, 50)
      yield* cleanup(prefix)
    }), 30_000)
})
