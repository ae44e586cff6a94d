/**
 * Compiles the algorithms of `src/internal/algorithm/` to the Lua 5.1 that
 * Redis runs, with TypeScriptToLua over the TypeScript 6 API (the project
 * type-checks with TypeScript 7, which has no such API).
 *
 * JavaScript and Lua differ where it matters here; the differences are
 * settled in the compiler, never in its output:
 *
 * - `Math.max`/`Math.min`: Lua's keep the first of two equal numbers, so
 *   `math.max(-0, 0)` is -0 where JavaScript says 0. They become `jmax` and
 *   `jmin`, which tell the zeros apart, unless an argument is a literal that
 *   makes a tie of zeros impossible (`Math.max(0, x)`, `Math.min(x, 1)`).
 * - `%`: Lua's floors (`-1 % 3` is 2), JavaScript's truncates (-1): it
 *   becomes `fmod`, which is C's `fmod`, exactly JavaScript's remainder.
 * - `Math.floor`, `Math.ceil` and `Infinity` become locals bound once
 *   (`floor`, `ceil`, `huge`): a global lookup per use costs, and a Redis
 *   Functions library is loaded with no globals at all.
 * - Numbers are never made into text in the compiled code (the subset
 *   refuses it): the replies are formatted by the entry points with
 *   `%.17g`, which round-trips every double (Lua's `tostring` keeps 14
 *   digits).
 *
 * Each module becomes a chunk that sets a local named after it (its
 * exports), run once when the library loads (or at the start of an `EVAL`).
 *
 * @since 0.2.0
 */
import { basename, join, relative } from "node:path"
import ts from "typescript"
import * as tstl from "typescript-to-lua"
import * as Subset from "./subset.ts"

import { hashInputs, root, sources } from "./inputs.ts"

export { hashInputs, root, sources }

/** A field of a configuration or a state: a number, a boolean (0 or 1), or numbers (a count, then each). */
export interface Field {
  readonly name: string
  readonly kind: "number" | "boolean" | "numbers"
}

/** One compiled module. */
export interface Module {
  /** The module's name (its file's), the Lua local its exports are in. */
  readonly name: string
  /** The chunk: sets the local `name`. */
  readonly lua: string
  /**
   * The chunk for the lean entry point: `step`'s objects are tables made
   * once (see the plugin), so the step allocates none of its own.
   */
  readonly lean: string
  /** Its `Config` interface's fields, in declaration order. */
  readonly config: ReadonlyArray<Field>
  /** Its `State` interface's fields, in declaration order. */
  readonly state: ReadonlyArray<Field>
}

/** What the compiler makes. */
export interface Output {
  readonly modules: ReadonlyArray<Module>
  /** The SHA1 of every input (the sources and the compiler's own files). */
  readonly inputHash: string
}

/** The compiler's options: TypeScript's for the algorithms, and TypeScriptToLua's. */
export const options: tstl.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  strict: true,
  exactOptionalPropertyTypes: true,
  allowImportingTsExtensions: true,
  rewriteRelativeImportExtensions: true,
  skipLibCheck: true,
  removeComments: true,
  types: [],
  lib: ["lib.es2022.d.ts"],
  luaTarget: tstl.LuaTarget.Lua51,
  luaLibImport: tstl.LuaLibImportKind.Inline,
  noImplicitSelf: true,
  noImplicitGlobalVariables: true,
  noHeader: true,
  sourceMap: false
}

/** A compilation refused: the subset's refusals, or the compilers' diagnostics. */
export class Refused extends Error {
  readonly problems: ReadonlyArray<string>
  constructor(problems: ReadonlyArray<string>) {
    super(`cannot compile to Lua for Redis:\n${problems.map((p) => `  ${p}`).join("\n")}`)
    this.problems = problems
  }
}

const describe = (d: ts.Diagnostic): string => {
  const message = ts.flattenDiagnosticMessageText(d.messageText, "\n")
  if (d.file === undefined || d.start === undefined) return message
  const { line } = d.file.getLineAndCharacterOfPosition(d.start)
  return `${relative(root, d.file.fileName)}:${line + 1}: ${message}`
}

// Math.max/min with JavaScript's zeros: a literal other than 0 among the
// arguments cannot tie with a zero, and Math.max(+0, x) keeps +0 on a tie
// as Lua's does.
const tieFree = (name: string, args: ReadonlyArray<ts.Expression>): boolean =>
  args.some((a) => ts.isNumericLiteral(a) && Number(a.text) !== 0) ||
  (name === "max" && args.length > 0 && ts.isNumericLiteral(args[0]) && Number(args[0].text) === 0)

