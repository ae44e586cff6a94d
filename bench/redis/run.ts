/**
 * @effect-diagnostics globalDate:off globalTimers:off
 *
 * The Redis benchmark: tollgate on `RedisStore` beside rate-limiter-flexible's
 * `RateLimiterRedis` (over ioredis, its fastest client here) and Effect's own
 * `RateLimiter` over `layerStoreRedis`, with `redis-benchmark`'s EVALSHA rate
 * of tollgate's lean token-bucket script (what a lone call runs) as the
 * server's ceiling for one call per decision. Concurrency 1 and 100, on one
 * hot key and on 10 000 keys; every limit is generous, so every call is a
 * full decision that admits (and one hot key where every call but the first
 * is denied). And the same limiter on a Redis Cluster of three primaries,
 * beside one server in the same rounds (1 and 100 callers on 10 000 keys),
 * with and without `replicas: { wait: 1 }`, and rate-limiter-flexible on
 * the cluster. For each contender that runs scripts it also reports the
 * servers' time in them per decision (`INFO commandstats`, of every primary
 * on the cluster), which the noise of a shared machine moves far less than
 * the throughput.
 *
 *   npm run bench:redis              about 9 minutes: writes bench/redis/results.json
 *   npm run bench:redis -- --quick   about 3 minutes: writes bench/redis/results-quick.json
 *
 * Uses REDIS_URL, or starts a redis-server of its own (127.0.0.1, a free port,
 * no persistence) and stops it at the end; and REDIS_CLUSTER_NODES, or a
 * cluster of its own (six redis-servers on free ports, with `redis-cli`).
 * Also measures the clients alone (PING and a raw EVALSHA of the same
 * script), and `RedisStore.apply` alone.
 */
import * as NodeRedis from "@effect/platform-node/NodeRedis"
import { Context, Effect, Layer, Scope } from "effect"
import { RateLimiter as EffectRateLimiter, Redis } from "effect/persistence"
import { Cluster as IORedisCluster, Redis as IORedis } from "ioredis"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { RateLimiterRedis } from "rate-limiter-flexible"
import { createClient } from "redis"
import * as Engine from "../../src/internal/actor/Engine.ts"
import { Kind as OpKind } from "../../src/internal/operation/Op.ts"
import * as Policy from "../../src/Policy.ts"
import { RateLimiter } from "../../src/RateLimiter.ts"
import * as Scripts from "../../src/redis/internal/scripts.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"
import * as Store from "../../src/Store.ts"
import { median } from "../stats.ts"
import type { RedisResults, RedisRow } from "./report.ts"

const quick = process.argv.includes("--quick") || process.env.BENCH_QUICK === "1"
const ROUNDS = quick ? 3 : 5
const MEASURE_MS = quick ? 500 : 1000
// One caller: more and shorter rounds. A lone round trip is mostly the two
// processes' wake-ups, which drift by ±15 % from one second to the next here,
// while the contenders differ by a few per cent: the median of many short
// rounds, each contender's close in time to the others', settles where five
// rounds of a second do not.
const ROUNDS_ONE = quick ? 5 : 15
const MEASURE_MS_ONE = quick ? 300 : 500
const WARMUP_MS = quick ? 300 : 700
const MANY = 10_000
// `--only=c100-hot,c100-many`: just those scenarios (and the targets they decide)
const only = process.argv.find((a) => a.startsWith("--only="))?.slice(7).split(",")
const wanted = (id: string): boolean => only === undefined || only.includes(id)

const log = (line: string): void => {
  process.stdout.write(line + "\n")
}

// ---------------------------------------------------------------------------
// the server

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const server = net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

