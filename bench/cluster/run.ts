/**
 * @effect-diagnostics globalDate:off globalTimers:off
 *
 * bench:cluster: tollgate on an Effect Cluster of three runner processes on
 * one Postgres, called from this process (a client-only node, so every
 * decision crosses to its key's owner), beside tollgate on the Redis store
 * (`RedisStore`, every decision a Redis call) in the same run, rounds
 * alternated: 1 and 100 callers, on 1 key and on 10 000 keys, every limit
 * generous (every call a full decision that admits). Also the design not
 * chosen, an entity per key (`KeyBucket` in bench/cluster/runner.ts), on 10
 * 000 keys, and the heap each resident key costs a runner in both designs.
 * And the transport floor (`Floor` in bench/cluster/runner.ts): the same
 * `Batch` messages through the same Effect Cluster, answered without
 * deciding anything, in the best shape 100 callers allow (one or two rounds
 * out to each runner at once, each carrying its share of the callers): what
 * bounds the cluster's decisions per second and its latency from below.
 *
 *   npm run bench:cluster              about 5 minutes: writes bench/cluster/results.json
 *   npm run bench:cluster -- --quick   about 2 minutes: writes bench/cluster/results-quick.json
 *
 * Uses TOLLGATE_PG_URL and REDIS_URL when set, or starts a Postgres (initdb,
 * pg_ctl) and a redis-server of its own (127.0.0.1, free ports) and stops
 * them at the end.
 */
import { Context, Effect, Layer, Redacted, Scope } from "effect"
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process"
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import { ClusterLimiter, ClusterRunner } from "../../src/cluster/index.ts"
import { Kind, pack } from "../../src/cluster/internal/protocol.ts"
import * as Policy from "../../src/Policy.ts"
import { RateLimiter } from "../../src/RateLimiter.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"
import { median } from "../stats.ts"
import { benchOptions, Floor, KeyBucket, sharding } from "./shared.ts"

const quick = process.argv.includes("--quick") || process.env.BENCH_QUICK === "1"
const ROUNDS = quick ? 3 : 5
const MEASURE_MS = quick ? 700 : 1500
const MANY = 10_000
// each contender runs this long before each measured round (its steady state, not a switch's)
const PRERUN_MS = quick ? 500 : 1000
const MEMORY_KEYS = quick ? 15_000 : 30_000
const MEMORY_ENTITIES = quick ? 1_500 : 3_000
// the cluster's path is long (four processes, Effect's RPC and sharding):
// it takes seconds of load before Node has compiled it hot
const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? (quick ? 8000 : 30_000))

const log = (line: string): void => {
  process.stdout.write(line + "\n")
}

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const server = net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

// ---------------------------------------------------------------------------
// servers

const stops: Array<() => void> = []
const stopAll = () => {
  while (stops.length > 0) {
    try {
      stops.pop()!()
    } catch {
      // already gone
    }
  }
}
process.on("exit", stopAll)

