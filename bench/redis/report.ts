/**
 * The Redis benchmark's results (bench/redis/results.json) and the section of
 * docs/performance.md that shows them, followed by bench/redis/history.md
 * (hand-written: the other full runs of the same code, and the runs before
 * and after each change). The analysis of the figures (why a target passes
 * or fails, what was tried) is in docs/distributed.md.
 */
import { existsSync, readFileSync } from "node:fs"

export interface RedisRow {
  readonly scenario: string
  readonly contender: string
  readonly label: string
  readonly callers: number
  readonly keys: number
  readonly opsPerSecond: number
  /** One per round, in round order (so two contenders' samples of a round pair up). */
  readonly samples: ReadonlyArray<number>
  readonly coalescing?: number | undefined
  /** For tollgate: decisions its fallback made (store calls past their timeout), not Redis. */
  readonly degraded?: number | undefined
  /** Decisions per script call (EVALSHA or FCALL) the server saw (undefined for contenders that send none). */
  readonly decisionsPerEval?: number | undefined
  /** The server's time in scripts per decision, µs (`INFO commandstats`). */
  readonly serverMicros?: number | undefined
  /** This process's CPU time (user and system) per decision, µs: the client's whole work, its socket calls too. */
  readonly clientCpuMicros?: number | undefined
  /** redis-server's CPU time (user and system) per decision, µs (`INFO cpu`): scripts, parsing, the socket. */
  readonly serverCpuMicros?: number | undefined
  /** CPU stolen by the host while the scenario ran, % of all CPU time (Linux only). */
  readonly stealPercent?: number | undefined
  /** The VM's 1-minute load average when the scenario ended (other users' work shows here, not in steal). */
  readonly loadAverage?: number | undefined
}

export interface RedisTarget {
  readonly name: string
  readonly scenario: string
  /** Median over rounds of tollgate ÷ rate-limiter-flexible within the round. */
  readonly ratio: number
  readonly ratioOfMedians: number
  readonly rounds: ReadonlyArray<number>
  readonly target: number
  readonly pass: boolean
}

export interface RedisResults {
  readonly meta: {
    readonly date: string
    readonly node: string
    readonly redis: string
    readonly cpu: string | undefined
    readonly cores: number
    readonly mode: "quick" | "full"
    readonly rounds: number
    readonly measureMillis: number
    /** Rounds of the one-caller scenarios (more and shorter: see run.ts). */
    readonly roundsOneCaller?: number | undefined
    readonly measureMillisOneCaller?: number | undefined
  }
  readonly rows: ReadonlyArray<RedisRow>
  readonly ceilings: ReadonlyArray<
    {
      readonly scenario: string
      readonly callers: number
      readonly keys: number
      readonly opsPerSecond?: number | undefined
    }
  >
  readonly targets: ReadonlyArray<RedisTarget>
  /** The cluster ÷ one server, waiting for a replica ÷ not, tollgate ÷ rate-limiter-flexible on the cluster. */
  readonly cluster?:
    | ReadonlyArray<{
      readonly scenario: string
      readonly clusterVsOneServer: number
      readonly waitVsNoWait: number
      readonly clusterVsRlfCluster: number
    }>
    | undefined
  /** A lone call's floor (ioredis's FCALL of the lean script, no Effect), in the same rounds. */
  readonly floors?:
    | ReadonlyArray<{
      readonly scenario: string
      readonly floorVsRlf: number
      readonly tollgateVsFloor: number
      /** The same FCALL in one `Effect.callback`: the floor of any Effect API. */
      readonly effectFloorVsRlf?: number | undefined
      readonly tollgateVsEffectFloor?: number | undefined
    }>
    | undefined
}

const scenarios: ReadonlyArray<readonly [id: string, title: string]> = [
  ["c1-hot", "1 caller, 1 key"],
  ["c100-hot", "100 callers, 1 hot key"],
  ["c1-many", "1 caller, 10 000 keys"],
  ["c100-many", "100 callers, 10 000 keys"],
  ["c100-hot-deny", "100 callers, 1 hot key, all denied"],
  ["cluster-c1-many", "Redis Cluster, 1 caller, 10 000 keys"],
  ["cluster-c100-many", "Redis Cluster, 100 callers, 10 000 keys"]
]

