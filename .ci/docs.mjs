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
// 5. What docgen leaves out of a class goes into its page: the members of a
//    service's shape (`class X extends Context.Service<X, { ... }>()`: docgen
//    shows `declare class X` and nothing of what `yield* X` gives) and static
//    properties (`static readonly make = ...`: docgen shows static methods
//    only). Each needs a description and an example, as docgen requires of an
//    export, and its example type-checks with the others of step 4.
//
// Exits 1, naming what is wrong, when a check fails.
import { execFileSync } from "node:child_process"
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { dirname, join, relative, sep } from "node:path"
import { fileURLToPath } from "node:url"
import { Node, Project, SyntaxKind } from "ts-morph"

const root = fileURLToPath(new URL("..", import.meta.url))
const api = join(root, "docs", "api")
const modules = join(api, "modules")
const problems = []

const walk = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? walk(path) : [path]
  })

// 5 (read here, rendered into the pages below): a class's members that docgen leaves out.
const project = new Project({ skipAddingFilesFromTsConfig: true })
const apiExamples = [] // { module, member, code }, type-checked in step 4

// A member's text without the indentation it has in its class (its first line has none).
const dedent = (text, indentation) =>
  text.split("\n").map((line) => (line.startsWith(indentation) ? line.slice(indentation.length) : line)).join("\n")

const indentationOf = (node) => " ".repeat(node.getStart() - node.getStartLinePos())

// The members of an exported class that docgen does not show: its static properties, and the
// members of the service's shape when it extends Context.Service<Self, { ... }>().
const hiddenMembers = (cls) => {
  const members = []
  for (const property of cls.getStaticProperties()) {
    if (property.hasModifier(SyntaxKind.PrivateKeyword)) continue
    const typeNode = Node.isPropertyDeclaration(property) ? property.getTypeNode() : undefined
    const type = typeNode?.getText() ?? property.getType().getText(property)
    members.push({
      node: property,
      kind: "static",
      signature: dedent(`static readonly ${property.getName()}: ${type}`, indentationOf(property))
    })
  }
  const heritage = cls.getExtends()?.getExpression()
  const service = heritage?.getDescendantsOfKind(SyntaxKind.CallExpression)
    .find((call) => call.getExpression().getText() === "Context.Service")
  const shape = service?.getTypeArguments()[1]
  if (shape !== undefined && Node.isTypeLiteral(shape)) {
    for (const member of shape.getMembers()) {
      const signature = dedent(member.getText(false).replace(/;$/, ""), indentationOf(member))
      members.push({ node: member, kind: "service", signature })
    }
  }
  return members
}

const slug = (heading) => heading.toLowerCase().replace(/[^a-z0-9 -]/g, "").replace(/ /g, "-")

// The section of a class's hidden members, and its entries for the page's table of contents.
const renderHidden = (module, cls, source) => {
  const className = cls.getName()
  const sections = []
  const toc = []
  for (const { node, kind, signature } of hiddenMembers(cls)) {
    const name = node.getName()
    const jsdoc = node.getJsDocs().at(-1)
    const description = jsdoc?.getDescription().trim() ?? ""
    const tags = jsdoc?.getTags() ?? []
    const tag = (tagName) => tags.find((t) => t.getTagName() === tagName)?.getCommentText()?.trim()
    if (tags.some((t) => t.getTagName() === "internal")) continue
    const label = kind === "static" ? `${className}.${name}` : `${className}'s ${name}`
    if (description === "") problems.push(`src/${module}: ${label} has no description`)
    const example = tag("example")
    const code = example === undefined ? undefined : /```ts\n([\s\S]*?)\n```/.exec(example)?.[1]
    if (code === undefined) problems.push(`src/${module}: ${label} has no example`)
    else apiExamples.push({ module, member: label, code })
    const since = tag("since") ?? cls.getJsDocs().at(-1)?.getTags().find((t) => t.getTagName() === "since")?.getCommentText()?.trim()
    const heading = kind === "static" ? `${className}.${name} (static)` : `${name} (${className} service)`
    toc.push(`    - [${heading}](#${slug(heading)})`)
    sections.push(
      [
        `### ${heading}`,
        "",
        description,
        ...(code === undefined ? [] : ["", "**Example**", "", "```ts", code, "```"]),
        "",
        "**Signature**",
        "",
        "```ts",
        signature,
        "```",
        "",
        `[Source](${source}#L${node.getStartLineNumber()})`,
        ...(since === undefined ? [] : ["", `Since v${since}`])
      ].join("\n")
    )
  }
  return { sections, toc }
}

// 1 and 2: the module pages (and 5).
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
  // 5: each exported class's hidden members, after the class's own section (which ends with
  // its "Since" line) and under its entry in the table of contents.
  const sourceFile = project.addSourceFileAtPath(join(root, "src", module))
  for (const cls of sourceFile.getClasses().filter((c) => c.isExported())) {
    const { sections, toc } = renderHidden(module, cls, source)
    if (sections.length === 0) continue
    const heading = `## ${cls.getName()} (class)`
    const at = text.indexOf(`\n${heading}\n`)
    if (at < 0) {
      problems.push(`src/${module}: ${cls.getName()} is not on its page`)
      continue
    }
    const since = text.indexOf("\nSince v", at)
    const end = since < 0 ? text.length : text.indexOf("\n", since + 1)
    text = text.slice(0, end) + "\n\n" + sections.join("\n\n") + text.slice(end)
    const entry = `  - [${cls.getName()} (class)](#${slug(`${cls.getName()} (class)`)})`
    text = text.replace(`${entry}\n`, `${entry}\n${toc.join("\n")}\n`)
  }
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
const apiFiles = new Map() // file name -> the member it shows
apiExamples.forEach(({ code, member, module }, i) => {
  const name = `api-${i}.ts`
  writeFileSync(join(scratch, name), code + "\n")
  files.push(name)
  apiFiles.set(name, `src/${module}: the example of ${member}`)
})
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
      `example in ${
        line
          .replace(/^(api-\d+\.ts)\((\d+),(\d+)\)/, (_, file, row) => `${apiFiles.get(file)}, line ${row}`)
          .replace(/^(.*?)-md-L(\d+)\.ts\((\d+),(\d+)\)/, (_, doc, at, row) => `${doc.replace(/-/g, "/")}.md, the block at line ${at}, line ${row}`)
      }`
    )
  )
}
rmSync(scratch, { recursive: true, force: true })

if (problems.length > 0) {
  console.error(`docs: ${problems.length} problem(s)\n${problems.map((p) => `- ${p}`).join("\n")}`)
  process.exit(1)
}
console.log(
  `docs: ${pages.length} module pages, every export categorised; ${apiExamples.length} members docgen leaves out ` +
    `(services' methods, static properties) added with their examples; ${files.length - apiExamples.length} examples ` +
    "in README.md and docs/*.md; every example type-checks"
)
