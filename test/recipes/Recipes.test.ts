/**
 * docs/recipes.md runs: each ```ts block on the page, as written there, is
 * a module whose `program` this test runs under TestClock (time moves only
 * when the program waits), and its result is the one the page states.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))
const scratch = join(root, "node_modules", ".cache", "tollgate-recipes")

// The page's blocks by the heading above them, the package's entry points
// pointed at src/ (as the docs' type-check does).
const blocks = (() => {
  const lines = readFileSync(join(root, "docs", "recipes.md"), "utf8").split("\n")
  const found = new Map<string, string>()
  let heading = ""
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].startsWith("## ")) heading = lines[i].slice(3)
    if (lines[i] !== "```ts") continue
    let end = i + 1
    while (end < lines.length && lines[end] !== "```") end++
    found.set(
      heading,
      lines.slice(i + 1, end).join("\n").replace(
        /from "tollgate(\/[a-z]+)?"/g,
        (_, entry: string | undefined) =>
          `from ${JSON.stringify(join(root, "src", entry === undefined ? "index.ts" : `${entry.slice(1)}/index.ts`))}`
      )
    )
    i = end
  }
  return found
})()

const load = (heading: string) =>
  Effect.promise(async () => {
    const code = blocks.get(heading)
    if (code === undefined) throw new Error(`docs/recipes.md has no block under "## ${heading}"`)
    mkdirSync(scratch, { recursive: true })
    const file = join(scratch, `${heading.replace(/[^A-Za-z0-9]+/g, "-")}.ts`)
    writeFileSync(file, code + "\n")
    const module: { readonly program: Effect.Effect<unknown, unknown> } = await import(pathToFileURL(file).href)
    return module.program
  })

// Runs the program, moving the virtual clock whenever it waits: by 1 ms for
// its first 10 seconds (the figures the page quotes are exact to the ms),
// then by 10 ms (a recipe that sleeps for minutes).
const run = (heading: string) =>
  Effect.gen(function*() {
    const program = yield* load(heading)
    const fiber = yield* Effect.forkChild(program)
    for (let i = 0; i < 1_000_000 && fiber.pollUnsafe() === undefined; i++) {
      yield* Effect.yieldNow
      if (fiber.pollUnsafe() === undefined) yield* TestClock.adjust(i < 10_000 ? 1 : 10)
    }
    return yield* Fiber.join(fiber)
  })

describe("docs/recipes.md", () => {
  it.effect("API keys with tiers", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* run("API keys with tiers"), {
        served: { alice: 60, bob: 10 },
        bobRetryAfterMillis: 6000
      })
    }))

  it.effect("Login brute-force protection", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* run("Login brute-force protection"), [
        ...Array.from({ length: 5 }, () => "wrong password"),
        "locked for 900 s",
        "locked for 900 s",
        "welcome"
      ])
    }))

  it.effect("Per-user, per-org and global limits", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* run("Per-user, per-org and global limits"), {
        log: [
          ...Array.from({ length: 5 }, () => "ann: ok"),
          "ann: denied by user:ann",
          "ben: ok",
          "ben: ok",
          "ben: ok",
          "ben: denied by org:acme"
        ],
        globalRemaining: 992
      })
    }))

  it.effect("One upstream budget, shared fairly between tenants", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* run("One upstream budget, shared fairly between tenants"), {
        small: 25,
        medium: 25,
        large: 50
      })
    }))

  it.effect("A client that respects a 429", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* run("A client that respects a 429"), [
        "0 ms: 200",
        "200 ms: 200",
        "367 ms: 200",
        "510 ms: 429",
        "2510 ms: 200",
        "2733 ms: 200"
      ])
    }))

  it("every block is tested", () => {
    assert.strictEqual(blocks.size, 5)
    rmSync(scratch, { recursive: true, force: true })
  })
})