const contenders: ReadonlyArray<readonly [id: string, title: string]> = [
  ["tollgate", "**tollgate `acquire`, RedisStore**"],
  ["store", "`RedisStore.apply` alone"],
  ["store-unbatched", "`RedisStore.apply` alone, `maxBatchKeys: 1`"],
  ["rlf", "rate-limiter-flexible `RateLimiterRedis` (ioredis)"],
  ["effect", "Effect `RateLimiter`, `layerStoreRedis`"],
  ["floor", "floor of a lone call: ioredis, `FCALL` of the lean script, no Effect"],
  ["effect-floor", "floor of an Effect call: the same `FCALL` in one `Effect.callback`"],
  ["tollgate-cluster", "tollgate `acquire`, RedisStore on a Redis Cluster of three primaries"],
  ["tollgate-cluster-wait", "the same, `replicas: { wait: 1 }`"],
  ["rlf-cluster", "rate-limiter-flexible `RateLimiterRedis` on the cluster (ioredis)"]
]

const ops = (n: number | undefined): string =>
  n === undefined || !Number.isFinite(n) ? "" : Math.round(n).toLocaleString("en-US").replace(/,/g, " ")

/**
 * The "On Redis" section of docs/performance.md.
 */
export const renderRedisSection = (results: RedisResults): string => {
  const { meta } = results
  const present = scenarios.filter(([id]) => results.rows.some((r) => r.scenario === id))
  const cell = (scenario: string, contender: string): string => {
    const row = results.rows.find((r) => r.scenario === scenario && r.contender === contender)
    if (row === undefined) return ""
    const per = contender === "tollgate" && row.coalescing !== undefined && row.coalescing > 1.05
      ? ` (${row.coalescing.toFixed(0)} ops per call)`
      : contender !== "store-unbatched" && row.decisionsPerEval !== undefined && row.decisionsPerEval > 1.05
      ? ` (${row.decisionsPerEval.toFixed(0)} keys per call)`
      : ""
    const fallback = row.degraded !== undefined && row.degraded > 0 ? ` (${ops(row.degraded)} by the fallback)` : ""
    return ops(row.opsPerSecond) + per + fallback
  }
  const out: Array<string> = [
    "## On Redis",
    "",
    `\`npm run bench:redis\` (also run by \`npm run bench\` when a \`redis-server\` is at hand), ${
      meta.date.slice(0, 10)
    } · Node ${meta.node} · Redis ${meta.redis} · ${
      meta.cpu ?? "?"
    } × ${meta.cores} · ${meta.mode} run: ${meta.rounds} rounds of ${
      meta.measureMillis / 1000
    } s per contender, interleaved${
      meta.roundsOneCaller === undefined
        ? ""
        : ` (one caller: ${meta.roundsOneCaller} rounds of ${meta.measureMillisOneCaller! / 1000} s)`
    }. Decisions per second, medians over rounds; every limit is generous (every call a full decision that admits) except in the last column; \`redis-benchmark\` runs tollgate's lean token-bucket script, what a lone call runs. What these figures mean, what bounds them and what was tried: [distributed.md](distributed.md#performance).`,
    "",
    `| decisions/s | ${present.map(([, t]) => t).join(" | ")} |`,
    `|---|${present.map(() => "---:").join("|")}|`
  ]
  for (const [id, title] of contenders) {
    if (!results.rows.some((r) => r.contender === id)) continue
    out.push(`| ${title} | ${present.map(([s]) => cell(s, id)).join(" | ")} |`)
  }
  out.push(
    `| \`redis-benchmark\` EVALSHA, one decision per call (the server's ceiling for unbatched calls) | ${
      present.map(([s]) => ops(results.ceilings.find((c) => c.scenario === s)?.opsPerSecond)).join(" | ")
    } |`
  )
  const load = present.map(([s]) => results.rows.find((r) => r.scenario === s)?.loadAverage)
  if (load.some((x) => x !== undefined)) {
    out.push(
      `| load average at the end (1 min; the benchmark alone keeps about 1–2) | ${
        load.map((x) => x === undefined ? "" : x.toFixed(1)).join(" | ")
      } |`
    )
  }
  const steal = present.map(([s]) => results.rows.find((r) => r.scenario === s)?.stealPercent)
  if (steal.some((x) => x !== undefined)) {
    out.push(
      `| CPU stolen by the VM's host meanwhile | ${
        steal.map((x) => x === undefined ? "" : `${x.toFixed(0)} %`).join(" | ")
      } |`
    )
  }
  // One row per contender that has a cell, one column per scenario.
  const perDecision = (caption: string, cell: (row: RedisRow) => string | undefined) => {
    const at = (scenario: string, contender: string) => {
      const row = results.rows.find((r) => r.scenario === scenario && r.contender === contender)
      return row === undefined ? "" : cell(row) ?? ""
    }
    const shown = contenders.filter(([id]) => results.rows.some((r) => r.contender === id && cell(r) !== undefined))
    if (shown.length === 0) return
    out.push(
      "",
      caption,
      "",
      `| µs per decision | ${present.map(([, t]) => t).join(" | ")} |`,
      `|---|${present.map(() => "---:").join("|")}|`
    )
    for (const [id, title] of shown) out.push(`| ${title} | ${present.map(([s]) => at(s, id)).join(" | ")} |`)
  }
  // The server's time in scripts per decision: what the noise of the client's machine moves least.
  perDecision(
    "The server's time in scripts per decision, µs (`INFO commandstats`, `usec` of EVALSHA and FCALL over the decisions made):",
    (row) => row.serverMicros?.toFixed(1)
  )
  // CPU per decision, the client's and the server's: for one caller the two
  // run one after the other, so with the wake-ups between them they make
  // the round trip; unlike the throughput, the noise of the machine moves
  // them little.
  perDecision(
    "CPU time per decision, µs: this process (the client, its socket calls included) + redis-server (`INFO cpu`) = both:",
    (row) =>
      row.clientCpuMicros === undefined || row.serverCpuMicros === undefined
        ? undefined
        : `${row.clientCpuMicros.toFixed(0)} + ${row.serverCpuMicros.toFixed(0)} = ${
          (row.clientCpuMicros + row.serverCpuMicros).toFixed(0)
        }`
  )
  out.push(
    "",
    "| target | median of the rounds' ratios | each round | ratio of medians | result |",
    "|---|---:|---|---:|---|"
  )
  for (const t of results.targets) {
    out.push(
      `| ${t.name} | ${t.ratio.toFixed(2)}× | ${t.rounds.map((r) => r.toFixed(2)).join(", ")} | ${
        t.ratioOfMedians.toFixed(2)
      }× | ${t.pass ? "PASS" : "**FAIL**"} |`
    )
  }
  if (results.floors !== undefined && results.floors.length > 0) {
    out.push(
      "",
      "A lone call's floor, in the same rounds (medians of the rounds' ratios):",
      "",
      "| scenario | the floor ÷ rate-limiter-flexible | tollgate `acquire` ÷ the floor | the floor of an Effect call ÷ rate-limiter-flexible | tollgate `acquire` ÷ the floor of an Effect call |",
      "|---|---:|---:|---:|---:|"
    )
    const ratio = (x: number | undefined) => x === undefined ? "" : `${x.toFixed(2)}×`
    for (const f of results.floors) {
      const title = scenarios.find(([id]) => id === f.scenario)?.[1] ?? f.scenario
      out.push(
        `| ${title} | ${ratio(f.floorVsRlf)} | ${ratio(f.tollgateVsFloor)} | ${ratio(f.effectFloorVsRlf)} | ${
          ratio(f.tollgateVsEffectFloor)
        } |`
      )
    }
  }
  // clients-<ping|evalsha>-c<callers>: one row per client, one column per command and concurrency
  const clients = results.rows.filter((r) => r.scenario.startsWith("clients-"))
  if (clients.length > 0) {
    const columns = [...new Set(clients.map((r) => r.scenario))]
    const client = (r: RedisRow) => {
      const id = r.contender.replace(/-(ping|evalsha)$/, "")
      return id === "wire" ? "the store's own connection (`Wire`)" : id
    }
    const title = (scenario: string) => {
      const [, kind, callers] = /^clients-(\w+)-c(\d+)$/.exec(scenario) ?? []
      return `${kind === "ping" ? "PING" : "EVALSHA (tollgate's lean script)"}, ${callers} caller${
        callers === "1" ? "" : "s"
      }`
    }
    out.push(
      "",
      "The clients alone, on 10 000 keys (the choice of client rests on these):",
      "",
      `| ops/s | ${columns.map(title).join(" | ")} |`,
      `|---|${columns.map(() => "---:").join("|")}|`
    )
    for (const name of new Set(clients.map(client))) {
      out.push(
        `| ${name} | ${
          columns.map((k) => ops(clients.find((r) => r.scenario === k && client(r) === name)?.opsPerSecond)).join(" | ")
        } |`
      )
    }
  }
  if (existsSync(historyFile)) out.push("", readFileSync(historyFile, "utf8").trimEnd())
  return out.join("\n") + "\n"
}

const historyFile = new URL("./history.md", import.meta.url)
