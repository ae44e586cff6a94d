/**
 * `node bench/http/grpc-pair.ts`: tollgate's gRPC rate limit service and its
 * floor (bench/http/grpc-floor.ts: a bare grpc-js server, the same
 * RateLimitService definition, answering OK at once) driven at the same time,
 * each by a client process of its own (50 callers in a loop on one HTTP/2
 * connection, as Envoy calls it), for rounds of a few seconds; per round, each
 * server's CPU time (user + system, from /proc) per call, and their ratio.
 * Both servers see the same machine at the same moment, so the ratio holds up
 * on a busy machine much better than two runs one after the other do.
 *
 *   node bench/http/grpc-pair.ts                    6 rounds of 4 s
 *   node bench/http/grpc-pair.ts --rounds=10 --duration=5
 *   node bench/http/grpc-pair.ts --also=<checkout>  a third server: the service of another checkout of
 *                                                   tollgate (its src/server/main.ts), e.g. the code before
 *                                                   a change, driven at the same time
 *
 * Linux only (/proc).
 */
import * as grpc from "@grpc/grpc-js"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { loadDefinition } from "../../src/envoy/RlsServer.ts"

const root = fileURLToPath(new URL("../..", import.meta.url))
const args = process.argv.slice(2)
const option = (name: string): string | undefined =>
  args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
const rounds = Number(option("rounds") ?? 6)
const duration = Number(option("duration") ?? 4)
const also = option("also")

// A client process: drives `address` for `seconds` and prints the calls it made.
if (args[0] === "--client") {
  const definition = loadDefinition()
  if (!("ShouldRateLimit" in definition)) throw definition
  const Client = grpc.makeGenericClientConstructor(definition, "RateLimitService")
  const client = new Client(args[1], grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    ShouldRateLimit: (request: unknown, callback: (error: grpc.ServiceError | null) => void) => void
  }
  const request = { domain: "bench", descriptors: [{ entries: [{ key: "remote_address", value: "203.0.113.7" }] }] }
  const deadline = performance.now() + Number(args[2]) * 1000
  let calls = 0
  let errors = 0
  const caller = async () => {
    while (performance.now() < deadline) {
      await new Promise<void>((resolve) =>
        client.ShouldRateLimit(request, (error) => {
          if (error === null) calls++
          else errors++
          resolve()
        })
      )
    }
  }
  await Promise.all(Array.from({ length: 50 }, caller))
  client.close()
  console.log(JSON.stringify({ calls, errors }))
  process.exit(0)
}

const cpuSeconds = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")
  return (Number(fields[11]) + Number(fields[12])) / 100
}

interface Server {
  readonly name: string
  readonly child: ChildProcess
  readonly address: string
}

const start = (name: string, cwd: string, script: string, env: Record<string, string>, pattern: RegExp) =>
  new Promise<Server>((resolve, reject) => {
    const child = spawn(process.execPath, [script], {
      cwd,
      env: { ...process.env, PORT: "0", HOST: "127.0.0.1", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      const match = pattern.exec(output)
      if (match !== null) resolve({ name, child, address: match[1] })
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.on("exit", (code) => reject(new Error(`${name} exited with ${code}:\n${output}`)))
  })

const drive = (address: string, seconds: number) =>
  new Promise<{ calls: number; errors: number }>((resolve, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), "--client", address, String(seconds)], {
      cwd: root,
      stdio: ["ignore", "pipe", "inherit"]
    })
    let out = ""
    child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
    child.on("exit", (code) => code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`client exited ${code}`)))
  })

const dir = mkdtempSync(join(tmpdir(), "tollgate-grpc-pair-"))
writeFileSync(
  join(dir, "ratelimit.yaml"),
  "domain: bench\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: second, requests_per_unit: 4000000000 }\n"
)
writeFileSync(join(dir, "tollgate.json"), JSON.stringify({ rls: { port: 0, config: "ratelimit.yaml" } }))
const rlsAddress = /gRPC\) listening on (127\.0\.0\.1:\d+)/
const servers: Array<Server> = []
try {
  servers.push(
    await start("grpc-js floor", root, "bench/http/grpc-floor.ts", {}, /gRPC listening on (127\.0\.0\.1:\d+)/),
    await start("tollgate", root, "src/server/main.ts", { TOLLGATE_CONFIG: join(dir, "tollgate.json") }, rlsAddress)
  )
  if (also !== undefined) {
    servers.push(
      await start("also", also, "src/server/main.ts", { TOLLGATE_CONFIG: join(dir, "tollgate.json") }, rlsAddress)
    )
  }
  console.log(
    `grpc-pair: ${rounds} rounds of ${duration} s, every server driven at the same time by a client process of its ` +
      `own (50 callers); load average ${loadavg()[0].toFixed(1)}`
  )
  // a warm-up round, not counted
  await Promise.all(servers.map((s) => drive(s.address, 2)))
  const perRound: Array<Array<number>> = []
  for (let round = 0; round < rounds; round++) {
    const before = servers.map((s) => cpuSeconds(s.child.pid!))
    const results = await Promise.all(servers.map((s) => drive(s.address, duration)))
    const micros = servers.map((s, i) => (cpuSeconds(s.child.pid!) - before[i]) / results[i].calls * 1e6)
    perRound.push(micros)
    console.log(
      `round ${round + 1}: ` +
        servers.map((s, i) => `${s.name} ${micros[i].toFixed(1)} µs/call (${results[i].calls} calls)`).join(", ") +
        "; × the floor by CPU: " + servers.slice(1).map((s, i) => `${s.name} ${(micros[0] / micros[i + 1]).toFixed(2)}`)
        .join(", ")
    )
  }
  const median = (xs: ReadonlyArray<number>) => {
    const sorted = [...xs].sort((a, b) => a - b)
    const mid = Math.floor(sorted.length / 2)
    return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
  }
  for (let i = 1; i < servers.length; i++) {
    console.log(
      `${servers[i].name}: CPU per call × the floor's (floor ÷ it, median of the rounds) ${
        median(perRound.map((r) => r[0] / r[i])).toFixed(2)
      }; ${median(perRound.map((r) => r[i])).toFixed(1)} µs against ${median(perRound.map((r) => r[0])).toFixed(1)} µs`
    )
  }
} finally {
  for (const s of servers) s.child.kill("SIGTERM")
  rmSync(dir, { recursive: true, force: true })
}
