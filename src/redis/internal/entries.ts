/**
 * The Lua written by hand: the entry points around the compiled modules.
 * Everything that decides (the algorithms, the interpreter of operations,
 * the bound rule, the block) is compiled from TypeScript (`generated.ts`,
 * see `tools/lua`), and the readers and writers of each algorithm's numbers
 * are made from its interfaces (`fields.ts`). What is here, and why it is
 * not compiled:
 *
 * - reading `KEYS` and `ARGV`, and the server's `TIME` (`readNow`): they
 *   are Redis's, not the interpreter's, which takes `now` and a key's
 *   stored value;
 * - `GET`, `SET` with its TTL (`PX` from the compiled `settledAt`; the lean
 *   entry point's expiry kept after a fixed-size state, so a busy key keeps
 *   its TTL) and `DEL`: Redis's commands;
 * - which algorithm a stored value or a policy's text is (its code, the
 *   first number: the store's format), and the parts a composite or a burst
 *   policy names by their codes (`readShape`, `readState`, `writeState`);
 * - numbers as text (`fmt`, `%.17g`, which round-trips every double where
 *   Lua's `tostring` keeps 14 digits; `num`, `nums`), states as packed
 *   doubles (`struct`, `packNums`, `unpackNums`), and the replies (an
 *   array of numbers for the lean entry point, text with runs of equal
 *   replies for the batch one): what crosses the wire;
 * - caches that live as long as the library (a policy's configuration per
 *   text), which the TypeScript has no place for.
 *
 * The three entry points:
 *
 * - **lean**: one Take or Admit per key, the algorithm's compiled
 *   `initial`, `step` and `settledAt` (its lean copy, which allocates
 *   nothing of its own).
 *
 *   - `KEYS[i]`: the i-th key (with the store's prefix).
 *   - `ARGV[1]`: now in milliseconds, or `""` to read the server's `TIME`.
 *   - `ARGV[2]`: how long (ms, or `inf`) a settled key is kept.
 *   - `ARGV[3]`: the policy's configuration (`fields.configNumbers`),
 *     separated by spaces: as a function of the library read once and kept
 *     (at most 1024 texts per algorithm); as an `EVAL` script read on every
 *     call.
 *   - `ARGV[4 …]`: for each key its operation, `kind cost` (Take or Admit).
 *   - then, optionally, `b`: the reply in binary (below).
 *
 *   A key with a block (its value starts with `0 until`) is left to the
 *   batch entry point: its `allowed` is -1 and nothing is written. The reply
 *   is a flat array, five values per key (six for a shaper, its `delay`
 *   last): `allowed` (1 or 0), `remaining`, `retryAfter`, `resetAfter`,
 *   `limit`; a value is an integer reply when it is a whole number that
 *   survives one exactly (not −0, within ±2^53), otherwise text (`%.17g`,
 *   `inf`, `-inf`, `-0`). With `b` (and more than one key) the reply is
 *   one string instead, the same values as little-endian doubles
 *   (`struct.pack`): every value exact, nothing formatted on the server,
 *   and one string for the client to read where an array of five integers
 *   a key cost it more than the rest of its work on the reply. Asked for
 *   only over a client that gives that reply back as bytes (the store's
 *   own ioredis).
 *
 * - **batch**: any operations on each key, the compiled `Interpreter.apply`.
 *
 *   - `ARGV[1 + 2i]`: the i-th key's policy, `code canRelease config…`,
 *     then its blockDuration if it has one (read once per call for each
 *     distinct policy); a composite's `config…` is its count of parts and
 *     each part's `code canRelease config…`, a burst policy's its base's
 *     and its burst's.
 *   - `ARGV[2 + 2i]`: the i-th key's operations, `kind cost queued window
 *     times` for each run of `times` equal operations (`window` 0: the
 *     policy's own).
 *
 *   The reply is one string per key, `allowed remaining retryAfter
 *   resetAfter limit` for each of its operations, then `=value` for an
 *   operation that answers one (TakeUpTo, Get, Delete) and `~delay` for an
 *   admission a shaper delays; a reply followed by `*count` answers that
 *   many operations in a row, and one followed by `^count a b c` answers
 *   that many whose k-th (from 0) has remaining, retryAfter and resetAfter
 *   plus k times a, b and c. A key's value is written only if its
 *   operations changed it, and expires when it has settled
 *   (`settledAt + keep`), at least 1 ms from now; it is deleted at once if
 *   that is already past, and gets no TTL if it never settles.
 *
 * - **multi**: one take over several keys, all or nothing, the compiled
 *   `Interpreter.applyAll`: `ARGV[1 + 2i]` is the i-th key's policy and
 *   `ARGV[2 + 2i]` its cost; the reply is `1` or `0` (whether every key
 *   admitted), then one string per key, `allowed remaining retryAfter
 *   resetAfter limit`. The states are written only if every key admitted.
 *
 * A stored value is packed doubles: `code numbers…`, after `0 until` while a
 * block lasts (0 is no algorithm's code); a value of another algorithm reads
 * as none.
 *
 * @since 0.3.0
 */
