/**
 * The subset of TypeScript that is compiled to the Lua that Redis runs
 * (Lua 5.1, as Redis and Valkey embed it). A module outside it is refused
 * with a diagnostic naming the file, the line and the construct, before any
 * Lua is made: a change that would not run the same in Redis fails the
 * build and `npm test`, not a server.
 *
 * What it allows: numbers, booleans, string literals compared with `===`,
 * plain objects and arrays, classes of its own, `const`/`let`, functions
 * and the control flow of statements, `Math.floor`, `Math.ceil`,
 * `Math.min`, `Math.max`, and imports of the modules compiled with it. What
 * it refuses, and why:
 *
 * - a condition (`if`, `while`, `for`, `?:`, `!`, `&&`, `||`) that is a
 *   number or a string: in Lua 0, NaN and "" are true;
 * - `==` and `!=` (JavaScript's coercions), bitwise operators (Lua 5.1 has
 *   none), `%=`/`**` and the other compound forms with no Lua twin;
 * - numbers made into strings (a template, `+` with a string, `String`,
 *   `toString`, `toFixed`): Lua writes 14 digits where JavaScript writes 17;
 * - the clock, chance and the outside world: `Date`, `Math.random`, timers,
 *   `console`, `process`, `globalThis`, `JSON`, `Promise`, `async`, `yield`;
 * - `try`/`throw`, `delete`, `typeof`, `for…in`, regular expressions, and
 *   JavaScript's own classes (`Map`, `Set`, `Array`, `Object` but
 *   `Object.freeze`): each needs a runtime Lua lacks or behaves differently
 *   there (the project's own classes, `new` and `instanceof` compile to
 *   TypeScriptToLua's tables and metatables, with the same meaning);
 * - a value import of a module not compiled with it (Effect, or anything
 *   else: only `import type`).
 *
 * @since 0.2.0
 */
import { dirname, resolve } from "node:path"
import ts from "typescript"

/** One refusal: where and what. */
export interface Refusal {
  readonly file: string
  readonly line: number
  readonly message: string
}

const mathAllowed = new Set(["floor", "ceil", "min", "max"])
const forbiddenGlobals = new Set([
  "Date",
  "console",
  "process",
  "globalThis",
  "JSON",
  "Promise",
  "setTimeout",
  "setInterval",
  "setImmediate",
  "queueMicrotask",
  "String",
  "Number",
  "parseInt",
  "parseFloat",
  "Symbol",
  "BigInt",
  "eval",
  "Function",
  "Reflect",
  "Proxy",
  "Map",
  "Set",
  "WeakMap",
  "WeakSet",
  "Array",
  "RegExp",
  "Error"
])
// Of `Object`, only `freeze` (the compiled code never writes to an object).
const objectAllowed = new Set(["freeze"])
const forbiddenMethods = new Set(["toString", "toFixed", "toPrecision", "toExponential", "toLocaleString"])

// Types whose truthiness is the same in Lua: booleans, objects, and their
// unions with undefined (nil and false are Lua's only false values).
const luaTruthy = (type: ts.Type): boolean => {
  if (type.isUnion()) return type.types.every(luaTruthy)
  const flags = type.flags
  if (flags & (ts.TypeFlags.BooleanLike | ts.TypeFlags.Undefined | ts.TypeFlags.Null | ts.TypeFlags.Void)) return true
  if (flags & ts.TypeFlags.Object) return true
  if (flags & ts.TypeFlags.NonPrimitive) return true
  return false
}

const isStringy = (type: ts.Type): boolean =>
  type.isUnion() ? type.types.some(isStringy) : (type.flags & ts.TypeFlags.StringLike) !== 0

/**
 * Every refusal in `files` (paths of the program's source files).
 *
 * @since 0.2.0
 */
