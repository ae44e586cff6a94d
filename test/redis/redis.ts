/**
 * What the Redis tests share: the servers they run against (`REDIS_URL`, a
 * Redis Cluster's `REDIS_CLUSTER_NODES`, Sentinel's `REDIS_SENTINELS` and
 * `REDIS_SENTINEL_NAME`, all set by `.ci/run`), skipping with a clear
 * message when one is missing, and a namespace per test file that is
 * removed afterwards.
 */
import * as NodeRedis from "@effect/platform-node/NodeRedis"
import { describe, it, layer, type Vitest } from "@effect/vitest"
import { Clock, Context, Duration, Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import { Cluster, Redis as IORedis } from "ioredis"
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as Engine from "../../src/internal/actor/Engine.ts"
import * as Policy from "../../src/Policy.ts"
import { RateLimiter } from "../../src/RateLimiter.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"
import * as Store from "../../src/Store.ts"

/** The Redis the tests use, or undefined (then they are skipped). */
export const url: string | undefined = process.env.REDIS_URL === "" ? undefined : process.env.REDIS_URL

const skipped = "skipped: REDIS_URL is not set (.ci/run starts a redis-server and sets it)"

/** A prefix no other test run uses. */
export const uniquePrefix = (name: string): string =>
  `tollgate-test:${name}:${process.pid}:${Math.random().toString(36).slice(2, 8)}:`

/** Deletes every key under `prefix`. */
export const cleanup = (prefix: string) =>
  Effect.gen(function*() {
    const redis = yield* Redis.Redis
    let cursor = "0"
    do {
      const [next, keys] = yield* redis.send<[string, Array<string>]>(
        "SCAN",
        cursor,
        "MATCH",
        `${prefix}*`,
        "COUNT",
        "1000"
      )
      if (keys.length > 0) yield* redis.send("DEL", ...keys)
      cursor = next
    } while (cursor !== "0")
  })

// What a suite's body gets without a server: every test it declares
// (it.effect, it.scoped, …) registered as skipped, so a run counts them.
const skipping = <R>(): Vitest.MethodsNonLive<R> => {
  const register = (name: unknown) => it.skip(String(name), () => {})
  const handler: ProxyHandler<typeof register> = {
    get: () => new Proxy(register, handler),
    apply: (_, __, args: Array<unknown>) => register(args[0])
  }
  return new Proxy(register, handler) as unknown as Vitest.MethodsNonLive<R>
}

/**
 * A suite with the `Redis` service (the server at `on`, `REDIS_URL` by
 * default), or, when there is none, the same suite with every test
 * registered and skipped, its name saying why.
 */
export const describeRedis = (
  name: string,
  body: (it: Vitest.MethodsNonLive<Redis.Redis | NodeRedis.NodeRedis>) => void,
  on: { readonly url: string | undefined; readonly why: string } = { url, why: skipped }
): void => {
  if (on.url === undefined) {
    describe(`${name} (${on.why})`, () => body(skipping()))
    return
  }
  // Built with the live services: a TestClock jumping to epoch-sized times
  // would run the client's timers millions of times over.
  layer(NodeRedis.layer({ url: on.url }) as Layer.Layer<Redis.Redis | NodeRedis.NodeRedis, unknown>, {
    timeout: "10 seconds",
    excludeTestServices: true
  })(
    name,
    body
  )
}

// ---------------------------------------------------------------------------
// Where the store runs: one server, a Redis Cluster, a primary behind
// Sentinel. Suites that run on each (the conformance suite, the random
// workloads) are declared once per deployment.

const list = (value: string | undefined): ReadonlyArray<string> | undefined => {
  const items = value?.split(",").map((s) => s.trim()).filter((s) => s !== "")
  return items === undefined || items.length === 0 ? undefined : items
}

/** A Redis the store can run on, and what the tests need to reach it. */
export interface Deployment {
  /** As suites' names say it: "one server", "Redis Cluster", "Sentinel". */
  readonly name: string
  /** `RedisStore.layer`'s options that say where it is; undefined when not configured. */
  readonly where: Pick<RedisStore.LayerOptions, "url" | "cluster" | "sentinel"> | undefined
  /** Why its suites are skipped when it is not configured. */
  readonly missing: string
  /**
   * The client the store writes with: its own ioredis (`RedisStore.layer`,
   * the default; lean replies of several keys come back in binary), or
   * node-redis (`RedisStore.make` over `NodeRedis.layer`: every reply text
   * and integers).
   */
  readonly over?: "node-redis" | undefined
}

/** One redis-server (`REDIS_URL`). */
export const server: Deployment = {
  name: "one server",
  where: url === undefined ? undefined : { url },
  missing: skipped
}

const clusterNodes = list(process.env.REDIS_CLUSTER_NODES)

/** A Redis Cluster of three primaries and three replicas (`REDIS_CLUSTER_NODES`: its nodes' URLs). */
export const cluster: Deployment = {
  name: "Redis Cluster",
  where: clusterNodes === undefined ? undefined : { cluster: { nodes: clusterNodes } },
  missing: "REDIS_CLUSTER_NODES is not set: Redis Cluster tests skipped (.ci/run starts a cluster and sets it)"
}

const sentinels = list(process.env.REDIS_SENTINELS)
const sentinelName = process.env.REDIS_SENTINEL_NAME

/** A primary and its replica behind three sentinels (`REDIS_SENTINELS`, `REDIS_SENTINEL_NAME`). */
export const sentinel: Deployment = {
  name: "Sentinel",
  where: sentinels === undefined || sentinelName === undefined || sentinelName === ""
    ? undefined
    : { sentinel: { name: sentinelName, sentinels } },
  missing:
    "REDIS_SENTINELS or REDIS_SENTINEL_NAME is not set: Sentinel tests skipped (.ci/run starts sentinels and sets them)"
}

const valkeyUrl = process.env.VALKEY_URL === "" ? undefined : process.env.VALKEY_URL

/** One valkey-server (`VALKEY_URL`): the scripts compiled for Redis's Lua 5.1 run unchanged on Valkey's. */
export const valkey: Deployment = {
  name: "Valkey",
  where: valkeyUrl === undefined ? undefined : { url: valkeyUrl },
  missing: "VALKEY_URL is not set: Valkey tests skipped (.ci/run starts a valkey-server when one can be installed)"
}

/** Every Redis deployment, configured or not (Valkey aside: a server of another make). */
export const deployments: ReadonlyArray<Deployment> = [server, cluster, sentinel]

/**
 * Checks the tests make beside the store: a command routed by its key (on a
 * cluster, to the node that owns it), and removing a namespace from every
 * primary.
 */
export class Admin extends Context.Service<Admin, {
  readonly send: <A = unknown>(command: string, ...args: ReadonlyArray<string>) => Effect.Effect<A>
  readonly cleanup: (prefix: string) => Effect.Effect<void>
  /** The ioredis client itself (its nodes, on a cluster). */
  readonly client: IORedis | Cluster
}>()("test/Admin") {}

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

/** An ioredis client of the tests' own to a deployment, as `Admin`. */
export const adminLayer = (d: Deployment): Layer.Layer<Admin> =>
  Layer.effect(
    Admin,
    Effect.acquireRelease(
      Effect.sync(() => {
        const where = d.where!
        if (where.cluster !== undefined && where.cluster !== false && where.cluster !== true) {
          return new Cluster(where.cluster.nodes.map((u) => {
            const { hostname, port } = new URL(u)
            return { host: hostname, port: Number(port) }
          }))
        }
        if (where.sentinel !== undefined) {
          return new IORedis({
            sentinels: where.sentinel.sentinels.map((u) => {
              const { hostname, port } = new URL(u)
              return { host: hostname, port: Number(port) }
            }),
            name: where.sentinel.name
          })
        }
        return new IORedis(where.url!)
      }),
      (client) => promise(() => client.quit()).pipe(Effect.ignore)
    ).pipe(Effect.map((client) => {
      const primaries = () => client instanceof Cluster ? client.nodes("master") : [client]
      return Admin.of({
        client,
        send: <A>(command: string, ...args: ReadonlyArray<string>) =>
          promise(() => client.call(command, ...args) as Promise<A>),
        cleanup: (prefix) =>
          Effect.forEach(primaries(), (node) =>
            promise(async () => {
              let cursor = "0"
              do {
                const [next, keys] = await node.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000)
                // one key per command: on a cluster, keys of different slots
                for (const key of keys) await node.unlink(key)
                cursor = next
              } while (cursor !== "0")
            }), { discard: true })
      })
    }))
  )

