/**
 * The lean entry point: one algorithm's step on each of a call's keys, one
 * Take or Admit per key, and nothing else. It is what a call carries by far
 * most often (a lone caller, and calls for many different keys at once), so
 * it does only that: it defines no function and no table of functions,
 * parses no text (the policy comes as numeric `ARGV`), reads and writes the
 * same packed state as the batch entry point, and answers with numbers.
 *
 * Each algorithm's module gives its step as a fragment of Lua (`Lean`),
 * written inline with the few helpers below, which expand to plain
 * statements (JavaScript's `Math.min`/`Math.max` and the like), so nothing
 * is defined per call. The fragment mirrors the module's `step` exactly;
 * the conformance suite runs both against `MemoryStore.applyOps`.
 *
 * - `KEYS[i]`: the i-th key (with the store's prefix).
 * - `ARGV[1]`: now in milliseconds, or `""` to read the server's `TIME`.
 * - `ARGV[2]`: how long (ms, or `inf`) a settled key is kept.
 * - `ARGV[3]`: the policy's numbers (the module's `config`), separated by
 *   spaces. As a function of the library, each text is read once and kept
 *   (`configs`, at most `maxConfigs` of them): a policy is the same text on
 *   every call, and reading ten numbers from text cost about a tenth of the
 *   whole call. As an `EVAL` script, read on every call.
 * - `ARGV[4 …]`: for each key its operation, `kind cost` (0 Take, 5 Admit).
 *
 * A key with a block (its state after `0 until`, see `batch.ts`) is left to
 * the batch entry point: its `allowed` is -1 and nothing is written (the
 * batch entry point drops a block that is over, so this happens once after
 * a block).
 *
 * The reply is a flat array, five values per key (six for a shaper, its
 * `delay` last): `allowed` (1 or 0),
 * `remaining`, `retryAfter`, `resetAfter`, `limit`. A value is an integer
 * reply when it is a whole number that survives one exactly (not −0, within
 * ±2^53); otherwise text (`%.17g`, `inf`, `-inf`, `-0`).
 *
 * @since 0.2.0
 */
import * as Op from "../../internal/operation/Op.ts"
import type { Compiled } from "./generated.ts"
import * as Prelude from "./prelude.ts"

/**
 * One algorithm's lean step: its module compiled from TypeScript
 * (`generated.ts`), with the code its stored states start with. The step
 * is the module's own `initial`, `step` and `settledAt`; reading and writing
 * the state and the configuration are made from the `State` and `Config`
 * interfaces' fields (see {@link decodeState}).
 *
 * @since 0.2.0
 */
export interface Lean {
  /** The compiled module. */
  readonly module: Compiled
  /** The code a stored state of this algorithm starts with. */
  readonly code: number
  /**
   * A shaper: the step's outcome carries `delay` (ms an admitted request
   * waits), answered as a sixth value per key.
   */
  readonly delay?: boolean | undefined
}

/**
 * Bytes of an algorithm's packed state (its code and its numbers) when
 * every state has the same size, else `undefined` (a log).
 *
 * @example
 * ```ts
 * import { modules } from "./generated.ts"
 * import { sizeOf } from "./lean.ts"
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
 * import { configNumbers } from "./lean.ts"
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
 * import { decodeConfig } from "./lean.ts"
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
 * count (a log) with `unpackNums`, its numbers after the others, each list
 * as its count and then its numbers.
 *
 * @example
 * ```ts
 * import { modules } from "./generated.ts"
 * import { decodeState } from "./lean.ts"
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
  const scalars = module.state.filter((f) => f.kind !== "numbers")
  const lists = module.state.filter((f) => f.kind === "numbers")
  return `
  local s, deferred
  if raw then
    local a = unpackNums(raw)
    if a[1] == 0 and a[2] ~= nil then
      deferred = true
    elseif a[1] == ${code} and a[${scalars.length + 1}] ~= nil then
      local i, ok = ${scalars.length + 2}, true
      ${scalars.map((f) => get(into, f.name)).join(", ")} = ${scalars.map((_, j) => `a[${j + 2}]`).join(", ")}${
    lists.map((f) => `
      do
        local n, list = a[i], {}
        if n == nil or a[i + n] == nil then ok = false else
          for j = 1, n do list[j] = a[i + j] end
          i = i + n + 1
        end
        ${get(into, f.name)} = list
      end`).join("")
  }
      if ok then s = ${into} end
    end
  end`
}

/**
 * Lua that sets `out` to the state `t` packed as it is stored (its code,
 * its numbers; each list as its count and then its numbers).
 *
 * @example
 * ```ts
 * import { modules } from "./generated.ts"
 * import { encodeState } from "./lean.ts"
 *
 * encodeState(modules.TokenBucket, 1, "nxt", "packed") // 'packed = spack("<ddd", 1, nxt.level, nxt.at)'
 * ```
 *
 * @since 0.2.0
 */
