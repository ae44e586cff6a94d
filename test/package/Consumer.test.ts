// The package as a user gets it. `npm pack` (which runs prepack: a clean
// build), then a plain `npm install` of the tarball, scripts on, into a fresh
// app in the system's temporary directory, outside the repository, so nothing
// the app loads can come from the repository's node_modules. Then what a user
// would try: plain JavaScript on Node 20 and 24, a strict TypeScript consumer
// under TypeScript 5.x and the project's own TypeScript, every entry point,
// `npx tollgate`, and publint and attw on the tarball. What the install adds
// is counted (tollgate and nothing else), and every entry point is run first
// without the optional packages (one line naming what is missing), then with
// them.
//
// Versions are pinned so that a fresh machine gets the same run: effect,
// @effect/platform-node and @types/node at the repository's own versions,
// TypeScript 5.9.3, and Node 20 as the `node` package from npm at the lowest
// version `engines` admits (cached under node_modules/.cache). The Node
// that runs npm is tried too when it is another version.
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { delimiter, dirname, join, sep } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, assert, beforeAll, describe, it } from "vitest"

const root = fileURLToPath(new URL("../..", import.meta.url))
const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"))
const devVersion = (name: string): string => manifest.devDependencies[name]
const TYPESCRIPT_5 = "5.9.3"
// The floor of `engines.node` (">=20.0.0"): the oldest Node the package claims.
const NODE_20 = /^>=\s*(20\.\d+\.\d+)$/.exec(manifest.engines.node)?.[1]

// The environment of every command run for the app: npm's settings (registry,
// cache, certificates) are kept, but nothing that ties npm to the repository
// (its prefix, its package, the script being run), and no node_modules/.bin
// on PATH. Node 24 (this process's, the project's pinned Node) comes first on
// PATH, so `npm` and the `tollgate` bin run on it.
const appEnv = (() => {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined) continue
    if (/^npm_(package|lifecycle|command|execpath|node_execpath)/i.test(name)) continue
    if (/^npm_config_(local_prefix|prefix|global_prefix)$/i.test(name) || name === "INIT_CWD") continue
    if (name === "PORT" || name === "HOST" || name.startsWith("TOLLGATE_") || name.startsWith("REDIS_")) continue
    env[name] = value
  }
  const path = (process.env.PATH ?? "").split(delimiter).filter((dir) => !dir.includes(`node_modules${sep}.bin`))
  env.PATH = [dirname(process.execPath), ...path].join(delimiter)
  return env
})()

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly output: string
}

const children = new Set<ChildProcess>()

const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: Record<string, string> }
): Promise<Run> =>
  new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: { ...appEnv, ...options.env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    children.add(child)
    let stdout = ""
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
      output += chunk.toString("utf8")
    })
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8")
    })
    child.on("error", reject)
    child.on("close", (code) => {
      children.delete(child)
      resolve({ code, stdout, output })
    })
  })

/** Runs a command that must succeed; fails with its whole output otherwise. */
const must = async (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: Record<string, string> }
): Promise<Run> => {
  const result = await run(command, args, options)
  assert.strictEqual(result.code, 0, `${command} ${args.join(" ")} exited with ${result.code}:\n${result.output}`)
  return result
}

const npm = (args: ReadonlyArray<string>, cwd: string) => must("npm", args, { cwd })
// --prefer-offline: what npm's cache holds (from the repository's own `npm ci`)
// is used without asking the registry again; the rest is fetched as usual.
const install = (args: ReadonlyArray<string>, cwd: string) =>
  npm(["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel", "info", ...args], cwd)

/** A Node of the given version from the `node` package on npm, installed once into node_modules/.cache. */
const nodeBinary = async (version: string): Promise<string> => {
  const dir = join(root, "node_modules", ".cache", "tollgate-package-test", `node-${version}`)
  const binary = join(dir, "node_modules", "node", "bin", process.platform === "win32" ? "node.exe" : "node")
  if (!existsSync(binary)) {
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "node-cache", private: true }))
    await install([`node@${version}`], dir)
  }
  const reported = (await must(binary, ["--version"], { cwd: dir })).stdout.trim()
  assert.strictEqual(reported, `v${version}`)
  return binary
}