/**
 * A suite on a deployment, with `Admin`; or, when the deployment is not
 * configured, the same suite with every test registered and skipped, its
 * name saying why.
 */
export const describeOn = (
  d: Deployment,
  name: string,
  body: (it: Vitest.MethodsNonLive<Admin>) => void
): void => {
  const title = `${name}, on ${d.name}`
  if (d.where === undefined) {
    describe(`${title} (${d.missing})`, () => body(skipping<Admin>()))
    return
  }
  layer(adminLayer(d), { timeout: "20 seconds", excludeTestServices: true })(title, body)
}

/** The store on a deployment (`RedisStore.layer` with its place), in the scope. */
export const storeOn = (d: Deployment, options: RedisStore.LayerOptions = {}) =>
  d.over === "node-redis" && d.where?.url !== undefined
    ? Effect.flatMap(
      Layer.build(NodeRedis.layer({ url: d.where.url })),
      // (the layer's options about its own client do not apply)
      (context) => Effect.provideContext(RedisStore.make({ ...options, cluster: undefined }), context)
    )
    : Effect.map(
      Layer.build(RedisStore.layer({ ...options, ...d.where })),
      (context) => Context.get(context, Store.CurrentStore)
    )

/** The same store as the limiter's core sees it: `apply(key, policy, ops)` answering replies. */
export const engineOn = (d: Deployment, options: RedisStore.LayerOptions = {}) =>
  Effect.map(storeOn(d, options), Engine.engineOf)

