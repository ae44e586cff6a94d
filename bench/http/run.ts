/**
 * @effect-diagnostics globalDate:off
 *
 * `npm run bench:http`: drives tollgate's HTTP service with autocannon and
 * prints requests/s and p50/p99 latency beside a bare effect/http
 * hello-world server (GET, and a POST that reads a JSON body: the fair
 * baseline for the service's POST API), all on this machine in the same run. Every server runs
 * in its own child process on 127.0.0.1; autocannon runs in this one.
 *
 *   npm run bench:http                       2 rounds of 5 s per scenario, 50 connections
 *   npm run bench:http -- --duration=3 --connections=20 --rounds=3
 *   npm run bench:http -- --json             also print the results as JSON
 *   npm run bench:http -- --only=gRPC        only the scenarios whose name contains "grpc" (any case)
 *                                            (and the bare JSON POST, which the ratios need)
 *   npm run bench:http -- --save             also write bench/http/results.json, which
 *                                            docs/performance.md shows (npm run bench -- --report-only)
 *
 * The scenarios run in rounds, interleaved, and each reports its best round
 * (the machine is shared: the best run is the one least disturbed). Beside
 * requests/s it reports the server process's CPU time per request (Linux:
 * user + system time from /proc, median over the rounds), and that against the
 * bare JSON POST's in the same round: a figure much less sensitive to other
 * load on the machine than requests/s, since it counts the server's own work.
 */
import * as grpc from "@grpc/grpc-js"
import autocannon from "autocannon"
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { fileURLToPath } from "node:url"
import { loadDefinition } from "../../src/envoy/RlsServer.ts"
import { consumeName, grpcFloorName, grpcName, type HttpResults, type HttpRow, jsonPostName } from "./report.ts"