const startPostgres = async (): Promise<string> => {
  const versions = existsSync("/usr/lib/postgresql") ? readdirSync("/usr/lib/postgresql").sort() : []
  if (versions.length === 0) throw new Error("TOLLGATE_PG_URL is not set and Postgres is not installed")
  const bin = `/usr/lib/postgresql/${versions[versions.length - 1]}/bin`
  const dir = mkdtempSync(path.join(os.tmpdir(), "tollgate-bench-pg-"))
  const asRoot = process.getuid?.() === 0
  const run = (command: string, args: Array<string>) =>
    asRoot
      ? execFileSync("runuser", ["-u", "postgres", "--", command, ...args], { stdio: "pipe" })
      : execFileSync(command, args, { stdio: "pipe" })
  if (asRoot) chownSync(dir, Number(execFileSync("id", ["-u", "postgres"]).toString().trim()), 0)
  run(`${bin}/initdb`, ["-D", `${dir}/data`, "-A", "trust", "-U", "postgres"])
  const port = await freePort()
  run(`${bin}/pg_ctl`, [
    "-D",
    `${dir}/data`,
    "-l",
    `${dir}/log`,
    "-w",
    "-o",
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off`,
    "start"
  ])
  stops.push(() => {
    run(`${bin}/pg_ctl`, ["-D", `${dir}/data`, "-m", "fast", "-w", "stop"])
    rmSync(dir, { recursive: true, force: true })
  })
  return `postgres://postgres@127.0.0.1:${port}/postgres`
}

const startRedis = async (): Promise<string> => {
  const port = await freePort()
  const dir = mkdtempSync(path.join(os.tmpdir(), "tollgate-bench-redis-"))
  const child = spawn("redis-server", ["--bind", "127.0.0.1", "--port", String(port), "--save", "", "--dir", dir])
  await new Promise<void>((resolve, reject) => {
    let out = ""
    child.stdout!.on("data", (chunk) => {
      out += String(chunk)
      if (out.includes("Ready to accept connections")) resolve()
    })
    child.on("exit", (code) => reject(new Error(`redis-server exited (${code}): ${out}`)))
  })
  stops.push(() => {
    child.kill()
    rmSync(dir, { recursive: true, force: true })
  })
  return `redis://127.0.0.1:${port}`
}

interface Runner {
  readonly child: ChildProcess
  /** Stops it gracefully (its shards handed over) and waits for it to exit. */
  readonly stop: () => Promise<void>
  readonly mem: () => Promise<{ heap: number; buckets: number; entities: number }>
}

const startRunner = async (db: string, entityPerKey: boolean): Promise<Runner> => {
  const port = await freePort()
  const args = entityPerKey
    ? ["--expose-gc", path.join(import.meta.dirname, "runner.ts")]
    : [path.join(import.meta.dirname, "runner.ts")]
  const child = spawn(process.execPath, args, {
    env: { ...process.env, TOLLGATE_PG_URL: db, PORT: String(port), ENTITY_PER_KEY: entityPerKey ? "1" : "0" },
    stdio: ["pipe", "pipe", "inherit"]
  })
  const stop = () => child.kill("SIGKILL")
  stops.push(stop)
  // its own lines ("ready", JSON), not its log's
  const waiting: Array<(line: string) => void> = []
  readline.createInterface({ input: child.stdout! }).on("line", (line) => {
    if (line === "ready" || line.startsWith("{")) waiting.shift()?.(line)
  })
  const next = () => new Promise<string>((resolve) => waiting.push(resolve))
  await next()
  return {
    child,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once("exit", () => resolve())
        child.kill("SIGTERM")
      }),
    mem: async () => {
      const line = next()
      child.stdin!.write("mem\n")
      return JSON.parse(await line)
    }
  }
}

// ---------------------------------------------------------------------------
// contenders

interface Instance {
  /** `callers` loops over `keys` until `deadline`: the decisions made and each one's time (ms). */
  readonly run: (callers: number, keys: ReadonlyArray<string>, deadline: number) => Promise<Array<number>>
  readonly close: () => Promise<void>
}

const loops =
  (decide: (key: string) => Effect.Effect<unknown, unknown>) =>
  (callers: number, keys: ReadonlyArray<string>, deadline: number): Promise<Array<number>> => {
    let cursor = 0
    const times: Array<number> = []
    const loop = Effect.gen(function*() {
      while (performance.now() < deadline) {
        const start = performance.now()
        yield* decide(keys[cursor++ % keys.length])
        times.push(performance.now() - start)
      }
    })
    return Effect.runPromise(
      Effect.forEach(Array.from({ length: callers }), () => loop, { concurrency: callers, discard: true })
    ).then(() => times)
  }

const withScope = async <A>(build: Effect.Effect<A, unknown, Scope.Scope>) => {
  const scope = Scope.makeUnsafe()
  const value = await Effect.runPromise(Scope.provide(build, scope))
  return { value, close: () => Effect.runPromise(Scope.close(scope, Effect.void as never)) }
}

const cluster = async (db: string) => {
  const { close, value } = await withScope(Effect.gen(function*() {
    const context = yield* Layer.build(
      ClusterLimiter.layer(benchOptions).pipe(
        Layer.provideMerge(ClusterRunner.layerPostgres({ url: Redacted.make(db), sharding }))
      )
    )
    const limiter = Context.get(context, RateLimiter)
    const entity = yield* KeyBucket.client.pipe(Effect.provideContext(context))
    const floor = yield* Floor.client.pipe(Effect.provideContext(context))
    return { limiter, entity, floor }
  }))
  return { ...value, close }
}

const redis = async (url: string): Promise<Instance & { readonly limiter: RateLimiter["Service"] }> => {
  const { close, value } = await withScope(Effect.gen(function*() {
    const context = yield* Layer.build(RedisStore.layer({ url, prefix: `bench-cluster:${process.pid}:` }))
    return yield* RateLimiter.make({
      policy: Policy.tokenBucket({ capacity: 1e9, refill: { tokens: 1e9, per: "1 second" } }),
      mailboxCapacity: 1_000_000
    }).pipe(Effect.provideContext(context))
  }))
  return { limiter: value, run: loops((key) => value.acquire(key)), close }
}

