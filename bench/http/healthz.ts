/**
 * `node bench/http/healthz.ts`: how long `GET /healthz` takes on a cold
 * service under saturation, as a liveness probe sees it. Each round starts
 * the service afresh (no warm-up), saturates it at once with autocannon in a
 * process of its own (POST /v1/consume on `--connections` kept-alive
 * connections, as fast as it answers), and meanwhile probes `/healthz` every
 * 100 ms from this process the way kubelet does:
 * a new connection per probe, one request, `Connection: close`. It reports
 * the probes' latency (median, p99, max) over the first `--cold` seconds and
 * over the rest of the round.
 *
 *   node bench/http/healthz.ts                       3 rounds of 8 s, 200 connections
 *   node bench/http/healthz.ts --rounds=5 --duration=10 --connections=400
 *   node bench/http/healthz.ts --compare=<checkout>  also runs <checkout>/src/server/main.ts,
 *                                                    its rounds interleaved with this one's
 *
 * The machine may be shared: compare contenders from the same run only.
 */
import type autocannon from "autocannon"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import { cpus, loadavg, tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))
const args = process.argv.slice(2)
const option = (name: string, fallback: number): number => {
  const hit = args.find((a) => a.startsWith(`--${name}=`))
  const value = hit === undefined ? fallback : Number(hit.slice(name.length + 3))
  if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number`)
  return value
}
const rounds = option("rounds", 3)
const duration = option("duration", 8)
const coldSeconds = option("cold", 3)
const connections = option("connections", 200)
const compare = args.find((a) => a.startsWith("--compare="))?.slice("--compare=".length)

interface Service {
  readonly url: string
  readonly child: ChildProcess
}

const launch = (checkout: string, config: string): Promise<Service> =>
  new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [join(checkout, "src/server/main.ts")], {
      cwd: checkout,
      env: { ...process.env, PORT: "0", HOST: "127.0.0.1", TOLLGATE_CONFIG: config },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      const match = /Listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)
      if (match !== null) resolvePromise({ url: match[1], child })
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.on("exit", (code) => reject(new Error(`the service exited with ${code}:\n${output}`)))
  })

const stop = (service: Service): Promise<void> =>
  new Promise((resolvePromise) => {
    if (service.child.exitCode !== null) return resolvePromise()
    service.child.removeAllListeners("exit")
    service.child.once("exit", () => resolvePromise())
    service.child.kill("SIGKILL")
  })

// One probe as kubelet sends it: a connection of its own, closed after the answer.
const probe = (url: URL): Promise<number> =>
  new Promise((resolvePromise) => {
    const started = performance.now()
    const req = http.get({
      host: url.hostname,
      port: url.port,
      path: "/healthz",
      agent: false,
      headers: { connection: "close" }
    }, (res) => {
      res.resume()
      res.on("end", () => resolvePromise(res.statusCode === 200 ? performance.now() - started : Infinity))
    })
    req.on("error", () => resolvePromise(Infinity))
    req.setTimeout(10_000, () => req.destroy())
  })

// autocannon in a process of its own, so that the probes' event loop is as free as kubelet's.
const saturate = (url: string): Promise<autocannon.Result> =>
  new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [
      join(root, "node_modules/autocannon/autocannon.js"),
      "--json",
      "--connections",
      String(connections),
      "--duration",
      String(duration),
      "--method",
      "POST",
      "--headers",
      "content-type=application/json",
      "--body",
      JSON.stringify({ key: "hot" }),
      url + "/v1/consume"
    ], { stdio: ["ignore", "pipe", "ignore"] })
    let output = ""
    child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
    child.on("exit", (code) => {
      try {
        resolvePromise(JSON.parse(output) as autocannon.Result)
      } catch {
        reject(new Error(`autocannon exited with ${code}: ${output}`))
      }
    })
  })

interface Round {
  readonly cold: ReadonlyArray<number>
  readonly warm: ReadonlyArray<number>
  readonly requestsPerSecond: number
  /** Answers of the load that were not 2xx, and its errors and timeouts. */
  readonly refused: number
}

const round = async (checkout: string, config: string): Promise<Round> => {
  const service = await launch(checkout, config)
  try {
    const url = new URL(service.url)
    const load = saturate(service.url)
    const started = performance.now()
    const cold: Array<number> = []
    const warm: Array<number> = []
    const probes: Array<Promise<void>> = []
    while (performance.now() - started < duration * 1000 - 500) {
      const at = performance.now() - started
      probes.push(
        probe(url).then((ms) => {
          ;(at < coldSeconds * 1000 ? cold : warm).push(ms)
        })
      )
      await sleep(100)
    }
    const result = await load
    await Promise.all(probes)
    return {
      cold,
      warm,
      requestsPerSecond: result.requests.average,
      refused: result.non2xx + result.errors + result.timeouts
    }
  } finally {
    await stop(service)
  }
}

const summary = (samples: ReadonlyArray<number>) => {
  const sorted = [...samples].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
  const ms = (x: number) => Number.isFinite(x) ? `${x.toFixed(1)} ms` : "failed"
  return `median ${ms(at(0.5))}, p99 ${ms(at(0.99))}, max ${ms(sorted.at(-1) ?? NaN)} (${sorted.length} probes)`
}

const main = async () => {
  const dir = mkdtempSync(join(tmpdir(), "tollgate-healthz-"))
  const config = join(dir, "tollgate.json")
  writeFileSync(
    config,
    JSON.stringify({
      policies: { default: { kind: "tokenBucket", capacity: 1e12, refill: { tokens: 1e9, per: "1 second" } } }
    })
  )
  const contenders: Array<{ readonly name: string; readonly checkout: string }> = [{
    name: "this tree",
    checkout: root
  }]
  if (compare !== undefined) contenders.push({ name: `compare (${compare})`, checkout: resolve(compare) })
  const results = new Map(contenders.map((c) => [c.name, [] as Array<Round>]))
  console.log(
    `/healthz on a cold, saturated service: ${rounds} rounds of ${duration} s, ${connections} connections of ` +
      `POST /v1/consume; cold = the first ${coldSeconds} s. ${cpus().length} cores, load ${
        loadavg()[0].toFixed(2)
      } at start (the machine may be shared).`
  )
  try {
    for (let i = 0; i < rounds; i++) {
      for (const contender of contenders) {
        const r = await round(contender.checkout, config)
        results.get(contender.name)!.push(r)
        console.log(
          `  round ${i + 1}, ${contender.name}: ${Math.round(r.requestsPerSecond)} req/s (${r.refused} not 2xx or ` +
            `failed); cold ${summary(r.cold)}; ` +
            `warm ${summary(r.warm)}`
        )
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  for (const [name, rs] of results) {
    console.log(`${name}:`)
    console.log(`  cold: ${summary(rs.flatMap((r) => r.cold))}`)
    console.log(`  warm: ${summary(rs.flatMap((r) => r.warm))}`)
  }
}

await main()