/** A clock that reads `time.now` (set it at will, backwards too); it never sleeps. */
export const settableClock = (start: number) => {
  const time = { now: start }
  const nanos = () => BigInt(time.now) * 1_000_000n
  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: () => time.now,
    currentTimeMillis: Effect.sync(() => time.now),
    currentTimeNanosUnsafe: nanos,
    currentTimeNanos: Effect.sync(nanos),
    monotonicTimeNanosUnsafe: nanos,
    monotonicTimeNanos: Effect.sync(nanos),
    sleep: () => Effect.never
  }
  return { time, clock } as const
}

// ---------------------------------------------------------------------------
// A redis-server of a test's own (the restart and service-failure tests stop
// and kill it), skipped when the binary is missing.

/** Whether a `redis-server` binary is installed. */
export const hasServer: boolean = spawnSync("redis-server", ["--version"]).status === 0

/** A port nothing listens on at the moment (127.0.0.1). */
export const freePort = Effect.callback<number>((resume) => {
  const server = net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** The port of a TCP server on 127.0.0.1 that accepts connections and never answers (closed with the scope). */
export const silentServer = Effect.acquireRelease(
  Effect.callback<net.Server>((resume) => {
    const server = net.createServer(() => {})
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
  }),
  (server) => Effect.sync(() => server.close())
).pipe(Effect.map((server) => (server.address() as net.AddressInfo).port))

/**
 * A TCP relay on 127.0.0.1 to `target` (closed with the scope), standing in
 * for a network between: while `gate.hold()` is in force, what the server
 * sends is kept back (what clients send still goes through) until
 * `gate.release()`; `cut()` silently drops everything on the connections
 * open now, both ways, for good (as a lost route or a middlebox that forgot
 * them would), while new connections go through.
 */
export const relay = (target: number) => {
  let accepted = 0
  let to = target
  return Effect.acquireRelease(
    Effect.callback<{ readonly server: net.Server; readonly gate: Gate; readonly open: Set<{ cut: boolean }> }>(
      (resume) => {
        const gate = new Gate()
        const open = new Set<{ cut: boolean }>()
        const server = net.createServer((client) => {
          accepted++
          const link = { cut: false }
          open.add(link)
          const upstream = net.connect(to, "127.0.0.1")
          client.on("data", (chunk) => {
            if (!link.cut) upstream.write(chunk)
          })
          upstream.on("data", (chunk) => {
            if (!link.cut) gate.pass(() => client.write(chunk))
          })
          const close = () => {
            open.delete(link)
            client.destroy()
            upstream.destroy()
          }
          client.on("close", close).on("error", close)
          upstream.on("close", close).on("error", close)
        })
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, gate, open })))
      }
    ),
    ({ server }) => Effect.sync(() => server.close())
  ).pipe(Effect.map(({ gate, open, server }) => ({
    port: (server.address() as net.AddressInfo).port,
    gate,
    cut: () => {
      for (const link of open) link.cut = true
    },
    /** How many connections it has accepted. */
    accepted: () => accepted,
    /** Where the connections it accepts from now on go (as a name that moves to another server). */
    retarget: (port: number) => {
      to = port
    }
  })))
}