type FloorClient = Effect.Success<typeof Floor.client>

// The transport floor: `perRunner` rounds out at once to each runner (an
// entity of the floor's on it), each carrying its share of the callers'
// operations (one caller: one operation a round, the runners in turn); an
// operation's time is its round's.
const floorOf = async (client: FloorClient, perRunner: number): Promise<Instance> => {
  // an entity id on each runner, found by asking (each reply names its runner)
  const byRunner = new Map<string, string>()
  for (let i = 0; i < 64 && byRunner.size < 3; i++) {
    const id = `floor:${i}`
    const reply = await Effect.runPromise(client(id).Batch(pack([{ k: Kind.Acquire, s: 0, key: "probe", n: 1 }], 0)))
    if (!byRunner.has(reply.owner)) byRunner.set(reply.owner, id)
  }
  const ids = [...byRunner.values()]
  const run = (callers: number, keys: ReadonlyArray<string>, deadline: number): Promise<Array<number>> => {
    let cursor = 0
    const times: Array<number> = []
    const lanes = callers === 1 ? 1 : ids.length * perRunner
    const size = Math.ceil(callers / lanes)
    const lane = (i: number) =>
      Effect.gen(function*() {
        let turn = 0
        while (performance.now() < deadline) {
          const ops = Array.from(
            { length: size },
            () => ({ k: Kind.Acquire, s: 0, key: keys[cursor++ % keys.length], n: 1 })
          )
          const id = callers === 1 ? ids[turn++ % ids.length] : ids[i % ids.length]
          const start = performance.now()
          yield* client(id).Batch(pack(ops, 0))
          const t = performance.now() - start
          for (let j = 0; j < size; j++) times.push(t)
        }
      })
    return Effect.runPromise(
      Effect.forEach(Array.from({ length: lanes }, (_, i) => i), lane, { concurrency: lanes, discard: true })
    ).then(() => times)
  }
  return { run, close: async () => {} }
}

// ---------------------------------------------------------------------------
// the run

const percentile = (times: ReadonlyArray<number>, p: number): number => {
  const sorted = [...times].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0
}

interface Row {
  scenario: string
  contender: string
  callers: number
  keys: number
  opsPerSecond: number
  samples: Array<number>
  p50Millis: number
  p99Millis: number
}

