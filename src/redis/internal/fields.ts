/**
 * What the Lua reads and writes of each algorithm, made from its `Config`
 * and `State` interfaces (their fields, in declaration order, from
 * `generated.ts`): the numbers a policy's configuration is sent as, and
 * the readers and writers of a stored state's numbers. Nothing here is
 * written per algorithm: a new algorithm's fields are read and written as
 * its interfaces say.
 *
 * @since 0.3.0
 */
import type { Compiled, Field } from "./generated.ts"

/**
 * Bytes of an algorithm's packed state (its code and its numbers) when
 * every state has the same size, else `undefined` (a log).
 *
 * @example
 * ```ts
 * import { modules } from "./generated.ts"
 * import { sizeOf } from "./fields.ts"
 *
 * sizeOf(modules.TokenBucket) // 24: the code, level and at
 * ```
 *
 * @since 0.2.0
 */
export const sizeOf = (module: Compiled): number | undefined =>
  module.state.every((f) => f.kind !== "numbers") ? 8 * (module.state.length + 1) : undefined

/**
 * The configuration as the numbers the lean entry point reads: every field
 * of the module's `Config`, in declaration order (a boolean as 1 or 0).
 *
 * @example
 * ```ts
 * import * as TokenBucket from "../../internal/algorithm/TokenBucket.ts"
 * import { modules } from "./generated.ts"
 * import { configNumbers } from "./fields.ts"
 *
 * configNumbers(modules.TokenBucket, TokenBucket.config({ capacity: 10, tokens: 1, periodMillis: 1000 }))
 * // [10, 1, 1000, 10, 10000, 0, 0, 0, -Infinity, 0]
 * ```
 *
 * @since 0.2.0
 */
export const configNumbers = (module: Compiled, config: unknown): ReadonlyArray<number> => {
  const c = config as Record<string, unknown>
  return module.config.map((f) => {
    const v = c[f.name]
    return f.kind === "boolean" ? (v === true ? 1 : 0) : typeof v === "number" ? v : NaN
  })
}

// A field of a Lua table: `t.name`, or `t["end"]` for a name Lua reserves.
const reserved = new Set([
  "and",
  "break",
  "do",
  "else",
  "elseif",
  "end",
  "false",
  "for",
  "function",
  "if",
  "in",
  "local",
  "nil",
  "not",
  "or",
  "repeat",
  "return",
  "then",
  "true",
  "until",
  "while"
])
const key = (name: string): string => reserved.has(name) ? `["${name}"]` : name
const get = (table: string, name: string): string => reserved.has(name) ? `${table}["${name}"]` : `${table}.${name}`

/**
 * Lua: `function(a) return config end`, the module's `Config` from the
 * numbers of {@link configNumbers}.
 *
 * @example
 * ```ts
 * import { modules } from "./generated.ts"
 * import { decodeConfig } from "./fields.ts"
 *
 * decodeConfig(modules.Gcra) // "function(a) return { maxBurst = a[1], ... } end"
 * ```
 *
 * @since 0.2.0
 */
export const decodeConfig = (module: Compiled): string =>
  `function(a) return { ${
    module.config.map((f, i) => `${key(f.name)} = a[${i + 1}]${f.kind === "boolean" ? " == 1" : ""}`).join(", ")
  } } end`

/**
 * Lua that reads the key's stored value `raw`: `s` is its state when it is
 * one of this algorithm (its code first), filled into the table `into`
 * (made once: the lean entry point is done with a key's state before it
 * reads the next), else `nil`; `deferred` is true when the value starts
 * with a block (a first number of 0, no algorithm's code). A state of
 * fixed size is read with one `struct.unpack`; one with numbers of varying
 * count (a log) as they lie, its numbers after the others, each list
 * as its count and then its numbers.
 *
 * @example
 * ```ts
 * import { modules } from "./generated.ts"
 * import { decodeState } from "./fields.ts"
 *
 * decodeState(modules.TokenBucket, 1, "TokenBucketState") // reads "<ddd": the code, level and at
 * ```
 *
 * @since 0.2.0
 */
export const decodeState = (module: Compiled, code: number, into: string): string => {
  const fixed = sizeOf(module)
  if (fixed !== undefined) {
    const names = module.state.map((_, i) => `_${i + 1}`)
    return `
  local s, deferred
  if raw then
    if #raw >= ${fixed} then
      local _code, ${names.join(", ")} = sunpack("<${"d".repeat(names.length + 1)}", raw)
      if _code == ${code} then
        ${module.state.map((f) => get(into, f.name)).join(", ")} = ${names.join(", ")}
        s = ${into}
      elseif _code == 0 then
        deferred = true
      end
    elseif #raw >= 16 and sunpack("<d", raw) == 0 then
      deferred = true
    end
  end`
  }
  const [scalars, list] = varying(module)
  const names = scalars.map((_, i) => `_${i + 1}`)
  // The numbers are read where they lie (no table of them all first): the
  // scalars and the list's count in one struct call, the list into a table
  // of its own.
  return `
  local s, deferred
  if raw and #raw >= 16 then
    local _code = sunpack("<d", raw)
    if _code == 0 then
      deferred = true
    elseif _code == ${code} and #raw >= ${8 * (scalars.length + 2)} then
      local ${names.join(", ")}, n, pos = sunpack("<${"d".repeat(scalars.length + 1)}", raw, 9)
      if n >= 0 and n % 1 == 0 and #raw >= pos - 1 + 8 * n then
        ${scalars.map((f) => get(into, f.name)).join(", ")} = ${names.join(", ")}
        ${get(into, list.name)} = unpackRange(raw, pos, n)
        s = ${into}
      end
    end
  end`
}