/**
 * Runs `decide` until Redis decides it (not the limiter's fallback), 20 s at
 * most: a store's first call loads its scripts, which a loaded machine may
 * take longer to do than a call's timeout in the tests of failures.
 */
export const decidedByRedis = (decide: Effect.Effect<{ readonly degraded?: boolean | undefined }, unknown>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      const d = yield* Effect.orDie(decide)
      if (d.degraded !== true) return
      yield* Effect.sleep("100 millis")
    }
    return yield* Effect.die("no call was decided by Redis in 20 s")
  })

/**
 * Runs `decide` (given a count) every 20 ms until Redis decides a call after
 * the fallback has answered at least one, or `within` ms pass: how many the
 * fallback answered, when Redis was back (ms from the start; Infinity: not
 * within), and the slowest call (ms).
 */
export const untilBackOnRedis = (
  decide: (i: number) => Effect.Effect<{ readonly degraded?: boolean | undefined }, unknown>,
  within: number
) =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    let degraded = 0
    let slowest = 0
    for (let i = 0; (yield* Clock.currentTimeMillis) - start < within; i++) {
      const [took, d] = yield* Effect.timed(Effect.orDie(decide(i)))
      slowest = Math.max(slowest, Duration.toMillis(took))
      if (d.degraded === true) degraded++
      else if (degraded > 0) return { degraded, backAfter: (yield* Clock.currentTimeMillis) - start, slowest }
      yield* Effect.sleep("20 millis")
    }
    return { degraded, backAfter: Infinity, slowest }
  })

/** What a `relay` holds back: sends run at once, or in order at `release()`. */
export class Gate {
  private held: Array<() => void> | undefined = undefined
  /** How many writes it has held back, in all. */
  heldBack = 0
  hold(): void {
    this.held ??= []
  }
  release(): void {
    const held = this.held ?? []
    this.held = undefined
    for (const send of held) send()
  }
  pass(send: () => void): void {
    if (this.held === undefined) send()
    else {
      this.heldBack++
      this.held.push(send)
    }
  }
}

/** A directory of the test's own (its name starting with `prefix`), removed with the scope. */
export const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), prefix))),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )

/** A limiter of one generous token bucket on `store`, whose fallback decides locally after `timeout`. */
export const generousOn = (store: Store.Store, timeout: Duration.Input, retryAfter: Duration.Input) =>
  RateLimiter.make({
    policy: Policy.tokenBucket({ capacity: 1e9, refill: { tokens: 1e6, per: "1 second" } }),
    fallback: { mode: "local", timeout, retryAfter },
    mailboxCapacity: 65_536
  }).pipe(Effect.provideService(Store.CurrentStore, store))

