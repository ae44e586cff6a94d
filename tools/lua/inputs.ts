/**
 * What the Lua is compiled from, and its hash: the algorithm modules, the
 * compiler's own files and its pinned versions. Cheap (no compiler is
 * loaded), so a build or a test run can tell at once whether the generated
 * module is current.
 *
 * @since 0.2.0
 */
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

/** The repository's root. */
export const root = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..")

/**
 * The algorithms whose states Redis stores as numbers: each has a `Config`
 * and a `State` of numbers, booleans and lists of numbers, and a lean entry
 * point.
 */
export const algorithms: ReadonlyArray<string> = [
  "TokenBucket",
  "Gcra",
  "FixedWindow",
  "SlidingWindow",
  "SlidingLog",
  "Concurrency",
  "WarmUp",
  "Adaptive"
].map((name) => join(root, "src", "internal", "algorithm", `${name}.ts`))

/** Every module compiled to Lua: the algorithms, the policies made of others, and the interpreter of operations. */
export const sources: ReadonlyArray<string> = [
  ...algorithms,
  ...["Algorithm", "Block", "Composite", "Burst", "Unlimited"].map((name) =>
    join(root, "src", "internal", "algorithm", `${name}.ts`)
  ),
  ...["Op", "Interpreter"].map((name) => join(root, "src", "internal", "operation", `${name}.ts`))
]

// The compiler's own files (a change to one changes what it makes), and the
// installed compilers (their versions).
const own = ["compile.ts", "subset.ts", "inputs.ts", "main.ts", "package.json"].map((f) =>
  join(root, "tools", "lua", f)
)
const installed = ["typescript", "typescript-to-lua"].map((p) =>
  join(root, "tools", "lua", "node_modules", p, "package.json")
)

/** The SHA1 of the inputs: the sources (the contract among them), the compiler and the compilers' versions. */
export const hashInputs = (files: ReadonlyArray<string> = sources): string => {
  const hash = createHash("sha1")
  for (const file of [...new Set([...files, join(root, "src", "internal", "algorithm", "Algorithm.ts")]), ...own]) {
    hash.update(relative(root, file)).update("\0").update(readFileSync(file)).update("\0")
  }
  for (const file of installed) {
    const version = (JSON.parse(readFileSync(file, "utf8")) as { version?: string }).version ?? ""
    hash.update(version).update("\0")
  }
  return hash.digest("hex")
}
