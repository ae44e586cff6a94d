// The commands in README.md and docs/*.md run as written. Every ```sh block
// carries a check, an HTML comment on the line above it:
//
//   <!-- check: run -->            run with bash -e from the repository's root
//   <!-- check: service -->        the same, where each `npm start` comes up in the background (its
//                                  log says where it listens, it answers /healthz) and is stopped at
//                                  the end, while the block's other lines (curl, ...) run against it
//   <!-- check: against ENV=... --> run against `npm start` with those variables (exported to the
//                                  block too, as a reader's shell has them): one service for a page's
//                                  blocks with the same check, which run in the page's order
//   <!-- check: ... redis -->      as above with a Redis: REDIS_URL of the environment; without it the
//                                  case is registered and skipped, saying so
//   <!-- check: skip: <reason> --> registered and skipped, with the reason in its name
//
// A block without a check fails. Ports in a block (8080, 8081, ...) become free
// ports, the Redis URL the test's Redis and a Redis key prefix a fresh one: the
// rest is run as written. A curl command's answer is compared with the lines
// shown under it (`# {...}`, or after it on its line): the same fields, the same
// strings and booleans (numbers move with time and are not compared); an HTTP
// head (`curl -si`) has the same status and header fields.
//
// ```ts blocks are type-checked by `npm run docs` (.ci/docs.mjs), and the
// programs of docs/recipes.md run in test/recipes/.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))
const documents = [
  "README.md",
  ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)
]

interface Block {
  readonly document: string
  /** 1-based line of the opening fence. */
  readonly line: number
  readonly check: string | undefined
  readonly code: string
}

const blocks: ReadonlyArray<Block> = documents.flatMap((document) => {
  const lines = readFileSync(join(root, document), "utf8").split("\n")
  const found: Array<Block> = []
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(sh|bash|shell|console)\s*$/.test(lines[i])) continue
    let end = i + 1
    while (end < lines.length && lines[end] !== "```") end++
    const check = /^<!-- check: (.*?) -->$/.exec(lines[i - 1] ?? "")?.[1]
    found.push({ document, line: i + 1, check, code: lines.slice(i + 1, end).join("\n") })
    i = end
  }
  return found
})

// A port no one listens on now (the service binds it a moment later).
const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

// bash's preamble: `npm start` in the background, in a process group of its own, until it listens;
// each curl's answer followed by a line that ends it; every service stopped on exit.
const PRELUDE = String.raw`
set -e
__pids=()
__stop() { for p in "${"$"}{__pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap __stop EXIT
npm() {
  if [ "$1" != start ]; then command npm "$@"; return; fi
  local log
  log=$(mktemp)
  setsid npm start > "$log" 2>&1 < /dev/null &
  local pid=$!
  __pids+=("$pid")
  for _ in $(seq 1 300); do
    if grep -q "Listening on" "$log"; then
      local url
      url=$(grep -o "Listening on http://[^ ]*" "$log" | head -1 | cut -d' ' -f3 | sed 's#0\.0\.0\.0#127.0.0.1#')
      command curl -sf --max-time 5 "$url/healthz" > /dev/null || { cat "$log" >&2; return 1; }
      echo "@@SERVICE $url@@"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; return 1; }
    sleep 0.1
  done
  cat "$log" >&2
  return 1
}
curl() {
  local rc=0
  command curl --max-time 15 "$@" || rc=$?
  printf '\n@@CURL %s@@\n' "$rc"
  return "$rc"
}
`

interface Expected {
  readonly command: string
  readonly output: string | undefined
}

// Each curl command of a block (continued lines joined) and the answer the page shows for it.
const curls = (code: string): ReadonlyArray<Expected> => {
  const lines = code.replace(/\\\n/g, " ").split("\n")
  const out: Array<Expected> = []
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]
    if (!/^\s*curl\s/.test(line)) continue
    const inline = /\s#\s(.*)$/.exec(line.replace(/'[^']*'/g, (q) => q.replace(/#/g, "_")))?.[1]
    let output = inline
    if (output === undefined) {
      const shown: Array<string> = []
      for (let j = i + 1; j < lines.length && /^#( |$)/.test(lines[j]); j++) shown.push(lines[j].slice(2))
      if (shown.length > 0) output = shown.join("\n")
    }
    out.push({ command: line, output })
  }
  return out
}

