/**
 * @effect-diagnostics globalDate:off
 *
 * The benchmark: tollgate against its peers, side by side in one process.
 *
 *   npm run bench              full run (~2-3 min on 2 cores): writes bench/results/latest.json,
 *                              docs/performance.md and docs/performance-ratios.svg
 *   npm run bench:quick        15-20 s smoke run (or BENCH_QUICK=1): writes bench/results/quick.json
 *
 * After the in-process scenarios a full or quick run also runs the Redis scenarios (bench/redis/run.ts,
 * in a process of its own, on REDIS_URL or a redis-server it starts) when a redis-server is installed or
 * REDIS_URL is set; --no-redis skips them. docs/performance.md shows the last full Redis run.
 *
 * Flags (after `--` with npm): --quick, --no-redis, --only=<ids> (scenarios: 1key-allow, 1key-deny, 1key-1000,
 * 1000keys, 1000keys-1000, largekeys, wait, memory, reap), --contenders=<ids> (plain, effect-floor, lazy-floor, ref-floor, mailbox-floor, rlf, effect,
 * tollgate), --out=<file> (where the results go, relative to bench/ or absolute), --report-only (re-render the docs from bench/results/latest.json). A filtered run writes
 * bench/results/partial.json and leaves the docs alone.
 */
import { spawnSync } from "node:child_process"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import { renderChart } from "./chart.ts"
import {
  allowSpec,
  type Contender,
  denySpec,
  effectFloor,
  effectPersistence,
  hasFastPathOption,
  lazyFloor,
  mailboxFloor,
  plain,
  refFloor,
  rlf,
  tollgate,
  tollgateVariants
} from "./contenders.ts"
import { memoryContenders, runMemory, runReap } from "./memory.ts"
import { fmtOps, fmtRatio, renderMarkdown } from "./report.ts"
import { shuffled } from "./stats.ts"
import { computeTargets } from "./targets.ts"
import { runScenarios, type Scenario } from "./throughput.ts"
import type { ContenderId, MemoryRow, ReapResult, Results, Settings, ThroughputResult, WaitResult } from "./types.ts"
import { runWait } from "./wait.ts"

const here = (path: string) => new URL(path, import.meta.url)
const args = process.argv.slice(2)
const flag = (name: string): string | undefined => {
  const hit = args.find((a) => a === `--${name}` || a.startsWith(`--${name}=`))
  return hit === undefined ? undefined : hit.includes("=") ? hit.slice(hit.indexOf("=") + 1) : ""
}
const quick = flag("quick") !== undefined || process.env.BENCH_QUICK === "1"
const only = flag("only")?.split(",").filter((s) => s.length > 0)
const contenderFilter = flag("contenders")?.split(",").filter((s) => s.length > 0)
const filtered = only !== undefined || contenderFilter !== undefined

const log = (line: string): void => {
  process.stdout.write(line + "\n")
}

const chartFile = "performance-ratios.svg"
const writeDocs = (results: Results): void => {
  mkdirSync(here("../docs/"), { recursive: true })
  const subtitle = `${
    results.meta.date.slice(0, 10)
  } · Node ${results.meta.node} · ${results.meta.cpuModel} × ${results.meta.cores} · ${results.meta.mode} run · higher is faster`
  writeFileSync(here(`../docs/${chartFile}`), renderChart(results.throughput, subtitle))
  writeFileSync(here("../docs/performance.md"), renderMarkdown(results, chartFile))
  log("wrote docs/performance.md and docs/" + chartFile)
}

if (flag("report-only") !== undefined) {
  writeDocs(JSON.parse(readFileSync(here("./results/latest.json"), "utf8")) as Results)
  process.exit(0)
}

if (globalThis.gc === undefined) {
  process.stderr.write("run with --expose-gc (npm run bench does)\n")
  process.exit(1)
}

