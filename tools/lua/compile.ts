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
import { basename, join, parse, relative, sep } from "node:path"
import ts from "typescript"
import * as tstl from "typescript-to-lua"
import * as Subset from "./subset.ts"

import { algorithms, hashInputs, root, sources } from "./inputs.ts"

export { algorithms, hashInputs, root, sources }

/** A field of a configuration or a state: a number, a boolean (0 or 1), or numbers (a count, then each). */
export interface Field {
  readonly name: string
  readonly kind: "number" | "boolean" | "numbers"
}

/** One compiled module. */
export interface Module {
  /** The module's name (its file's). */
  readonly name: string
  /** Its name for `require` (its path from the root, with dots). */
  readonly path: string
  /** The chunk: `loaders[path] = function() … return exports end`. */
  readonly lua: string
  /**
   * The chunk for the lean entry point, under `"lean:" + path`: `step`'s
   * objects are tables made once (see the plugin), so the step allocates
   * none of its own. Only an algorithm's.
   */
  readonly lean: string
  /** An algorithm's `Config` interface's fields, in declaration order (else none). */
  readonly config: ReadonlyArray<Field>
  /** An algorithm's `State` interface's fields, in declaration order (else none). */
  readonly state: ReadonlyArray<Field>
}

/** What the compiler makes. */
export interface Output {
  readonly modules: ReadonlyArray<Module>
  /** The compiled code's runtime (see {@link runtime}). */
  readonly runtime: string
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

/**
 * What the compiled code calls by name, in Lua: `floor`, `ceil`, `fmod`,
 * `huge`, `mmax`, `mmin` (bound by `bindRuntime()` on the first call),
 * `jmax` and `jmin` (JavaScript's `Math.max` and `Math.min`), and `require`
 * over the chunks' `loaders`. It comes before the chunks.
 */
export const runtime = `
-- The compiled code's runtime (tools/lua): what it calls by name. Bound
-- on the first call (bindRuntime): a Redis Functions library is loaded with
-- no globals but \`redis\`, and its functions run with all of them.
local floor, ceil, fmod, huge, mmax, mmin
local function bindRuntime()
  floor, ceil, fmod, huge, mmax, mmin = math.floor, math.ceil, math.fmod, math.huge, math.max, math.min
end

-- JavaScript's Math.max and Math.min of two numbers (never NaN here): Lua's
-- keep the first of two equal numbers, and -0 equals 0.
local function jmax(a, b)
  if a > b then return a end
  if b > a then return b end
  if a == 0 and 1 / a < 0 then return b end
  return a
end
local function jmin(a, b)
  if a < b then return a end
  if b < a then return b end
  if a == 0 and 1 / a > 0 then return b end
  return a
end

-- The compiled modules: each chunk sets loaders[name] to the function that
-- makes its exports, run on the module's first require (a call's, when the
-- globals are there) and kept. Redis has no require of its own.
local loaders, loaded = {}, {}
local function require(name)
  local m = loaded[name]
  if m == nil then
    m = loaders[name]()
    loaded[name] = m
  end
  return m
end
`

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

// The functions at the top of a module, by name: `const f = (…) => …` and
// `function f(…) {…}`.
const topFunctions = (source: ts.SourceFile): Map<string, ts.FunctionLikeDeclaration> => {
  const out = new Map<string, ts.FunctionLikeDeclaration>()
  for (const statement of source.statements) {
    if (ts.isFunctionDeclaration(statement) && statement.name !== undefined) out.set(statement.name.text, statement)
    if (!ts.isVariableStatement(statement)) continue
    for (const d of statement.declarationList.declarations) {
      const f = d.initializer
      if (ts.isIdentifier(d.name) && f !== undefined && (ts.isArrowFunction(f) || ts.isFunctionExpression(f))) {
        out.set(d.name.text, f)
      }
    }
  }
  return out
}

// How many times each function of the module runs, at most, when `f` runs
// once (Infinity: in a loop, or recursion).
const runs = (
  functions: Map<string, ts.FunctionLikeDeclaration>,
  f: ts.FunctionLikeDeclaration,
  seen: ReadonlySet<ts.Node> = new Set()
): Map<string, number> => {
  const out = new Map<string, number>()
  const add = (name: string, n: number) => out.set(name, (out.get(name) ?? 0) + n)
  const visit = (node: ts.Node, times: number): void => {
    if (ts.isFunctionLike(node) && node !== f) times = Infinity
    if (ts.isIterationStatement(node, false)) times = Infinity
    if (ts.isIdentifier(node) && functions.has(node.text)) {
      const callee = functions.get(node.text)!
      add(node.text, times)
      if (seen.has(callee) || callee === f) add(node.text, Infinity)
      else for (const [name, n] of runs(functions, callee, new Set([...seen, f]))) add(name, n * times)
    }
    ts.forEachChild(node, (child) => visit(child, times))
  }
  if (f.body !== undefined) visit(f.body, 1)
  return out
}

/**
 * The functions whose objects the lean build makes once per module: `step`,
 * and the helpers that run at most once when `step` runs and never from
 * `initial` or `settledAt` (the other functions the lean entry point
 * calls). The lean entry point is done with a step's outcome, and every
 * object in it, before it steps again, and no object of a step is kept; so
 * no object made this way is in use when it is made again.
 */
const scratchFunctions = (source: ts.SourceFile): Set<ts.Node> => {
  const functions = topFunctions(source)
  const step = functions.get("step")
  if (step === undefined) return new Set()
  const elsewhere = new Set<string>()
  for (const root of ["initial", "settledAt"]) {
    const f = functions.get(root)
    if (f === undefined) continue
    elsewhere.add(root)
    for (const name of runs(functions, f).keys()) elsewhere.add(name)
  }
  const out = new Set<ts.Node>([step])
  for (const [name, n] of runs(functions, step)) {
    if (n <= 1 && !elsewhere.has(name) && name !== "step") out.add(functions.get(name)!)
  }
  return out
}

// The object literals the lean build makes once: in a function of
// `scratchFunctions`, not in a loop, not in a function within it.
const inStep = (node: ts.Node, scratchable: Set<ts.Node>): boolean => {
  for (let at: ts.Node | undefined = node.parent; at !== undefined; at = at.parent) {
    if (ts.isIterationStatement(at, false)) return false
    if (ts.isFunctionLike(at)) return scratchable.has(at)
  }
  return false
}

const reusable = (node: ts.ObjectLiteralExpression): boolean =>
  node.properties.every((p) =>
    (ts.isPropertyAssignment(p) && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name))) ||
    ts.isShorthandPropertyAssignment(p)
  )