export const check = (
  program: ts.Program,
  files: ReadonlyArray<string>,
  compiled: ReadonlyArray<string> = files
): ReadonlyArray<Refusal> => {
  const checker = program.getTypeChecker()
  const out: Array<Refusal> = []
  for (const file of files) {
    const source = program.getSourceFile(file)
    if (source === undefined) {
      out.push({ file, line: 0, message: "not in the program" })
      continue
    }
    const refuse = (node: ts.Node, message: string) => {
      const { line } = source.getLineAndCharacterOfPosition(node.getStart(source))
      out.push({ file, line: line + 1, message })
    }
    const condition = (node: ts.Expression, where: string) => {
      const type = checker.getTypeAtLocation(node)
      if (!luaTruthy(type)) {
        refuse(
          node,
          `${where}: \`${node.getText(source)}\` is a ${
            checker.typeToString(type)
          }, true in Lua even when 0, NaN or "": compare it`
        )
      }
    }
    const visit = (node: ts.Node): void => {
      // types are erased: nothing in them runs
      if (ts.isTypeNode(node) || ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node)) return
      switch (node.kind) {
        case ts.SyntaxKind.ImportDeclaration: {
          const declaration = node as ts.ImportDeclaration
          const clause = declaration.importClause
          if (clause === undefined || !clause.isTypeOnly) {
            const named = clause?.namedBindings
            const allTypes = named !== undefined && ts.isNamedImports(named) && clause?.name === undefined &&
              named.elements.every((e) => e.isTypeOnly)
            // a module compiled with this one is there at run time; nothing else is
            const target = ts.isStringLiteral(declaration.moduleSpecifier)
              ? resolve(dirname(file), declaration.moduleSpecifier.text)
              : ""
            if (!allTypes && !compiled.includes(target)) {
              refuse(node, "a value import of a module not compiled with it (no Effect, nothing else at run time)")
            }
          }
          return
        }
        case ts.SyntaxKind.TryStatement:
        case ts.SyntaxKind.ThrowStatement:
          refuse(node, "`try`/`throw`: the algorithms are total")
          break
        case ts.SyntaxKind.DeleteExpression:
          refuse(node, "`delete`")
          break
        case ts.SyntaxKind.TypeOfExpression:
          refuse(node, "`typeof` (Lua names types differently)")
          break
        case ts.SyntaxKind.ForInStatement:
          refuse(node, "`for…in` (Lua's table order is not JavaScript's)")
          break
        case ts.SyntaxKind.RegularExpressionLiteral:
          refuse(node, "a regular expression")
          break
        case ts.SyntaxKind.TemplateExpression:
        case ts.SyntaxKind.NoSubstitutionTemplateLiteral:
          refuse(node, "a template: numbers made into text differ in Lua (14 digits, not 17)")
          break
        case ts.SyntaxKind.AwaitExpression:
        case ts.SyntaxKind.YieldExpression:
          refuse(node, "`await`/`yield`")
          break
        case ts.SyntaxKind.IfStatement:
          condition((node as ts.IfStatement).expression, "an `if`")
          break
        case ts.SyntaxKind.WhileStatement:
        case ts.SyntaxKind.DoStatement:
          condition((node as ts.WhileStatement).expression, "a loop's condition")
          break
        case ts.SyntaxKind.ForStatement: {
          const c = (node as ts.ForStatement).condition
          if (c !== undefined) condition(c, "a loop's condition")
          break
        }
        case ts.SyntaxKind.ConditionalExpression:
          condition((node as ts.ConditionalExpression).condition, "a `?:`")
          break
        case ts.SyntaxKind.PrefixUnaryExpression: {
          const e = node as ts.PrefixUnaryExpression
          if (e.operator === ts.SyntaxKind.ExclamationToken) condition(e.operand, "a `!`")
          if (e.operator === ts.SyntaxKind.TildeToken) refuse(node, "a bitwise operator (Lua 5.1 has none)")
          break
        }
        case ts.SyntaxKind.BinaryExpression: {
          const e = node as ts.BinaryExpression
          const op = e.operatorToken.kind
          switch (op) {
            case ts.SyntaxKind.AmpersandAmpersandToken:
            case ts.SyntaxKind.BarBarToken:
              condition(e.left, op === ts.SyntaxKind.BarBarToken ? "a `||`" : "a `&&`")
              if (op === ts.SyntaxKind.AmpersandAmpersandToken) condition(e.right, "a `&&`")
              else condition(e.right, "a `||`")
              break
            case ts.SyntaxKind.EqualsEqualsToken:
            case ts.SyntaxKind.ExclamationEqualsToken:
              refuse(node, "`==`/`!=`: use `===`/`!==`")
              break
            case ts.SyntaxKind.AmpersandToken:
            case ts.SyntaxKind.BarToken:
            case ts.SyntaxKind.CaretToken:
            case ts.SyntaxKind.LessThanLessThanToken:
            case ts.SyntaxKind.GreaterThanGreaterThanToken:
            case ts.SyntaxKind.GreaterThanGreaterThanGreaterThanToken:
            case ts.SyntaxKind.AmpersandEqualsToken:
            case ts.SyntaxKind.BarEqualsToken:
            case ts.SyntaxKind.CaretEqualsToken:
            case ts.SyntaxKind.LessThanLessThanEqualsToken:
            case ts.SyntaxKind.GreaterThanGreaterThanEqualsToken:
            case ts.SyntaxKind.GreaterThanGreaterThanGreaterThanEqualsToken:
              refuse(node, "a bitwise operator (Lua 5.1 has none)")
              break
            case ts.SyntaxKind.AsteriskAsteriskToken:
            case ts.SyntaxKind.AsteriskAsteriskEqualsToken:
            case ts.SyntaxKind.PercentEqualsToken:
              refuse(node, "`**`/`%=`: write it out")
              break
            case ts.SyntaxKind.PlusToken:
            case ts.SyntaxKind.PlusEqualsToken:
              if (isStringy(checker.getTypeAtLocation(e.left)) || isStringy(checker.getTypeAtLocation(e.right))) {
                refuse(node, "text made with `+`: numbers made into text differ in Lua (14 digits, not 17)")
              }
              break
          }
          break
        }
        case ts.SyntaxKind.Identifier: {
          const id = node as ts.Identifier
          const parent = id.parent
          // a property name or a declaration is not a reference to a global
          const isName = (ts.isPropertyAccessExpression(parent) && parent.name === id) ||
            (ts.isPropertyAssignment(parent) && parent.name === id) ||
            (ts.isPropertySignature(parent) && parent.name === id) ||
            (ts.isBindingElement(parent) && parent.propertyName === id)
          if (!isName && forbiddenGlobals.has(id.text)) {
            const symbol = checker.getSymbolAtLocation(id)
            const declared = symbol?.declarations?.some((d) => d.getSourceFile() === source) === true
            if (!declared) refuse(node, `\`${id.text}\`: not in the subset compiled to Lua`)
          }
          break
        }
        case ts.SyntaxKind.PropertyAccessExpression: {
          const e = node as ts.PropertyAccessExpression
          if (ts.isIdentifier(e.expression) && e.expression.text === "Math" && !mathAllowed.has(e.name.text)) {
            refuse(node, `\`Math.${e.name.text}\`: only Math.floor, Math.ceil, Math.min and Math.max`)
          }
          if (ts.isIdentifier(e.expression) && e.expression.text === "Object" && !objectAllowed.has(e.name.text)) {
            refuse(node, `\`Object.${e.name.text}\`: only Object.freeze`)
          }
          if (forbiddenMethods.has(e.name.text)) {
            refuse(node, `\`.${e.name.text}\`: numbers made into text differ in Lua (14 digits, not 17)`)
          }
          break
        }
        case ts.SyntaxKind.FunctionDeclaration:
        case ts.SyntaxKind.FunctionExpression:
        case ts.SyntaxKind.ArrowFunction:
        case ts.SyntaxKind.MethodDeclaration: {
          const f = node as ts.FunctionLikeDeclaration
          if (f.modifiers?.some((m) => m.kind === ts.SyntaxKind.AsyncKeyword) === true) refuse(node, "`async`")
          if (f.asteriskToken !== undefined) refuse(node, "a generator")
          break
        }
      }
      ts.forEachChild(node, visit)
    }
    visit(source)
  }
  return out
}