import * as Op from "../../internal/operation/Op.ts"
import * as Fields from "./fields.ts"
import { type Compiled, runtime } from "./generated.ts"

/**
 * The helpers of the entry points (after the compiled code's runtime):
 * `bind()`, numbers as text and back, packed doubles.
 *
 * @example
 * ```ts
 * import { prelude } from "./entries.ts"
 *
 * prelude.includes("local function fmt") // true
 * ```
 *
 * @since 0.3.0
 */
export const prelude = `
-- Bound by bind() on the first call (the compiled code's runtime with
-- them): a Redis Functions library is loaded with no globals but \`redis\`,
-- and its functions run with all of them.
local format, gmatch, concat, srep, spack, sunpack, unpackAll
local function bind()
  bindRuntime()
  format, gmatch, concat, srep = string.format, string.gmatch, table.concat, string.rep
  spack, sunpack, unpackAll = struct.pack, struct.unpack, unpack
end

-- How many texts (policies, configurations, operations) a cache keeps:
-- past that it starts afresh (callers send what they like).
local maxConfigs = 1024

-- Equal, telling -0 from 0 (they print differently).
local function same(a, b)
  return a == b and (a ~= 0 or 1 / a == 1 / b)
end

-- Replies travel as text: "%.17g" round-trips every double ("%d" writes the
-- same digits for a whole number, twice as fast); "inf" is Infinity.
local function fmt(x)
  -- the commonest figure (retryAfter of an admission), with no call at all
  if x == 0 and 1 / x > 0 then return "0" end
  if x == huge then return "inf" end
  if x == -huge then return "-inf" end
  if x == floor(x) and x < 1e15 and x > -1e15 and (x ~= 0 or 1 / x > 0) then return format("%d", x) end
  return format("%.17g", x)
end
local function num(s)
  if s == "inf" then return huge end
  if s == "-inf" then return -huge end
  return tonumber(s)
end
local function nums(s)
  local a, n = {}, 0
  for w in gmatch(s, "%S+") do
    n = n + 1
    a[n] = num(w)
  end
  return a
end

-- States are kept as 8-byte little-endian doubles: exact, and about ten
-- times cheaper to read and write than text. One struct call per state of
-- up to 64 numbers (its format, "<dd…", made once per length); a longer one
-- (a sliding log) goes in pieces of 64, within Lua's limit on results.
local packFormats = {}
local function packFormat(n)
  local f = packFormats[n]
  if f == nil then
    f = "<" .. srep("d", n)
    packFormats[n] = f
  end
  return f
end
-- a[i..j] packed (nothing when j < i)
local function packRange(a, i, j)
  local n = j - i + 1
  if n <= 0 then return "" end
  if n <= 64 then return spack(packFormat(n), unpackAll(a, i, j)) end
  local parts, k = {}, 0
  for from = i, j, 64 do
    local to = from + 63
    if to > j then to = j end
    k = k + 1
    parts[k] = spack(packFormat(to - from + 1), unpackAll(a, from, to))
  end
  return concat(parts)
end
local function packNums(a)
  return packRange(a, 1, #a)
end
-- n numbers of raw from byte pos, as a new list, and the position after them
local function unpackRange(raw, pos, n)
  if n == 0 then return {}, pos end
  if n <= 64 then
    -- the last value struct.unpack returns is the position after the data
    local a = { sunpack(packFormat(n), raw, pos) }
    local after = a[n + 1]
    a[n + 1] = nil
    return a, after
  end
  local a, i = {}, 0
  while i < n do
    local m = n - i
    if m > 64 then m = 64 end
    local t = { sunpack(packFormat(m), raw, pos) }
    for j = 1, m do a[i + j] = t[j] end
    pos = t[m + 1]
    i = i + m
  end
  return a, pos
end
local function unpackNums(raw)
  return (unpackRange(raw, 1, floor(#raw / 8)))
end
`

