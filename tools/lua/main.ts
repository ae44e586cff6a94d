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
import * as Compile from "./compile.ts"

/** Where the generated module goes. */
export const target = join(Compile.root, "src", "redis", "internal", "generated.ts")

/** The text of the generated module. */
export const render = (output: Compile.Output): string => {
  const modules = output.modules.map((m) =>
    `  ${m.name}: {\n    name: ${JSON.stringify(m.name)},\n    lua: ${JSON.stringify(m.lua)},\n` +
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
 * One algorithm module compiled to Lua: a chunk that sets the local \`name\`
 * to its exports, and its \`Config\` and \`State\` fields in declaration order.
 *
 * @since 0.2.0
 */
export interface Compiled {
  readonly name: string
  readonly lua: string
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
 * The compiled modules.
 *
 * @since 0.2.0
 */
export const modules = {
${modules.join(",\n")}
} as const satisfies Record<string, Compiled>
`
}

const current = (): string | undefined => {
  if (!existsSync(target)) return undefined
  return /export const inputHash = "([0-9a-f]+)"/.exec(readFileSync(target, "utf8"))?.[1]
}

const main = () => {
  const force = process.argv.includes("--force")
  if (!force && current() === Compile.hashInputs()) return
  let output: Compile.Output
  try {
    output = Compile.compile()
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`)
    process.exit(1)
  }
  writeFileSync(target, render(output))
  process.stdout.write(`${relative(Compile.root, target)}: ${output.modules.length} modules compiled to Lua\n`)
}

if (import.meta.url === `file://${process.argv[1]}`) main()