const settings: Settings = quick
  ? {
    rounds: 3,
    warmupBatches: 1,
    batchMillis: 40,
    concurrency: 1000,
    largeKeys: 20_000,
    memoryKeys: 20_000,
    memoryRepeats: 1,
    reapKeys: 20_000,
    reapRepeats: 1,
    reapIdleMillis: 200,
    waitSeconds: 1,
    waitRatePerSecond: 1000,
    waitCapacities: [1, 10],
    waitCallers: 100
  }
  : {
    rounds: 11,
    warmupBatches: 2,
    batchMillis: 200,
    concurrency: 1000,
    largeKeys: 100_000,
    memoryKeys: 50_000,
    memoryRepeats: 3,
    reapKeys: 50_000,
    reapRepeats: 2,
    reapIdleMillis: 200,
    waitSeconds: 3,
    waitRatePerSecond: 1000,
    waitCapacities: [1, 10],
    waitCallers: 100
  }

const started = performance.now()
const loadavgStart = os.loadavg()
const fastPathOption = hasFastPathOption()
const variants = tollgateVariants(fastPathOption)
const reference: ContenderId = variants[variants.length - 1].id
const wanted = (id: ContenderId) =>
  contenderFilter === undefined ||
  contenderFilter.some((f) => id === f || (f === "tollgate" && id.startsWith("tollgate")))
const contenders: ReadonlyArray<Contender> = [
  plain,
  effectFloor,
  lazyFloor,
  refFloor,
  mailboxFloor,
  rlf,
  effectPersistence,
  ...variants.map(tollgate)
]
  .filter((c) => wanted(c.id))
const runs = (id: string) => only === undefined || only.includes(id)

log(
  `tollgate bench, ${quick ? "quick" : "full"} mode; fastPath option ${
    fastPathOption ? "present" : "absent"
  }; contenders: ${contenders.map((c) => c.id).join(", ")}`
)

const keysOf = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}:${i}`)
const oneKey = ["user:1"]
const keys1000 = keysOf(1000, "user")
const keysLarge = keysOf(settings.largeKeys, "user")
const largeTitle = `${settings.largeKeys >= 1000 ? `${settings.largeKeys / 1000}k` : settings.largeKeys} keys`
const c = settings.concurrency

const scenarios: ReadonlyArray<Scenario> = [
  {
    id: "1key-allow",
    title: "1 key, 1 sequential caller, allow path",
    description: "One key, one caller awaiting each decision in turn; the bucket never runs out.",
    expect: "allow",
    spec: allowSpec,
    keys: oneKey,
    prime: oneKey,
    callers: 1
  },
  {
    id: "1key-deny",
    title: "1 key, 1 sequential caller, deny path",
    description: "One key, one caller; capacity 1 and one token per hour, so every timed decision is a denial.",
    expect: "deny",
    spec: denySpec,
    keys: oneKey,
    prime: oneKey,
    callers: 1
  },
  {
    id: "1key-1000",
    title: `1 key, ${c} concurrent callers`,
    description: `One key, ${c} concurrent callers (Effect: fibers under \`Effect.forEach\` with concurrency ${c};`
      + ` rate-limiter-flexible: ${c} async loops), allow path.`,
    expect: "allow",
    spec: allowSpec,
    keys: oneKey,
    prime: oneKey,
    callers: c
  },
  {
    id: "1000keys",
    title: "1000 keys, 1 sequential caller",
    description: "1000 live keys visited round-robin in a fixed shuffled order by one sequential caller, allow path.",
    expect: "allow",
    spec: allowSpec,
    keys: shuffled(keys1000, 1),
    prime: keys1000,
    callers: 1
  },
  {
    id: "1000keys-1000",
    title: `1000 keys, ${c} concurrent callers`,
    description: `1000 live keys, ${c} concurrent callers taking the next key of the same shuffled round-robin,`
      + " allow path.",
    expect: "allow",
    spec: allowSpec,
    keys: shuffled(keys1000, 2),
    prime: keys1000,
    callers: c
  },
  {
    id: "largekeys",
    title: `${largeTitle}, 1 sequential caller`,
    description: `${settings.largeKeys} live keys (all started before timing) visited round-robin in a fixed`
      + " shuffled order by one sequential caller, allow path.",
    expect: "allow",
    spec: allowSpec,
    keys: shuffled(keysLarge, 3),
    prime: keysLarge,
    callers: 1
  }
]

