/**
 * The HTTP benchmark's results (bench/http/results.json, written by
 * `npm run bench:http -- --save`) and the section of docs/performance.md that
 * shows them. Where the service's time goes, and what was changed, is in
 * docs/service.md (Benchmark).
 */

export interface HttpRound {
  readonly requestsPerSecond: number
  /** The server process's CPU time (user + system) per request, µs; NaN without /proc. */
  readonly cpuMicros: number
}

export interface HttpRow {
  readonly name: string
  /** The best round's requests/s (and its latency). */
  readonly requestsPerSecond: number
  readonly p50: number
  readonly p99: number
  readonly non2xx: number
  readonly errors: number
  /** Median over rounds. */
  readonly cpuMicros: number
  /** Median over rounds of the bare JSON POST's CPU per request ÷ this row's, in the same round. */
  readonly cpuVsJsonPost: number
  /** Median over rounds of this row's requests/s ÷ the bare JSON POST's, in the same round. */
  readonly requestsVsJsonPost: number
  /** In round order. */
  readonly rounds: ReadonlyArray<HttpRound>
}

export interface HttpResults {
  readonly meta: {
    readonly date: string
    readonly node: string
    readonly cpu: string | undefined
    readonly cores: number
    readonly rounds: number
    readonly seconds: number
    readonly connections: number
    /** 1-minute load average at the start and at the end (Linux). */
    readonly load: readonly [number, number]
  }
  readonly rows: ReadonlyArray<HttpRow>
}

/** The row every other is compared with: the same HTTP work as a POST /v1/consume, no validation, no limiter. */
export const jsonPostName = "effect/http POST /json (reads a JSON body)"
/** The same bare route, reading its body with tollgate's reader: what is left is the service's own work. */
export const jsonBodyName = "effect/http POST /json, tollgate's body reader"
/** The row the speed target is about. */
export const consumeName = "tollgate POST /v1/consume, 1 hot key (allowed)"
/** The floor of the gRPC row: a bare grpc-js server, same proto, answering OK at once. */
export const grpcFloorName = "grpc-js ShouldRateLimit, answers OK at once (floor: no Effect)"
/** Envoy's rate limit service, with one descriptor per call. */
export const grpcName = "tollgate gRPC ShouldRateLimit (1 descriptor)"

const ratio = (x: number): string => Number.isFinite(x) ? `${x.toFixed(2)}×` : "–"
const count = (x: number): string => Math.round(x).toLocaleString("en-US")
const micros = (x: number): string => Number.isFinite(x) ? x.toFixed(1) : "–"

