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
import * as Prelude from "./prelude.ts"

/**
 * One algorithm's lean step.
 *
 * The fragment runs once per key with these locals in scope: `now`, `cost`,
 * `admit` (a denial must leave the state as it was), `raw` (the key's stored
 * value, or `false`), the configuration's names, and `floor`, `ceil`,
 * `fmod`, `huge`, `spack`, `sunpack`, `sub`, `srep`. It must set `allowed`,
 * `remaining`, `retry`, `reset` and `limit` (the reply), `dirty` (whether the
 * state must be written: a fresh key, or a state the step changed), and when
 * `dirty`, `settled` (the state's `settledAt`) and `packed` (the state as
 * the batch entry point stores it).
 *
 * @since 0.2.0
 */
export interface Lean {
  /** Lua names of the configuration's numbers, in the order of the module's `config`. */
  readonly config: ReadonlyArray<string>
  /**
   * A shaper: the step also sets `delay` (ms an admitted request waits),
   * answered as a sixth value per key.
   */
  readonly delay?: boolean | undefined
  /** The step, in Lua. */
  readonly step: string
  /**
   * Bytes of the packed state, when every state has the same size (what
   * `readFixed` reads). Such a state is written with its expiry after it
   * (see {@link body}); a state of varying size (a log) is not.
   */
  readonly size?: number | undefined
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

/**
 * `out = Math.min(a, b)` in Lua (a and b plain names or numbers: each is
 * read more than once).
 *
 * @example
 * ```ts
 * import { min } from "./lean.ts"
 *
 * min("x", "a", "b") // "if a < b then x = a elseif ... end"
 * ```
 *
 * @since 0.2.0
 */
export const min = (out: string, a: string, b: string): string =>
  `if ${a} < ${b} then ${out} = ${a} elseif ${b} < ${a} then ${out} = ${b} elseif ${a} == 0 and 1 / ${a} > 0 then ${out} = ${b} else ${out} = ${a} end`

/**
 * `out = Math.max(a, b)` in Lua (a and b plain names or numbers).
 *
 * @example
 * ```ts
 * import { max } from "./lean.ts"
 *
 * max("x", "0", "y") // "if 0 > y then x = 0 elseif ... end"
 * ```
 *
 * @since 0.2.0
 */
export const max = (out: string, a: string, b: string): string =>
  `if ${a} > ${b} then ${out} = ${a} elseif ${b} > ${a} then ${out} = ${b} elseif ${a} == 0 and 1 / ${a} < 0 then ${out} = ${b} else ${out} = ${a} end`

/**
 * `out = t - (((t % w) + w) % w)` in Lua: the start of the aligned window
 * holding t.
 *
 * @example
 * ```ts
 * import { alignedStart } from "./lean.ts"
 *
 * alignedStart("start", "cWindow", "now")
 * ```
 *
 * @since 0.2.0
 */
export const alignedStart = (out: string, w: string, t: string): string =>
  `${out} = ${t} - fmod(fmod(${t}, ${w}) + ${w}, ${w})`

/**
 * `out = Math.ceil(excess / rate) + (at > now ? at - now : 0)`, 0 when
 * nothing is in excess: the whole milliseconds until a metered excess has
 * drained at `rate` per ms, counted from the anchor `at` when the clock is
 * behind it (GCRA, the leaky bucket, a greedy token bucket).
 *
 * @example
 * ```ts
 * import { drainMillis } from "./lean.ts"
 *
 * drainMillis("retry", "need - level", "cTokens", "now", "at")
 * ```
 *
 * @since 0.2.0
 */
export const drainMillis = (out: string, excess: string, rate: string, now: string, at: string): string => `
  do
    local _x = ${excess}
    if _x <= 0 then
      ${out} = 0
    else
      local _behind = 0
      if ${at} > ${now} then _behind = ${at} - ${now} end
      ${out} = ceil(_x / ${rate}) + _behind
    end
  end`

/**
 * Reads a state of fixed size: `names` get the stored numbers when `raw`
 * holds a state of this `code`, and `fresh` tells whether it did not.
 *
 * @example
 * ```ts
 * import { readFixed } from "./lean.ts"
 *
 * readFixed(1, ["level", "at"])
 * ```
 *
 * @since 0.2.0
 */
export const readFixed = (code: number, names: ReadonlyArray<string>): string => {
  const list = names.join(", ")
  const got = names.map((n) => `_${n}`).join(", ")
  return `
  local ${list}
  if raw and #raw >= ${8 * (names.length + 1)} then
    local _code, ${got} = sunpack("<${"d".repeat(names.length + 1)}", raw)
    if _code == ${code} then ${list} = ${got} end
  end
  local fresh = ${names[0]} == nil`
}

/**
 * The packed state of fixed size (what the batch entry point writes).
 *
 * @example
 * ```ts
 * import { pack } from "./lean.ts"
 *
 * pack(1, ["nl", "na"]) // 'spack("<ddd", 1, nl, na)'
 * ```
 *
 * @since 0.2.0
 */
export const pack = (code: number, names: ReadonlyArray<string>): string =>
  `spack("<${"d".repeat(names.length + 1)}", ${code}, ${names.join(", ")})`

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
 * The library's reader of a policy's numbers, defined once when the library
 * is loaded: `leanConfig(text)` gives the numbers of `text` (a table),
 * read on its first call and kept after. At most `maxConfigs` texts are
 * kept: past that the table starts afresh (callers send what they like).
 *
 * @example
 * ```ts
 * import { configReader } from "./lean.ts"
 *
 * configReader.includes("local function leanConfig") // true
 * ```
 *
 * @since 0.2.0
 */
export const configReader = `
local maxConfigs, configs, configCount = 1024, {}, 0
local function leanConfig(text)
  local c = configs[text]
  if c ~= nil then return c end
  local huge = math.huge
  c = {}
  for w in string.gmatch(text, "%S+") do c[#c + 1] = ${number("w")} end
  if configCount >= maxConfigs then configs, configCount = {}, 0 end
  configs[text], configCount = c, configCount + 1
  return c
end
`

/**
 * The whole lean body of an algorithm: as an `EVAL` script
 * (`"script"`), or as the body of a Redis function (`"function"`, with
 * `KEYS` and `ARGV` its parameters and {@link configReader} in scope).
 * The two differ only in how they read the policy's numbers.
 *
 * @example
 * ```ts
 * import { body } from "./lean.ts"
 * import * as TokenBucket from "./tokenBucket.ts"
 *
 * body(TokenBucket.lean, "script").includes("redis.call(\"GET\"") // true
 * ```
 *
 * @since 0.2.0
 */
export const body = (lean: Lean, mode: "script" | "function"): string => {
  const count = lean.config.length
  const size = lean.size
  const names = lean.config.join(", ")
  const fields = lean.config.map((_, i) => `cfg[${i + 1}]`).join(", ")
  const config = mode === "function"
    ? `local cfg = leanConfig(ARGV[3])`
    : `local cfg, _text, _from = {}, ARGV[3], 1
for i = 1, ${count} do
  local _to = string.find(_text, " ", _from, true) or (#_text + 1)
  local w = sub(_text, _from, _to - 1)
  cfg[i] = ${number("w")}
  _from = _to + 1
end`
  return `
local floor, ceil, fmod, huge, format = math.floor, math.ceil, math.fmod, math.huge, string.format
local spack, sunpack, sub, srep = struct.pack, struct.unpack, string.sub, string.rep
local now
${Prelude.readNow("now")}
local keep = tonumber(ARGV[2])
local NOTHING = spack("<d", 0)
${config}
local ${names} = ${fields}
local out, single = {}, #KEYS == 1
for k = 1, #KEYS do
  local key = KEYS[k]
  local admit = ARGV[2 + 2 * k] == "${Op.Kind.Admit}"
  local cost = tonumber(ARGV[3 + 2 * k])
  local raw = redis.call("GET", key)
  local allowed, remaining, retry, reset, limit, dirty, settled, packed
  local delay = 0
  -- a block ("0 until" before the state), in force or over: the batch
  -- entry point answers (allowed -1 says so), and drops a block that is over
  local deferred = raw and #raw >= 16 and sub(raw, 1, 8) == NOTHING
  if deferred then
    allowed, remaining, retry, reset, limit = -1, 0, 0, 0, 0
  else
${lean.step}
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