const startServer = async (): Promise<{ url: string; stop: () => void }> => {
  const port = await freePort()
  const dir = mkdtempSync(path.join(os.tmpdir(), "tollgate-bench-redis-"))
  const child: ChildProcess = spawn("redis-server", [
    "--bind",
    "127.0.0.1",
    "--port",
    String(port),
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    dir
  ])
  await new Promise<void>((resolve, reject) => {
    let out = ""
    child.stdout!.on("data", (chunk) => {
      out += String(chunk)
      if (out.includes("Ready to accept connections")) resolve()
    })
    child.on("error", reject)
    child.on("exit", (code) => reject(new Error(`redis-server exited (${code}): ${out}`)))
  })
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: () => {
      child.kill()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

// A Redis Cluster of this run's own: three primaries and three replicas on
// free ports (each with its bus port, +10000, free too), ready once every
// node sees every slot served and every replica has synced.
const portFree = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })
const startCluster = async (): Promise<{ nodes: ReadonlyArray<string>; stop: () => void }> => {
  const ports: Array<number> = []
  while (ports.length < 6) {
    const port = 20000 + Math.floor(Math.random() * 10000)
    if (!ports.includes(port) && await portFree(port) && await portFree(port + 10000)) ports.push(port)
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), "tollgate-bench-cluster-"))
  const children = ports.map((port) =>
    spawn("redis-server", [
      "--bind",
      "127.0.0.1",
      "--port",
      String(port),
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      `${dir}/nodes-${port}.conf`,
      "--cluster-node-timeout",
      "5000",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir
    ], { stdio: "ignore" })
  )
  const stop = () => {
    for (const child of children) child.kill()
    rmSync(dir, { recursive: true, force: true })
  }
  const cli = (...args: Array<string>) => spawnSync("redis-cli", args, { encoding: "utf8" }).stdout ?? ""
  for (let i = 0; i < 100 && !ports.every((p) => cli("-p", String(p), "ping").includes("PONG")); i++) {
    await new Promise((r) => setTimeout(r, 50))
  }
  cli("--cluster", "create", ...ports.map((p) => `127.0.0.1:${p}`), "--cluster-replicas", "1", "--cluster-yes")
  for (let i = 0; i < 600; i++) {
    const ok = ports.every((p) => cli("-p", String(p), "cluster", "info").includes("cluster_state:ok"))
    const synced = ports.filter((p) => cli("-p", String(p), "info", "replication").includes("master_link_status:up"))
    if (ok && synced.length === 3) return { nodes: ports.map((p) => `redis://127.0.0.1:${p}`), stop }
    await new Promise((r) => setTimeout(r, 100))
  }
  stop()
  throw new Error("the cluster did not get ready")
}

// The CPU time the VM's host gave to other guests (Linux's "steal"), as a
// share of all CPU time: on a shared host the figures of a run with much of
// it are low and spread widely, so the report states it.
const cpuTimes = (): { steal: number; total: number } | undefined => {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number)
    return { steal: line[7] ?? 0, total: line.reduce((a, b) => a + b, 0) }
  } catch {
    return undefined
  }
}
const stealSince = (from: ReturnType<typeof cpuTimes>): number | undefined => {
  const to = cpuTimes()
  if (from === undefined || to === undefined || to.total === from.total) return undefined
  return (100 * (to.steal - from.steal)) / (to.total - from.total)
}

// ---------------------------------------------------------------------------
// contenders

interface Instance {
  /** Runs `callers` concurrent loops over `keys` until `deadline`; resolves with the decisions made. */
  readonly run: (callers: number, keys: ReadonlyArray<string>, deadline: number) => Promise<number>
  /** For tollgate: store calls and the ops they carried. */
  readonly coalescing?: () => Promise<{ calls: number; ops: number; degraded: number }>
  readonly close: () => Promise<void>
  /** The servers whose statistics count for it (a cluster's primaries); by default the one server. */
  readonly servers?: ReadonlyArray<Admin> | undefined
}

/** What the statistics are read from: one redis-server. */
interface Admin {
  readonly info: (section: string) => Promise<string>
}

interface Contender {
  readonly id: string
  readonly label: string
  /** `deny`: a limit of 1 per hour, so every call after the first is denied. */
  readonly make: (url: string, prefix: string, deny: boolean) => Promise<Instance>
}

// Promise-driven callers (the way a Node app calls a promise API).
const promiseLoops =
  (decide: (key: string) => Promise<unknown>) =>
  async (callers: number, keys: ReadonlyArray<string>, deadline: number): Promise<number> => {
    let cursor = 0
    let done = 0
    await Promise.all(Array.from({ length: callers }, async () => {
      while (performance.now() < deadline) {
        await decide(keys[cursor++ % keys.length])
        done++
      }
    }))
    return done
  }

// Effect-driven callers: `callers` fibers, each looping.
const effectLoops = <E>(
  run: <A, E2>(effect: Effect.Effect<A, E2>) => Promise<A>,
  decide: (key: string) => Effect.Effect<unknown, E>
) =>
(callers: number, keys: ReadonlyArray<string>, deadline: number): Promise<number> => {
  let cursor = 0
  let done = 0
  const loop = Effect.gen(function*() {
    while (performance.now() < deadline) {
      yield* decide(keys[cursor++ % keys.length])
      done++
    }
  })
  return run(Effect.forEach(Array.from({ length: callers }), () => loop, { concurrency: callers, discard: true }))
    .then(() => done)
}