// The object literals of a module's `step` (not in a loop, not in a
// function within it): what the lean entry point's step allocates.
const inStep = (node: ts.Node): boolean => {
  for (let at: ts.Node | undefined = node.parent; at !== undefined; at = at.parent) {
    if (ts.isIterationStatement(at, false)) return false
    if (ts.isFunctionLike(at)) {
      const declared = at.parent
      return ts.isVariableDeclaration(declared) && ts.isIdentifier(declared.name) && declared.name.text === "step" &&
        ts.isVariableStatement(declared.parent.parent) && declared.parent.parent.parent === node.getSourceFile()
    }
  }
  return false
}

const reusable = (node: ts.ObjectLiteralExpression): boolean =>
  node.properties.every((p) =>
    (ts.isPropertyAssignment(p) && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name))) ||
    ts.isShorthandPropertyAssignment(p)
  )

/**
 * The plugin: JavaScript's semantics (above), and with `scratch` (the lean
 * build) the object literals of `step` filled into tables made once per
 * module (`scratch[file]` counts them) instead of made on each call. That is
 * sound where each step's outcome is consumed before the next step runs and
 * no object of it is kept: the lean entry point, which reads the outcome,
 * writes the state and answers one key before it steps the next.
 */
const plugin = (scratch: Map<string, number> | undefined): tstl.Plugin => ({
  visitors: {
    [ts.SyntaxKind.CallExpression]: (node, context) => {
      const callee = node.expression
      if (
        ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression) &&
        callee.expression.text === "Math"
      ) {
        const name = callee.name.text
        const args = node.arguments.map((a) => context.transformExpression(a))
        if (name === "floor" || name === "ceil") {
          return tstl.createCallExpression(tstl.createIdentifier(name), args, node)
        }
        if ((name === "max" || name === "min") && args.length >= 2) {
          if (tieFree(name, node.arguments)) {
            return tstl.createCallExpression(tstl.createIdentifier(name === "max" ? "mmax" : "mmin"), args, node)
          }
          const helper = tstl.createIdentifier(name === "max" ? "jmax" : "jmin")
          // pairwise from the right: max(a, b, c) = jmax(a, jmax(b, c))
          let out = args[args.length - 1]
          for (let i = args.length - 2; i >= 0; i--) out = tstl.createCallExpression(helper, [args[i], out])
          return out
        }
      }
      return context.superTransformExpression(node)
    },
    [ts.SyntaxKind.BinaryExpression]: (node, context) => {
      if (node.operatorToken.kind === ts.SyntaxKind.PercentToken) {
        return tstl.createCallExpression(
          tstl.createIdentifier("fmod"),
          [context.transformExpression(node.left), context.transformExpression(node.right)],
          node
        )
      }
      return context.superTransformExpression(node)
    },
    [ts.SyntaxKind.Identifier]: (node, context) => {
      if (
        node.text === "Infinity" &&
        context.checker.getSymbolAtLocation(node)?.declarations?.[0]?.getSourceFile().isDeclarationFile !== false
      ) {
        return tstl.createIdentifier("huge", node)
      }
      return context.superTransformExpression(node)
    },
    [ts.SyntaxKind.ObjectLiteralExpression]: (node, context) => {
      if (scratch === undefined || !inStep(node) || !reusable(node)) return context.superTransformExpression(node)
      const file = node.getSourceFile().fileName
      const n = (scratch.get(file) ?? 0) + 1
      scratch.set(file, n)
      const table = tstl.createIdentifier(`____scratch_${n}`)
      const keys: Array<tstl.AssignmentLeftHandSideExpression> = []
      const values: Array<tstl.Expression> = []
      for (const p of node.properties) {
        const name = ts.isShorthandPropertyAssignment(p) ? p.name.text : (p as ts.PropertyAssignment).name.getText()
        const key = name.replace(/^"|"$/g, "")
        keys.push(tstl.createTableIndexExpression(table, tstl.createStringLiteral(key)))
        values.push(
          ts.isShorthandPropertyAssignment(p)
            ? context.transformExpression(p.name)
            : context.transformExpression((p as ts.PropertyAssignment).initializer)
        )
      }
      // every value first, then the fields (one assignment): a value read
      // from the table itself sees the fields as they were
      context.addPrecedingStatements(tstl.createAssignmentStatement(keys, values, node))
      return table
    }
  }
})