// The allow and deny paths are timed in the same rounds, so "deny ≥ allow" compares like with like.
const groups: ReadonlyArray<ReadonlyArray<Scenario>> = [
  scenarios.slice(0, 2),
  ...scenarios.slice(2).map((scenario) => [scenario])
]

const throughput: Array<ThroughputResult> = []
for (const group of groups) {
  const selected = group.filter((scenario) => runs(scenario.id))
  if (selected.length === 0 || contenders.length === 0) continue
  const t0 = performance.now()
  log(`\n== ${selected.map((scenario) => scenario.title).join(" | ")}`)
  // The mailbox floor keeps a live fiber per key: on the large key set its
  // hundred thousand fibers would load the heap every other contender of the
  // round shares (their figures fell several times over), so it sits that one out.
  const large = selected.some((scenario) => scenario.prime.length > 1000)
  const present = large ? contenders.filter((c) => c.id !== "mailbox-floor") : contenders
  const results = await runScenarios(selected, present, {
    rounds: settings.rounds,
    warmupBatches: settings.warmupBatches,
    batchMillis: settings.batchMillis,
    log
  })
  for (const result of results) {
    throughput.push(result)
    if (selected.length > 1) log(`  -- ${result.title}`)
    for (const r of result.contenders) {
      log(
        r.error !== undefined
          ? `  ${r.id.padEnd(16)} failed: ${r.error}`
          : `  ${r.id.padEnd(16)} ${fmtOps(r.opsPerSec).padStart(8)} ops/s  ${
            r.nsPerOp.toFixed(0).padStart(7)
          } ns/op  spread ${(r.spread * 100).toFixed(0).padStart(3)} %  × plain ${
            fmtRatio(r.ratios.plain).padStart(6)
          }  × rlf ${fmtRatio(r.ratios.rlf).padStart(6)}  × effect ${
            fmtRatio(r.ratios.effect).padStart(6)
          }  × ${reference} ${fmtRatio(r.ratios[reference]).padStart(6)}${
            result.versus === undefined
              ? ""
              : `  × own ${result.versus.scenario} ${fmtRatio(result.versus.ratios[r.id])}`
          }`
      )
    }
  }
  log(`  (${((performance.now() - t0) / 1000).toFixed(1)} s)`)
  globalThis.gc?.()
}

const tollgateWanted = variants.filter((v) => wanted(v.id))

const wait: Array<WaitResult> = []
if (runs("wait")) {
  log(`\n== wait mode: ${settings.waitCallers} callers on one key at ${settings.waitRatePerSecond}/s`)
  for (const capacity of settings.waitCapacities) {
    for (const v of tollgateWanted) {
      const w = await runWait(v, {
        capacity,
        rate: settings.waitRatePerSecond,
        callers: settings.waitCallers,
        seconds: settings.waitSeconds
      })
      wait.push(w)
      log(
        w.error !== undefined
          ? `  ${v.id}, capacity ${capacity}: failed: ${w.error}`
          : `  ${v.id}, capacity ${capacity}: ${w.admissionsPerSec.toFixed(0)} admissions/s; interval median ${
            w.intervalMedianMs.toFixed(2)
          } ms, p99 ${w.intervalP99Ms.toFixed(2)} ms; spacing error median ${
            w.spacingErrorMedianMs.toFixed(2)
          } ms, p99 ${w.spacingErrorP99Ms.toFixed(2)} ms; lag ${w.lagMs.toFixed(0)} ms`
      )
    }
  }
  globalThis.gc?.()
}