// A scope of our own for each instance, closed by `close`.
const withScope = async <A>(build: Effect.Effect<A, unknown, Scope.Scope>) => {
  const scope = Scope.makeUnsafe()
  const value = await Effect.runPromise(Scope.provide(build, scope))
  return { value, close: () => Effect.runPromise(Scope.close(scope, Effect.void as never)) }
}

const generous = Policy.tokenBucket({ capacity: 1e9, refill: { tokens: 1e6, per: "1 second" } }) as Policy.Valid
const strict = Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 hour" } }) as Policy.Valid

const tollgate: Contender = {
  id: "tollgate",
  label: "tollgate acquire, RedisStore (ioredis)",
  make: async (url, prefix, deny) => {
    const { close, value } = await withScope(Effect.gen(function*() {
      const context = yield* Layer.build(RedisStore.layer({ url, prefix }))
      const limiter = yield* RateLimiter.make({ policy: deny ? strict : generous, mailboxCapacity: 65_536 }).pipe(
        Effect.provideContext(context)
      )
      return limiter
    }))
    const limiter = value
    return {
      run: effectLoops(
        Effect.runPromise,
        (key) => Effect.flatMap(limiter.acquire(key), (ok) => ok || deny ? Effect.void : Effect.die("denied"))
      ),
      coalescing: () =>
        Effect.runPromise(limiter.stats).then((s) => ({ calls: s.storeCalls, ops: s.storeOps, degraded: s.degraded })),
      close
    }
  }
}

// tollgate's acquire on a Redis Cluster (RedisStore on ioredis's Cluster),
// optionally waiting for a replica after each script; its statistics are
// the primaries'.
const onCluster = (nodes: ReadonlyArray<string>, primaries: ReadonlyArray<Admin>, wait: boolean): Contender => ({
  id: wait ? "tollgate-cluster-wait" : "tollgate-cluster",
  label: `tollgate acquire, RedisStore on the cluster${wait ? ", replicas: { wait: 1 }" : ""}`,
  make: async (_url, prefix, deny) => {
    const { close, value: limiter } = await withScope(Effect.gen(function*() {
      const context = yield* Layer.build(RedisStore.layer({
        cluster: { nodes },
        prefix,
        ...(wait ? { replicas: { wait: 1, timeout: "100 millis" } } : {})
      }))
      return yield* RateLimiter.make({ policy: deny ? strict : generous, mailboxCapacity: 65_536 }).pipe(
        Effect.provideContext(context)
      )
    }))
    return {
      run: effectLoops(
        Effect.runPromise,
        (key) => Effect.flatMap(limiter.acquire(key), (ok) => ok || deny ? Effect.void : Effect.die("denied"))
      ),
      coalescing: () =>
        Effect.runPromise(limiter.stats).then((s) => ({ calls: s.storeCalls, ops: s.storeOps, degraded: s.degraded })),
      close,
      servers: primaries
    }
  }
})

const rlfCluster = (nodes: ReadonlyArray<string>, primaries: ReadonlyArray<Admin>): Contender => ({
  id: "rlf-cluster",
  label: "rate-limiter-flexible RateLimiterRedis on the cluster (ioredis)",
  make: async (_url, prefix, deny) => {
    const client = new IORedisCluster(nodes.map((u) => {
      const { hostname, port } = new URL(u)
      return { host: hostname, port: Number(port) }
    }))
    await client.ping()
    const limiter = new RateLimiterRedis({
      storeClient: client,
      points: deny ? 1 : 1e9,
      duration: 3600,
      keyPrefix: prefix
    })
    return {
      run: promiseLoops((key) => limiter.consume(key).catch((res) => deny ? res : Promise.reject(res))),
      close: async () => {
        client.disconnect()
      },
      servers: primaries
    }
  }
})

const storeAlone = (maxBatchKeys: number | undefined): Contender => ({
  id: maxBatchKeys === 1 ? "store-unbatched" : "store",
  label: `RedisStore.apply alone (no actor)${maxBatchKeys === 1 ? ", maxBatchKeys: 1" : ""}`,
  make: async (url, prefix) => {
    const { close, value: store } = await withScope(Effect.gen(function*() {
      const context = yield* Layer.build(RedisStore.layer({ url, prefix, maxBatchKeys }))
      return Engine.engineOf(Context.get(context, Store.CurrentStore))
    }))
    const ops = [{ kind: OpKind.Take, cost: 1, queued: 0 }]
    return {
      run: effectLoops(Effect.runPromise, (key) => store.apply(key, generous, ops)),
      close
    }
  }
})