// A field's kind from its type.
const kindOf = (checker: ts.TypeChecker, type: ts.Type): Field["kind"] | undefined => {
  if (type.flags & ts.TypeFlags.NumberLike) return "number"
  if (type.flags & ts.TypeFlags.BooleanLike) return "boolean"
  if (checker.isArrayType(type)) {
    const [element] = checker.getTypeArguments(type as ts.TypeReference)
    if (element !== undefined && element.flags & ts.TypeFlags.NumberLike) return "numbers"
  }
  return undefined
}

const fieldsOf = (
  checker: ts.TypeChecker,
  source: ts.SourceFile,
  name: string,
  problems: Array<string>
): ReadonlyArray<Field> => {
  const declaration = source.statements.find((s): s is ts.InterfaceDeclaration =>
    ts.isInterfaceDeclaration(s) && s.name.text === name
  )
  if (declaration === undefined) {
    problems.push(`${relative(root, source.fileName)}: no interface ${name}`)
    return []
  }
  const fields: Array<Field> = []
  for (const member of declaration.members) {
    if (!ts.isPropertySignature(member) || member.name === undefined) continue
    const type = checker.getTypeAtLocation(member)
    const kind = kindOf(checker, type)
    const field = member.name.getText(source)
    if (kind === undefined) {
      problems.push(
        `${relative(root, source.fileName)}: ${name}.${field} is a ${
          checker.typeToString(type)
        }: a stored field is a number, a boolean or numbers`
      )
    } else fields.push({ name: field, kind })
  }
  return fields
}

// The chunk of one module: its exports in a local named after it.
const chunk = (name: string, lua: string, scratch = 0): string => {
  const body = lua.trimEnd()
  const last = body.lastIndexOf("\nreturn ____exports")
  if (last < 0 || body.slice(last).trim() !== "return ____exports") {
    throw new Refused([`${name}: the compiled module does not end with its exports`])
  }
  const tables = Array.from({ length: scratch }, (_, i) => `____scratch_${i + 1}`)
  const declared = scratch === 0 ? "" : `local ${tables.join(", ")} = ${tables.map(() => "{}").join(", ")}\n`
  return `local ${name}\ndo\n${declared}${body.slice(0, last)}\n${name} = ____exports\nend\n`
}

// Every file's Lua, by the file's name, with the plugin in `scratch` mode or not.
const emit = (
  program: ts.Program,
  files: ReadonlyArray<string>,
  scratch: Map<string, number> | undefined,
  problems: Array<string>
): Map<string, string> => {
  const emitted = new Map<string, string>()
  const { diagnostics } = new tstl.Transpiler().emit({
    program,
    plugins: [plugin(scratch)],
    sourceFiles: files.map((f) => program.getSourceFile(f)!),
    writeFile: (fileName, text) => emitted.set(basename(fileName, ".lua"), text)
  })
  for (const d of diagnostics) problems.push(describe(d))
  return emitted
}

/**
 * Compiles `files` (default: {@link sources}); throws {@link Refused}.
 *
 * @since 0.2.0
 */
export const compile = (files: ReadonlyArray<string> = sources): Output => {
  // the contract is a root too: TypeScriptToLua reads its function types as
  // having no `self` only in the program's own files
  const contract = join(root, "src", "internal", "algorithm", "Algorithm.ts")
  const program = ts.createProgram({ rootNames: [...files, contract], options: options as ts.CompilerOptions })
  const problems: Array<string> = []
  for (const d of ts.getPreEmitDiagnostics(program)) problems.push(describe(d))
  for (const r of Subset.check(program, files)) problems.push(`${relative(root, r.file)}:${r.line}: ${r.message}`)
  if (problems.length > 0) throw new Refused(problems)
  const plain = emit(program, files, undefined, problems)
  const scratch = new Map<string, number>()
  const lean = emit(program, files, scratch, problems)
  const checker = program.getTypeChecker()
  const modules: Array<Module> = []
  for (const file of files) {
    const name = basename(file, ".ts")
    const lua = plain.get(name)
    const leanLua = lean.get(name)
    if (lua === undefined || leanLua === undefined) {
      problems.push(`${relative(root, file)}: no Lua was made`)
      continue
    }
    const source = program.getSourceFile(file)!
    modules.push({
      name,
      lua: chunk(name, lua),
      lean: chunk(name, leanLua, scratch.get(source.fileName) ?? 0),
      config: fieldsOf(checker, source, "Config", problems),
      state: fieldsOf(checker, source, "State", problems)
    })
  }
  if (problems.length > 0) throw new Refused(problems)
  return { modules, inputHash: hashInputs(files) }
}
