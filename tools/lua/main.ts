/**
 * `npm run lua`: compiles the algorithms to Lua and writes
 * `src/redis/internal/generated.ts` (not committed: `npm run build` puts
 * it in `dist/` with the rest). Writes nothing when the file is already
 * what the inputs make (its `inputHash`), so running it is cheap; `--force`
 * writes anyway. Exits 1, naming each refusal, when the algorithms are not
 * in the subset that runs in Redis.
 *
 * @since 0.2.0
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join, relative } from "node:path"
import type * as Compile from "./compile.ts"
import { hashInputs, root } from "./inputs.ts"

/** Where the generated module goes. */
export const target = join(root, "src", "redis", "internal", "generated.ts")

/** The text of the generated module. */
export const render = (output: Compile.Output): string => {
  const modules = output.modules.map((m) =>
    `  ${m.name}: {\n    name: ${JSON.stringify(m.name)},\n    path: ${JSON.stringify(m.path)},\n    lua: ${
      JSON.stringify(m.lua)
    },\n    lean: ${JSON.stringify(m.lean)},\n` +
    `    config: ${JSON.stringify(m.config)},\n    state: ${JSON.stringify(m.state)}\n  }`
  )
  return `/**
 * Made by \`npm run lua\` (tools/lua) from src/internal/algorithm: do not edit.
 *
 * @since 0.2.0
 */

/**
 * A stored field: a number, a boolean (0 or 1), or numbers (a count, then each).
 *
 * @since 0.2.0
 */
export interface Field {
  readonly name: string
  readonly kind: "number" | "boolean" | "numbers"
}

/**
 * One module compiled to Lua: a chunk that sets \`loaders[path]\` to the
 * function that makes its exports (\`lean\`: an algorithm's, for the lean
 * entry point, under \`"lean:" + path\`), and an algorithm's \`Config\` and
 * \`State\` fields in declaration order.
 *
 * @since 0.2.0
 */
export interface Compiled {
  readonly name: string
  /** Its name for \`require\` (its path from the root, with dots). */
  readonly path: string
  readonly lua: string
  /** The chunk for the lean entry point: the objects of \`step\` are tables made once, filled on each call. */
  readonly lean: string
  readonly config: ReadonlyArray<Field>
  readonly state: ReadonlyArray<Field>
}

/**
 * The SHA1 of what the modules were compiled from.
 *
 * @since 0.2.0
 */
export const inputHash = ${JSON.stringify(output.inputHash)}

/**
 * What the compiled code calls by name (\`jmax\`, \`jmin\`, \`floor\`, …, and
 * \`require\`): it comes before the chunks; \`bindRuntime()\` on the first call.
 *
 * @since 0.3.0
 */
export const runtime = ${JSON.stringify(output.runtime)}

/**
 * The compiled modules.
 *
 * @since 0.2.0
 */
export const modules = {
${modules.join(",\n")}
} as const satisfies Record<string, Compiled>
`
}

const current = (file: string): string | undefined => {
  if (!existsSync(file)) return undefined
  return /export const inputHash = "([0-9a-f]+)"/.exec(readFileSync(file, "utf8"))?.[1]
}

/**
 * Writes the generated module to `file` unless it is current (or `force`);
 * the compiler is loaded only when it must run. Throws `Compile.Refused`.
 */
export const generate = async (file = target, force = false): Promise<"current" | "written"> => {
  if (!force && current(file) === hashInputs()) return "current"
  const Compile = await import("./compile.ts")
  writeFileSync(file, render(Compile.compile()))
  return "written"
}

const main = async () => {
  const out = process.argv.indexOf("--out")
  const file = out >= 0 ? process.argv[out + 1] : target
  try {
    const done = await generate(file, process.argv.includes("--force"))
    if (done === "written") process.stdout.write(`${relative(root, file)}: the algorithms compiled to Lua\n`)
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`)
    process.exit(1)
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main()
