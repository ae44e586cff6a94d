/**
 * The subset of TypeScript that is compiled to the Lua that Redis runs
 * (Lua 5.1, as Redis and Valkey embed it). A module outside it is refused
 * with a diagnostic naming the file, the line and the construct, before any
 * Lua is made: a change that would not run the same in Redis fails the
 * build and `npm test`, not a server.
 *
 * What it allows: numbers, booleans, string literals compared with `===`,
 * plain objects and arrays of numbers, `const`/`let`, functions (arrow or
 * declared) and the control flow of statements, `Math.floor`, `Math.ceil`,
 * `Math.min`, `Math.max`, and `import type`. What it refuses, and why:
 *
 * - a condition (`if`, `while`, `for`, `?:`, `!`, `&&`, `||`) that is a
 *   number or a string: in Lua 0, NaN and "" are true;
 * - `==` and `!=` (JavaScript's coercions), bitwise operators (Lua 5.1 has
 *   none), `%=`/`**` and the other compound forms with no Lua twin;
 * - numbers made into strings (a template, `+` with a string, `String`,
 *   `toString`, `toFixed`): Lua writes 14 digits where JavaScript writes 17;
 * - the clock, chance and the outside world: `Date`, `Math.random`, timers,
 *   `console`, `process`, `globalThis`, `JSON`, `Promise`, `async`, `yield`;
 * - classes, `new`, `instanceof`, `this`, `try`/`throw`, `delete`, `typeof`,
 *   `for…in`, regular expressions: each needs a runtime Lua lacks or
 *   behaves differently there;
 * - a value import (Effect or any other module: only `import type`);
 * - computation at the top of a module (only functions, literals and
 *   objects of them): a Redis Functions library is loaded with no globals
 *   at all, so `math` is not there yet.
 *
 * @since 0.2.0
 */
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
  "Object",
  "Array",
  "RegExp",
  "Error"
])
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
export const check = (program: ts.Program, files: ReadonlyArray<string>): ReadonlyArray<Refusal> => {
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
    for (const statement of source.statements) topLevel(statement, refuse)
    const visit = (node: ts.Node): void => {
      // types are erased: nothing in them runs
      if (ts.isTypeNode(node) || ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node)) return
      switch (node.kind) {
        case ts.SyntaxKind.ImportDeclaration: {
          const clause = (node as ts.ImportDeclaration).importClause
          if (clause === undefined || !clause.isTypeOnly) {
            const named = clause?.namedBindings
            const allTypes = named !== undefined && ts.isNamedImports(named) && clause?.name === undefined &&
              named.elements.every((e) => e.isTypeOnly)
            if (!allTypes) refuse(node, "a value import: only `import type` (no Effect, no other module at run time)")
          }
          return
        }
        case ts.SyntaxKind.ClassDeclaration:
        case ts.SyntaxKind.ClassExpression:
          refuse(node, "a class: use plain objects and functions")
          return
        case ts.SyntaxKind.NewExpression:
          refuse(node, "`new`: use plain objects and arrays")
          break
        case ts.SyntaxKind.ThisKeyword:
          refuse(node, "`this`")
          break
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

// What the top of a module may hold: imports, types, and declarations of
// functions, literals and objects or arrays of them (nothing that runs a
// call when the library is loaded, when not even `math` is there).
const topLevel = (statement: ts.Statement, refuse: (node: ts.Node, message: string) => void): void => {
  if (
    ts.isImportDeclaration(statement) || ts.isInterfaceDeclaration(statement) ||
    ts.isTypeAliasDeclaration(statement) || ts.isFunctionDeclaration(statement)
  ) return
  if (ts.isVariableStatement(statement)) {
    for (const d of statement.declarationList.declarations) {
      if (d.initializer !== undefined && !inert(d.initializer)) {
        refuse(d, `\`${d.name.getText()}\` runs code when the module is loaded: only functions and literals here`)
      }
    }
    return
  }
  refuse(statement, "a statement at the top of a module: only declarations")
}

const inert = (e: ts.Expression): boolean => {
  if (ts.isArrowFunction(e) || ts.isFunctionExpression(e)) return true
  if (ts.isNumericLiteral(e) || ts.isStringLiteral(e)) return true
  if (e.kind === ts.SyntaxKind.TrueKeyword || e.kind === ts.SyntaxKind.FalseKeyword) return true
  if (ts.isIdentifier(e)) return e.text !== "Infinity" && e.text !== "NaN"
  if (ts.isPrefixUnaryExpression(e)) return ts.isNumericLiteral(e.operand)
  if (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression(e)) {
    return inert(e.expression)
  }
  if (ts.isArrayLiteralExpression(e)) return e.elements.every((x) => !ts.isSpreadElement(x) && inert(x))
  if (ts.isObjectLiteralExpression(e)) {
    return e.properties.every((p) =>
      ts.isShorthandPropertyAssignment(p) || ts.isMethodDeclaration(p) ||
      (ts.isPropertyAssignment(p) && inert(p.initializer))
    )
  }
  return false
}