// The answer has what the page shows: every field it names, with the same strings and booleans.
const compare = (expected: string, actual: string, label: string) => {
  if (expected.startsWith("HTTP/")) {
    const [status, ...headers] = expected.split("\n")
    assert.isTrue(actual.startsWith(status.split(" ").slice(0, 2).join(" ")), `${label}: status\n${actual}`)
    for (const header of headers) {
      const [name, value] = header.split(/:\s*/, 2)
      const got = new RegExp(`^${name}:\\s*(.*)$`, "mi").exec(actual)?.[1]
      assert.isDefined(got, `${label}: no ${name} header\n${actual}`)
      // the item's name (`"login"`): its parameters move with time
      assert.strictEqual(got!.split(";")[0], value.split(";")[0], `${label}: ${name}`)
    }
    return
  }
  for (const [, key] of expected.matchAll(/"([A-Za-z_]+)":/g)) {
    assert.include(actual, `"${key}":`, `${label}: no field ${key}\n${actual}`)
  }
  for (const [pair] of expected.matchAll(/"[A-Za-z_]+":("(?:[^"\\]|\\.)*"|true|false|null)/g)) {
    assert.include(actual, pair, `${label}: not ${pair}\n${actual}`)
  }
}

// The environment of every process started here: the test's own, without anything the service reads.
const baseEnv = (): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined || name === "HOST" || name.startsWith("TOLLGATE_") || name.startsWith("REDIS_")) continue
    env[name] = value
  }
  return env
}

const run = async (
  block: Block,
  mode: "run" | "service" | "against",
  env: Record<string, string>,
  against?: number
) => {
  let code = block.code
  // Ports as written become free ones (8080 the running service's, for `against`); `npm start` with no
  // PORT gets the one for 8080.
  const ports = new Map<string, number>(against === undefined ? [] : [["8080", against]])
  for (const [port] of code.matchAll(/\b(80[89]\d|9000)\b/g)) {
    if (!ports.has(port)) ports.set(port, await freePort())
  }
  if (!ports.has("8080")) ports.set("8080", await freePort())
  code = code.replace(/\b(80[89]\d|9000)\b/g, (port) => String(ports.get(port)))
  if (process.env.REDIS_URL !== undefined) {
    code = code.replace(/redis:\/\/127\.0\.0\.1:6379/g, process.env.REDIS_URL)
    code = code.replace(/REDIS_PREFIX=([A-Za-z0-9_-]+:)/g, `REDIS_PREFIX=docs-${randomUUID()}-$1`)
  }
  // `npm start &` is backgrounded by the preamble's npm, which returns once the service listens.
  code = code.replace(/(npm start.*?)\s+&\s*$/gm, "$1")
  const starts = (block.code.match(/npm start/g) ?? []).length
  const child = spawn("bash", ["-c", PRELUDE + code + "\n"], {
    cwd: root,
    env: { ...baseEnv(), PORT: String(ports.get("8080")), ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
    timeout: 90_000,
    killSignal: "SIGKILL"
  })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  const code_ = await new Promise<number | null>((resolve) => child.on("close", resolve))
  try {
    process.kill(-child.pid!, "SIGKILL") // anything the block left behind
  } catch {
    // the group is gone
  }
  const label = `${block.document}, the block at line ${block.line}`
  assert.strictEqual(code_, 0, `${label} exited with ${code_}:\n${stdout}\n${stderr}`)
  if (mode === "service") {
    const started = (stdout.match(/@@SERVICE /g) ?? []).length
    assert.strictEqual(started, starts, `${label}: services that came up\n${stdout}`)
  }
  const answers = stdout.split(/\n@@CURL 0@@\n/).slice(0, -1).map((a) => a.replace(/^[\s\S]*@@SERVICE [^@]*@@\n/, ""))
  const expected = curls(block.code)
  assert.strictEqual(answers.length, expected.length, `${label}: curl answers\n${stdout}`)
  expected.forEach(({ command, output }, i) => {
    if (output !== undefined) compare(output, answers[i].trim(), `${label}, ${command.trim()}`)
  })
}

// `npm start` in its own process group, resolved once it listens: the service that a document's
// `against` blocks are run against, in the page's order, as a reader would.
const startService = async (env: Record<string, string>) => {
  const port = await freePort()
  const child = spawn("npm", ["start"], {
    cwd: root,
    env: { ...baseEnv(), ...env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true
  })
  let output = ""
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      if (output.includes("Listening on")) resolve()
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    child.on("close", (code) => reject(new Error(`npm start exited with ${code}:\n${output}`)))
  })
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve()
      child.removeAllListeners("close")
      child.on("close", () => resolve())
      process.kill(-child.pid!, "SIGTERM")
    })
  return { port, stop }
}