/** A redis-server on 127.0.0.1:port, no persistence; ready when it says so. */
export const startServer = (port: number, dir: string, extra: ReadonlyArray<string> = []) =>
  Effect.callback<ChildProcessWithoutNullStreams>((resume) => {
    const child = spawn("redis-server", [
      "--bind",
      "127.0.0.1",
      "--port",
      String(port),
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir,
      ...extra
    ])
    let out = ""
    const onData = (chunk: unknown) => {
      out += String(chunk)
      if (out.includes("Ready to accept connections")) {
        child.stdout.off("data", onData)
        resume(Effect.succeed(child))
      }
    }
    child.stdout.on("data", onData)
    child.on("exit", (code) => resume(Effect.die(`redis-server exited (${code}): ${out}`)))
  })

/** Kills the server (SIGKILL: a crash, not a clean shutdown) and waits for it to exit. */
export const killServer = (child: ChildProcessWithoutNullStreams) =>
  Effect.callback<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
    child.kill("SIGKILL") // a crash, not a clean shutdown
  })

// ---------------------------------------------------------------------------
// A Redis Cluster or a Sentinel set of a test's own (the failover tests kill
// their primaries), from the redis-server and redis-cli binaries.

/** Whether `redis-cli` is installed (to create a cluster). */
export const hasCli: boolean = spawnSync("redis-cli", ["--version"]).status === 0

const portFree = (port: number) =>
  Effect.callback<boolean>((resume) => {
    const server = net.createServer()
    server.once("error", () => resume(Effect.succeed(false)))
    server.listen(port, "127.0.0.1", () => server.close(() => resume(Effect.succeed(true))))
  })

// `REDIS_TEST_PORTS` (e.g. "7100-7105,7125-7129") lends ports to the servers
// tests start, in order; without it they take free ones.
const lent = (() => {
  const ports: Array<number> = []
  for (const range of list(process.env.REDIS_TEST_PORTS) ?? []) {
    const [from, to] = range.split("-").map(Number)
    for (let p = from; p <= (to ?? from); p++) ports.push(p)
  }
  return ports
})()

/**
 * `n` ports nothing listens on, each with its cluster bus port (+10000)
 * free too: the first free ones of `REDIS_TEST_PORTS` when set, else from
 * 20000-29999.
 */
export const serverPorts = (n: number) =>
  Effect.gen(function*() {
    const out: Array<number> = []
    const free = (port: number) => Effect.map(Effect.all([portFree(port), portFree(port + 10000)]), ([a, b]) => a && b)
    if (lent.length > 0) {
      for (const port of lent) {
        if (out.length < n && (yield* free(port))) out.push(port)
      }
      if (out.length < n) return yield* Effect.die(`REDIS_TEST_PORTS: fewer than ${n} free ports`)
      return out
    }
    while (out.length < n) {
      const port = 20000 + Math.floor(Math.random() * 10000)
      if (!out.includes(port) && (yield* free(port))) out.push(port)
    }
    return out
  })

/** Waits until the server on `port` answers PING (10 s at most). */
export const answers = (port: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      const pong = yield* Effect.callback<boolean>((resume) => {
        const socket = net.connect(port, "127.0.0.1")
        socket.setTimeout(500)
        socket.once("connect", () => socket.write("PING\r\n"))
        socket.once("data", (data) => {
          socket.destroy()
          resume(Effect.succeed(String(data).startsWith("+PONG")))
        })
        socket.once("error", () => resume(Effect.succeed(false)))
        socket.once("timeout", () => {
          socket.destroy()
          resume(Effect.succeed(false))
        })
      })
      if (pong) return
      yield* Effect.sleep("50 millis")
    }
    return yield* Effect.die(`nothing answers on port ${port}`)
  })

/** A redis-server (or sentinel) of the test's own, killed with the scope. */
export const spawnServer = (port: number, args: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const child = spawn("redis-server", [...args, "--port", String(port), "--bind", "127.0.0.1"])
      child.stdout.resume()
      child.stderr.resume()
      yield* answers(port)
      return child
    }),
    killServer
  )

