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
import { type RedisRow, renderRedisSection } from "../../bench/redis/report.ts"
import { computeTargets } from "../../bench/targets.ts"
import type { ContenderId, ContenderResult, ThroughputResult } from "../../bench/types.ts"

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

describe("the Redis section of docs/performance.md", () => {
  it("shows each scenario's figures, the stolen CPU and each target's verdict from the rounds' ratios", () => {
    const row = (scenario: string, contender: string, samples: Array<number>, more: object = {}): RedisRow => ({
      scenario,
      contender,
      label: contender,
      callers: 100,
      keys: scenario === "c100-hot" ? 1 : 10_000,
      opsPerSecond: samples.slice().sort((a, b) => a - b)[samples.length >> 1],
      samples,
      stealPercent: 7,
      ...more
    })
    const text = renderRedisSection({
      meta: {
        date: "2026-11-24T00:00:00.000Z",
        node: "v24.0.0",
        redis: "7.0.15",
        cpu: "cpu",
        cores: 2,
        mode: "full",
        rounds: 3,
        measureMillis: 1000
      },
      rows: [
        row("c100-hot", "tollgate", [90_000, 100_000, 110_000], { coalescing: 99.6 }),
        row("c100-hot", "rlf", [40_000, 60_000, 50_000]),
        row("c100-many", "store", [40_000, 40_000, 40_000], { decisionsPerEval: 50 }),
        row("clients-ping-c1", "ioredis-ping", [3_000]),
        row("clients-evalsha-c1", "ioredis-evalsha", [1_500])
      ],
      ceilings: [{ scenario: "c100-hot", callers: 100, keys: 1, opsPerSecond: 20_000 }],
      targets: [{
        name: "hot key ≥ 2×",
        scenario: "c100-hot",
        ratio: 2,
        ratioOfMedians: 2,
        rounds: [2.25, 1.67, 2.2],
        target: 2,
        pass: true
      }]
    })
    assert.include(text, "| decisions/s | 100 callers, 1 hot key | 100 callers, 10 000 keys |")
    assert.include(text, "| **tollgate `acquire`, RedisStore** | 100 000 (100 ops per call) |  |")
    assert.include(text, "| `RedisStore.apply` alone |  | 40 000 (50 keys per call) |")
    assert.include(
      text,
      "| `redis-benchmark` EVALSHA, one decision per call (the server's ceiling for unbatched calls) | 20 000 |  |"
    )
    assert.include(text, "| CPU stolen by the VM's host meanwhile | 7 % | 7 % |")
    assert.include(text, "| hot key ≥ 2× | 2.00× | 2.25, 1.67, 2.20 | 2.00× | PASS |")
    assert.include(text, "| ioredis | 3 000 | 1 500 |")
  })
})

describe("the speed targets (bench/targets.ts)", () => {
  const contender = (id: ContenderId, ratios: ContenderResult["ratios"]): ContenderResult => ({
    id,
    label: id,
    opsPerBatch: 1,
    samples: [1],
    opsPerSec: 1,
    nsPerOp: 1,
    spread: 0,
    ratios,
    allowedFraction: 1
  })
  const scenario = (id: string, fast: number, refFloor: number, nofast: number, mailbox: number): ThroughputResult => ({
    id,
    title: id,
    description: id,
    expect: "allow",
    contenders: [
      contender("tollgate-fast", { effect: fast, rlf: 1.1 }),
      contender("ref-floor", { effect: refFloor }),
      contender("tollgate-nofast", { "tollgate-fast": nofast }),
      contender("mailbox-floor", { "tollgate-fast": mailbox })
    ]
  })

  it("a missed target names the floor that bounds it in its weakest scenario", () => {
    const targets = computeTargets(
      ["tollgate-nofast", "tollgate-fast"],
      "tollgate-fast",
      [
        scenario("small", 3.5, 4.1, 0.2, 0.3),
        scenario("large", 1.25, 1.78, 0.04, 0.13)
      ],
      [],
      []
    )
    const effect = targets.find((t) => t.variant === "tollgate-fast" && t.text.includes("effect/persistence"))
    assert.strictEqual(effect?.pass, false)
    assert.strictEqual(effect?.measured, "weakest 1.25× effect, in “large” (the Ref floor there: 1.78× effect)")
    const actor = targets.find((t) => t.variant === "tollgate-nofast" && t.text.includes("0.3×"))
    assert.strictEqual(actor?.pass, false)
    assert.strictEqual(
      actor?.measured,
      "weakest 0.040× the fast path, in “large” (the mailbox floor there: 0.13× the fast path)"
    )
  })
})
