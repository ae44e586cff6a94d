/**
 * Renders docs/performance.md from a run's results.
 */
import { existsSync, readFileSync } from "node:fs"
import { shortNames } from "./chart.ts"
import { type HttpResults, renderHttpSection } from "./http/report.ts"
import { type RedisResults, renderRedisSection } from "./redis/report.ts"
import type { ContenderId, ContenderResult, Results, ThroughputResult } from "./types.ts"

const group = (n: number): string => Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, " ")

export const fmtOps = (n: number): string => {
  if (!Number.isFinite(n)) return "–"
  if (n >= 1e6) return `${(n / 1e6).toFixed(n >= 1e7 ? 1 : 2)} M`
  if (n >= 1e3) return `${(n / 1e3).toFixed(n >= 1e5 ? 0 : 1)} k`
  return n.toFixed(0)
}

export const fmtRatio = (r: number | undefined): string => {
  if (r === undefined || !Number.isFinite(r)) return "–"
  if (r >= 100) return r.toFixed(0)
  if (r >= 0.1) return r.toFixed(2)
  return r.toPrecision(2)
}

const fmtPct = (r: number): string => (Number.isFinite(r) ? `${(r * 100).toFixed(0)} %` : "–")
const fmtMs = (n: number, digits = 2): string => (Number.isFinite(n) ? n.toFixed(digits) : "–")
const fmtMB = (n: number): string => (Number.isFinite(n) ? (n / 1024 / 1024).toFixed(1) : "–")

const label = (c: ContenderResult, reference: ContenderId): string =>
  c.id === reference || c.id === "plain" ? `**${c.label}**` : c.label

const throughputTable = (s: ThroughputResult, reference: ContenderId): Array<string> => {
  const lines = [
    `### ${s.title}`,
    "",
    s.description,
    "",
    "| Contender | ops/s | ns/op | spread | × plain | × rate-limiter-flexible | × effect-persistence | × tollgate |",
    "|---|---:|---:|---:|---:|---:|---:|---:|"
  ]
  for (const c of s.contenders) {
    if (c.error !== undefined) {
      lines.push(`| ${c.label} | failed: ${c.error.replace(/\|/g, "\\|")} | | | | | | |`)
      continue
    }
    lines.push(
      `| ${label(c, reference)} | ${fmtOps(c.opsPerSec)} | ${group(c.nsPerOp)} | ${fmtPct(c.spread)} | ${
        fmtRatio(c.ratios.plain)
      } | ${fmtRatio(c.ratios.rlf)} | ${fmtRatio(c.ratios.effect)} | ${fmtRatio(c.ratios[reference])} |`
    )
  }
  lines.push("")
  if (s.versus !== undefined) {
    const versus = s.versus
    lines.push(
      `Timed in the same rounds as “${versus.title}”; this path ÷ that one, median over rounds: ${
        s.contenders.filter((c) => versus.ratios[c.id] !== undefined).map((c) =>
          `${shortNames[c.id]} ${fmtRatio(versus.ratios[c.id])}×`
        ).join(", ")
      }.`,
      ""
    )
  }
  return lines
}

// The throughput target against rate-limiter-flexible: 1.0× in every in-process scenario (bench/targets.ts).
const RLF_TARGET = 1.0

/**
 * What an Effect-returning `acquire` can reach in this run. The Effect floor
 * (a plain bucket inside `Effect.sync`, in the same loop) is the cheapest
 * Effect call of all; the lazy floor (the same bucket behind `Effect.suspend`,
 * answering with a shared `Exit`) is the cheapest that can also wait in line.
 * Their ratios to a peer bound tollgate's from above.
 */
