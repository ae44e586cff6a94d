// The second half of `npm run docs`, after @effect/docgen has written the API
// reference to docs/api/ (docgen has already required `@since`, a description
// and an example on every public export, and type-checked every example).
//
// 1. Every public export has a `@category`: docgen files an export without one
//    under "utils", so no module page may have that group.
// 2. Source links point at the file: docgen writes `SRC/<file name>#L<n>`
//    (the srcLink of docgen.json); each becomes a path relative to the page.
// 3. docs/api/README.md lists the modules by entry point.
// 4. Every ```ts block in README.md and docs/*.md type-checks against src/, as
//    the JSDoc examples do, with the project's TypeScript (a block fenced
//    ```ts skip-type-checking is shown, not checked).
//
// Exits 1, naming what is wrong, when a check fails.
import { execFileSync } from "node:child_process"
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { dirname, join, relative, sep } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const api = join(root, "docs", "api")
const modules = join(api, "modules")
const problems = []

const walk = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? walk(path) : [path]
  })

// 1 and 2: the module pages.
const pages = walk(modules).filter((path) => path.endsWith(".ts.md"))
for (const page of pages) {
  let text = readFileSync(page, "utf8")
  const module = relative(modules, page).slice(0, -".md".length) // e.g. http/RateLimitMiddleware.ts
  if (/^- \[utils\]\(#utils\)$/m.test(text)) {
    const group = text.slice(text.indexOf("- [utils](#utils)")).split("\n").slice(1)
    const names = group.filter((line) => line.startsWith("  - ")).map((line) => line.replace(/^ {2}- \[(.*?)\].*$/, "$1"))
    problems.push(`src/${module}: no @category on ${names.join(", ")}`)
  }
  const source = relative(dirname(page), join(root, "src", module)).split(sep).join("/")
  text = text.replace(/\]\(SRC\/[^#)]+#L(\d+)\)/g, (_, line) => `](${source}#L${line})`)
  writeFileSync(page, text)
}

// 3: an index of the pages by entry point.
const entries = [
  ["tollgate", "", "the limiter, policies, decisions, errors, metrics, the Store seam"],
  ["tollgate/http", "http", "middleware and headers for effect/http apps"],
  ["tollgate/redis", "redis", "the Redis store"],
  ["tollgate/server", "server", "the stand-alone service as a library"],
  ["tollgate/envoy", "envoy", "Envoy's rate limit service (gRPC) and its YAML configuration"],
  ["tollgate/persistence", "persistence", "effect/persistence's RateLimiterStore backed by tollgate"],
  ["tollgate/cluster", "cluster", "the limiter on an Effect Cluster: one owner per key"]
]
const listed = (folder) =>
  pages
    .map((page) => relative(modules, page).split(sep).join("/"))
    .filter((path) => (folder === "" ? !path.includes("/") : path.startsWith(`${folder}/`)))
    .sort((a, b) => (a.endsWith("index.ts.md") ? -1 : b.endsWith("index.ts.md") ? 1 : a < b ? -1 : 1))
writeFileSync(
  join(api, "README.md"),
  [
    "# tollgate API reference",
    "",
    "Generated from the JSDoc in `src/` by `npm run docs` (@effect/docgen); every example on these pages",
    "type-checks. Each entry point's `index.ts` page lists what it exports.",
    "",
    ...entries.flatMap(([name, folder, what]) => [
      `## \`${name}\`: ${what}`,
      "",
      ...listed(folder).map((path) => `- [${path.replace(/\.md$/, "")}](modules/${path})`),
      ""
    ])
  ].join("\n")
)

// 4: the examples in README.md and docs/*.md.
const scratch = join(root, "node_modules", ".cache", "tollgate-doc-examples")
rmSync(scratch, { recursive: true, force: true })
mkdirSync(scratch, { recursive: true })
const documents = [join(root, "README.md"), ...readdirSync(join(root, "docs")).filter((name) => name.endsWith(".md")).map((name) => join(root, "docs", name))]
const files = []
for (const document of documents) {
  const lines = readFileSync(document, "utf8").split("\n")
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== "```ts") continue
    const start = i + 1
    let end = start
    while (end < lines.length && lines[end] !== "```") end++
    const name = `${relative(root, document).replace(/[^A-Za-z0-9]+/g, "-")}-L${start}.ts`
    writeFileSync(join(scratch, name), lines.slice(start, end).join("\n") + "\n")
    files.push(name)
    i = end
  }
}
const src = (path) => join(root, "src", path)
writeFileSync(
  join(scratch, "tsconfig.json"),
  JSON.stringify({
    compilerOptions: {
      noEmit: true,
      strict: true,
      exactOptionalPropertyTypes: true,
      skipLibCheck: true,
      module: "ESNext",
      moduleResolution: "Bundler",
      moduleDetection: "force",
      target: "ES2022",
      lib: ["ES2022"],
      types: ["node"],
      typeRoots: [join(root, "node_modules", "@types")],
      allowImportingTsExtensions: true,
      paths: {
        tollgate: [src("index.ts")],
        "tollgate/http": [src("http/index.ts")],
        "tollgate/redis": [src("redis/index.ts")],
        "tollgate/server": [src("server/index.ts")],
        "tollgate/envoy": [src("envoy/index.ts")],
        "tollgate/persistence": [src("persistence/index.ts")],
        "tollgate/cluster": [src("cluster/index.ts")]
      }
    },
    files
  })
)
try {
  execFileSync(join(root, "node_modules", ".bin", "tsc"), ["-p", join(scratch, "tsconfig.json")], {
    cwd: scratch,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"]
  })
} catch (error) {
  const output = `${error.stdout ?? ""}${error.stderr ?? ""}`
  const errors = output.split("\n").filter((line) => / error TS\d+/.test(line))
  // Name the document and line: README-md-L33.ts(4,7) -> README.md, block at line 33, line 4 of the block.
  problems.push(
    ...(errors.length > 0 ? errors : [output.trim() || String(error)]).map((line) =>
      `example in ${line.replace(/^(.*?)-md-L(\d+)\.ts\((\d+),(\d+)\)/, (_, doc, at, row) => `${doc.replace(/-/g, "/")}.md, the block at line ${at}, line ${row}`)}`
    )
  )
}
rmSync(scratch, { recursive: true, force: true })

if (problems.length > 0) {
  console.error(`docs: ${problems.length} problem(s)\n${problems.map((p) => `- ${p}`).join("\n")}`)
  process.exit(1)
}
console.log(`docs: ${pages.length} module pages, every export categorised; ${files.length} examples in README.md and docs/*.md type-check`)
