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
 * - `ARGV[3 …]`: the policy's numbers (the module's `config`), then for each
 *   key its operation, `kind cost` (0 Take, 5 Admit).
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
}

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

/**
 * The whole lean body of an algorithm: the same text runs as an `EVAL`
 * script and as the body of a Redis function (with `KEYS` and `ARGV` its
 * parameters).
 *
 * @example
 * ```ts
 * import { body } from "./lean.ts"
 * import * as TokenBucket from "./tokenBucket.ts"
 *
 * body(TokenBucket.lean).includes("redis.call(\"GET\"") // true
 * ```
 *
 * @since 0.2.0
 */
export const body = (lean: Lean): string => {
  const size = lean.config.length
  return `
local floor, ceil, fmod, huge, format = math.floor, math.ceil, math.fmod, math.huge, string.format
local spack, sunpack, sub, srep = struct.pack, struct.unpack, string.sub, string.rep
local now
${Prelude.readNow("now")}
local keep = tonumber(ARGV[2])
local NOTHING = spack("<d", 0)
local ${lean.config.join(", ")} = ${
    lean.config.map((_, i) =>
      `(ARGV[${3 + i}] == "-inf" and -huge) or (ARGV[${3 + i}] == "inf" and huge) or tonumber(ARGV[${3 + i}])`
    ).join(", ")
  }
local out, single = {}, #KEYS == 1
for k = 1, #KEYS do
  local key = KEYS[k]
  local admit = ARGV[${1 + size} + 2 * k] == "5"
  local cost = tonumber(ARGV[${2 + size} + 2 * k])
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
      redis.call("SET", key, packed)
    else
      -- whole milliseconds, at least 1; beyond 2^50 ms (35 000 years) it makes no difference
      if ttl > 1125899906842624 then ttl = 1125899906842624 end
      redis.call("SET", key, packed, "PX", ceil(ttl))
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