const refused = (url: string) => fetch(url).then(() => false, () => true)

/** Starts the service in the app (a process group of its own) and resolves once it listens. */
const serve = async (command: string, args: ReadonlyArray<string>) => {
  const child = spawn(command, args, {
    cwd: app,
    env: { ...appEnv, PORT: "0", HOST: "127.0.0.1" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true
  })
  children.add(child)
  let output = ""
  // "close": the process exited and every holder of its output (a child of its own too) is gone.
  const closed = new Promise<number | null>((resolve) => child.on("close", resolve))
  const kill = () => {
    try {
      process.kill(-child.pid!, "SIGKILL")
    } catch {
      // the group is gone already
    }
  }
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      const match = /Listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)
      if (match !== null) resolve(match[1]!)
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    void closed.then((code) => reject(new Error(`${command} exited with ${code}:\n${output}`)))
  }).catch((error) => {
    kill()
    throw error
  })
  return { child, url, closed, kill, output: () => output }
}

// The optional peer dependencies: a user adds them for the parts that need them.
const OPTIONAL_PEERS = Object.keys(manifest.peerDependenciesMeta ?? {})

/**
 * The packages in an app's node_modules (npm's `.package-lock.json`) that are
 * neither `peer` nor one of its dependencies, direct or not: what installing
 * tollgate beside `peer` added.
 */
const addedBesides = (dir: string, peer: string): ReadonlyArray<string> => {
  const lock = JSON.parse(readFileSync(join(dir, "node_modules", ".package-lock.json"), "utf8")) as {
    packages: Record<string, { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> }>
  }
  // npm's resolution: a dependency of the package at `from` is in its own node_modules, or in a parent's.
  const resolve = (from: string, name: string): string | undefined => {
    for (let base = from;; base = base.slice(0, Math.max(0, base.lastIndexOf("/node_modules/")))) {
      const path = `${base === "" ? "" : `${base}/`}node_modules/${name}`
      if (path in lock.packages) return path
      if (base === "") return undefined
    }
  }
  const reached = new Set<string>()
  const visit = (path: string | undefined) => {
    if (path === undefined || reached.has(path)) return
    reached.add(path)
    const entry = lock.packages[path]!
    for (const name of Object.keys({ ...entry.dependencies, ...entry.optionalDependencies })) {
      visit(resolve(path, name))
    }
  }
  visit(resolve("", peer))
  return Object.keys(lock.packages).filter((path) => path !== "" && !reached.has(path)).sort()
}

// Every entry point, then each part that needs an optional package, run without any of them:
// the entry points load, and each part fails with its one line (Effect's own rendering of the
// failure, or the parser's issue).
const WITHOUT_OPTIONAL = `import { Cause, Effect, Exit, Layer } from "effect"
for (const entry of ["tollgate", "tollgate/http", "tollgate/persistence", "tollgate/redis", "tollgate/envoy", "tollgate/server", "tollgate/cluster"]) {
  await import(entry)
}
const { Server } = await import("tollgate/server")
const { RedisStore } = await import("tollgate/redis")
const { RlsConfig, RlsServer } = await import("tollgate/envoy")
const { ClusterRunner } = await import("tollgate/cluster")
const failure = async (layer) => {
  const exit = await Effect.runPromiseExit(Effect.scoped(Layer.build(layer)))
  return Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "built"
}
console.log(JSON.stringify([
  await failure(Server.layer),
  await failure(RedisStore.layer({ url: "redis://127.0.0.1:1", client: { connectionName: "app" } })),
  await failure(RlsServer.layer({ host: "127.0.0.1", port: 0 })),
  await failure(ClusterRunner.layerPostgres({ url: "postgres://127.0.0.1:1/none" })),
  RlsServer.loadDefinition().stack,
  RlsConfig.parseYaml("domain: edge\\n", "edge.yaml").failure.reason
]))
`