const boundTable = (results: Results, ref: ContenderId): Array<string> => {
  const rows: Array<string> = []
  const threshold = RLF_TARGET
  for (const t of results.throughput) {
    const find = (cid: ContenderId) => t?.contenders.find((c) => c.id === cid && c.error === undefined)
    const floor = find("effect-floor")
    const lazy = find("lazy-floor")
    const refFloor = find("ref-floor")
    const tg = find(ref)
    if (t === undefined || floor === undefined || tg === undefined) continue
    const bound = lazy?.ratios.rlf
    const reachable = bound === undefined ? "–" : bound >= threshold ? "yes" : "**no**: the lazy floor is below it"
    rows.push(
      `| ${t.title} | ${threshold.toFixed(1)}× | ${fmtRatio(floor.ratios.rlf)} | ${fmtRatio(bound)} | ${reachable} | ${
        fmtRatio(tg.ratios.rlf)
      } | ${fmtRatio(tg.ratios["lazy-floor"])} | ${fmtRatio(tg.ratios["ref-floor"])} | ${
        fmtRatio(lazy?.ratios.effect)
      } | ${fmtRatio(refFloor?.ratios.effect)} |`
    )
  }
  if (rows.length === 0) return []
  return [
    "### What bounds the throughput targets",
    "",
    "`acquire` returns an `Effect`, and the program runs it in an Effect loop, so two floors are measured in",
    "the same rounds as tollgate: the *Effect floor*, the plain bucket inside `Effect.sync` (the cheapest",
    "Effect call of all), and the *lazy floor*, the same bucket as a lazy `Effect` of one object (Effect's",
    "`Effectable.Prototype`: its `evaluate` decides when the fiber runs it) answering with a shared `Exit`.",
    "The lazy floor is the cheapest shape an `acquire` can have and still be a lazy description that can",
    "fail with a typed error (a bad key, `Overloaded`, `LimiterShutdown`) and wait its turn in line: an",
    "`Effect.sync` can do neither, and `Effect.suspend` (or `Effect.withFiber`) makes three objects a call",
    "(the effect, a closure and what the closure captures). tollgate's single-key calls have",
    "exactly that shape, so its ratio to a peer bounds tollgate's from above, and tollgate ÷ lazy floor is",
    "how much of that bound tollgate reaches (what is left is tollgate's own work: validation, the key's",
    "bucket, the clock, the decision, the counters). The *Ref floor* is the lazy floor in tollgate's shape:",
    "the table maps a key to a bucket object that is the Effect `Ref` holding the key's state (as tollgate's",
    "bucket is). On a key set too large for the caches each object of that chain is a dependent load of its",
    "own, so the Ref floor is the least a limiter of this shape can cost, and tollgate ÷ Ref floor is",
    "tollgate's own work against it.",
    "",
    "| Scenario | target × rlf | Effect floor × rlf | lazy floor × rlf (the bound) | target reachable | tollgate × rlf | tollgate × lazy floor | tollgate × Ref floor | lazy floor × effect-persistence | Ref floor × effect-persistence |",
    "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ...rows,
    "",
    "Likewise, “≥ 2× effect-persistence” is out of reach in a scenario whose lazy floor × effect-persistence",
    "is below 2, and out of reach *for this design* (each key's state in its bucket's `Ref`) where the Ref floor",
    "× effect-persistence is below 2: on a key set too large for the caches, the effect/persistence store keeps",
    "its state in a plain `Map` entry, one dependent load fewer than a bucket that is its state's `Ref`.",
    "",
    ...actorBound(results, ref)
  ]
}

/**
 * What the literal actor (`fastPath: false`) can reach: the mailbox floor (a
 * fiber per key, a bounded `Queue` in, a `Deferred` back, the plain bucket's
 * arithmetic) ÷ the fast path bounds it from above.
 */
const actorBound = (results: Results, ref: ContenderId): Array<string> => {
  const rows: Array<string> = []
  for (const t of results.throughput) {
    const find = (cid: ContenderId) => t.contenders.find((c) => c.id === cid && c.error === undefined)
    const mailbox = find("mailbox-floor")
    const actor = find("tollgate-nofast")
    if (mailbox === undefined || actor === undefined || ref === "tollgate-nofast") continue
    const bound = mailbox.ratios[ref]
    rows.push(
      `| ${t.title} | 0.3× | ${fmtRatio(bound)} | ${
        bound === undefined ? "–" : bound >= 0.3 ? "yes" : "**no**: the mailbox floor is below it"
      } | ${fmtRatio(actor.ratios[ref])} | ${fmtRatio(actor.ratios["mailbox-floor"])} |`
    )
  }
  if (rows.length === 0) return []
  return [
    "The literal actor (`fastPath: false`) sends every call to its key's fiber and waits for the reply. The",
    "*mailbox floor* is the least that costs on Effect's own parts: a fiber per key that takes what waits in",
    "its bounded `Queue` and answers each request through its `Deferred`, deciding with the plain bucket's",
    "arithmetic. Its ratio to the fast path bounds the actor's from above.",
    "",
    "| Scenario | target × the fast path | mailbox floor × the fast path (the bound) | target reachable | tollgate, fastPath: false × the fast path | tollgate, fastPath: false × mailbox floor |",
    "|---|---:|---:|---|---:|---:|",
    ...rows,
    ""
  ]
}