const parse = (block: Block) => {
  const check = block.check ?? "missing"
  const skip = /^skip: (.+)$/.exec(check)
  const [mode, ...rest] = check.split(/\s+/)
  const env = Object.fromEntries(
    rest.filter((word) => word.includes("=")).map((
      word
    ) => [word.slice(0, word.indexOf("=")), word.slice(word.indexOf("=") + 1)])
  )
  return { check, skip: skip?.[1], mode, redis: rest.includes("redis"), env }
}

const titleOf = (block: Block) => `${block.document}:${block.line}: ${block.code.split("\n")[0].slice(0, 70)}`

describe("the commands in README.md and docs/*.md", () => {
  it("every sh block says how it is checked", () => {
    const unmarked = blocks.filter((b) => b.check === undefined).map((b) => `${b.document}:${b.line}`)
    assert.deepStrictEqual(unmarked, [], "blocks without a <!-- check: ... --> line above them")
    const unknown = blocks.filter((b) => {
      const { mode, skip } = parse(b)
      return b.check !== undefined && skip === undefined && !["run", "service", "against"].includes(mode)
    })
    assert.deepStrictEqual(unknown.map((b) => `${b.document}:${b.line}: ${b.check}`), [], "unknown checks")
    assert.isAbove(blocks.length, 10)
  })

  for (const block of blocks) {
    const { mode, redis, skip, env } = parse(block)
    if (skip !== undefined) {
      it.skip(`${block.document}:${block.line}: skipped: ${skip}`, () => {})
      continue
    }
    if (mode !== "run" && mode !== "service") continue
    const test = () => run(block, mode, env)
    if (redis) it.skipIf(process.env.REDIS_URL === undefined)(`${titleOf(block)} (needs REDIS_URL)`, test, 120_000)
    else it(titleOf(block), test, 120_000)
  }

  // The `against` blocks of a page, by the service they need, in the page's order.
  const groups = new Map<string, Array<Block>>()
  for (const block of blocks) {
    const { check, mode } = parse(block)
    if (mode !== "against") continue
    const key = `${block.document} ${check}`
    groups.set(key, [...(groups.get(key) ?? []), block])
  }
  for (const [key, group] of groups) {
    const { env, redis } = parse(group[0])
    describe.skipIf(redis && process.env.REDIS_URL === undefined)(`against npm start: ${key}`, () => {
      let service: { readonly port: number; readonly stop: () => Promise<void> } | undefined
      beforeAll(async () => {
        service = await startService(env)
      }, 120_000)
      afterAll(() => service?.stop())
      for (const block of group) it(titleOf(block), () => run(block, "against", env, service!.port), 120_000)
    })
  }
})

describe("the example configuration", () => {
  it("the README shows tollgate.json as the repository has it", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8")
    const at = readme.indexOf("`tollgate.json` is the example configuration")
    const block = /```json\n([\s\S]*?)\n```/.exec(readme.slice(at))?.[1]
    assert.isDefined(block, "no json block after the README's tollgate.json paragraph")
    assert.deepStrictEqual(JSON.parse(block!), JSON.parse(readFileSync(join(root, "tollgate.json"), "utf8")))
  })
})