const WITHOUT_OPTIONAL_LINES = [
  "MissingPackage: the HTTP service needs @effect/platform-node, which is not installed: " +
  "npm install @effect/platform-node",
  "MissingPackage: the Redis store's own client (RedisStore.layer) needs ioredis, which is not installed: " +
  "npm install ioredis",
  "MissingPackage: the Envoy rate limit service (gRPC) needs @grpc/grpc-js, which is not installed: " +
  "npm install @grpc/grpc-js",
  "MissingPackage: the cluster's runners on Postgres (ClusterRunner.layerPostgres) needs @effect/sql-pg and " +
  "@effect/platform-node, which are not installed: npm install @effect/sql-pg @effect/platform-node",
  "MissingPackage: the rate limit service's definition (RlsServer.loadDefinition) needs @grpc/grpc-js and " +
  "@grpc/proto-loader, which are not installed: npm install @grpc/grpc-js @grpc/proto-loader",
  "reading envoyproxy/ratelimit's YAML needs yaml, which is not installed: npm install yaml"
]

// tollgate/redis's own client: ioredis beside effect (REDIS_URL: a Redis to use).
const REDIS_OWN = `import { Effect, Layer } from "effect"
import { Policy, RateLimiter } from "tollgate"
import { RedisStore } from "tollgate/redis"
const prefix = \`tollgate-package-test:\${process.pid}:\${Date.now()}:\`
const program = Effect.gen(function*() {
  const limiter = yield* RateLimiter
  const decisions = []
  for (let i = 0; i < 4; i++) decisions.push(yield* limiter.acquire("user:42"))
  return decisions.join(" ")
})
const limiter = RateLimiter.layer({ policy: Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "1 hour" } }) })
console.log(await Effect.runPromise(program.pipe(
  Effect.provide(limiter.pipe(Layer.provide(RedisStore.layer({ url: process.env.REDIS_URL, prefix }))))
)))
`

// tollgate/envoy's gRPC server and YAML, with their packages installed: two calls on a limit of one.
const ENVOY = `import * as grpc from "@grpc/grpc-js"
import { Effect } from "effect"
import { RlsConfig, RlsServer, RlsService } from "tollgate/envoy"
const yaml = "domain: edge\\ndescriptors:\\n  - key: remote_address\\n    rate_limit: { unit: minute, requests_per_unit: 1 }\\n"
const config = RlsConfig.compile([{ file: "edge.yaml", document: RlsConfig.parseYaml(yaml, "edge.yaml").success }])
const program = Effect.gen(function*() {
  const port = yield* RlsServer.make({ host: "127.0.0.1", port: 0 })
  const Client = grpc.makeGenericClientConstructor(RlsServer.loadDefinition(), "RateLimitService")
  const client = new Client(\`127.0.0.1:\${port}\`, grpc.credentials.createInsecure())
  const request = { domain: "edge", descriptors: [{ entries: [{ key: "remote_address", value: "203.0.113.7" }] }] }
  const call = Effect.promise(() =>
    new Promise((resolve, reject) =>
      client.ShouldRateLimit(request, (error, response) => error ? reject(error) : resolve(response.overall_code))
    )
  )
  const codes = [yield* call, yield* call]
  client.close()
  return codes.join(" ")
})
console.log(await Effect.runPromise(program.pipe(
  Effect.provideServiceEffect(RlsService.RlsService, RlsService.RlsService.make({ config: config.success })),
  Effect.scoped
)))
`

let work = ""
let app = ""
let tarball = ""
let packed: { size: number; unpackedSize: number; files: Array<{ path: string }> } | undefined

const PROGRAM = `import { Effect } from "effect"
import { Policy, RateLimiter } from "tollgate"

const program = Effect.gen(function*() {
  const limiter = yield* RateLimiter
  const decisions = []
  for (let i = 0; i < 4; i++) decisions.push(yield* limiter.acquire("user:42"))
  const peek = yield* limiter.peek("user:42")
  console.log(decisions.join(" "), peek.remaining)
})

await program.pipe(
  Effect.provide(RateLimiter.layer({ policy: Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "1 hour" } }) })),
  Effect.runPromise
)
`

