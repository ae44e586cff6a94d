/**
 * The batch and multi entry points: `Interpreter.apply` and
 * `Interpreter.applyAll` (src/internal/operation), compiled from their
 * TypeScript, over the keys' states in Redis. What is written here by hand
 * is only what the compiled code cannot do itself, each for its reason:
 *
 * - reading `KEYS` and `ARGV`, and the server's `TIME`: they are Redis's,
 *   not the interpreter's (which takes `now` and a key's stored value);
 * - reading a policy from its text and a stored value from its packed
 *   numbers, and writing them back: the layout of each algorithm's numbers
 *   is made from its `Config` and `State` interfaces (`Codecs` below), but
 *   which algorithm a number stands for (a code) is the store's format, and
 *   a composite's or a burst policy's parts name theirs;
 * - the key's TTL (`PX`, from the interpreter's `settledAt`) and the reply
 *   text: what Redis keeps and what crosses the wire.
 *
 * Batch:
 *
 * - `KEYS[i]`: the i-th key (with the store's prefix).
 * - `ARGV[1]`: now in milliseconds, or `""` to read the server's `TIME`.
 * - `ARGV[2]`: how long (ms, or `inf`) a settled key is kept before it is
 *   forgotten.
 * - `ARGV[1 + 2i]`: the i-th key's policy, `code canRelease config…`, then
 *   its blockDuration if it has one (read once per call for each distinct
 *   policy); a composite's `config…` is its count of parts and each part's
 *   `code canRelease config…`, a burst policy's its base's and its burst's.
 * - `ARGV[2 + 2i]`: the i-th key's operations, `kind cost queued window
 *   times` for each run of `times` equal operations (`window` 0: the
 *   policy's own).
 *
 * The reply is an array with one string per key, `allowed remaining
 * retryAfter resetAfter limit` for each of its operations (`allowed` is 1 or
 * 0, numbers as `%.17g`, `inf` for Infinity), then `=value` for an
 * operation that answers one (TakeUpTo, Get, Delete) and `~delay` for an
 * admission a shaper delays; a reply followed by `*count` answers that many
 * operations in a row.
 *
 * A stored value is packed doubles: `code numbers…`, after `0 until` while a
 * block lasts (0 is no algorithm's code). A value of another algorithm reads
 * as none. After a key's operations its value is written only if they
 * changed it, and expires when it has settled (`settledAt + keep`), at
 * least 1 ms from now; it is deleted at once if that is already past, and
 * gets no TTL if it never settles.
 *
 * Multi (one take over several keys, all or nothing): `ARGV[1 + 2i]` is the
 * i-th key's policy and `ARGV[2 + 2i]` its cost; the reply is `1` or `0`
 * (whether every key admitted), then one string per key, `allowed
 * remaining retryAfter resetAfter limit`. The states are written only if
 * every key admitted.
 *
 * @since 0.1.0
 */
import type { Compiled, Field } from "./generated.ts"
import * as Prelude from "./prelude.ts"

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

const reserved = new Set(["and", "break", "do", "else", "elseif", "end", "false", "for", "function", "if", "in"])
for (const w of ["local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while"]) reserved.add(w)
const get = (table: string, name: string): string => reserved.has(name) ? `${table}["${name}"]` : `${table}.${name}`

// `function(a, i) return config, next end` from the Config's fields.
const configReader = (fields: ReadonlyArray<Field>): string =>
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
 * import { codecs } from "./batch.ts"
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
  config = ${configReader(module.config)},
  read = ${stateReader(module.state)},
  write = ${stateWriter(module.state)}
}\n`
    ).join("")
  }`

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
 * import { definitions } from "./batch.ts"
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
-- blockDuration) and the shape its states are read and written with.
local policies
local function policyOf(text)
  local P = policies[text]
  if P == nil then
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

-- In a batch most keys carry the same operations ("0 1 0 0 1"): read each once per call.
local parsedOps

-- Replies of the key being applied, equal ones in a row sent once with
-- "*count" after them (a hot key under attack answers the same denial a
-- thousand times).
local out, n = {}, 0
local la, lrem, lretry, lreset, llimit, lvalue, ldelay, times = false, 0, 0, 0, 0, nil, nil, 0
local function flush()
  if times == 0 then return end
  n = n + 1
  out[n] = reply(la, lrem, lretry, lreset, llimit, lvalue, ldelay)
  if times > 1 then
    n = n + 1
    out[n] = "*" .. times
  end
  times = 0
end
local function answer(r)
  local allowed, remaining, retry, reset, limit, value, delay =
    r.allowed, r.remaining, r.retryAfter, r.resetAfter, r.limit, r.value, r.delay
  if delay ~= nil and not (delay > 0) then delay = nil end
  if
    times > 0 and allowed == la and same(remaining, lrem) and same(retry, lretry) and same(reset, lreset)
    and same(limit, llimit) and (value == lvalue or (value ~= nil and lvalue ~= nil and same(value, lvalue)))
    and (delay == ldelay or (delay ~= nil and ldelay ~= nil and same(delay, ldelay)))
  then
    times = times + 1
    return
  end
  flush()
  la, lrem, lretry, lreset, llimit, lvalue, ldelay, times = allowed, remaining, retry, reset, limit, value, delay, 1
end

-- A key's operations, each run of equal ones as one op table repeated.
local function opsOf(text)
  local ops = parsedOps[text]
  if ops == nil then
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
  n, times = 0, 0
  for i = 1, #replies do answer(replies[i]) end
  flush()
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
 * import { body } from "./batch.ts"
 *
 * body.includes("redis.call(\"TIME\")") // true
 * ```
 *
 * @since 0.2.0
 */
export const body = `
${Prelude.readNow("now")}
keep = num(ARGV[2])
parsedOps, policies = {}, {}
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
 * import { multi } from "./batch.ts"
 *
 * multi.includes("applyAll(KEYS, ARGV)") // true
 * ```
 *
 * @since 0.3.0
 */
export const multi = `
${Prelude.readNow("now")}
keep = num(ARGV[2])
policies = {}
return applyAll(KEYS, ARGV)
`