const rlf: Contender = {
  id: "rlf",
  label: "rate-limiter-flexible RateLimiterRedis (ioredis)",
  make: async (url, prefix, deny) => {
    const client = new IORedis(url)
    await client.ping()
    const limiter = new RateLimiterRedis({
      storeClient: client,
      points: deny ? 1 : 1e9,
      duration: 3600,
      keyPrefix: prefix
    })
    return {
      // a denial rejects with a RateLimiterRes
      run: promiseLoops((key) => limiter.consume(key).catch((res) => deny ? res : Promise.reject(res))),
      close: async () => {
        client.disconnect()
      }
    }
  }
}

const effectRedis: Contender = {
  id: "effect",
  label: "effect/persistence RateLimiter, layerStoreRedis (NodeRedis)",
  make: async (url, prefix, deny) => {
    const { close, value: limiter } = await withScope(
      Layer.build(
        Layer.effect(EffectRateLimiter.RateLimiter, EffectRateLimiter.make).pipe(
          Layer.provide(EffectRateLimiter.layerStoreRedis({ prefix })),
          Layer.provide(NodeRedis.layer({ url }))
        )
      ).pipe(Effect.map((context) => Context.get(context, EffectRateLimiter.RateLimiter)))
    )
    return {
      run: effectLoops(
        Effect.runPromise,
        (key) =>
          limiter.consume({
            key,
            limit: deny ? 1 : 1e9,
            window: "1 hour",
            algorithm: "token-bucket",
            onExceeded: "fail"
          })
            .pipe(Effect.catchIf(() => deny, () => Effect.void))
      ),
      close
    }
  }
}

// The floor of a lone call on this store: an ioredis client writing the
// FCALL that RedisStore sends for one Take (the lean token-bucket function,
// the same arguments), awaited as a promise: no Effect, no limiter, no store
// code. What tollgate's acquire adds on top is the price of being an Effect
// (one suspension of the caller) and of the limiter's path.
const openLean = async (url: string, prefix: string) => {
  const client = new IORedis(url)
  await client.call("FUNCTION", "LOAD", "REPLACE", Scripts.library.lua)
  const fn = tokenBucket.lean!.fn
  return {
    client,
    take: (key: string) => [fn, "1", prefix + key, "", "0", tokenBucket.leanConfig, "0", "1"]
  }
}
const leanFloor: Contender = {
  id: "floor",
  label: "floor: ioredis, FCALL of the lean script (no Effect)",
  make: async (url, prefix) => {
    const { client, take } = await openLean(url, prefix)
    return {
      run: promiseLoops((key) => client.call("FCALL", ...take(key))),
      close: async () => {
        client.disconnect()
      }
    }
  }
}

// The floor of a lone call for any Effect API over this store: the same
// FCALL on ioredis, inside one `Effect.callback` (the one suspension an
// Effect-returning call cannot do without), no limiter, no store code.
const effectFloor: Contender = {
  id: "effect-floor",
  label: "floor for an Effect: the same FCALL in one Effect.callback",
  make: async (url, prefix) => {
    const { client, take } = await openLean(url, prefix)
    return {
      run: effectLoops(Effect.runPromise, (key) =>
        Effect.callback<unknown, Error>((resume) => {
          client.call("FCALL", ...take(key)).then(
            (reply) => resume(Effect.succeed(reply)),
            (failure: Error) => resume(Effect.fail(failure))
          )
        })),
      close: async () => {
        client.disconnect()
      }
    }
  }
}

// The clients alone, for the choice of client: PING and a raw EVALSHA of the
// token bucket's lean script (the same ARGV as RedisStore sends for a lone
// Take, as an EVAL script).
const tokenBucket = Scripts.forPolicy(generous.algorithm, generous.config) as Scripts.Encoded
const tokenBucketScript = tokenBucket.lean!.script
const evalArgs = (prefix: string, key: string) => [
  "EVALSHA",
  tokenBucketScript.sha,
  "1",
  prefix + key,
  "",
  "0",
  tokenBucket.leanConfig,
  "0",
  "1"
]