const HTTP_IMPORT = `const { RateLimitMiddleware } = await import("tollgate/http")
console.log(typeof RateLimitMiddleware.make)`

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "tollgate-package-"))
  app = join(work, "app")
  mkdirSync(app)
  // npm pack prints the prepack and prepare scripts' output first, then the JSON.
  const pack = await npm(["pack", "--json", "--pack-destination", work], root)
  const json = pack.stdout.slice(pack.stdout.search(/^\[/m))
  const [info] = JSON.parse(json)
  packed = info
  tarball = join(work, info.filename)
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "fixture-app", private: true, type: "module" }))
  writeFileSync(join(app, "app.mjs"), PROGRAM)
}, 300_000)

afterAll(() => {
  for (const child of children) {
    try {
      process.kill(-child.pid!, "SIGKILL") // a service's group
    } catch {
      child.kill("SIGKILL")
    }
  }
  // The app's node_modules (effect, TypeScript, gRPC, ...): tens of thousands of files, which a busy
  // machine takes more than the default 10 s hook timeout to delete.
  if (work !== "") rmSync(work, { recursive: true, force: true })
}, 120_000)

describe("the package, packed and installed into a fresh app", () => {
  it("the tarball holds the build, the sources (no demo), README, CHANGELOG and LICENSE; no tests, bench or CI", () => {
    const files = packed!.files.map((file) => file.path)
    for (const file of files) {
      assert.match(
        file,
        /^(dist\/.+\.(js|js\.map|d\.ts|d\.ts\.map)|src\/.+\.ts|src\/envoy\/proto\/.+\.(proto|md)|src\/envoy\/proto\/LICENSE|package\.json|README\.md|CHANGELOG\.md|LICENSE)$/,
        file
      )
      assert.notMatch(file, /^(test|bench|\.ci|docs)\/|^src\/demo\/|^dist\/demo\//, file)
    }
    for (
      const entry of [
        "index",
        "http/index",
        "redis/index",
        "server/index",
        "server/main",
        "envoy/index",
        "persistence/index",
        "cluster/index"
      ]
    ) {
      assert.include(files, `dist/${entry}.js`)
      assert.include(files, `dist/${entry}.d.ts`)
    }
    for (const file of ["package.json", "README.md", "CHANGELOG.md", "LICENSE"]) assert.include(files, file)
    // the Redis scripts, compiled from the TypeScript at build time (not committed)
    assert.include(files, "dist/redis/internal/generated.js")
    // the gRPC service reads its vendored protocol at start, with their licence beside them
    for (const file of ["src/envoy/proto/envoy/service/ratelimit/v3/rls.proto", "src/envoy/proto/LICENSE"]) {
      assert.include(files, file)
    }
  })

  it(
    "npm install <tarball> effect: installs with scripts on, runs none of tollgate's, one copy of effect",
    async () => {
      const installed = await install([tarball, `effect@${devVersion("effect")}`], app)
      // npm logs every lifecycle script it runs as `run <name>@<version> <event> ...`.
      assert.notMatch(installed.output, /\brun tollgate@/, installed.output)
      const ownManifest = JSON.parse(readFileSync(join(app, "node_modules", "tollgate", "package.json"), "utf8"))
      for (const event of ["preinstall", "install", "postinstall"]) {
        assert.isUndefined(ownManifest.scripts?.[event], `a ${event} script ships`)
      }
      // The install adds tollgate and nothing else: every package in the app is tollgate or
      // effect or one of effect's own dependencies (the peer the user asked for).
      const added = addedBesides(app, "effect")
      assert.deepStrictEqual(added, ["node_modules/tollgate"], `the install added ${added.join(", ")}`)
      // The optional peers are not installed, so nothing can load them.
      for (const name of OPTIONAL_PEERS) assert.isFalse(existsSync(join(app, "node_modules", name)), name)
      assert.isFalse(existsSync(join(app, "node_modules", "tollgate", "node_modules")))
    },
    300_000
  )

  it(
    "plain JavaScript: yield* limiter.acquire(key) prints decisions, and tollgate/http imports, on Node 20 and 24",
    async () => {
      assert.isDefined(NODE_20, `engines.node is ${manifest.engines.node}`)
      const nodes = new Set([await nodeBinary(NODE_20!), process.execPath])
      const npmNode = process.env.npm_node_execpath
      if (npmNode !== undefined && existsSync(npmNode)) nodes.add(npmNode)
      const versions: Array<string> = []
      for (const node of nodes) {
        const version = (await must(node, ["--version"], { cwd: app })).stdout.trim()
        versions.push(version)
        const result = await must(node, ["app.mjs"], { cwd: app })
        assert.strictEqual(result.stdout, "true true true false 0\n", `on Node ${version}`)
        // tollgate/http needs nothing but effect either.
        const http = await must(node, ["--input-type=module", "-e", HTTP_IMPORT], { cwd: app })
        assert.strictEqual(http.stdout, "function\n", `tollgate/http on Node ${version}`)
      }
      assert.isTrue(versions.some((v) => v.startsWith("v20.")), versions.join(", "))
      assert.isTrue(versions.some((v) => v.startsWith("v24.")), versions.join(", "))
    },
    300_000
  )

  it(
    "without the optional packages, every entry point loads on Node 20 and 24, and each part that needs one fails with one line naming it and its install command",
    async () => {
      const nodes = new Set([await nodeBinary(NODE_20!), process.execPath])
      for (const node of nodes) {
        const result = await must(node, ["--input-type=module", "-e", WITHOUT_OPTIONAL], { cwd: app })
        assert.deepStrictEqual(JSON.parse(result.stdout), WITHOUT_OPTIONAL_LINES, `on ${node}`)
      }
    },
    120_000
  )

  it(
    "npx tollgate without @effect/platform-node exits 1 with one line naming it and its install command; --version answers",
    async () => {
      const result = await run("npx", ["--no-install", "tollgate"], { cwd: app })
      assert.strictEqual(result.code, 1, result.output)
      assert.strictEqual(
        result.output,
        "tollgate: the service needs @effect/platform-node, which is not installed: npm install @effect/platform-node\n"
      )
      // (--version needs nothing but the package: it reads the package's own manifest)
      const version = await must("npx", ["--no-install", "tollgate", "--version"], { cwd: app })
      assert.strictEqual(version.stdout, `${manifest.version}\n`)
    },
    120_000
  )

  it("publint and attw (profile esm-only: the package is ES modules only) report the tarball clean", async () => {
    const bin = (name: string) => join(root, "node_modules", ".bin", name)
    const publint = await must(bin("publint"), ["run", "--strict", tarball], { cwd: work })
    assert.include(publint.output, "All good!")
    const attw = await must(bin("attw"), ["--profile", "esm-only", "--format", "ascii", tarball], { cwd: work })
    assert.notMatch(attw.output, /\n(node16 \(from ESM\)|bundler): (?!🟢)/u, attw.output)
  }, 300_000)

  describe("with the service's packages installed (@effect/platform-node and redis, ioredis, gRPC, yaml)", () => {
    beforeAll(async () => {
      await install([
        `@effect/platform-node@${devVersion("@effect/platform-node")}`,
        `ioredis@${devVersion("ioredis")}`,
        `@types/node@${devVersion("@types/node")}`,
        `typescript@${TYPESCRIPT_5}`
      ], app)
    }, 300_000)

    it.skipIf(process.env.REDIS_URL === undefined)(
      "tollgate/redis: RedisStore.layer runs on ioredis, on Node 20 and 24 (REDIS_URL)",
      async () => {
        const nodes = new Set([await nodeBinary(NODE_20!), process.execPath])
        for (const node of nodes) {
          const result = await must(node, ["--input-type=module", "-e", REDIS_OWN], {
            cwd: app,
            env: { REDIS_URL: process.env.REDIS_URL! }
          })
          assert.strictEqual(result.stdout, "true true true false\n", `on ${node}`)
        }
      },
      120_000
    )

    it(
      "npx tollgate with Envoy's rate limit service configured, without its packages, exits 1 with one line",
      async () => {
        writeFileSync(join(app, "edge.yaml"), "domain: edge\n")
        const grpc = await run("npx", ["--no-install", "tollgate"], {
          cwd: app,
          env: { PORT: "0", TOLLGATE_RLS_PORT: "0" }
        })
        assert.strictEqual(grpc.code, 1, grpc.output)
        assert.strictEqual(
          grpc.output,
          "tollgate: the Envoy rate limit service (gRPC) needs @grpc/grpc-js, which is not installed: " +
            "npm install @grpc/grpc-js\n"
        )
        const yaml = await run("npx", ["--no-install", "tollgate"], {
          cwd: app,
          env: { PORT: "0", TOLLGATE_RLS_PORT: "0", TOLLGATE_RLS_CONFIG: "edge.yaml" }
        })
        assert.strictEqual(yaml.code, 1, yaml.output)
        assert.strictEqual(
          yaml.output,
          "tollgate: invalid configuration: edge.yaml: reading envoyproxy/ratelimit's YAML needs yaml, which is not " +
            "installed: npm install yaml\n"
        )
      },
      120_000
    )

    it(
      "tollgate/envoy: with its packages added, the gRPC rate limit service on its YAML answers OK, then OVER_LIMIT, on Node 20 and 24",
      async () => {
        await install([
          `@grpc/grpc-js@${devVersion("@grpc/grpc-js")}`,
          `@grpc/proto-loader@${devVersion("@grpc/proto-loader")}`,
          `yaml@${devVersion("yaml")}`
        ], app)
        const nodes = new Set([await nodeBinary(NODE_20!), process.execPath])
        for (const node of nodes) {
          const result = await must(node, ["--input-type=module", "-e", ENVOY], { cwd: app })
          // the server's log line (Effect's logger), then the answers
          assert.match(result.stdout, /gRPC\) listening on 127\.0\.0\.1:\d+\nOK OVER_LIMIT\n$/, `on ${node}`)
        }
      },
      120_000
    )

    it(
      "tollgate/http, tollgate/redis, tollgate/server, tollgate/envoy, tollgate/persistence and tollgate/cluster import (Node 24)",
      async () => {
        const script = `
        const http = await import("tollgate/http")
        const redis = await import("tollgate/redis")
        const server = await import("tollgate/server")
        const envoy = await import("tollgate/envoy")
        const persistence = await import("tollgate/persistence")
        // (without @effect/sql-pg: only ClusterRunner.layerPostgres loads it, when built)
        const cluster = await import("tollgate/cluster")
        console.log(
          typeof http.RateLimitMiddleware.make,
          typeof redis.RedisStore.layer,
          typeof server.Server.layer,
          typeof envoy.RlsServer.protoDirectory(),
          typeof persistence.RateLimiterStore.layer,
          typeof cluster.ClusterLimiter.layer
        )
      `
        const result = await must(process.execPath, ["--input-type=module", "-e", script], { cwd: app })
        assert.strictEqual(result.stdout, "function function object string function function\n")
        const internal = await run(process.execPath, [
          "--input-type=module",
          "-e",
          `await import("tollgate/dist/index.js")`
        ], {
          cwd: app
        })
        assert.notStrictEqual(internal.code, 0, "a path outside the exports map resolves")
        assert.include(internal.output, "ERR_PACKAGE_PATH_NOT_EXPORTED")
      },
      120_000
    )

    it(
      "tollgate/redis's declarations name no optional package but ioredis: a program on RedisStore.layer type-checks without @effect/platform-node",
      async () => {
        writeFileSync(
          join(app, "redis-only.ts"),
          `import { RedisStore } from "tollgate/redis"\nexport const store = RedisStore.layer({ url: "redis://127.0.0.1:6379" })\n`
        )
        const compilerOptions = { target: "ES2022", types: ["node"], strict: true, module: "NodeNext", noEmit: true }
        writeFileSync(join(app, "tsconfig.redis.json"), JSON.stringify({ compilerOptions, files: ["redis-only.ts"] }))
        const { stdout } = await must(
          join(root, "node_modules", ".bin", "tsc"),
          ["-p", "tsconfig.redis.json", "--listFilesOnly"],
          { cwd: app }
        )
        const loaded = stdout.split("\n").filter((file) => file.includes("/node_modules/"))
        assert.isTrue(loaded.some((file) => file.includes("/node_modules/ioredis/")), "ioredis's declarations")
        // all of these are installed in this app: a declaration that names one loads it
        const optional = /\/node_modules\/(@effect\/platform-node|@effect\/sql-pg|redis|@redis|@grpc|yaml)\//
        assert.deepStrictEqual(loaded.filter((file) => optional.test(file)), [])
      },
      120_000
    )

    it(
      "a strict TypeScript consumer type-checks (nodenext and bundler; TypeScript 5.9 and the project's)",
      async () => {
        writeFileSync(join(app, "consumer.ts"), CONSUMER)
        const options = {
          // No lib: the default for the target includes the DOM types that effect's own declarations
          // name (CryptoKey, Transferable), which skipLibCheck false checks.
          target: "ES2022",
          types: ["node"],
          strict: true,
          noUncheckedIndexedAccess: true,
          exactOptionalPropertyTypes: true,
          skipLibCheck: false,
          noEmit: true
        }
        // Both resolutions load the same declaration files (checked below), so they are checked once, under
        // nodenext; the bundler run checks the consumer against them (a third of the time of a full check).
        const configs = {
          nodenext: { ...options, module: "NodeNext", moduleResolution: "NodeNext" },
          bundler: { ...options, module: "ESNext", moduleResolution: "Bundler", skipLibCheck: true }
        }
        for (const [name, compilerOptions] of Object.entries(configs)) {
          writeFileSync(join(app, `tsconfig.${name}.json`), JSON.stringify({ compilerOptions, files: ["consumer.ts"] }))
        }
        const compilers = {
          [`TypeScript ${TYPESCRIPT_5}`]: [process.execPath, join(app, "node_modules", "typescript", "bin", "tsc")],
          "the project's TypeScript": [join(root, "node_modules", ".bin", "tsc")]
        }
        const files = await Promise.all(
          Object.keys(configs).map((config) =>
            must(join(root, "node_modules", ".bin", "tsc"), ["-p", `tsconfig.${config}.json`, "--listFilesOnly"], {
              cwd: app
            }).then(({ stdout }) => stdout.split("\n").filter((line) => line !== "").sort())
          )
        )
        assert.isAbove(files[0].filter((file) => file.includes("/node_modules/tollgate/dist/")).length, 10)
        assert.deepStrictEqual(files[1], files[0], "the two resolutions load other files")
        const checks = Object.entries(compilers).flatMap(([compiler, [command, ...args]]) =>
          Object.keys(configs).map(async (config) => {
            const result = await run(command!, [...args, "-p", `tsconfig.${config}.json`], { cwd: app })
            return { label: `${compiler}, moduleResolution ${config}`, result }
          })
        )
        const version = await must(process.execPath, [join(app, "node_modules", "typescript", "bin", "tsc"), "-v"], {
          cwd: app
        })
        assert.include(version.stdout, TYPESCRIPT_5)
        for (const { label, result } of await Promise.all(checks)) {
          assert.strictEqual(result.code, 0, `${label}:\n${result.output}`)
        }
      },
      300_000
    )

    it(
      "npx tollgate starts the service and answers /healthz; Ctrl-C (SIGINT to its process group) stops it",
      async () => {
        const service = await serve("npx", ["--no-install", "tollgate"])
        try {
          const health = await fetch(`${service.url}/healthz`)
          assert.strictEqual(health.status, 200)
          assert.deepStrictEqual(await health.json(), { status: "ok" })
          assert.strictEqual((await fetch(`${service.url}/readyz`, { method: "HEAD" })).status, 200)
          process.kill(-service.child.pid!, "SIGINT")
          await service.closed
          assert.include(service.output(), "draining")
          assert.isTrue(await refused(`${service.url}/healthz`), "the service still answers after Ctrl-C")
        } finally {
          service.kill()
        }
      },
      120_000
    )

    it("the bin run directly (as a supervisor would) stops on SIGTERM with exit code 0", async () => {
      const service = await serve(join(app, "node_modules", ".bin", "tollgate"), [])
      try {
        assert.strictEqual((await fetch(`${service.url}/healthz`)).status, 200)
        service.child.kill("SIGTERM")
        assert.strictEqual(await service.closed, 0, service.output())
        assert.isTrue(await refused(`${service.url}/healthz`), "the service still answers after SIGTERM")
      } finally {
        service.kill()
      }
    }, 120_000)
  })
})