const root = fileURLToPath(new URL("../..", import.meta.url))
const args = process.argv.slice(2)
const option = (name: string, fallback: number): number => {
  const hit = args.find((a) => a.startsWith(`--${name}=`))
  const value = hit === undefined ? fallback : Number(hit.slice(name.length + 3))
  if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number`)
  return value
}
const duration = option("duration", 5)
const connections = option("connections", 50)
const rounds = option("rounds", 2)
const only = args.find((a) => a.startsWith("--only="))?.slice("--only=".length)
const loadAtStart = loadavg()[0]

interface Server {
  readonly url: string
  readonly child: ChildProcess
  readonly output: () => string
}

const launch = (
  script: string,
  extraArgs: ReadonlyArray<string>,
  env: Record<string, string>,
  listening: RegExp = /Listening on (http:\/\/127\.0\.0\.1:\d+)/
): Promise<Server> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...extraArgs], {
      cwd: root,
      env: { ...process.env, PORT: "0", HOST: "127.0.0.1", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      const match = listening.exec(output)
      if (match !== null) resolve({ url: match[1], child, output: () => output })
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.on("exit", (code) => reject(new Error(`${script} exited with ${code}:\n${output}`)))
  })

const stop = (server: Server): Promise<void> =>
  new Promise((resolve) => {
    if (server.child.exitCode !== null) return resolve()
    server.child.removeAllListeners("exit")
    server.child.once("exit", () => resolve())
    server.child.kill("SIGTERM")
  })

interface Row {
  readonly name: string
  readonly requestsPerSecond: number
  /** The server process's CPU time (user + system) per request served, in µs; NaN where /proc is missing. */
  readonly cpuMicros: number
  readonly p50: number
  readonly p99: number
  readonly non2xx: number
  readonly errors: number
}

// CPU time (user + system) a process has used so far, in seconds, from /proc (Linux); NaN elsewhere.
// Much less sensitive than requests/s to what else runs on the machine: it counts the server's
// own work per request, not how much of the machine it got.
const ticksPerSecond = 100 // USER_HZ: 100 on every Linux port that Node runs on
const cpuSeconds = (pid: number | undefined): number => {
  if (pid === undefined || !existsSync(`/proc/${pid}/stat`)) return NaN
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond
}

const warmedUp = new Set<string>()

// gRPC ShouldRateLimit: `connections` callers in a loop on one HTTP/2 connection (Envoy's shape),
// each sending its next call when the previous one is answered; latency per call.
const driveGrpc = async (name: string, address: string, seconds: number, pid: number | undefined): Promise<Row> => {
  // a short warm-up (JIT, connection setup) before the first measured run, as for HTTP
  if (!warmedUp.has(name)) {
    warmedUp.add(name)
    await driveGrpc(name, address, 2, undefined)
  }
  const definition = loadDefinition()
  if (!("ShouldRateLimit" in definition)) throw definition
  const Client = grpc.makeGenericClientConstructor(definition, "RateLimitService")
  const client = new Client(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    ShouldRateLimit: (request: unknown, callback: (error: grpc.ServiceError | null) => void) => void
  }
  const request = {
    domain: "bench",
    descriptors: [{ entries: [{ key: "remote_address", value: "203.0.113.7" }] }]
  }
  const latencies: Array<number> = []
  let errors = 0
  const deadline = performance.now() + seconds * 1000
  const caller = async () => {
    while (performance.now() < deadline) {
      const t0 = performance.now()
      await new Promise<void>((resolve) =>
        client.ShouldRateLimit(request, (error) => {
          if (error !== null) errors++
          latencies.push(performance.now() - t0)
          resolve()
        })
      )
    }
  }
  const started = performance.now()
  const cpuBefore = cpuSeconds(pid)
  await Promise.all(Array.from({ length: connections }, caller))
  const cpu = cpuSeconds(pid) - cpuBefore
  const elapsed = (performance.now() - started) / 1000
  client.close()
  latencies.sort((a, b) => a - b)
  const at = (q: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0)
  return {
    name,
    requestsPerSecond: latencies.length / elapsed,
    cpuMicros: cpu / latencies.length * 1e6,
    p50: at(0.5),
    p99: at(0.99),
    non2xx: 0,
    errors
  }
}

const drive = async (name: string, options: autocannon.Options, pid: number | undefined): Promise<Row> => {
  // a short warm-up (JIT, connection setup) before the first measured run
  if (!warmedUp.has(name)) {
    warmedUp.add(name)
    await autocannon({ ...options, duration: 2 })
  }
  const cpuBefore = cpuSeconds(pid)
  const result = await autocannon({ ...options, connections, duration })
  const cpu = cpuSeconds(pid) - cpuBefore
  return {
    name,
    requestsPerSecond: result.requests.average,
    cpuMicros: cpu / result.requests.total * 1e6,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts
  }
}

const json = { "content-type": "application/json" }
const HOT_CAPACITY = 1e12 // no client can exhaust it: every request is admitted

const main = async () => {
  const servers: Array<Server> = []
  const rows: Array<Row> = []
  try {
    const hello = await launch("bench/http/hello.ts", [], {})
    servers.push(hello)
    const helloLimited = await launch("bench/http/hello.ts", ["--middleware"], {})
    servers.push(helloLimited)
    const floor = await launch("bench/http/floor.ts", [], {})
    servers.push(floor)
    const grpcFloor = await launch("bench/http/grpc-floor.ts", [], {}, /gRPC listening on (127\.0\.0\.1:\d+)/)
    servers.push(grpcFloor)
    // The service with forward-auth rules and the Envoy rate limit service, limits no client exhausts.
    const dir = mkdtempSync(join(tmpdir(), "tollgate-bench-"))
    writeFileSync(
      join(dir, "ratelimit.yaml"),
      "domain: bench\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: second, requests_per_unit: 4000000000 }\n"
    )
    writeFileSync(
      join(dir, "tollgate.json"),
      JSON.stringify({
        policies: {
          default: { kind: "tokenBucket", capacity: HOT_CAPACITY, refill: { tokens: 1e9, per: "1 second" } },
          tight: { kind: "tokenBucket", capacity: 10, refill: { tokens: 1, per: "1 hour" } }
        },
        limits: { maxBatch: 100 },
        forwardAuth: {
          trustedProxies: ["127.0.0.1"],
          rules: [{ name: "api", pathPrefix: "/api/", policy: "default", key: ["address"] }]
        },
        rls: { port: 0, config: "ratelimit.yaml" }
      })
    )
    const tollgate = await launch("src/server/main.ts", [], { TOLLGATE_CONFIG: join(dir, "tollgate.json") })
    servers.push(tollgate)
    // The gRPC server is up a moment after the HTTP one.
    let rls: string | undefined
    for (let i = 0; i < 100 && rls === undefined; i++) {
      rls = /listening on (127\.0\.0\.1:\d+)/.exec(tollgate.output())?.[1]
      if (rls === undefined) await sleep(50)
    }
    rmSync(dir, { recursive: true, force: true })
    if (rls === undefined) throw new Error(`no RLS address:\n${tollgate.output()}`)

    console.log(
      `bench:http: ${rounds} rounds of ${duration} s per scenario (best round shown), ${connections} connections, ` +
        `${cpus().length} cores, node ${process.version}`
    )
    let n = 0
    const batch = JSON.stringify({ requests: Array.from({ length: 10 }, (_, i) => ({ key: `batch:${i}` })) })
    const all: ReadonlyArray<readonly [string, Server, autocannon.Options | "grpc"]> = [
      ["effect/http hello world (GET /)", hello, { url: hello.url + "/" }],
      ["node:http POST /json (floor: no Effect)", floor, {
        url: floor.url + "/json",
        method: "POST",
        headers: json,
        body: JSON.stringify({ key: "hot" })
      }],
      ["effect/http POST /json (reads a JSON body)", hello, {
        url: hello.url + "/json",
        method: "POST",
        headers: json,
        body: JSON.stringify({ key: "hot" })
      }],
      ["effect/http POST /json, tollgate's body reader", hello, {
        url: hello.url + "/json-body",
        method: "POST",
        headers: json,
        body: JSON.stringify({ key: "hot" })
      }],
      ["hello world + RateLimitMiddleware", helloLimited, { url: helloLimited.url + "/" }],
      ["tollgate GET /healthz", tollgate, { url: tollgate.url + "/healthz" }],
      ["tollgate POST /v1/consume, 1 hot key (allowed)", tollgate, {
        url: tollgate.url + "/v1/consume",
        method: "POST",
        headers: json,
        body: JSON.stringify({ key: "hot" })
      }],
      ["tollgate POST /v1/consume, 1 key (denied)", tollgate, {
        url: tollgate.url + "/v1/consume",
        method: "POST",
        headers: json,
        body: JSON.stringify({ key: "hot", policy: "tight" })
      }],
      ["tollgate POST /v1/consume, 10k keys", tollgate, {
        url: tollgate.url + "/v1/consume",
        requests: [{
          method: "POST",
          headers: json,
          setupRequest: (request) => ({ ...request, body: JSON.stringify({ key: `user:${n++ % 10_000}` }) })
        }]
      }],
      ["tollgate POST /v1/batch, 10 decisions per request", tollgate, {
        url: tollgate.url + "/v1/batch",
        method: "POST",
        headers: json,
        body: batch
      }],
      ["tollgate GET /v1/check (forward auth, nginx's shape)", tollgate, {
        url: tollgate.url + "/v1/check",
        headers: {
          "x-forwarded-uri": "/api/items?page=2",
          "x-forwarded-method": "GET",
          "x-forwarded-for": "203.0.113.7"
        }
      }],
      [grpcFloorName, grpcFloor, "grpc"],
      [grpcName, tollgate, "grpc"]
    ]
    const scenarios = all.filter(([name]) =>
      only === undefined || name === jsonPostName || name.toLowerCase().includes(only.toLowerCase())
    )
    const runs = new Map<string, Array<Row>>(scenarios.map(([name]) => [name, []]))
    for (let round = 0; round < rounds; round++) {
      for (const [name, server, options] of scenarios) {
        const pid = server.child.pid
        runs.get(name)!.push(
          options === "grpc"
            ? await driveGrpc(name, server === grpcFloor ? grpcFloor.url : rls, duration, pid)
            : await drive(name, options, pid)
        )
      }
    }
    for (const [name] of scenarios) rows.push(...runs.get(name)!)
  } finally {
    await Promise.all(servers.map(stop))
  }

  const names = [...new Set(rows.map((r) => r.name))]
  const roundsOf = (name: string) => rows.filter((r) => r.name === name)
  const bestOf = (name: string) => roundsOf(name).reduce((a, b) => b.requestsPerSecond > a.requestsPerSecond ? b : a)
  const median = (xs: ReadonlyArray<number>) => {
    const sorted = [...xs].sort((a, b) => a - b)
    const mid = Math.floor(sorted.length / 2)
    return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
  }
  const base = bestOf(names[0]).requestsPerSecond
  // The fair baseline of the service's POST API: the bare effect/http JSON POST of the same run.
  const jsonRounds = roundsOf(jsonPostName)
  const summary: Array<HttpRow> = names.map((name) => {
    const { p50, p99, non2xx, errors, requestsPerSecond } = bestOf(name)
    const runs = roundsOf(name).map(({ cpuMicros, requestsPerSecond }) => ({ requestsPerSecond, cpuMicros }))
    return {
      name,
      requestsPerSecond,
      p50,
      p99,
      non2xx,
      errors,
      cpuMicros: median(runs.map((r) => r.cpuMicros)),
      // per round, against the JSON POST of the same round (higher is faster in both)
      cpuVsJsonPost: median(runs.map((r, round) => jsonRounds[round].cpuMicros / r.cpuMicros)),
      requestsVsJsonPost: median(runs.map((r, round) => r.requestsPerSecond / jsonRounds[round].requestsPerSecond)),
      rounds: runs
    }
  })
  const header = [
    "scenario",
    "req/s",
    "vs hello",
    "vs POST /json",
    "CPU us/req",
    "CPU vs POST /json",
    "p50 ms",
    "p99 ms",
    "non-2xx",
    "errors"
  ]
  const lines = summary.map((r) => [
    r.name,
    Math.round(r.requestsPerSecond).toLocaleString("en-US"),
    `${(r.requestsPerSecond / base).toFixed(2)}x`,
    `${r.requestsVsJsonPost.toFixed(2)}x`,
    Number.isNaN(r.cpuMicros) ? "-" : r.cpuMicros.toFixed(1),
    Number.isNaN(r.cpuVsJsonPost) ? "-" : `${r.cpuVsJsonPost.toFixed(2)}x`,
    String(r.p50),
    String(r.p99),
    String(r.non2xx),
    String(r.errors)
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)))
  const format = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i])).join("  ")
  console.log(format(header))
  console.log(widths.map((w) => "-".repeat(w)).join("  "))
  for (const line of lines) console.log(format(line))
  const perRound = (row: HttpRow | undefined, floor: ReadonlyArray<HttpRow["rounds"][number]>, what: string) => {
    if (row === undefined || floor.length === 0) return
    console.log(
      `${what}, per round: requests/s ${
        row.rounds.map((r, i) => (r.requestsPerSecond / floor[i].requestsPerSecond).toFixed(2)).join(", ")
      }; CPU ${row.rounds.map((r, i) => (floor[i].cpuMicros / r.cpuMicros).toFixed(2)).join(", ")}`
    )
  }
  console.log("")
  perRound(summary.find((r) => r.name === consumeName), jsonRounds, "POST /v1/consume against the bare JSON POST")
  perRound(
    summary.find((r) => r.name === grpcName),
    roundsOf(grpcFloorName).map(({ cpuMicros, requestsPerSecond }) => ({ requestsPerSecond, cpuMicros })),
    "gRPC ShouldRateLimit against the bare grpc-js server"
  )
  const results: HttpResults = {
    meta: {
      date: new Date().toISOString(),
      node: process.version,
      cpu: cpus()[0]?.model,
      cores: cpus().length,
      rounds,
      seconds: duration,
      connections,
      load: [loadAtStart, loadavg()[0]]
    },
    rows: summary
  }
  if (args.includes("--json")) console.log(JSON.stringify(results, null, 2))
  if (args.includes("--save")) {
    writeFileSync(new URL("./results.json", import.meta.url), JSON.stringify(results, null, 2) + "\n")
    console.log("wrote bench/http/results.json (npm run bench -- --report-only puts it into docs/performance.md)")
  }
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