export const encodeState = (module: Compiled, code: number, t: string, out: string): string => {
  if (sizeOf(module) !== undefined) {
    return `${out} = spack("<${"d".repeat(module.state.length + 1)}", ${code}, ${
      module.state.map((f) => get(t, f.name)).join(", ")
    })`
  }
  const scalars = module.state.filter((f) => f.kind !== "numbers")
  const lists = module.state.filter((f) => f.kind === "numbers")
  return `do
      local a = { ${[String(code), ...scalars.map((f) => get(t, f.name))].join(", ")} }${
    lists.map((f) => `
      local list = ${get(t, f.name)}
      a[#a + 1] = #list
      for j = 1, #list do a[#a + 1] = list[j] end`).join("")
  }
      ${out} = packNums(a)
    end`
}

// The step: the module's own functions, over the state read and written
// as above; a denied Admit keeps the state as it was.
const step = (lean: Lean): string => {
  const m = lean.module.name
  return `
  local fresh = s == nil
  if fresh then s = ${m}Initial(cfg, now) end
  local o = ${m}Step(cfg, s, now, cost)
  allowed, remaining, retry, reset, limit = o.allowed, o.remaining, o.retryAfter, o.resetAfter, o.limit${
    lean.delay === true ? `\n  delay = o.delay or 0` : ""
  }
  local nxt = o.state
  if admit and not allowed then nxt = s end
  dirty = fresh or nxt ~= s
  if dirty then
    settled = ${m}SettledAt(cfg, nxt)
    ${encodeState(lean.module, lean.code, "nxt", "packed")}
  end`
}

/**
 * How far past what a state needs (its `settledAt` plus `keepSettled`) a
 * lean write moves the key's expiry when it must move it: a busy key then
 * writes its expiry about once in this long, and keeps its TTL
 * (`SET … KEEPTTL`) in between. A key is so kept at most this much longer
 * than it must be.
 *
 * @example
 * ```ts
 * import { refreshMillis } from "./lean.ts"
 *
 * refreshMillis // 10000
 * ```
 *
 * @since 0.2.0
 */
export const refreshMillis = 10_000

// One reply value, in place: left a number when an integer reply carries it
// exactly (a whole number within ±2^53, not -0), else made text.
const reply = (v: string): string =>
  `if ${v} % 1 == 0 and ${v} > -9007199254740992 and ${v} < 9007199254740992 and (${v} ~= 0 or 1 / ${v} > 0) then
  elseif ${v} == huge then
    ${v} = "inf"
  elseif ${v} == -huge then
    ${v} = "-inf"
  else
    ${v} = format("%.17g", ${v})
  end`

// One number of a policy's text, as the module's `show` wrote it.
const number = (w: string): string => `((${w} == "-inf" and -huge) or (${w} == "inf" and huge) or tonumber(${w}))`

/**
 * The library's reader of a policy's configuration, defined once when the
 * library is loaded: `configCache(decode)` makes a reader for one
 * algorithm, which gives the configuration of a policy's text (`decode` of
 * its numbers), made on its first call and kept after. At most `maxConfigs`
 * texts are kept per algorithm: past that its table starts afresh (callers
 * send what they like).
 *
 * @example
 * ```ts
 * import { configReader } from "./lean.ts"
 *
 * configReader.includes("local function configCache") // true
 * ```
 *
 * @since 0.2.0
 */
export const configReader = `
local maxConfigs = 1024
local function configCache(decode)
  local configs, count = {}, 0
  return function(text)
    local c = configs[text]
    if c ~= nil then return c end
    local huge, a = math.huge, {}
    for w in string.gmatch(text, "%S+") do a[#a + 1] = ${number("w")} end
    c = decode(a)
    if count >= maxConfigs then configs, count = {}, 0 end
    configs[text], count = c, count + 1
    return c
  end
end
`

/**
 * The Lua name of an algorithm's configuration reader in the library.
 *
 * @example
 * ```ts
 * import { modules } from "./generated.ts"
 * import { reader } from "./lean.ts"
 *
 * reader(modules.Gcra) // "GcraConfig"
 * ```
 *
 * @since 0.2.0
 */
export const reader = (module: Compiled): string => `${module.name}Config`

/**
 * What the library defines for an algorithm's lean entry point, once
 * (after {@link configReader} and the compiled module): its configuration
 * reader, the table a key's state is read into, and locals for the
 * module's `initial`, `step` and `settledAt` (set on the first call, when
 * the module is first required).
 *
 * @example
 * ```ts
 * import { modules } from "./generated.ts"
 * import { definitions } from "./lean.ts"
 *
 * definitions(modules.Gcra).startsWith("local GcraConfig") // true
 * ```
 *
 * @since 0.2.0
 */
export const definitions = (module: Compiled): string => {
  const m = module.name
  return `local ${reader(module)} = configCache(${decodeConfig(module)})
local ${m}State = {}
local ${m}Initial, ${m}Step, ${m}SettledAt
`
}

/**
 * The whole lean body of an algorithm: as an `EVAL` script
 * (`"script"`: the prelude and the compiled module first), or as the body
 * of a Redis function (`"function"`, with `KEYS` and `ARGV` its parameters
 * and the library's definitions in scope). The two differ only in how they
 * read the policy's configuration.
 *
 * @example
 * ```ts
 * import { modules } from "./generated.ts"
 * import { body } from "./lean.ts"
 *
 * body({ module: modules.TokenBucket, code: 1 }, "script").includes("redis.call(\"GET\"") // true
 * ```
 *
 * @since 0.2.0
 */
export const body = (lean: Lean, mode: "script" | "function"): string => {
  const size = sizeOf(lean.module)
  const m = lean.module.name
  const config = `${mode === "function" ? "if floor == nil then bind() end\n" : ""}if ${m}Step == nil then
  local A = require("lean:${lean.module.path}").algorithm
  ${m}Initial, ${m}Step, ${m}SettledAt = A.initial, A.step, A.settledAt
end
local cfg = ${reader(lean.module)}(ARGV[3])`
  const prefix = mode === "function"
    ? ""
    : `${Prelude.lua}bind()\n${configReader}${lean.module.lean}${definitions(lean.module)}`
  return `${prefix}
${config}
local ceil, huge, format = math.ceil, math.huge, string.format
local spack, sunpack, sub = struct.pack, struct.unpack, string.sub
local now
${Prelude.readNow("now")}
local keep = tonumber(ARGV[2])
local out, single = {}, #KEYS == 1
for k = 1, #KEYS do
  local key = KEYS[k]
  local admit = ARGV[2 + 2 * k] == "${Op.Kind.Admit}"
  local cost = tonumber(ARGV[3 + 2 * k])
  local raw = redis.call("GET", key)
  local allowed, remaining, retry, reset, limit, dirty, settled, packed
  local delay = 0
${decodeState(lean.module, lean.code, `${lean.module.name}State`)}
  -- a block ("0 until" before the state), in force or over: the batch
  -- entry point answers (allowed -1 says so), and drops a block that is over
  if deferred then
    allowed, remaining, retry, reset, limit = -1, 0, 0, 0, 0
  else
${step(lean)}
  end
  if dirty then
    local ttl = settled + keep - now
    if ttl <= 0 then
      if raw then redis.call("DEL", key) end
    elseif ttl == huge then
      redis.call("SET", key, ${size === undefined ? "packed" : `packed .. spack("<d", huge)`})
    else${
    size === undefined
      ? `
      -- whole milliseconds, at least 1; beyond 2^50 ms (35 000 years) it makes no difference
      if ttl > 1125899906842624 then ttl = 1125899906842624 end
      redis.call("SET", key, packed, "PX", ceil(ttl))`
      : `
      -- the expiry the stored state was written with, after it: while it
      -- covers what this state needs, the key keeps its TTL (a SET with PX
      -- costs about a third of the whole call); else it is moved REFRESH
      -- ms past what is needed, so a busy key moves it once in a while
      local expires = -huge
      if raw and #raw == ${size + 8} then expires = sunpack("<d", raw, ${size + 1}) end
      if settled + keep <= expires and expires < huge then
        redis.call("SET", key, packed .. sub(raw, ${size + 1}), "KEEPTTL")
      else
        expires = settled + keep + ${refreshMillis}
        ttl = expires - now
        -- whole milliseconds, at least 1; beyond 2^50 ms (35 000 years) it makes no difference
        if ttl > 1125899906842624 then ttl = 1125899906842624 end
        redis.call("SET", key, packed .. spack("<d", expires), "PX", ceil(ttl))
      end`
  }
    end
  end
  local a = 0
  if allowed == -1 then a = -1 elseif allowed then a = 1 end
  ${reply("remaining")}
  ${reply("retry")}
  ${reply("reset")}
  ${reply("limit")}
${
    lean.delay === true
      ? `  ${reply("delay")}
  if single then return { a, remaining, retry, reset, limit, delay } end
  local i = 6 * k - 6
  out[i + 1], out[i + 2], out[i + 3], out[i + 4], out[i + 5], out[i + 6] = a, remaining, retry, reset, limit, delay`
      : `  -- one key (by far the commonest call): its reply made at once
  if single then return { a, remaining, retry, reset, limit } end
  local i = 5 * k - 5
  out[i + 1], out[i + 2], out[i + 3], out[i + 4], out[i + 5] = a, remaining, retry, reset, limit`
  }
end
return out
`
}