// A consumer that touches every entry point, with explicit types so that a
// type that widened to any, or lost its error channel, fails to compile.
const CONSUMER = `import { Effect, Layer, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import {
  type Decision,
  InvalidPolicy,
  type InvalidRequest,
  type LimiterShutdown,
  MemoryStore,
  Metrics,
  type Overloaded,
  Policy,
  RateLimiter,
  Store
} from "tollgate"
import { RateLimitHeaders, RateLimitMiddleware } from "tollgate/http"
import { RedisStore } from "tollgate/redis"
import { Server, ServiceConfig } from "tollgate/server"
import { RlsConfig } from "tollgate/envoy"
import { RateLimiterStore } from "tollgate/persistence"
import { RateLimiter as EffectRateLimiter } from "effect/persistence"

const policy: Policy.Policy = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } })
const limiterLayer: Layer.Layer<RateLimiter, InvalidPolicy> = RateLimiter.layer({ policy, idleTimeout: "1 minute" })

const program: Effect.Effect<{ ok: boolean; remaining: number }, unknown, RateLimiter> = Effect.gen(function*() {
  const limiter = yield* RateLimiter
  const ok: boolean = yield* limiter.acquire("user:42", { cost: 2 })
  const decision: Decision.Decision = yield* limiter.consume("user:42")
  return { ok, remaining: decision.remaining }
})

type AcquireError = Effect.Error<ReturnType<RateLimiter["Service"]["acquire"]>>
const mustBeTyped: [InvalidRequest | Overloaded | LimiterShutdown] extends [AcquireError] ? true : false = true
const notAny: unknown extends AcquireError ? false : true = true

export const main = program.pipe(Effect.provide(limiterLayer))
export const failure: boolean = Schema.is(InvalidPolicy)(new InvalidPolicy({ field: "capacity", value: "0", reason: "must be positive" }))
export const store = Store.CurrentStore
export const memory = MemoryStore
export const decisions = Metrics.decisions

export const middleware = Effect.gen(function*() {
  const limiter = yield* RateLimiter
  const limit = yield* RateLimitMiddleware.make(limiter, { key: { header: "x-api-key" }, policy })
  return limit(Effect.succeed(HttpServerResponse.text("ok")))
})
export const header: string = RateLimitHeaders.sfString("x")

export const redis: Layer.Layer<never, unknown> = RedisStore.layer({ url: "redis://127.0.0.1:6379", prefix: "app:" })
export const rls = RlsConfig
export const service = Layer.launch(Server.layerWith(ServiceConfig.ServiceConfig.layerFrom({ env: { PORT: "0" } })))
export const effectLimiter: Layer.Layer<EffectRateLimiter.RateLimiter, InvalidPolicy> = EffectRateLimiter.layer.pipe(
  Layer.provide(RateLimiterStore.layerWith({ idleTimeout: "1 minute" }))
)
export const flags = [mustBeTyped, notAny]
`