// Inlining: a call of a module's own function whose body is one
// expression (`const f = (a, b) => expr`) becomes that expression, its
// parameters standing for the arguments. A Lua call costs about as much as
// the arithmetic of a small helper (Redis runs a plain interpreter), and
// the algorithms are written as many small helpers. Only when it cannot
// change a thing: an argument that is not a name, a literal or a field of
// a name stands for a parameter used at most once (the code is pure, so
// when it is computed does not matter), and no name the body uses is
// declared anew around the call.
interface Inlinable {
  readonly params: ReadonlyArray<ts.Symbol>
  readonly body: ts.Expression
  readonly uses: ReadonlyMap<ts.Symbol, number>
  readonly free: ReadonlySet<string>
}

const inlinableOf = (checker: ts.TypeChecker, declaration: ts.Declaration): Inlinable | undefined => {
  if (!ts.isVariableDeclaration(declaration) || declaration.initializer === undefined) return undefined
  const list = declaration.parent
  if (!ts.isVariableDeclarationList(list) || !(list.flags & ts.NodeFlags.Const)) return undefined
  if (!ts.isVariableStatement(list.parent) || !ts.isSourceFile(list.parent.parent)) return undefined
  const f = declaration.initializer
  if (!ts.isArrowFunction(f) || ts.isBlock(f.body)) return undefined
  const params: Array<ts.Symbol> = []
  for (const p of f.parameters) {
    if (!ts.isIdentifier(p.name) || p.initializer !== undefined || p.dotDotDotToken !== undefined) return undefined
    const symbol = checker.getSymbolAtLocation(p.name)
    if (symbol === undefined) return undefined
    params.push(symbol)
  }
  const uses = new Map<ts.Symbol, number>()
  const free = new Set<string>()
  let ok = true
  const visit = (node: ts.Node): void => {
    if (ts.isShorthandPropertyAssignment(node) || ts.isFunctionLike(node) || ts.isObjectLiteralExpression(node)) {
      ok = false
      return
    }
    if (ts.isIdentifier(node) && !(ts.isPropertyAccessExpression(node.parent) && node.parent.name === node)) {
      const symbol = checker.getSymbolAtLocation(node)
      if (symbol !== undefined && params.includes(symbol)) uses.set(symbol, (uses.get(symbol) ?? 0) + 1)
      else free.add(node.text)
    }
    ts.forEachChild(node, visit)
  }
  visit(f.body)
  // and the helpers the compiled body calls by name
  for (const name of helperNames) free.add(name)
  return ok ? { params, body: f.body, uses, free } : undefined
}