// A state of varying size: its numbers, and its one list of numbers after
// them (the stored format: the scalars, the list's count, the list). No
// algorithm keeps more than one list; one that did would need its counts
// read one after another.
const varying = (module: Compiled): readonly [ReadonlyArray<Field>, Field] => {
  const lists = module.state.filter((f) => f.kind === "numbers")
  if (lists.length !== 1) throw new Error(`${module.name}: a state of varying size keeps exactly one list`)
  return [module.state.filter((f) => f.kind !== "numbers"), lists[0]]
}

/**
 * A Lua expression: the state `t` packed as it is stored (its code, its
 * numbers; each list as its count and then its numbers), and for a state of
 * fixed size the double `after` behind it (the lean entry point's expiry),
 * in the same `struct.pack`: one string made where a state and its expiry
 * packed apart and joined made three.
 *
 * @example
 * ```ts
 * import { modules } from "./generated.ts"
 * import { encodeState } from "./fields.ts"
 *
 * encodeState(modules.TokenBucket, 1, "nxt", "huge") // 'spack("<dddd", 1, nxt.level, nxt.at, huge)'
 * ```
 *
 * @since 0.2.0
 */
export const encodeState = (module: Compiled, code: number, t: string, after?: string): string => {
  if (sizeOf(module) !== undefined) {
    const values = [String(code), ...module.state.map((f) => get(t, f.name)), ...(after === undefined ? [] : [after])]
    return `spack("<${"d".repeat(values.length)}", ${values.join(", ")})`
  }
  if (after !== undefined) throw new Error(`${module.name}: a state of varying size is stored with nothing behind it`)
  const [scalars, list] = varying(module)
  const l = get(t, list.name)
  // One struct call for the code, the scalars and the list's count, then the
  // list packed as it lies (no table of every number first).
  return `spack("<${"d".repeat(scalars.length + 2)}", ${
    [String(code), ...scalars.map((f) => get(t, f.name)), `#${l}`].join(", ")
  }) .. packRange(${l}, 1, #${l})`
}

/**
 * An algorithm's place in the stored format: its code, and its compiled
 * module (`undefined` for a policy made of others, whose layout is written
 * here).
 *
 * @since 0.3.0
 */
export interface Stored {
  readonly code: number
  readonly module: Compiled
}

// `function(a, i) return config, next end` from the Config's fields.
const readConfig = (fields: ReadonlyArray<Field>): string =>
  `function(a, i) return { ${
    fields.map((f, k) =>
      `${reserved.has(f.name) ? `["${f.name}"]` : f.name} = a[i + ${k}]${f.kind === "boolean" ? " == 1" : ""}`
    )
      .join(", ")
  } }, i + ${fields.length} end`

// `function(a, i) return state, next end` (nil: not a state) from the
// State's fields: its numbers first, then each list as its count and its
// numbers.
const stateReader = (fields: ReadonlyArray<Field>): string => {
  const scalars = fields.filter((f) => f.kind !== "numbers")
  const lists = fields.filter((f) => f.kind === "numbers")
  return `function(a, i)
    if a[i + ${scalars.length - 1}] == nil then return nil end
    local s = {}
    ${scalars.map((f, k) => `${get("s", f.name)} = a[i + ${k}]`).join("\n    ")}
    i = i + ${scalars.length}${
    lists.map((f) => `
    do
      local n, list = a[i], {}
      if n == nil or (n > 0 and a[i + n] == nil) then return nil end
      for j = 1, n do list[j] = a[i + j] end
      ${get("s", f.name)} = list
      i = i + n + 1
    end`).join("")
  }
    return s, i
  end`
}

// `function(s, out)`: the state's numbers after what `out` holds.
const stateWriter = (fields: ReadonlyArray<Field>): string => {
  const scalars = fields.filter((f) => f.kind !== "numbers")
  const lists = fields.filter((f) => f.kind === "numbers")
  return `function(s, out)
    local n = #out
    ${scalars.map((f, k) => `out[n + ${k + 1}] = ${get("s", f.name)}`).join("\n    ")}${
    lists.map((f) => `
    do
      local list = ${get("s", f.name)}
      n = #out
      out[n + 1] = #list
      for j = 1, #list do out[n + 1 + j] = list[j] end
    end`).join("")
  }
  end`
}

/**
 * The Lua table `codecs`: for each algorithm's code, its module's name for
 * `require` and the readers and writer of its numbers, made from its
 * `Config` and `State` interfaces.
 *
 * @example
 * ```ts
 * import { modules } from "./generated.ts"
 * import { codecs } from "./fields.ts"
 *
 * codecs([{ code: 1, module: modules.TokenBucket }]).includes("codecs[1]") // true
 * ```
 *
 * @since 0.3.0
 */
export const codecs = (stored: ReadonlyArray<Stored>): string =>
  `local codecs = {}\n${
    stored.map(({ code, module }) =>
      `codecs[${code}] = {
  path = ${JSON.stringify(module.path)},
  config = ${readConfig(module.config)},
  read = ${stateReader(module.state)},
  write = ${stateWriter(module.state)}
}\n`
    ).join("")
  }`