/**
 * Lua that sets `assign` to now in milliseconds: `ARGV[1]`, or the server's
 * `TIME` when it is `""` (every entry point's first argument).
 *
 * @example
 * ```ts
 * import { readNow } from "./entries.ts"
 *
 * readNow("now").includes("redis.call(\"TIME\")") // true
 * ```
 *
 * @since 0.2.0
 */
export const readNow = (assign: string): string =>
  `if ARGV[1] == "" then
  local time = redis.call("TIME")
  -- (arithmetic on a numeral reads it as tonumber does, in fewer steps)
  ${assign} = time[1] * 1000 + floor(time[2] / 1000)
else
  ${assign} = tonumber(ARGV[1])
end`

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
  nxt = o.state
  if admit and not allowed then nxt = s end
  dirty = fresh or nxt ~= s
  if dirty then
    settled = ${m}SettledAt(cfg, nxt)${
    // a state of fixed size is packed where it is written, with its expiry
    Fields.sizeOf(lean.module) === undefined
      ? `\n    packed = ${Fields.encodeState(lean.module, lean.code, "nxt")}`
      : ""}
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
 * import { refreshMillis } from "./entries.ts"
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
 * import { configReader } from "./entries.ts"
 *
 * configReader.includes("local function configCache") // true
 * ```
 *
 * @since 0.2.0
 */
export const configReader = `
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
 * import { reader } from "./entries.ts"
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
 * import { leanDefinitions } from "./entries.ts"
 *
 * leanDefinitions(modules.Gcra).startsWith("local GcraConfig") // true
 * ```
 *
 * @since 0.2.0
 */
export const leanDefinitions = (module: Compiled): string => {
  const m = module.name
  return `local ${reader(module)} = configCache(${Fields.decodeConfig(module)})
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
 * import { leanBody } from "./entries.ts"
 *
 * leanBody({ module: modules.TokenBucket, code: 1 }, "script").includes("redis.call(\"GET\"") // true
 * ```
 *
 * @since 0.2.0
 */
export const leanBody = (lean: Lean, mode: "script" | "function"): string => {
  const size = Fields.sizeOf(lean.module)
  const m = lean.module.name
  // a fixed-size state and the expiry after it, packed at once
  const packWith = (expires: string) => Fields.encodeState(lean.module, lean.code, "nxt", expires)
  const config = `${mode === "function" ? "if floor == nil then bind() end\n" : ""}if ${m}Step == nil then
  local A = require("lean:${lean.module.path}").algorithm
  ${m}Initial, ${m}Step, ${m}SettledAt = A.initial, A.step, A.settledAt
