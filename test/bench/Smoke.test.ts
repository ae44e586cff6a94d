/**
 * A short run of the benchmark (`npm run bench`) in CI, so the harness and
 * every contender keep working: the run exits 0, every contender reports a
 * throughput, and every timed decision was the expected one (all allowed on
 * the allow paths, all denied on the deny path). Nothing here looks at how
 * fast anything was.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const scenarios = ["1key-allow", "1key-deny", "1key-1000", "1000keys"]

interface Results {
  readonly throughput: ReadonlyArray<{
    readonly id: string
    readonly contenders: ReadonlyArray<{
      readonly id: string
      readonly opsPerSec: number
      readonly allowedFraction: number
      readonly error?: string
    }>
  }>
}

describe("npm run bench", () => {
  it("a quick run of four scenarios completes with every contender measured", () => {
    const dir = mkdtempSync(join(tmpdir(), "tollgate-bench-"))
    try {
      const out = join(dir, "smoke.json")
      const run = spawnSync(
        process.execPath,
        ["--expose-gc", "bench/run.ts", "--quick", `--only=${scenarios.join(",")}`, `--out=${out}`],
        { cwd: new URL("../..", import.meta.url), encoding: "utf8", timeout: 120_000 }
      )
      assert.strictEqual(run.status, 0, `bench exited with ${run.status}:\n${run.stdout}\n${run.stderr}`)
      const results = JSON.parse(readFileSync(out, "utf8")) as Results
      assert.deepStrictEqual(results.throughput.map((t) => t.id), scenarios)
      for (const t of results.throughput) {
        const ids = t.contenders.map((c) => c.id)
        for (const id of ["plain", "effect-floor", "lazy-floor", "rlf", "effect"]) assert.include(ids, id, t.id)
        assert.isTrue(ids.some((id) => id.startsWith("tollgate")), `${t.id}: no tollgate contender`)
        for (const c of t.contenders) {
          assert.isUndefined(c.error, `${t.id} / ${c.id}`)
          assert.isTrue(c.opsPerSec > 0, `${t.id} / ${c.id}: ${c.opsPerSec}`)
          assert.strictEqual(c.allowedFraction, t.id === "1key-deny" ? 0 : 1, `${t.id} / ${c.id}: share allowed`)
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 150_000)
})