// The names the compiled code calls that no module declares.
const helperNames = ["floor", "ceil", "fmod", "huge", "jmax", "jmin", "mmax", "mmin"]

// The declaration a called name stands for, if the compiler may inline it:
// the module's own, or one imported from a module compiled with it whose
// body names nothing of its module (only its parameters and the helpers).
const importedOrOwn = (checker: ts.TypeChecker, callee: ts.Identifier): ts.Declaration | undefined => {
  let symbol = checker.getSymbolAtLocation(callee)
  if (symbol !== undefined && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol)
  const declaration = symbol?.valueDeclaration
  if (declaration === undefined || declaration.getSourceFile() === callee.getSourceFile()) return declaration
  if (declaration.getSourceFile().isDeclarationFile) return undefined
  const target = inlinableOf(checker, declaration)
  return target !== undefined && [...target.free].every((name) => helperNames.includes(name)) ? declaration : undefined
}

// Whether every value an import brings is a function inlined at each of its
// calls (see `importedOrOwn`); a call that could not be inlined leaves a
// `require` behind, which `compile` refuses in an algorithm's lean chunk.
const inlinedImport = (checker: ts.TypeChecker, node: ts.ImportDeclaration): boolean => {
  const clause = node.importClause
  if (clause === undefined || clause.isTypeOnly || clause.name !== undefined) return false
  const named = clause.namedBindings
  if (named === undefined || !ts.isNamedImports(named)) return false
  const values = named.elements.filter((e) => !e.isTypeOnly)
  return values.length > 0 && values.every((e) => importedOrOwn(checker, e.name) !== undefined)
}

// Whether the import that brings `name` is left out (see `inlinedImport`).
const importDropped = (checker: ts.TypeChecker, name: ts.Identifier): boolean => {
  const specifier = checker.getSymbolAtLocation(name)?.declarations?.[0]
  const declaration = specifier !== undefined && ts.isImportSpecifier(specifier)
    ? specifier.parent.parent.parent
    : undefined
  return declaration !== undefined && ts.isImportDeclaration(declaration) && inlinedImport(checker, declaration)
}

// Every name declared in the functions around `node` (their parameters and locals).
const namesAround = (node: ts.Node): Set<string> => {
  const names = new Set<string>()
  for (let at: ts.Node | undefined = node.parent; at !== undefined && !ts.isSourceFile(at); at = at.parent) {
    if (!ts.isFunctionLike(at)) continue
    const collect = (n: ts.Node): void => {
      if ((ts.isVariableDeclaration(n) || ts.isParameter(n) || ts.isBindingElement(n)) && ts.isIdentifier(n.name)) {
        names.add(n.name.text)
      }
      if (ts.isFunctionDeclaration(n) && n.name !== undefined) names.add(n.name.text)
      ts.forEachChild(n, collect)
    }
    collect(at)
  }
  return names
}

// An argument that can stand for a parameter used several times: a name, a
// literal, or a field of a name.
const simple = (e: ts.Expression): boolean =>
  ts.isIdentifier(e) || ts.isNumericLiteral(e) || ts.isStringLiteral(e) ||
  e.kind === ts.SyntaxKind.TrueKeyword || e.kind === ts.SyntaxKind.FalseKeyword ||
  (ts.isPrefixUnaryExpression(e) && ts.isNumericLiteral(e.operand)) ||
  (ts.isPropertyAccessExpression(e) && simple(e.expression))

/**
 * The plugin: JavaScript's semantics (above), and with `scratch` (the lean
 * build) the object literals of `step` filled into tables made once per
 * module (`scratch[file]` counts them) instead of made on each call. That is
 * sound where each step's outcome is consumed before the next step runs and
 * no object of it is kept: the lean entry point, which reads the outcome,
 * writes the state and answers one key before it steps the next.
 */