export const renderHttpSection = (results: HttpResults): string => {
  const { meta, rows } = results
  const json = rows.find((r) => r.name === jsonPostName)
  const consume = rows.find((r) => r.name === consumeName)
  const out: Array<string> = [
    "## The HTTP service",
    "",
    `\`npm run bench:http -- --save\`, ${meta.date.slice(0, 10)} · Node ${meta.node} · ${
      meta.cpu ?? "CPU unknown"
    } × ${meta.cores} · ${meta.rounds} interleaved rounds of ${meta.seconds} s per scenario, ${meta.connections} ` +
    `connections · load average ${meta.load[0].toFixed(1)} at the start, ${meta.load[1].toFixed(1)} at the end. ` +
    "Each server is a child process on 127.0.0.1, autocannon drives it from the benchmark's process on the same " +
    "cores. Requests/s is the best round's; CPU is the server process's user + system time per request served " +
    "(median over rounds), which counts the server's own work and so moves much less than requests/s with other " +
    "load on the machine. The “×” columns are medians over rounds of the ratio to the bare effect/http JSON POST " +
    "in the same round (for CPU: its CPU per request ÷ this row's, so that higher is faster in both). What the " +
    "figures mean, where the service's time goes and what was changed: [service.md](service.md#benchmark).",
    "",
    "| scenario | req/s | × POST /json (req/s) | CPU µs/req | × POST /json (CPU) | p99 ms | non-2xx | errors |",
    "|---|---:|---:|---:|---:|---:|---:|---:|"
  ]
  for (const r of rows) {
    out.push(
      `| ${r.name} | ${count(r.requestsPerSecond)} | ${ratio(r.requestsVsJsonPost)} | ${micros(r.cpuMicros)} | ${
        ratio(r.cpuVsJsonPost)
      } | ${r.p99} | ${r.non2xx} | ${r.errors} |`
    )
  }
  out.push("")
  if (json !== undefined && consume !== undefined) {
    const each = (f: (c: HttpRound, j: HttpRound) => number) =>
      consume.rounds.map((c, i) => f(c, json.rounds[i]).toFixed(2)).join(", ")
    const pass = (x: number) => (x >= 0.8 ? "**PASS**" : "**FAIL**")
    out.push(
      "| target | median of the rounds' ratios | each round | best round ÷ best round | result |",
      "|---|---:|---|---:|---|",
      `| POST /v1/consume ≥ 0.8× the bare JSON POST, by requests/s | ${ratio(consume.requestsVsJsonPost)} | ${
        each((c, j) => c.requestsPerSecond / j.requestsPerSecond)
      } | ${ratio(consume.requestsPerSecond / json.requestsPerSecond)} | ${pass(consume.requestsVsJsonPost)} |`,
      `| the same, by server CPU per request | ${ratio(consume.cpuVsJsonPost)} | ${
        each((c, j) => j.cpuMicros / c.cpuMicros)
      } | | ${pass(consume.cpuVsJsonPost)} |`,
      ""
    )
    const grpcRow = rows.find((r) => r.name === grpcName)
    const grpcFloor = rows.find((r) => r.name === grpcFloorName)
    if (grpcRow !== undefined && grpcFloor !== undefined) {
      const perRound = (f: (c: HttpRound, j: HttpRound) => number) =>
        grpcRow.rounds.map((c, i) => f(c, grpcFloor.rounds[i]))
      const middle = (xs: ReadonlyArray<number>) => {
        const sorted = [...xs].sort((a, b) => a - b)
        return sorted.length % 2 === 1
          ? sorted[(sorted.length - 1) / 2]
          : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2
      }
      const byCpu = perRound((c, j) => j.cpuMicros / c.cpuMicros)
      const byRequests = perRound((c, j) => c.requestsPerSecond / j.requestsPerSecond)
      out.push(
        "| target (gRPC) | median of the rounds' ratios | each round | result |",
        "|---|---:|---|---|",
        `| ShouldRateLimit ≥ 0.8× the bare grpc-js server, by server CPU per call | ${ratio(middle(byCpu))} | ${
          byCpu.map((x) => x.toFixed(2)).join(", ")
        } | ${pass(middle(byCpu))} |`,
        `| the same, by requests/s (bounded by the benchmark's one client) | ${ratio(middle(byRequests))} | ${
          byRequests.map((x) => x.toFixed(2)).join(", ")
        } | ${pass(middle(byRequests))} |`,
        "",
        "The steadier measure of the gRPC service, both servers driven at the same time: " +
          "`node bench/http/grpc-pair.ts` ([service.md](service.md#the-grpc-rate-limit-service)).",
        ""
      )
    }
    const own = rows.find((r) => r.name === jsonBodyName)
    if (own !== undefined) {
      const cpu = consume.rounds.map((c, i) => own.rounds[i].cpuMicros / c.cpuMicros)
      const sorted = [...cpu].sort((a, b) => a - b)
      const median = sorted.length % 2 === 1
        ? sorted[(sorted.length - 1) / 2]
        : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2
      out.push(
        `Against the bare route that reads its body with tollgate's reader (the service's own work: validation, ` +
          `the limiter, the answer, metrics), POST /v1/consume is at ${ratio(median)} by CPU per request ` +
          `(rounds: ${cpu.map((x) => x.toFixed(2)).join(", ")}).`,
        ""
      )
    }
  }
  return out.join("\n")
}