const clientContenders = (kind: "ping" | "evalsha"): ReadonlyArray<Contender> => [
  {
    id: `node-redis-${kind}`,
    label: `node-redis ${kind === "ping" ? "PING" : "EVALSHA (raw)"}`,
    make: async (url, prefix) => {
      const client = createClient({ url })
      await client.connect()
      await client.scriptLoad(tokenBucketScript.lua)
      return {
        run: promiseLoops((key) => kind === "ping" ? client.ping() : client.sendCommand(evalArgs(prefix, key))),
        close: () => client.close()
      }
    }
  },
  {
    id: `ioredis-${kind}`,
    label: `ioredis ${kind === "ping" ? "PING" : "EVALSHA (raw)"}`,
    make: async (url, prefix) => {
      const client = new IORedis(url)
      await client.script("LOAD", tokenBucketScript.lua)
      return {
        run: promiseLoops((key) => {
          if (kind === "ping") return client.ping()
          const [command, ...args] = evalArgs(prefix, key)
          return client.call(command, ...args)
        }),
        close: async () => {
          client.disconnect()
        }
      }
    }
  },
  {
    id: `effect-redis-${kind}`,
    label: `effect Redis.send ${kind === "ping" ? "PING" : "EVALSHA (raw)"} (NodeRedis)`,
    make: async (url, prefix) => {
      const { close, value: redis } = await withScope(
        Layer.build(NodeRedis.layer({ url })).pipe(Effect.map((context) => Context.get(context, Redis.Redis)))
      )
      await Effect.runPromise(redis.send("SCRIPT", "LOAD", tokenBucketScript.lua))
      return {
        run: effectLoops(Effect.runPromise, (key) => {
          if (kind === "ping") return redis.send("PING")
          const [command, ...args] = evalArgs(prefix, key)
          return redis.send(command, ...args)
        }),
        close
      }
    }
  }
]

// ---------------------------------------------------------------------------
// measuring

type Row = RedisRow

const keysOf = (n: number): ReadonlyArray<string> => Array.from({ length: n }, (_, i) => `k${i}`)