end
local cfg = ${reader(lean.module)}(ARGV[3])`
  const prefix = mode === "function"
    ? ""
    : `${runtime}${prelude}bind()\n${configReader}${lean.module.lean}${leanDefinitions(lean.module)}`
  return `${prefix}
${config}
local now
${readNow("now")}
local keep = tonumber(ARGV[2])
local single = #KEYS == 1
-- one key (the commonest call) answers with a table of its own, made at its
-- reply: the table for several keys' replies is made only for several
local out
if not single then out = {} end
-- a trailing "b": the reply as one string of doubles (see the module's doc)
local binary = not single and ARGV[4 + 2 * #KEYS] == "b"
for k = 1, #KEYS do
  local key = KEYS[k]
  local admit = ARGV[2 + 2 * k] == "${Op.Kind.Admit}"
  local cost = tonumber(ARGV[3 + 2 * k])
  local raw = redis.call("GET", key)
  local allowed, remaining, retry, reset, limit, dirty, settled, packed, nxt
  local delay = 0
${Fields.decodeState(lean.module, lean.code, `${lean.module.name}State`)}
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
      redis.call("SET", key, ${size === undefined ? "packed" : packWith("huge")})
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
        redis.call("SET", key, ${packWith("expires")}, "KEEPTTL")
      else
        expires = settled + keep + ${refreshMillis}
        ttl = expires - now
        -- whole milliseconds, at least 1; beyond 2^50 ms (35 000 years) it makes no difference
        if ttl > 1125899906842624 then ttl = 1125899906842624 end
        redis.call("SET", key, ${packWith("expires")}, "PX", ceil(ttl))
      end`
  }
    end
  end
  local a = 0
  if allowed == -1 then a = -1 elseif allowed then a = 1 end
  if binary then
${
    lean.delay === true
      ? `    out[k] = spack("<dddddd", a, remaining, retry, reset, limit, delay)`
      : `    out[k] = spack("<ddddd", a, remaining, retry, reset, limit)`
  }
  else
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
end
if binary then return table.concat(out) end
return out
`
}
/**
 * The paths of the modules the entry points require: the interpreter, the
 * block, the bound rule, and the policies made of others, with the codes
 * of the last three.
 *
 * @since 0.3.0
 */
export interface Structure {
  readonly interpreter: string
  readonly block: string
  readonly algorithm: string
  readonly composite: { readonly code: number; readonly path: string }
  readonly burst: { readonly code: number; readonly path: string }
  readonly unlimited: { readonly code: number; readonly path: string }
}

/**
 * The functions of the batch and multi entry points (after the prelude,
 * the compiled modules and {@link codecs}): made once in a library.
 *
 * @example
 * ```ts
 * import { definitions } from "./entries.ts"
 *
 * const lua = definitions({
 *   interpreter: "src.internal.operation.Interpreter",
 *   block: "src.internal.algorithm.Block",
 *   algorithm: "src.internal.algorithm.Algorithm",
 *   composite: { code: 9, path: "src.internal.algorithm.Composite" },
 *   burst: { code: 10, path: "src.internal.algorithm.Burst" },
 *   unlimited: { code: 11, path: "src.internal.algorithm.Unlimited" }
 * })
 * lua.includes("local function applyOps") // true
 * ```
 *
 * @since 0.2.0
 */
export const definitions = (s: Structure): string => `
-- Set by each call.
local now, keep

local COMPOSITE, BURST, UNLIMITED = ${s.composite.code}, ${s.burst.code}, ${s.unlimited.code}

-- A policy's algorithm from its text's numbers at i: a shape (the
-- algorithm, its configuration, its code; a composite's or a burst's
-- parts, each a shape, which is also the Part the TypeScript expects), and
-- the index after it.
local function readShape(a, i)
  local code = a[i]
  if code == COMPOSITE then
    local n, parts = a[i + 2], {}
    i = i + 3
    for k = 1, n do parts[k], i = readShape(a, i) end
    return { code = code, algorithm = require("${s.composite.path}").algorithm, config = { parts = parts }, parts = parts }, i
  elseif code == BURST then
    local base, burst
    base, i = readShape(a, i + 2)
    burst, i = readShape(a, i)
    return {
      code = code, algorithm = require("${s.burst.path}").algorithm, config = { base = base, burst = burst },
      parts = { base, burst }
    }, i
  elseif code == UNLIMITED then
    local U = require("${s.unlimited.path}")
    return { code = code, algorithm = U.algorithm, config = U.config }, i + 2
  end
  local codec = codecs[code]
  local config, after = codec.config(a, i + 2)
  return { code = code, algorithm = require(codec.path).algorithm, config = config }, after
end

-- A state of the shape from the numbers at i (nil: not one), and the index after it.
local function readState(shape, a, i)
  local code = shape.code
  if a[i] ~= code then return nil end
  if code == COMPOSITE then
    local parts = shape.parts
    if a[i + 1] ~= #parts then return nil end
    i = i + 2
    local s = {}
    for k = 1, #parts do
      s[k], i = readState(parts[k], a, i)
      if s[k] == nil then return nil end
    end
    return s, i
  elseif code == BURST then
    local base, burst
    base, i = readState(shape.parts[1], a, i + 1)
    if base == nil then return nil end
    burst, i = readState(shape.parts[2], a, i)
    if burst == nil then return nil end
    return { base, burst }, i
  elseif code == UNLIMITED then
    return shape.algorithm.initial(shape.config, now), i + 1
  end
  return codecs[code].read(a, i + 1)
end

local function writeState(shape, s, out)
  local code = shape.code
  out[#out + 1] = code
  if code == COMPOSITE then
    out[#out + 1] = #shape.parts
    for k = 1, #shape.parts do writeState(shape.parts[k], s[k], out) end
  elseif code == BURST then
    writeState(shape.parts[1], s[1], out)
    writeState(shape.parts[2], s[2], out)
  elseif code ~= UNLIMITED then
    codecs[code].write(s, out)
  end
end

-- A policy from its text: the interpreter's (the bound rule and its
-- blockDuration) and the shape its states are read and written with; made
-- on its first call and kept (at most maxConfigs).
local policies, policyCount = {}, 0
local function policyOf(text)
  local P = policies[text]
  if P == nil then
    if policyCount >= maxConfigs then policies, policyCount = {}, 0 end
    policyCount = policyCount + 1
    local a = nums(text)
    local shape, after = readShape(a, 1)
    P = {
      shape = shape,
      policy = { rule = require("${s.algorithm}").bind(shape.algorithm, shape.config), blockMillis = a[after] or 0 }
    }
    policies[text] = P
  end
  return P
end

-- A key's stored value as the interpreter holds it: none (nil), the
-- state, or a block beside it (Block.Stored, made as the compiled class
-- makes its instances).
local function readKey(key, P)
  local raw = redis.call("GET", key)
  if not raw then return raw, nil end
  local a = unpackNums(raw)
  local at, blockedUntil = 1, nil
  if a[1] == 0 and a[2] ~= nil then
    blockedUntil = a[2]
    at = 3
  end
  local state = readState(P.shape, a, at)
  if state == nil then return raw, nil end
  if blockedUntil == nil then return raw, state end
  local Stored = require("${s.block}").Stored
  local stored = setmetatable({}, Stored.prototype)
  stored:____constructor(blockedUntil, state)
  return raw, stored
end

-- Writes a key's stored value, kept until it settles; a settled key (or
-- none) is deleted.
local function writeKey(key, raw, P, stored)
  local ttl = -huge
  if stored ~= nil then
    local settled = require("${s.interpreter}").settledAt(P.policy, stored)
    if settled ~= -huge then ttl = settled + keep - now end
  end
  if stored == nil or ttl <= 0 then
    if raw then redis.call("DEL", key) end
    return
  end
  local out = {}
  local state = stored
  if getmetatable(stored) == require("${s.block}").Stored.prototype then
    out[1], out[2] = 0, stored["until"]
    state = stored.state
  end
  writeState(P.shape, state, out)
  local value = packNums(out)
  if ttl == huge then
    redis.call("SET", key, value)
  else
    -- whole milliseconds, at least 1; beyond 2^50 ms (35 000 years) it makes no difference
    redis.call("SET", key, value, "PX", format("%d", ceil(jmin(ttl, 1125899906842624))))
  end
end

-- Whether the operations changed the stored value (a block beside the
-- same state until the same time is the same).
local function changed(before, after)
  if before == after then return false end
  if before == nil or after == nil then return true end
  local Stored = require("${s.block}").Stored.prototype
  if getmetatable(before) == Stored and getmetatable(after) == Stored then
    return not (before.state == after.state and same(before["until"], after["until"]))
  end
  return true
end

-- A key's limit is the same in every reply: formatted once while it repeats.
local lastLimit, lastLimitText = nil, nil
local function reply(allowed, remaining, retry, reset, limit, value, delay)
  local a = "0"
  if allowed then a = "1" end
  if not (lastLimit ~= nil and same(limit, lastLimit)) then
    lastLimit, lastLimitText = limit, fmt(limit)
  end
  local text = a .. " " .. fmt(remaining) .. " " .. fmt(retry) .. " " .. fmt(reset) .. " " .. lastLimitText
  if value ~= nil then text = text .. " =" .. fmt(value) end
  if delay ~= nil then text = text .. " ~" .. fmt(delay) end
  return text
end

-- A batch's operations, read once and kept (at most maxConfigs): most keys
-- carry the same ("0 1 0 0 1").
local parsedOps, parsedCount = {}, 0

-- Replies of the key being applied, as runs: \`times\` replies in a row
-- that differ only by a constant step in remaining, retryAfter and
-- resetAfter are sent once, with "^times" and the three steps after them
-- (a hot key's admissions: remaining falls by the cost, resetAfter grows by
-- its time); equal replies are the run whose steps are 0, "*times" (a hot
-- key under attack answers the same denial a thousand times). The k-th
-- reply of a run is the first plus k times each step: a reply joins a run
-- only if that sum gives it exactly, so the reader's same sum does too.
local out, n = {}, 0
local lr, la, lrem, lretry, lreset, llimit, lvalue, ldelay, times = nil, false, 0, 0, 0, 0, nil, nil, 0
-- equal: every reply of the run so far is the first (a step of 0 would not
-- do: -0 plus 0 is 0); else the run steps by drem, dretry and dreset.
local equal, drem, dretry, dreset = true, 0, 0, 0
local function flush()
  if times == 0 then return end
  n = n + 1
  out[n] = reply(la, lrem, lretry, lreset, llimit, lvalue, ldelay)
  if times > 1 then
    if equal then
      n = n + 1
      out[n] = "*" .. times
    else
      out[n + 1], out[n + 2], out[n + 3], out[n + 4] = "^" .. times, fmt(drem), fmt(dretry), fmt(dreset)
      n = n + 4
    end
  end
  times = 0
end
local function answer(r)
  if times > 0 and r == lr and equal then
    -- the interpreter's reply again (an operation that changed nothing, repeated)
    times = times + 1
    return
  end
  local delay = r.delay
  if delay ~= nil and not (delay > 0) then delay = nil end
  if times > 0 then
    local value = r.value
    if
      r.allowed == la and same(r.limit, llimit) and (value == lvalue or (value ~= nil and lvalue ~= nil and same(value, lvalue)))
      and (delay == ldelay or (delay ~= nil and ldelay ~= nil and same(delay, ldelay)))
    then
      local rem, retry, reset = r.remaining, r.retryAfter, r.resetAfter
      if equal and same(rem, lrem) and same(retry, lretry) and same(reset, lreset) then
        times = times + 1
        return
      elseif times == 1 then
        local a, b, c = rem - lrem, retry - lretry, reset - lreset
        if same(lrem + a, rem) and same(lretry + b, retry) and same(lreset + c, reset) then
          equal, drem, dretry, dreset, times = false, a, b, c, 2
          return
        end
      elseif not equal and same(lrem + times * drem, rem) and same(lretry + times * dretry, retry) and same(lreset + times * dreset, reset) then
        times = times + 1
        return
      end
    end
  end
  flush()
  lr, la, lrem, lretry, lreset, llimit, lvalue, ldelay, times, equal =
    r, r.allowed, r.remaining, r.retryAfter, r.resetAfter, r.limit, r.value, delay, 1, true
end

-- A key's operations, each run of equal ones as one op table repeated.
local function opsOf(text)
  local ops = parsedOps[text]
  if ops == nil then
    if parsedCount >= maxConfigs then parsedOps, parsedCount = {}, 0 end
    parsedCount = parsedCount + 1
    local a = nums(text)
    ops = {}
    for i = 1, #a, 5 do
      local op = { kind = a[i], cost = a[i + 1], queued = a[i + 2], window = a[i + 3] }
      for _ = 1, a[i + 4] do ops[#ops + 1] = op end
    end
    parsedOps[text] = ops
  end
  return ops
end

local function applyOps(key, P, opsText)
  local raw, stored = readKey(key, P)
  local result = require("${s.interpreter}").apply(P.policy, stored, now, opsOf(opsText))
  local replies, after = result[1], result[2]
  n, times, lr = 0, 0, nil
  for i = 1, #replies do answer(replies[i]) end
  flush()
  lr = nil
  if changed(stored, after) then writeKey(key, raw, P, after) end
  return concat(out, " ", 1, n)
end

local function applyAll(KEYS, ARGV)
  local count = #KEYS
  local Ps, raws, entries, storeds = {}, {}, {}, {}
  for k = 1, count do
    local P = policyOf(ARGV[1 + 2 * k])
    Ps[k] = P
    raws[k], storeds[k] = readKey(KEYS[k], P)
    entries[k] = { policy = P.policy, cost = num(ARGV[2 + 2 * k]) }
  end
  local result = require("${s.interpreter}").applyAll(entries, storeds, now)
  local all, after = result[1], result[2]
  local reply0 = { 0 }
  if all.allowed then reply0[1] = 1 end
  for k = 1, count do
    -- (admitted: no key was blocked, and a block seen over is written without it)
    if all.allowed then writeKey(KEYS[k], raws[k], Ps[k], after[k]) end
    local r = all.replies[k]
    reply0[k + 1] = reply(r.allowed, r.remaining, r.retryAfter, r.resetAfter, r.limit)
  end
  return reply0
end
`

/**
 * What the batch entry point runs per call, with `KEYS` and `ARGV` in scope.
 *
 * @example
 * ```ts
 * import { body } from "./entries.ts"
 *
 * body.includes("redis.call(\"TIME\")") // true
 * ```
 *
 * @since 0.2.0
 */
export const body = `
${readNow("now")}
keep = num(ARGV[2])
local results = {}
for k = 1, #KEYS do
  results[k] = applyOps(KEYS[k], policyOf(ARGV[1 + 2 * k]), ARGV[2 + 2 * k])
end
return results
`

/**
 * What the multi entry point runs per call, with `KEYS` and `ARGV` in scope.
 *
 * @example
 * ```ts
 * import { multi } from "./entries.ts"
 *
 * multi.includes("applyAll(KEYS, ARGV)") // true
 * ```
 *
 * @since 0.3.0
 */
export const multi = `
${readNow("now")}
keep = num(ARGV[2])
return applyAll(KEYS, ARGV)
`
