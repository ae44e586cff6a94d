/**
 * docs/overview.svg is drawn from the code's structure: every file or folder
 * it names (`src/...`, `tools/...`) exists, and every entry point's folder is
 * in it, so the picture cannot drift from the tree unnoticed.
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))
const svg = readFileSync(join(root, "docs", "overview.svg"), "utf8")
const named = [...svg.matchAll(/>((?:src|tools)\/[^<\s]*)</g)].map((m) => m[1])

describe("docs/overview.svg", () => {
  it("names paths, and each one exists", () => {
    assert.isAbove(named.length, 10)
    const missing = named.filter((path) => !existsSync(join(root, path)))
    assert.deepStrictEqual(missing, [])
  })

  it("shows every entry point's folder and every folder of the core", () => {
    const folders = readdirSync(join(root, "src")).filter((f) =>
      statSync(join(root, "src", f)).isDirectory() && f !== "internal" && f !== "demo"
    )
    const core = readdirSync(join(root, "src", "internal")).filter((f) =>
      statSync(join(root, "src", "internal", f)).isDirectory()
    ).map((f) => `internal/${f}`)
    const shown = (folder: string) => named.some((path) => path.startsWith(`src/${folder}/`))
    assert.deepStrictEqual([...folders, ...core].filter((f) => !shown(f)), [])
  })
})