let serial = 0
const measure = async (
  admin: Admin,
  contenders: ReadonlyArray<Contender>,
  url: string,
  scenario: string,
  callers: number,
  keyCount: number,
  deny = false
): Promise<Array<Row>> => {
  const rounds = callers === 1 ? ROUNDS_ONE : ROUNDS
  const measureMs = callers === 1 ? MEASURE_MS_ONE : MEASURE_MS
  const keys = keysOf(keyCount)
  const instances = new Map<string, Instance>()
  const samples = new Map<string, Array<number>>()
  for (const c of contenders) {
    instances.set(c.id, await c.make(url, `bench:${serial++}:${c.id}:`, deny))
    samples.set(c.id, [])
    await instances.get(c.id)!.run(callers, keys, performance.now() + WARMUP_MS)
  }
  // The servers of a contender: the one server, or a cluster's primaries.
  const serversOf = (id: string): ReadonlyArray<Admin> => instances.get(id)!.servers ?? [admin]
  // Script calls (EVALSHA or FCALL) the servers ran, and the time they spent in them.
  const scriptCalls = async (id: string) => {
    let calls = 0
    let usec = 0
    for (const server of serversOf(id)) {
      const stats = await server.info("commandstats")
      for (const m of stats.matchAll(/cmdstat_(?:evalsha|fcall):calls=(\d+),usec=(\d+)/g)) {
        calls += Number(m[1])
        usec += Number(m[2])
      }
    }
    return { calls, usec }
  }
  // The redis-servers' CPU time (user and system), µs: with their script
  // time it shows what each decision costs the servers in all (reading and
  // writing the socket too).
  const serverCpu = async (id: string) => {
    let total = 0
    for (const server of serversOf(id)) {
      const cpu = await server.info("cpu")
      const seconds = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(cpu)?.[1] ?? NaN)
      total += (seconds("used_cpu_user") + seconds("used_cpu_sys")) * 1e6
    }
    return total
  }
  const steal0 = cpuTimes()
  const perCall = new Map<
    string,
    { decisions: number; calls: number; usec: number; clientCpu: number; serverCpu: number }
  >()
  const before = new Map<string, { calls: number; ops: number; degraded: number }>()
  for (const c of contenders) {
    const co = instances.get(c.id)!.coalescing
    if (co !== undefined) before.set(c.id, await co())
  }
  for (let round = 0; round < rounds; round++) {
    // rotate the order each round, so no contender always runs first
    for (let i = 0; i < contenders.length; i++) {
      const c = contenders[(i + round) % contenders.length]
      const calls0 = await scriptCalls(c.id)
      const server0 = await serverCpu(c.id)
      const client0 = process.cpuUsage()
      const start = performance.now()
      const done = await instances.get(c.id)!.run(callers, keys, start + measureMs)
      samples.get(c.id)!.push(done / ((performance.now() - start) / 1000))
      const client = process.cpuUsage(client0)
      const server1 = await serverCpu(c.id)
      const seen = perCall.get(c.id) ?? { decisions: 0, calls: 0, usec: 0, clientCpu: 0, serverCpu: 0 }
      const calls1 = await scriptCalls(c.id)
      perCall.set(c.id, {
        decisions: seen.decisions + done,
        calls: seen.calls + calls1.calls - calls0.calls,
        usec: seen.usec + calls1.usec - calls0.usec,
        clientCpu: seen.clientCpu + client.user + client.system,
        serverCpu: seen.serverCpu + server1 - server0
      })
    }
  }
  const steal = stealSince(steal0)
  // Other work on this VM (other users' processes): the host's steal does not
  // count it. The benchmark itself keeps about one to two runnable.
  const load = os.loadavg()[0]
  const rows: Array<Row> = []
  for (const c of contenders) {
    const instance = instances.get(c.id)!
    let coalescing: number | undefined
    let degraded: number | undefined
    if (instance.coalescing !== undefined) {
      const after = await instance.coalescing()
      // decisions the fallback made (a store call past its timeout): not Redis's
      degraded = after.degraded - before.get(c.id)!.degraded
      const b = before.get(c.id)!
      coalescing = (after.ops - b.ops) / Math.max(1, after.calls - b.calls)
    }
    await instance.close()
    const s = samples.get(c.id)!
    const pc = perCall.get(c.id)!
    const decisionsPerEval = pc.calls > 0 ? pc.decisions / pc.calls : undefined
    const serverMicros = pc.calls > 0 ? pc.usec / pc.decisions : undefined
    rows.push({
      scenario,
      contender: c.id,
      label: c.label,
      callers,
      keys: keyCount,
      opsPerSecond: median(s),
      samples: s,
      coalescing,
      degraded,
      decisionsPerEval,
      serverMicros,
      clientCpuMicros: pc.clientCpu / pc.decisions,
      serverCpuMicros: pc.serverCpu / pc.decisions,
      stealPercent: steal,
      loadAverage: load
    })
    log(
      `  ${c.label.padEnd(62)} ${Math.round(median(s)).toString().padStart(8)} ops/s` +
        (decisionsPerEval === undefined
          ? ""
          : `  ${decisionsPerEval.toFixed(1)} per script call, server ${serverMicros!.toFixed(1)} µs per decision`) +
        `; CPU per decision ${(pc.clientCpu / pc.decisions).toFixed(1)} µs here, ${
          (pc.serverCpu / pc.decisions).toFixed(1)
        } µs redis-server` +
        (coalescing === undefined ? "" : `, ${coalescing.toFixed(1)} ops per store call`) +
        (degraded === undefined || degraded === 0 ? "" : `, ${degraded} decided by the fallback`)
    )
  }
  log(
    `  (${
      steal === undefined ? "" : `CPU stolen by the host meanwhile: ${steal.toFixed(0)} %; `
    }load average at the end: ${load.toFixed(1)} on ${os.cpus().length} CPUs)`
  )
  return rows
}

// redis-benchmark: EVALSHA of the token-bucket script, on one key or many.
const ceiling = (url: string, callers: number, keyCount: number): number | undefined => {
  const { hostname, port } = new URL(url)
  const requests = callers === 1 ? (quick ? 10_000 : 30_000) : (quick ? 100_000 : 300_000)
  const key = keyCount === 1 ? "bench:ceiling:hot" : "bench:ceiling:__rand_int__"
  const out = spawnSync("redis-benchmark", [
    "-h",
    hostname,
    "-p",
    port,
    "-c",
    String(callers),
    "-n",
    String(requests),
    "-r",
    String(keyCount),
    "-q",
    ...evalArgs("", key)
  ], { encoding: "utf8" })
  const match = /([\d.]+) requests per second/.exec(out.stdout ?? "")
  return match === null ? undefined : Number(match[1])
}

// ---------------------------------------------------------------------------
// main