let memory: ReadonlyArray<MemoryRow> = []
if (runs("memory")) {
  log(`\n== heap per live bucket: ${settings.memoryKeys} keys × ${settings.memoryRepeats}`)
  memory = await runMemory(memoryContenders(variants).filter((m) => wanted(m.id)), {
    keys: settings.memoryKeys,
    repeats: settings.memoryRepeats,
    log
  })
}

const reaping: Array<ReapResult> = []
if (runs("reap")) {
  log(`\n== reaping: ${settings.reapKeys} buckets, idleTimeout ${settings.reapIdleMillis} ms`)
  for (let rep = 0; rep < settings.reapRepeats; rep++) {
    for (const v of tollgateWanted) {
      const r = await runReap(v, { keys: settings.reapKeys, idleMillis: settings.reapIdleMillis, tag: `${rep}` })
      reaping.push(r)
      log(
        r.error !== undefined
          ? `  ${v.id}: failed: ${r.error}`
          : `  ${v.id}: started ${fmtOps(r.createPerSec)}/s, peak ${r.peakBuckets} live, empty after ${
            r.emptyAfterMillis.toFixed(0)
          } ms, all reaped after ${r.reapedAfterMillis.toFixed(0)} ms; heap ${
            (r.heapBeforeBytes / 1048576).toFixed(1)
          } MB -> peak ${(r.heapPeakBytes / 1048576).toFixed(1)} MB -> ${(r.heapAfterBytes / 1048576).toFixed(1)} MB (${
            (r.heapChange * 100).toFixed(1)
          } %)`
      )
    }
  }
}

const targets = computeTargets(tollgateWanted.map((v) => v.id), reference, throughput, memory, reaping)
const readVersion = (path: string): string => {
  try {
    return (JSON.parse(readFileSync(here(path), "utf8")) as { version: string }).version
  } catch {
    return "?"
  }
}
const cpus = os.cpus()
const results: Results = {
  meta: {
    date: new Date().toISOString(),
    mode: quick ? "quick" : "full",
    node: process.version,
    v8: process.versions.v8,
    platform: process.platform,
    arch: process.arch,
    cores: cpus.length,
    cpuModel: cpus[0]?.model.trim() ?? "unknown",
    memoryBytes: os.totalmem(),
    loadavgStart,
    loadavgEnd: os.loadavg(),
    versions: {
      effect: readVersion("../node_modules/effect/package.json"),
      rateLimiterFlexible: readVersion("../node_modules/rate-limiter-flexible/package.json"),
      tollgate: readVersion("../package.json")
    },
    fastPathOption,
    tollgateReference: reference,
    settings,
    durationSeconds: (performance.now() - started) / 1000
  },
  throughput,
  wait,
  memory,
  reaping,
  targets
}

log("\n== targets")
for (const t of targets) {
  log(`  ${t.pass === undefined ? "n/a " : t.pass ? "PASS" : "FAIL"}  [${t.variant}] ${t.text}: ${t.measured}`)
}

mkdirSync(here("./results/"), { recursive: true })
const file = flag("out") ?? `results/${filtered ? "partial.json" : quick ? "quick.json" : "latest.json"}`
writeFileSync(new URL(file, here("./")), JSON.stringify(results, null, 2) + "\n")
log(`\nwrote ${file} (${results.meta.durationSeconds.toFixed(0)} s)`)

// The Redis scenarios, in a process of their own (their clients and server
// must not share this one's heap and timers).
if (!filtered && flag("no-redis") === undefined) {
  const available = process.env.REDIS_URL !== undefined ||
    spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0
  if (available) {
    log("\n== on Redis (bench/redis/run.ts)")
    const redis = spawnSync(process.execPath, [
      new URL("./redis/run.ts", import.meta.url).pathname,
      ...(quick ? ["--quick"] : [])
    ], {
      stdio: "inherit"
    })
    if (redis.status !== 0) log(`the Redis scenarios failed (exit ${redis.status}); docs keep the last full Redis run`)
  } else {
    log("\n== on Redis: skipped (no redis-server installed and no REDIS_URL)")
  }
}
if (!filtered && !quick) writeDocs(results)