export const renderMarkdown = (results: Results, chartFile: string): string => {
  const { meta } = results
  const ref = meta.tollgateReference
  const s = meta.settings
  const variants = [...new Set(results.targets.map((t) => t.variant))]
  const variantLabel = (id: ContenderId) =>
    results.throughput.flatMap((t) => t.contenders).find((c) => c.id === id)?.label ?? id
  const out: Array<string> = []
  out.push(
    "# Performance",
    "",
    "<!-- Generated by `npm run bench` (bench/run.ts) from bench/results/latest.json; edit the generator, not this file. -->",
    "",
    "tollgate measured side by side with its peers, in one Node process, in interleaved rounds. Figures are",
    "medians; **compare the ratios, not the absolute numbers**: the machine is a small shared VM and other",
    "work (test runs of other engineers) ran on it at the same time, so every absolute figure is noisy, and",
    "the `spread` column (interquartile range over the median, across rounds) shows how much.",
    "",
    "Run it: `npm run bench` (about 2–3 minutes on 2 cores; rewrites this file, the chart and",
    "bench/results/latest.json) or `npm run bench:quick` (a 15–20 s smoke run with fewer, shorter rounds",
    "and 20k instead of 100k keys; writes bench/results/quick.json only).",
    "",
    "## Machine and run",
    "",
    "| | |",
    "|---|---|",
    `| Date | ${meta.date} |`,
    `| Mode | ${meta.mode} (${s.rounds} timed rounds of ~${s.batchMillis} ms per contender, ${s.warmupBatches} warm-up batches) |`,
    `| CPU | ${meta.cpuModel}, ${meta.cores} cores (os.cpus()) |`,
    `| Memory | ${(meta.memoryBytes / 1024 ** 3).toFixed(1)} GiB |`,
    `| Node | ${meta.node} (V8 ${meta.v8}), ${meta.platform}/${meta.arch} |`,
    `| Packages | effect ${meta.versions.effect}, rate-limiter-flexible ${meta.versions.rateLimiterFlexible}, tollgate ${meta.versions.tollgate} |`,
    `| tollgate \`fastPath\` option | ${
      meta.fastPathOption
        ? "present: both settings measured; “× tollgate” is relative to `fastPath: true`"
        : "not present in `RateLimiter.make` options at run time: the default limiter only"
    } |`,
    `| Load average (1/5/15 min) | start ${meta.loadavgStart.map((l) => l.toFixed(2)).join(" / ")}, end ${
      meta.loadavgEnd.map((l) => l.toFixed(2)).join(" / ")
    } |`,
    `| Shared machine | ${
      Math.max(meta.loadavgStart[0], meta.loadavgEnd[0]) > meta.cores
        ? `**yes**: a load average of up to ${
          Math.max(meta.loadavgStart[0], meta.loadavgEnd[0]).toFixed(1)
        } on ${meta.cores} cores, so other work ran throughout this run and every figure is lower and noisier than on a quiet machine`
        : "no other load to speak of (load average below the core count)"
    } |`,
    `| Duration | ${meta.durationSeconds.toFixed(0)} s |`,
    ""
  )

  // Targets.
  out.push(
    "## Targets",
    "",
    "tollgate's own targets, and why: a limiter sits in every request's path, so the default limiter's",
    "`acquire` (the fast path) should be at least as fast as the fastest in-process limiter on npm",
    "(rate-limiter-flexible's memory limiter) in every in-process scenario: one key, a thousand callers, a",
    "thousand keys, the large key set; and at least twice as fast as Effect's own `effect/persistence`",
    "RateLimiter in every scenario. The literal actor (`fastPath: false`: every call a message to the key's",
    "bucket fiber) should keep at least 0.3× the fast path. Beyond speed: no slower to deny than to admit (a",
    "flood of refused requests must not cost more than the traffic it refuses); at most 1.5 KB of heap per",
    "live key (a million keys in 1.5 GB); and the heap back where it started once idle keys are reaped. Each",
    "is computed from this run (ratios are medians over rounds of tollgate ÷ the peer in the same round); a",
    "target that is not the column's to meet says so.",
    ""
  )
  const cell = (id: ContenderId, text: string) => {
    const t = results.targets.find((t) => t.variant === id && t.text === text)
    if (t === undefined) return "–"
    return `${t.pass === undefined ? "n/a" : t.pass ? "**PASS**" : "**FAIL**"}: ${t.measured}`
  }
  out.push(
    `| Target | ${variants.map((id) => variantLabel(id)).join(" | ")} |`,
    `|---|${variants.map(() => "---").join("|")}|`
  )
  for (const text of new Set(results.targets.map((t) => t.text))) {
    out.push(`| ${text} | ${variants.map((id) => cell(id, text)).join(" | ")} |`)
  }
  out.push("")

  out.push(...boundTable(results, ref))

  // Summary + chart.
  out.push(
    "## Summary",
    "",
    `![Throughput of each contender relative to rate-limiter-flexible, per scenario](${chartFile})`,
    ""
  )
  const ids = results.throughput[0]?.contenders.map((c) => c.id) ?? []
  const refName = shortNames[ref]
  out.push(
    `| Scenario | ${ids.map((id) => `${shortNames[id]} ops/s`).join(" | ")} | ${refName} × rlf | ${refName} × effect |`,
    `|---|${ids.map(() => "---:").join("|")}|---:|---:|`
  )
  for (const t of results.throughput) {
    const cells = ids.map((id) => {
      const c = t.contenders.find((c) => c.id === id)
      return c === undefined || c.error !== undefined ? "–" : fmtOps(c.opsPerSec)
    })
    const tg = t.contenders.find((c) => c.id === ref)
    out.push(
      `| ${t.title} | ${cells.join(" | ")} | ${fmtRatio(tg?.ratios.rlf)} | ${fmtRatio(tg?.ratios.effect)} |`
    )
  }
  out.push("")

  out.push("## Throughput", "")
  for (const t of results.throughput) out.push(...throughputTable(t, ref))

  out.push(
    "## Wait mode (tollgate only)",
    "",
    `\`limiter.wait(key)\` on one saturated key: ${s.waitCallers} fibers loop on it for ${s.waitSeconds} s of`,
    `real time (after a short untimed run that empties the bucket); the bucket refills ${s.waitRatePerSecond} per second,`,
    `so the ideal is one admission every ${(1000 / s.waitRatePerSecond).toFixed(2)} ms. With capacity 1 a late wake-up`,
    "loses the refill beyond the one token (the bucket is full), so timer lateness shows as lost throughput;",
    "a larger capacity absorbs it (and admits in small bursts instead). Spacing error: |interval − ideal",
    "spacing|; lag: how far the last admission is behind the ideal schedule started at the first one;",
    "bursts: consecutive admissions closer than half the ideal spacing.",
    "",
    "| Variant | capacity | admissions/s | ideal | interval median / p99 / max ms | spacing error median / p99 ms | lag ms | bursts |",
    "|---|---:|---:|---:|---:|---:|---:|---:|"
  )
  for (const w of results.wait) {
    out.push(
      w.error !== undefined
        ? `| ${w.label} | ${w.capacity} | failed: ${w.error} | | | | | |`
        : `| ${w.label} | ${w.capacity} | ${group(w.admissionsPerSec)} | ${w.ratePerSecond} | ${
          fmtMs(w.intervalMedianMs)
        } / ${fmtMs(w.intervalP99Ms)} / ${fmtMs(w.intervalMaxMs)} | ${fmtMs(w.spacingErrorMedianMs)} / ${
          fmtMs(w.spacingErrorP99Ms)
        } | ${fmtMs(w.lagMs, 0)} | ${fmtPct(w.burstFraction)} |`
    )
  }
  out.push("")

  const plainMem = results.memory.find((m) => m.id === "plain")?.bytesPerKey
  out.push(
    "## Heap per live bucket",
    "",
    `\`heapUsed\` after two full GCs (\`--expose-gc\`), after minus before starting ${
      group(s.memoryKeys)
    } buckets (one allowed`,
    "decision per fresh key; key strings built before the baseline), divided by the key count; median of",
    `${s.memoryRepeats} repeat(s), contenders interleaved. tollgate buckets are live and idle (idle timeout 1 hour).`,
    "",
    "| Contender | B per live bucket | × plain | samples (B) |",
    "|---|---:|---:|---|"
  )
  for (const m of results.memory) {
    out.push(
      m.error !== undefined
        ? `| ${m.label} | failed: ${m.error} | | |`
        : `| ${m.label} | ${group(m.bytesPerKey)} | ${
          plainMem === undefined ? "–" : fmtRatio(m.bytesPerKey / plainMem)
        } | ${m.samples.map(group).join(", ")} |`
    )
  }
  out.push("")

  out.push(
    "## Reaping",
    "",
    `tollgate with \`idleTimeout: ${s.reapIdleMillis} ms\` and a policy that refills within a millisecond (capacity 10,`,
    `10 000 per second; a bucket may only be reaped once full again). ${group(s.reapKeys)} buckets are started by a`,
    "sequential caller in chunks of 1000 (`stats` read between chunks), then `stats` is polled until",
    "`stats.buckets` is 0 and every started bucket is counted as reaped (its fiber ended). The sweep runs",
    "every idleTimeout / 2, so buckets started early are already reaped while later ones start; *churn* is",
    "N ÷ (creation + drain), buckets started and reaped per second end to end. Heap: `heapUsed` after two",
    "full GCs once everything is reaped, against the same before the first bucket (limiter already built).",
    "",
    "| Variant | started/s | peak live | empty after ms | all reaped after ms | churn /s | heap before MB | heap peak MB (no GC) | heap after MB | change |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  )
  for (const r of results.reaping) {
    out.push(
      r.error !== undefined
        ? `| ${r.label} | failed: ${r.error} | | | | | | | | |`
        : `| ${r.label} | ${fmtOps(r.createPerSec)} | ${group(r.peakBuckets)} | ${fmtMs(r.emptyAfterMillis, 0)} | ${
          fmtMs(r.reapedAfterMillis, 0)
        } | ${fmtOps(r.churnPerSec)} | ${fmtMB(r.heapBeforeBytes)} | ${fmtMB(r.heapPeakBytes)} | ${
          fmtMB(r.heapAfterBytes)
        } | ${r.heapChange >= 0 ? "+" : ""}${(r.heapChange * 100).toFixed(1)} % |`
    )
  }
  out.push("")

  out.push(
    "## Method",
    "",
    "- **One process, side by side.** Each throughput scenario builds every contender once (outside the",
    "  timed section), primes it with one untimed decision per key (so every bucket exists before the clock",
    "  starts), calibrates the operation count so one batch takes about the batch time, runs the warm-up",
    "  batches, then the timed rounds. In every round each contender runs one batch; the order rotates from",
    "  round to round. A minor GC runs before every batch, so one contender's young garbage is not",
    "  collected on another's clock. ops/s and ns/op are medians over rounds; every `× X` column is the",
    "  median over rounds of (this contender ÷ X in the same round), so slow drifts of the machine cancel.",
    "- **The contenders.**",
    "  - *plain*: a lazy-refill token bucket per key in a `Map<string, Bucket>`, one `Date.now()` per",
    "    decision, called synchronously in a loop (also for the concurrent scenarios: it is the floor, the",
    "    cost of the decision itself).",
    "  - *Effect floor*, *lazy floor*, *Ref floor*: the plain bucket inside `Effect.sync`, as a lazy",
    "    `Effect` of one object (`Effectable.Prototype`), and the same in tollgate's shape (a bucket object per",
    "    key, its state in an Effect `Ref`), in the same Effect loop as tollgate.",
    "  - *rate-limiter-flexible*: `RateLimiterMemory` (a fixed window of the same mean rate: `points` =",
    "    capacity, `duration` = capacity ÷ refill rate), `await limiter.consume(key)` on every call; a denial",
    "    is its rejection, caught.",
    "  - *effect-persistence*: Effect 4's `RateLimiter` from `effect/persistence` over `layerStoreMemory`,",
    "    `consume({ key, limit, window, algorithm: \"token-bucket\", onExceeded: \"fail\" })`, its",
    "    `RateLimitExceeded` failure turned into `false` with `Effect.match`.",
    "  - *tollgate*: `limiter.acquire(key)`; the limiter is built by `RateLimiter.make` on a long-lived",
    "    `Scope` (idle timeout 1 hour, so nothing is reaped during the throughput scenarios).",
    "  - The Effect contenders run as an `Effect.gen` loop per batch under `Effect.runPromise`; with",
    `    concurrent callers, \`Effect.forEach(callers, loop, { concurrency: ${s.concurrency} })\` (rate-limiter-flexible:`,
    `    ${s.concurrency} concurrent \`async\` loops under \`Promise.all\`), each caller doing its share of the batch.`,
    "- **The limits.** Allow path: capacity 10⁹ (never exhausted within a run). Deny path: capacity 1 and",
    "  one token per hour, the single token taken in priming, so every timed call is denied. The harness",
    "  checks the decisions: every timed call of an allow scenario allowed, of the deny scenario denied.",
    `- **Keys.** Multi-key scenarios use pre-built keys, started in index order and then timed round-robin`,
    "  over a fixed shuffled order (the same for every contender), so the timed walk does not follow the",
    `  order in which the buckets were allocated. “${group(s.largeKeys)} keys” keeps that many buckets live at once in`,
    "  every contender.",
    "- **Heap, reaping and wait mode**: see their sections. They run after the throughput scenarios in the",
    "  same process (the throughput limiters closed and collected first).",
    "- **Targets** are computed from this run by bench/targets.ts. The 1-key allow and deny scenarios are",
    "  timed together (all their lanes interleaved in the same rounds), so “deny ≥ allow” is the median over",
    "  rounds of tollgate's deny ÷ allow throughput; “≥ 2× effect-persistence” takes the weakest scenario;",
    "  heap after reaping takes the worst repeat.",
    "- **Noise.** The machine is shared and small; a run on a busy machine lowers all absolute figures and",
    "  widens the spread. The ratios are more stable because each is taken within a round, but a contender",
    "  that allocates more (and so collects more) is hit harder by a busy neighbour.",
    "- **Design-time figures** (measured before tollgate existed, same kind of machine, Node 20; not",
    "  re-measured here): `Effect.scoped(RcMap.get)` cost about 3.4 µs more per acquire than a hand-written",
    "  `Map`, and an idle `RcMap` entry about 2.8 KB (a sleeping expiry fiber each), which is why the",
    "  supervisor is a plain `Map` with one sweep fiber; an idle actor built on `Queue.take` + `Deferred` cost",
    "  about 3 KB, hence the ≤ 1.5 KB target.",
    "- **Profiling.** `node --expose-gc --cpu-prof bench/run.ts --quick --only=1key-allow --contenders=tollgate`",
    "  (any scenario/contender ids; a filtered run writes bench/results/partial.json and leaves the docs",
    "  alone).",
    "- **In CI.** `test/bench/Smoke.test.ts` runs four scenarios in quick mode on every `npm test`: every",
    "  contender must be measured and every timed decision be the expected one; it asserts nothing on speed.",
    ""
  )
  // The Redis scenarios' last full run (bench/redis/run.ts writes it).
  if (existsSync(redisFile)) {
    out.push(renderRedisSection(JSON.parse(readFileSync(redisFile, "utf8")) as RedisResults))
  }
  // The HTTP service's last saved run (npm run bench:http -- --save writes it).
  if (existsSync(httpFile)) {
    out.push(renderHttpSection(JSON.parse(readFileSync(httpFile, "utf8")) as HttpResults))
  }
  // Hand-written: what each change did, with the figures of the runs before and after it.
  if (existsSync(historyFile)) out.push(readFileSync(historyFile, "utf8").trimEnd(), "")
  return out.join("\n")
}

const historyFile = new URL("./history.md", import.meta.url)
const redisFile = new URL("./redis/results.json", import.meta.url)
const httpFile = new URL("./http/results.json", import.meta.url)