const cli = (args: ReadonlyArray<string>) =>
  Effect.callback<string>((resume) => {
    const child = spawn("redis-cli", args)
    let out = ""
    child.stdout.on("data", (chunk) => (out += String(chunk)))
    child.stderr.on("data", (chunk) => (out += String(chunk)))
    child.on("exit", () => resume(Effect.succeed(out)))
  })

/** One server of a set the test started: its port, and its process. */
export interface Started {
  readonly port: number
  readonly child: ChildProcessWithoutNullStreams
}

/**
 * A Redis Cluster of three primaries and three replicas of the test's own,
 * in `dir`, ready (cluster_state:ok on every node); killed with the scope.
 */
export const startCluster = (dir: string, nodeTimeout: number) =>
  Effect.gen(function*() {
    const ports = yield* serverPorts(6)
    const nodes: Array<Started> = []
    for (const port of ports) {
      const child = yield* spawnServer(port, [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        `${dir}/nodes-${port}.conf`,
        "--cluster-node-timeout",
        String(nodeTimeout),
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        dir
      ])
      nodes.push({ port, child })
    }
    const created = yield* cli([
      "--cluster",
      "create",
      ...ports.map((p) => `127.0.0.1:${p}`),
      "--cluster-replicas",
      "1",
      "--cluster-yes"
    ])
    if (!created.includes("All 16384 slots covered")) return yield* Effect.die(`cluster create: ${created}`)
    // every node sees every slot served, and every replica has synced with
    // its primary (one that has not cannot be promoted)
    for (let i = 0; i < 400; i++) {
      const states = yield* Effect.forEach(ports, (p) => cli(["-p", String(p), "cluster", "info"]))
      const links = yield* Effect.forEach(ports, (p) => cli(["-p", String(p), "info", "replication"]))
      const replicasUp = links.filter((l) => l.includes("role:slave") && l.includes("master_link_status:up")).length
      if (states.every((s) => s.includes("cluster_state:ok")) && replicasUp === 3) {
        return { nodes, urls: ports.map((p) => `redis://127.0.0.1:${p}`) }
      }
      yield* Effect.sleep("50 millis")
    }
    return yield* Effect.die("the cluster did not reach cluster_state:ok")
  })

/**
 * A primary, its replica and three sentinels (quorum 2) of the test's own,
 * in `dir`, named `name`; ready once the sentinels see the replica and each
 * other. Killed with the scope.
 */
export const startSentinels = (dir: string, name: string, downAfter: number) =>
  Effect.gen(function*() {
    const [primaryPort, replicaPort, ...sentinelPorts] = yield* serverPorts(5)
    const data = ["--save", "", "--appendonly", "no", "--dir", dir]
    const primary = yield* spawnServer(primaryPort, data)
    const replica = yield* spawnServer(replicaPort, [...data, "--replicaof", "127.0.0.1", String(primaryPort)])
    const sentinels: Array<Started> = []
    for (const port of sentinelPorts) {
      const conf = `${dir}/sentinel-${port}.conf`
      yield* Effect.sync(() =>
        fs.writeFileSync(
          conf,
          [
            `sentinel monitor ${name} 127.0.0.1 ${primaryPort} 2`,
            `sentinel down-after-milliseconds ${name} ${downAfter}`,
            `sentinel failover-timeout ${name} ${downAfter * 3}`,
            ""
          ].join("\n")
        )
      )
      sentinels.push({ port, child: yield* spawnServer(port, [conf, "--sentinel", "--dir", dir]) })
    }
    for (let i = 0; i < 400; i++) {
      const seen = yield* cli(["-p", String(sentinelPorts[0]), "sentinel", "master", name])
      const replicas = yield* cli(["-p", String(sentinelPorts[0]), "sentinel", "replicas", name])
      if (/num-other-sentinels\n2\n/.test(seen) && replicas.includes(String(replicaPort))) {
        return {
          primary: { port: primaryPort, child: primary },
          replica: { port: replicaPort, child: replica },
          sentinels,
          urls: sentinelPorts.map((p) => `redis://127.0.0.1:${p}`)
        }
      }
      yield* Effect.sleep("50 millis")
    }
    return yield* Effect.die("the sentinels did not see each other and the replica")
  })
