/**
 * The start of every tollgate script: the helpers the compiled modules
 * call (JavaScript's semantics where Lua's differ: `Math.max`/`Math.min`,
 * +0 beating -0, as `jmax`/`jmin`; `%` as `fmod`, which is C's `fmod` and
 * JavaScript's remainder alike), number formatting for the replies
 * (`%.17g`, so a double survives the trip through a string exactly; Lua's
 * `tostring` keeps only 14 digits), and the packing of states as doubles
 * (`struct.pack("<d", …)`, exact with no conversion at all).
 *
 * @since 0.1.0
 */

/**
 * The Lua source of the shared helpers, and `require` for the compiled
 * modules.
 *
 * @example
 * ```ts
 * import { lua } from "./prelude.ts"
 *
 * lua.includes("local function jmax") // true
 * ```
 *
 * @since 0.1.0
 */
export const lua = `
-- Bound by bind() on the first call: a Redis Functions library is loaded
-- with no globals but \`redis\`, and its functions run with all of them.
local floor, ceil, fmod, huge, mmax, mmin, format, gmatch, concat, srep, spack, sunpack, unpackAll
local function bind()
  floor, ceil, fmod, huge, mmax, mmin = math.floor, math.ceil, math.fmod, math.huge, math.max, math.min
  format, gmatch, concat, srep = string.format, string.gmatch, table.concat, string.rep
  spack, sunpack, unpackAll = struct.pack, struct.unpack, unpack
end

-- JavaScript's Math.max and Math.min of two numbers (never NaN here).
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
local function packNums(a)
  local n = #a
  if n <= 64 then return spack(packFormat(n), unpackAll(a)) end
  local parts, k = {}, 0
  for i = 1, n, 64 do
    local j = i + 63
    if j > n then j = n end
    k = k + 1
    parts[k] = spack(packFormat(j - i + 1), unpackAll(a, i, j))
  end
  return concat(parts)
end
local function unpackNums(raw)
  local n = floor(#raw / 8)
  if n == 0 then return {} end
  if n <= 64 then
    -- the last value struct.unpack returns is the position after the data
    local a = { sunpack(packFormat(n), raw) }
    a[n + 1] = nil
    return a
  end
  local a, i, pos = {}, 0, 1
  while i < n do
    local m = n - i
    if m > 64 then m = 64 end
    local t = { sunpack(packFormat(m), raw, pos) }
    for j = 1, m do a[i + j] = t[j] end
    pos = t[m + 1]
    i = i + m
  end
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

/**
 * Lua that sets `assign` to now in milliseconds: `ARGV[1]`, or the server's
 * `TIME` when it is `""` (every entry point's first argument).
 *
 * @example
 * ```ts
 * import { readNow } from "./prelude.ts"
 *
 * readNow("now").includes("redis.call(\"TIME\")") // true
 * ```
 *
 * @since 0.2.0
 */
export const readNow = (assign: string): string =>
  `if ARGV[1] == "" then
  local time = redis.call("TIME")
  ${assign} = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
else
  ${assign} = tonumber(ARGV[1])
end`