const main = async () => {
  const db0 = process.env.TOLLGATE_PG_URL ?? (await startPostgres())
  const redisUrl = process.env.REDIS_URL ?? (await startRedis())
  // a database of the run's own
  const dbName = `tollgate_bench_${process.pid}`
  const dbUrl = new URL(db0)
  const admin = spawnSync("psql", [db0, "-qAtc", `CREATE DATABASE ${dbName}`])
  if (admin.status !== 0) throw new Error(`cannot create the database: ${admin.stderr}`)
  stops.push(() => void spawnSync("psql", [db0, "-qAtc", `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`]))
  dbUrl.pathname = `/${dbName}`
  const db = dbUrl.toString()

  log(
    `bench:cluster ${quick ? "(quick)" : ""} on Node ${process.version}, ${os.cpus().length} cores, load ${
      os.loadavg()[0].toFixed(2)
    }`
  )
  // The comparison with Redis on runners that host the limiter alone; then
  // the design not chosen on three runners that host both designs (an
  // entity type with 10 000 resident entities weighs on a runner).
  let runners = await Promise.all([startRunner(db, false), startRunner(db, false), startRunner(db, false)])
  log("three runners up")
  let onCluster = await cluster(db)
  const onRedis = await redis(redisUrl)
  const instances: Record<string, Instance> = {
    cluster: { run: loops((key) => onCluster.limiter.acquire(key)), close: () => onCluster.close() },
    redis: onRedis,
    "entity-per-key": { run: loops((key) => onCluster.entity(key).Take({ cost: 1 })), close: async () => {} },
    floor: await floorOf(onCluster.floor, 2),
    "floor-1": await floorOf(onCluster.floor, 1)
  }

  const hot = ["hot"]
  const many = Array.from({ length: MANY }, (_, i) => `key:${i}`)
  // every shard's partition open, every key's bucket started, on both
  const warm = async (instance: Instance, keys: ReadonlyArray<string>) => {
    await instance.run(100, keys, performance.now() + WARMUP_MS / 2)
    await instance.run(1, keys, performance.now() + WARMUP_MS / 4)
    await instance.run(100, ["hot"], performance.now() + WARMUP_MS / 4)
  }
  await warm(instances.cluster, many)
  await warm(onRedis, many)
  await warm(instances.floor, many)
  await warm(instances["floor-1"], many)
  log("warmed")

  const scenarios = [
    { id: "c1-hot", callers: 1, keys: hot, contenders: ["cluster", "redis", "floor"] },
    { id: "c1-many", callers: 1, keys: many, contenders: ["cluster", "redis", "floor"] },
    { id: "c100-hot", callers: 100, keys: hot, contenders: ["cluster", "redis", "floor", "floor-1"] },
    { id: "c100-many", callers: 100, keys: many, contenders: ["cluster", "redis", "floor", "floor-1"] },
    { id: "design-c1-many", callers: 1, keys: many, contenders: ["cluster", "entity-per-key"] },
    { id: "design-c100-many", callers: 100, keys: many, contenders: ["cluster", "entity-per-key"] }
  ]
  const rows: Array<Row> = []
  const ratios: Record<string, Array<number>> = {}
  // per round: the floor (the better of its shapes) / redis, and the cluster / the floor
  const floorRatios: Record<string, { floorVsRedis: Array<number>; clusterVsFloor: Array<number> }> = {}
  for (const scenario of scenarios) {
    if (scenario.id === "design-c1-many") {
      await onCluster.close()
      await Promise.all(runners.map((r) => r.stop()))
      runners = await Promise.all([startRunner(db, true), startRunner(db, true), startRunner(db, true)])
      onCluster = await cluster(db)
      await warm(instances.cluster, many)
      await warm(instances["entity-per-key"], many)
      log("three runners of both designs up, warmed")
    }
    const samples: Record<string, Array<number>> = {}
    const times: Record<string, Array<number>> = {}
    for (let round = 0; round < ROUNDS; round++) {
      const perRound: Record<string, number> = {}
      // alternate the order from round to round
      const order = round % 2 === 0 ? scenario.contenders : [...scenario.contenders].reverse()
      for (const contender of order) {
        await instances[contender].run(scenario.callers, scenario.keys, performance.now() + PRERUN_MS)
        const start = performance.now()
        const t = await instances[contender].run(scenario.callers, scenario.keys, start + MEASURE_MS)
        const opsPerSecond = (t.length * 1000) / (performance.now() - start)
        ;(samples[contender] ??= []).push(opsPerSecond)
        const all = (times[contender] ??= [])
        for (const x of t) all.push(x)
        perRound[contender] = opsPerSecond
      }
      const other = scenario.contenders[1]
      ;(ratios[scenario.id] ??= []).push(perRound.cluster / perRound[other])
      if (perRound.floor !== undefined) {
        const floor = Math.max(perRound.floor, perRound["floor-1"] ?? 0)
        const f = (floorRatios[scenario.id] ??= { floorVsRedis: [], clusterVsFloor: [] })
        f.floorVsRedis.push(floor / perRound.redis)
        f.clusterVsFloor.push(perRound.cluster / floor)
      }
    }
    for (const contender of scenario.contenders) {
      rows.push({
        scenario: scenario.id,
        contender,
        callers: scenario.callers,
        keys: scenario.keys.length,
        opsPerSecond: median(samples[contender]),
        samples: samples[contender],
        p50Millis: percentile(times[contender], 0.5),
        p99Millis: percentile(times[contender], 0.99)
      })
    }
    const line = scenario.contenders.map((c) => {
      const row = rows.find((r) => r.scenario === scenario.id && r.contender === c)!
      return `${c} ${Math.round(row.opsPerSecond)}/s (p99 ${row.p99Millis.toFixed(2)} ms)`
    }).join(", ")
    const f = floorRatios[scenario.id]
    log(
      `${scenario.id}: ${line}; cluster / ${scenario.contenders[1]} ${median(ratios[scenario.id]).toFixed(2)}x` +
        (f === undefined
          ? ""
          : `; floor / redis ${median(f.floorVsRedis).toFixed(2)}x, cluster / floor ${
            median(f.clusterVsFloor).toFixed(2)
          }x`)
    )
  }

  // the heap of a resident key: fresh keys, each decided once, on three runners
  const once = (decide: (key: string) => Effect.Effect<unknown, unknown>, keys: ReadonlyArray<string>) =>
    Effect.runPromise(Effect.forEach(keys, decide, { concurrency: 100, discard: true }))
  const before = await Promise.all(runners.map((r) => r.mem()))
  await once((key) => onCluster.limiter.acquire(key), Array.from({ length: MEMORY_KEYS }, (_, i) => `mem:${i}`))
  const after = await Promise.all(runners.map((r) => r.mem()))
  const heap = after.reduce((n, m, i) => n + m.heap - before[i].heap, 0)
  const buckets = after.reduce((n, m, i) => n + m.buckets - before[i].buckets, 0)
  const entityBefore = await Promise.all(runners.map((r) => r.mem()))
  await once(
    (key) => onCluster.entity(key).Take({ cost: 1 }),
    Array.from({ length: MEMORY_ENTITIES }, (_, i) => `mem-entity:${i}`)
  )
  const entityAfter = await Promise.all(runners.map((r) => r.mem()))
  const entityHeap = entityAfter.reduce((n, m, i) => n + m.heap - entityBefore[i].heap, 0)
  const entities = entityAfter.reduce((n, m, i) => n + m.entities - entityBefore[i].entities, 0)
  const perKey = heap / Math.max(1, buckets)
  const perEntity = entityHeap / Math.max(1, entities)
  log(
    `heap per resident key: ${Math.round(perKey)} B (${buckets} keys); per entity: ${
      Math.round(perEntity)
    } B (${entities} entities)`
  )

  const target = rows.find((r) => r.scenario === "c100-many" && r.contender === "cluster")!
  const floorRows = rows.filter((r) => r.scenario === "c100-many" && r.contender.startsWith("floor"))
  const bestFloor = floorRows.reduce((a, b) => (b.opsPerSecond > a.opsPerSecond ? b : a))
  const goal = {
    ratio: median(ratios["c100-many"]),
    ratioMet: median(ratios["c100-many"]) >= 0.5,
    p99Millis: target.p99Millis,
    p99Met: target.p99Millis < 5,
    bytesPerKey: perKey,
    bytesMet: perKey < 1024,
    floor: {
      contender: bestFloor.contender,
      vsRedis: median(floorRatios["c100-many"].floorVsRedis),
      clusterVsFloor: median(floorRatios["c100-many"].clusterVsFloor),
      p99Millis: bestFloor.p99Millis,
      p99MillisLeast: Math.min(...floorRows.map((r) => r.p99Millis))
    }
  }
  log(
    `goals (100 callers, 10 000 keys): cluster / redis ${goal.ratio.toFixed(2)}x (>= 0.5: ${goal.ratioMet}), ` +
      `p99 ${goal.p99Millis.toFixed(2)} ms (< 5: ${goal.p99Met}), ${
        Math.round(perKey)
      } B per key (< 1024: ${goal.bytesMet}); the floor there: ${goal.floor.vsRedis.toFixed(2)}x redis, the cluster ${
        goal.floor.clusterVsFloor.toFixed(2)
      }x of it, its p99 ${goal.floor.p99Millis.toFixed(2)} ms (least of its shapes ${
        goal.floor.p99MillisLeast.toFixed(2)
      } ms)`
  )
  const results = {
    meta: {
      date: new Date().toISOString(),
      node: process.version,
      cores: os.cpus().length,
      loadAverage: os.loadavg()[0],
      mode: quick ? "quick" : "full",
      rounds: ROUNDS,
      measureMillis: MEASURE_MS
    },
    rows,
    ratios: Object.fromEntries(Object.entries(ratios).map(([k, v]) => [k, { median: median(v), samples: v }])),
    floor: Object.fromEntries(
      Object.entries(floorRatios).map(([k, v]) => [k, {
        floorVsRedis: median(v.floorVsRedis),
        clusterVsFloor: median(v.clusterVsFloor),
        samples: v
      }])
    ),
    memory: { bytesPerKey: perKey, keys: buckets, bytesPerEntity: perEntity, entities },
    goal
  }
  writeFileSync(
    path.join(import.meta.dirname, quick ? "results-quick.json" : "results.json"),
    JSON.stringify(results, null, 2) + "\n"
  )
  await onRedis.close()
  await instances.cluster.close()
  stopAll()
}

main().then(() => process.exit(0), (error) => {
  console.error(error)
  stopAll()
  process.exit(1)
})