const plugin = (scratch: Map<string, number> | undefined, problems: Array<string>): tstl.Plugin => {
  // what each parameter of a body being inlined stands for
  const standing = new Map<ts.Symbol, ts.Expression>()
  const inlining = new Set<ts.Node>()
  const scratchable = new Map<ts.SourceFile, Set<ts.Node>>()
  const scratchIn = (source: ts.SourceFile): Set<ts.Node> => {
    let found = scratchable.get(source)
    if (found === undefined) {
      found = scratchFunctions(source)
      scratchable.set(source, found)
    }
    return found
  }
  return ({
    visitors: {
      [ts.SyntaxKind.CallExpression]: (node, context) => {
        const callee = node.expression
        // a frozen object is the object: the compiled code never writes to one
        if (
          ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression) &&
          callee.expression.text === "Object" && callee.name.text === "freeze" && node.arguments.length === 1
        ) {
          return context.transformExpression(node.arguments[0])
        }
        if (ts.isIdentifier(callee)) {
          const declaration = importedOrOwn(context.checker, callee)
          const target = declaration === undefined ? undefined : inlinableOf(context.checker, declaration)
          const imported = declaration !== undefined && declaration.getSourceFile() !== node.getSourceFile() &&
            importDropped(context.checker, callee)
          if (
            target !== undefined && !inlining.has(target.body) && node.arguments.length === target.params.length &&
            node.arguments.every((a, i) => simple(a) || (target.uses.get(target.params[i]) ?? 0) <= 1)
          ) {
            const around = namesAround(node)
            if (![...target.free].some((name) => around.has(name))) {
              target.params.forEach((p, i) => standing.set(p, node.arguments[i]))
              inlining.add(target.body)
              try {
                return tstl.createParenthesizedExpression(context.transformExpression(target.body))
              } finally {
                inlining.delete(target.body)
                for (const p of target.params) standing.delete(p)
              }
            }
          }
          // its import is left out (see `inlinedImport`): the call must go
          if (imported) {
            const source = node.getSourceFile()
            const { line } = source.getLineAndCharacterOfPosition(node.getStart(source))
            problems.push(
              `${relative(root, source.fileName)}:${line + 1}: \`${callee.text}\` is imported and cannot be ` +
                "inlined here: pass a name, a literal or a field for each parameter it uses more than once"
            )
          }
        }
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
      // an import of helpers that are all inlined is no import at all: an
      // algorithm's lean chunk is loaded alone, with no other module to require
      [ts.SyntaxKind.ImportDeclaration]: (node, context) =>
        inlinedImport(context.checker, node) ? undefined : context.superTransformStatements(node),
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
        const symbol = context.checker.getSymbolAtLocation(node)
        const argument = symbol === undefined ? undefined : standing.get(symbol)
        if (argument !== undefined) return context.transformExpression(argument)
        if (
          node.text === "Infinity" &&
          context.checker.getSymbolAtLocation(node)?.declarations?.[0]?.getSourceFile().isDeclarationFile !== false
        ) {
          return tstl.createIdentifier("huge", node)
        }
        return context.superTransformExpression(node)
      },
      [ts.SyntaxKind.ObjectLiteralExpression]: (node, context) => {
        if (scratch === undefined || !reusable(node) || !inStep(node, scratchIn(node.getSourceFile()))) {
          return context.superTransformExpression(node)
        }
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
}

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
/** A module's name for `require`: its path from the root (or `from`), with dots. */
export const requireName = (file: string, from = root): string =>
  relative(from, file).replace(/\.ts$/, "").split(sep).join(".")

const chunk = (key: string, name: string, lua: string, scratch = 0): string => {
  const body = lua.trimEnd()
  if (!body.endsWith("\nreturn ____exports")) {
    throw new Refused([`${name}: the compiled module does not end with its exports`])
  }
  const tables = Array.from({ length: scratch }, (_, i) => `____scratch_${i + 1}`)
  const declared = scratch === 0 ? "" : `local ${tables.join(", ")} = ${tables.map(() => "{}").join(", ")}\n`
  return `loaders[${JSON.stringify(key)}] = function()\n${declared}${body}\nend\n`
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
    plugins: [plugin(scratch, problems)],
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
  // modules require each other by their paths from the root (from the
  // file system's root for a module outside the repository: a test's)
  const rootDir = files.every((f) => !relative(root, f).startsWith("..")) ? root : parse(root).root
  const program = ts.createProgram({
    rootNames: [...new Set([...files, contract])],
    options: { ...options, rootDir } as ts.CompilerOptions
  })
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
    const path = requireName(file, rootDir)
    const algorithm = algorithms.includes(file) || !sources.includes(file)
    if (algorithm && /\brequire\(/.test(leanLua)) {
      problems.push(
        `${relative(root, file)}: its lean chunk requires another module (the lean script has none): ` +
          "import only helpers whose calls can be inlined (one expression; each argument a name, a literal " +
          "or a field where the parameter is used more than once)"
      )
    }
    modules.push({
      name,
      path,
      lua: chunk(path, name, lua),
      lean: algorithm ? chunk(`lean:${path}`, name, leanLua, scratch.get(source.fileName) ?? 0) : "",
      config: algorithm ? fieldsOf(checker, source, "Config", problems) : [],
      state: algorithm ? fieldsOf(checker, source, "State", problems) : []
    })
  }
  // (a module is emitted twice, plain and lean: each problem once)
  if (problems.length > 0) throw new Refused([...new Set(problems)])
  return { modules, runtime, inputHash: hashInputs(files) }
}