const main = async () => {
  const own = process.env.REDIS_URL === undefined ? await startServer() : undefined
  const url = own?.url ?? process.env.REDIS_URL!
  log(
    `redis: ${url}${own === undefined ? "" : " (started for this run)"} · node ${process.version} · ${
      os.cpus()[0]?.model ?? "?"
    } × ${os.cpus().length} · ${quick ? "quick" : "full"} run`
  )
  const loader = createClient({ url })
  await loader.connect()
  await loader.scriptLoad(tokenBucketScript.lua)
  const server = (await loader.info("server")).match(/redis_version:(\S+)/)?.[1] ?? "?"
  log(`redis-server ${server}`)

  const rows: Array<Row> = []
  const ceilings: Array<{ scenario: string; callers: number; keys: number; opsPerSecond: number | undefined }> = []
  const scenarios = [
    { id: "c1-hot", callers: 1, keys: 1 },
    { id: "c100-hot", callers: 100, keys: 1 },
    { id: "c1-many", callers: 1, keys: MANY },
    { id: "c100-many", callers: 100, keys: MANY }
  ]
  for (const s of scenarios) {
    if (!wanted(s.id)) continue
    log(`\n${s.id}: ${s.callers} caller(s), ${s.keys === 1 ? "one hot key" : `${s.keys} keys`}`)
    rows.push(
      ...await measure(
        loader,
        [
          tollgate,
          storeAlone(undefined),
          storeAlone(1),
          rlf,
          effectRedis,
          ...(s.callers === 1 ? [leanFloor, effectFloor] : [])
        ],
        url,
        s.id,
        s.callers,
        s.keys
      )
    )
    const c = ceiling(url, s.callers, s.keys)
    ceilings.push({ scenario: s.id, callers: s.callers, keys: s.keys, opsPerSecond: c })
    log(
      `  ${"redis-benchmark EVALSHA of the lean token-bucket script (ceiling)".padEnd(62)} ${
        c === undefined ? "n/a" : Math.round(c).toString().padStart(8)
      } ops/s`
    )
  }
  // The cluster: the same store on three primaries, beside one server, in
  // the same rounds; with and without waiting for a replica after each script.
  const clusterScenarios = [
    { id: "cluster-c1-many", callers: 1, keys: MANY },
    { id: "cluster-c100-many", callers: 100, keys: MANY }
  ].filter((s) => wanted(s.id))
  if (clusterScenarios.length > 0 && spawnSync("redis-cli", ["--version"]).status === 0) {
    const ownCluster = process.env.REDIS_CLUSTER_NODES === undefined ? await startCluster() : undefined
    const nodes = ownCluster?.nodes ?? process.env.REDIS_CLUSTER_NODES!.split(",").map((u) => u.trim())
    log(`\nRedis Cluster: ${nodes.join(", ")}${ownCluster === undefined ? "" : " (started for this run)"}`)
    const clusterAdmin = new IORedisCluster(nodes.map((u) => {
      const { hostname, port } = new URL(u)
      return { host: hostname, port: Number(port) }
    }))
    await clusterAdmin.ping()
    const primaries = clusterAdmin.nodes("master")
    for (const s of clusterScenarios) {
      log(`\n${s.id}: ${s.callers} caller(s), ${s.keys} keys, one server against a cluster of three primaries`)
      rows.push(
        ...await measure(
          loader,
          [
            tollgate,
            onCluster(nodes, primaries, false),
            onCluster(nodes, primaries, true),
            rlf,
            rlfCluster(nodes, primaries)
          ],
          url,
          s.id,
          s.callers,
          s.keys
        )
      )
    }
    clusterAdmin.disconnect()
    ownCluster?.stop()
  }
  if (wanted("c100-hot-deny")) {
    log("\nc100-hot-deny: 100 caller(s), one hot key, every call but the first denied")
    rows.push(...await measure(loader, [tollgate, rlf, effectRedis], url, "c100-hot-deny", 100, 1, true))
  }
  for (const kind of only === undefined ? ["ping", "evalsha"] as const : []) {
    for (const callers of [1, 100]) {
      log(`\nclients, ${kind}, ${callers} caller(s), ${MANY} keys`)
      rows.push(...await measure(loader, clientContenders(kind), url, `clients-${kind}-c${callers}`, callers, MANY))
    }
  }

  const row = (scenario: string, contender: string) =>
    rows.find((r) => r.scenario === scenario && r.contender === contender)
  // As in the in-process bench: the median over rounds of the two contenders'
  // ratio within each round (both ran back to back in it), so the drifts of a
  // shared machine cancel; the ratio of the medians is kept beside it.
  const versus = (scenario: string, target: number, name: string) => {
    const a = row(scenario, "tollgate")
    const b = row(scenario, "rlf")
    if (a === undefined || b === undefined) return undefined
    const paired = a.samples.map((x, i) => x / b.samples[i])
    const ratio = median(paired)
    return { name, scenario, ratio, ratioOfMedians: a.opsPerSecond / b.opsPerSecond, rounds: paired, target }
  }
  // The floors' own ratios, in the same rounds: where a lone call can get to
  // at best, with and without the one suspension of an Effect.
  const paired = (a: Row, b: Row) => median(a.samples.map((x, i) => x / b.samples[i]))
  const floors = ["c1-hot", "c1-many"].flatMap((scenario) => {
    const a = row(scenario, "floor")
    const e = row(scenario, "effect-floor")
    const b = row(scenario, "rlf")
    const t = row(scenario, "tollgate")
    if (a === undefined || b === undefined || t === undefined) return []
    return [{
      scenario,
      floorVsRlf: paired(a, b),
      tollgateVsFloor: paired(t, a),
      ...(e === undefined ? {} : { effectFloorVsRlf: paired(e, b), tollgateVsEffectFloor: paired(t, e) })
    }]
  })
  // The cluster against one server, waiting for a replica against not, and
  // tollgate against rate-limiter-flexible on the cluster: paired per round.
  const cluster = ["cluster-c1-many", "cluster-c100-many"].flatMap((scenario) => {
    const one = row(scenario, "tollgate")
    const onCluster = row(scenario, "tollgate-cluster")
    const waiting = row(scenario, "tollgate-cluster-wait")
    const rlfOnCluster = row(scenario, "rlf-cluster")
    if (one === undefined || onCluster === undefined || waiting === undefined || rlfOnCluster === undefined) return []
    return [{
      scenario,
      clusterVsOneServer: paired(onCluster, one),
      waitVsNoWait: paired(waiting, onCluster),
      clusterVsRlfCluster: paired(onCluster, rlfOnCluster)
    }]
  })
  for (const c of cluster) {
    log(
      `\n${c.scenario}: the cluster ${c.clusterVsOneServer.toFixed(2)}× one server; replicas: { wait: 1 } ${
        c.waitVsNoWait.toFixed(2)
      }× without; tollgate ${c.clusterVsRlfCluster.toFixed(2)}× rate-limiter-flexible on the cluster`
    )
  }
  const targets = [
    versus("c1-hot", 1, "tollgate ≥ 1.0× rate-limiter-flexible, 1 caller, one key"),
    versus("c1-many", 1, "tollgate ≥ 1.0× rate-limiter-flexible, 1 caller, 10 000 keys"),
    versus("c100-many", 1.5, "tollgate ≥ 1.5× rate-limiter-flexible, 100 callers, 10 000 keys"),
    versus("c100-hot", 2, "tollgate ≥ 2× rate-limiter-flexible, 100 callers, one hot key (coalescing)"),
    versus("c100-hot-deny", 2, "the same, every call but the first denied")
  ].filter((t) => t !== undefined)
  log("\ntargets")
  for (const t of targets) {
    log(
      `  ${t.ratio >= t.target ? "PASS" : "FAIL"}  ${t.name}: ${t.ratio.toFixed(2)}× (rounds ${
        t.rounds.map((r) => r.toFixed(2)).join(", ")
      }; ratio of medians ${t.ratioOfMedians.toFixed(2)}×)`
    )
  }

  for (const f of floors) {
    log(
      `  floor (${f.scenario}): the raw lean FCALL ${f.floorVsRlf.toFixed(2)}× rate-limiter-flexible; tollgate ${
        f.tollgateVsFloor.toFixed(2)
      }× the floor` + (f.effectFloorVsRlf === undefined
        ? ""
        : `; in one Effect.callback ${f.effectFloorVsRlf.toFixed(2)}× rate-limiter-flexible, tollgate ${
          f.tollgateVsEffectFloor!.toFixed(2)
        }× that`)
    )
  }

  const results: RedisResults = {
    meta: {
      date: new Date().toISOString(),
      node: process.version,
      redis: server,
      cpu: os.cpus()[0]?.model,
      cores: os.cpus().length,
      mode: quick ? "quick" : "full",
      rounds: ROUNDS,
      measureMillis: MEASURE_MS,
      roundsOneCaller: ROUNDS_ONE,
      measureMillisOneCaller: MEASURE_MS_ONE
    },
    rows,
    ceilings,
    floors,
    cluster,
    targets: targets.map((t) => ({ ...t, pass: t.ratio >= t.target }))
  }
  const name = only !== undefined ? "results-only.json" : quick ? "results-quick.json" : "results.json"
  writeFileSync(new URL(name, import.meta.url), JSON.stringify(results, null, 2) + "\n")
  log(`\nwrote bench/redis/${name}`)
  await loader.close()
  own?.stop()
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`)
    process.exit(1)
  }
)
