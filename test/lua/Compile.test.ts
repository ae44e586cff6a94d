/**
 * The compiler of the Redis scripts (tools/lua): it refuses what would not
 * run the same in Redis, naming the construct and its line, and what it
 * makes is reproducible (the same text, so the same SHA1s, every time).
 */
import { assert, describe, it } from "@effect/vitest"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Compile from "../../tools/lua/compile.ts"
import * as Inputs from "../../tools/lua/inputs.ts"
import * as Main from "../../tools/lua/main.ts"

const header = `
export interface Config { readonly n: number }
export interface State { readonly n: number }
`

// The problems the compiler names for one module's text.
const refusals = (text: string): ReadonlyArray<string> => {
  const dir = mkdtempSync(join(tmpdir(), "tollgate-lua-"))
  try {
    const file = join(dir, "Module.ts")
    writeFileSync(file, header + text)
    try {
      Compile.compile([file])
    } catch (e) {
      if (e instanceof Compile.Refused) return e.problems
      throw e
    }
    return []
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const refused = (text: string, needle: string) => {
  const problems = refusals(text)
  assert.isTrue(
    problems.some((p) => p.includes(needle)),
    `expected a refusal naming ${JSON.stringify(needle)}, got:\n${problems.join("\n")}`
  )
  // the line of the construct: the header is 3 lines, the text starts on line 4
  assert.isTrue(problems.every((p) => /Module\.ts:\d+: /.test(p)), problems.join("\n"))
}

describe("the subset compiled to Lua", () => {
  it("accepts plain arithmetic over numbers and objects", () => {
    assert.deepStrictEqual(
      refusals(`export const f = (c: Config, s: State): State => ({ n: Math.max(c.n, s.n) % 3 })`),
      []
    )
  })
  it("refuses chance", () => refused(`export const f = (): number => Math.random()`, "Math.random"))
  it("refuses the clock", () => refused(`export const f = (): number => Date.now()`, "`Date`"))
  it("refuses timers", () => refused(`export const f = (): void => { setTimeout(() => {}, 1) }`, "`setTimeout`"))
  it("refuses a number as a condition (0 is true in Lua)", () =>
    refused(`export const f = (n: number): number => n ? 1 : 2`, "true in Lua"))
  it("refuses a number in ||", () => refused(`export const f = (n: number): number => n || 2`, "a `||`"))
  it("refuses a string as a condition", () =>
    refused(`export const f = (s: string): number => { if (s) return 1; return 2 }`, "an `if`"))
  it("refuses == (coercions)", () => refused(`export const f = (n: number): boolean => n == 1`, "`==`"))
  it("refuses bitwise operators (Lua 5.1 has none)", () =>
    refused(`export const f = (n: number): number => n >>> 1`, "bitwise"))
  it("refuses numbers made into text (14 digits in Lua)", () => {
    refused("export const f = (n: number): string => `${n}`", "a template")
    refused(`export const f = (n: number): string => "n=" + n`, "text made with `+`")
    refused(`export const f = (n: number): string => n.toString()`, "`.toString`")
    refused(`export const f = (n: number): string => String(n)`, "`String`")
  })
  it("refuses JavaScript's own classes (Map, Set, Array…)", () => {
    refused(`export const f = (): Array<number> => new Array<number>(3)`, "`Array`")
    refused(`export const f = (): number => new Map<number, number>().size`, "`Map`")
  })
  it("refuses a value import of anything not compiled with it (Effect, or any module)", () =>
    refused(`import { Effect } from "effect"\nexport const f = () => Effect.void`, "a value import"))
  it("refuses throw", () => refused(`export const f = (): number => { throw 1 }`, "`try`/`throw`"))
  it("refuses Math functions it does not map", () =>
    refused(`export const f = (n: number): number => Math.sqrt(n)`, "Math.sqrt"))
  it("refuses a stored field that is not a number, a boolean or numbers", () => {
    const dir = mkdtempSync(join(tmpdir(), "tollgate-lua-"))
    try {
      const file = join(dir, "Texty.ts")
      writeFileSync(
        file,
        `export interface Config { readonly n: number }\nexport interface State { readonly s: string }\n`
      )
      assert.throws(() => Compile.compile([file]), /State\.s is a string/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe("a helper imported from another compiled module", () => {
  // Two modules: a helper and an algorithm that imports it. An algorithm's
  // lean chunk is loaded alone in Redis, so the helper must be inlined.
  const withHelper = <A>(use: string, f: (files: ReadonlyArray<string>) => A): A => {
    const dir = mkdtempSync(join(tmpdir(), "tollgate-lua-"))
    try {
      const helper = join(dir, "Helper.ts")
      writeFileSync(helper, `${header}export const twice = (n: number): number => n + n\n`)
      const file = join(dir, "Module.ts")
      writeFileSync(file, `import { twice } from "./Helper.ts"\n${header}${use}\n`)
      return f([helper, file])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }

  it("is inlined at its call, and its module is not required", () =>
    withHelper(`export const f = (c: Config): State => ({ n: twice(c.n) })`, (files) => {
      const module = Compile.compile(files).modules.find((m) => m.name === "Module")!
      for (const chunk of [module.lua, module.lean]) {
        assert.notInclude(chunk, "require(")
        assert.include(chunk, "c.n + c.n")
      }
    }))

  it("refuses a call it cannot inline, naming the helper and the line", () =>
    withHelper(`export const f = (c: Config): State => ({ n: twice(c.n + 1) })`, (files) => {
      assert.throws(() => Compile.compile(files), /Module\.ts:5: `twice` is imported and cannot be inlined/)
    }))
})

describe("the generated scripts", () => {
  it("are the same text every time they are made (so the same SHA1s)", () => {
    const first = Main.render(Compile.compile())
    const second = Main.render(Compile.compile())
    assert.strictEqual(first, second)
  })
  it("are current: src/redis/internal/generated.ts was made from the algorithms as they are", () => {
    // (vitest's global setup makes it before the tests run; npm run build too)
    const text = readFileSync(Main.target, "utf8")
    assert.include(text, `export const inputHash = "${Inputs.hashInputs()}"`)
    assert.strictEqual(text, Main.render(Compile.compile()))
  })
})
