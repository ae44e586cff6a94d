/**
 * The end of every tollgate script: `MemoryStore.applyOps` in Lua, for one
 * key or several. For each key it reads the state, applies that key's
 * operations in order with its policy's module from `ALG`, writes the state
 * back with a TTL, and answers every operation. Keys are independent: a
 * call with several keys is several atomic `applyOps` in one round trip.
 *
 * - `KEYS[i]`: the i-th key (with the store's prefix).
 * - `ARGV[1]`: now in milliseconds, or `""` to read the server's `TIME`.
 * - `ARGV[2]`: how long (ms, or `inf`) a settled key is kept before it is
 *   forgotten.
 * - `ARGV[1 + 2i]`: the i-th key's policy, `code canRelease config…` (parsed
 *   once per call for each distinct policy).
 * - `ARGV[2 + 2i]`: the i-th key's operations, `kind cost queued times` for
 *   each run of `times` equal operations.
 *
 * The reply is an array with one string per key, `allowed remaining
 * retryAfter resetAfter limit` for each of its operations (`allowed` is 1 or
 * 0, numbers as `%.17g`, `inf` for Infinity); a reply followed by `*count`
 * answers that many operations in a row.
 *
 * State: one string of 8-byte little-endian doubles, `code numbers…`. A key
 * with no state reads as fresh; a Reset leaves an absent key absent, and a
 * Release gives its units back to an absent key's initial state (which stays
 * absent when that is settled: a key that starts full); a state of another
 * algorithm reads as no state. After the batch the key expires when its state has settled
 * (`settledAt + keep`), at least 1 ms from now, and is deleted at once if
 * that is already past; a state that never settles (a concurrency limit with
 * units out) gets no TTL.
 *
 * @since 0.1.0
 */

/**
 * The Lua source of the driver.
 *
 * @example
 * ```ts
 * import { lua } from "./driver.ts"
 *
 * lua.includes("redis.call(\"TIME\")") // true
 * ```
 *
 * @since 0.1.0
 */
export const lua = `
local now
if ARGV[1] == "" then
  local time = redis.call("TIME")
  now = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
else
  now = num(ARGV[1])
end
local keep = num(ARGV[2])

-- A key's limit is the same in every reply: formatted once while it repeats.
local lastLimit, lastLimitText = nil, nil
local function reply(allowed, remaining, retry, reset, limit)
  local a = "0"
  if allowed then a = "1" end
  if not (lastLimit ~= nil and same(limit, lastLimit)) then
    lastLimit, lastLimitText = limit, fmt(limit)
  end
  return a .. " " .. fmt(remaining) .. " " .. fmt(retry) .. " " .. fmt(reset) .. " " .. lastLimitText
end

-- In a batch most keys carry the same operations ("0 1 0"): parse each once.
local parsedOps = {}

-- Replies of the key being applied, equal ones in a row sent once with
-- "*count" after them (a hot key under attack answers the same denial a
-- thousand times). Kept here, not in closures per key: a call with many keys
-- allocates less (and leaves the Lua collector less to do).
local out, n = {}, 0
local la, lrem, lretry, lreset, llimit, times = false, 0, 0, 0, 0, 0
local function flush()
  if times == 0 then return end
  n = n + 1
  out[n] = reply(la, lrem, lretry, lreset, llimit)
  if times > 1 then
    n = n + 1
    out[n] = "*" .. times
  end
  times = 0
end
local function answer(allowed, remaining, retry, reset, limit)
  if
    times > 0 and allowed == la and same(remaining, lrem) and same(retry, lretry) and same(reset, lreset)
    and same(limit, llimit)
  then
    times = times + 1
    return
  end
  flush()
  la, lrem, lretry, lreset, llimit, times = allowed, remaining, retry, reset, limit, 1
end

local function applyOps(key, P, opsText)
  local A, c, code = P.A, P.c, P.code
  local raw = redis.call("GET", key)
  local state = nil
  if raw then
    local sa = unpackNums(raw)
    if sa[1] == code then state = A.decode(c, sa, 2) end
  end
  local dirty = false
  n, times = 0, 0
  local op = parsedOps[opsText]
  if op == nil then
    op = nums(opsText)
    parsedOps[opsText] = op
  end
  for i = 1, #op, 4 do
    local kind, cost, queued = op[i], op[i + 1], op[i + 2]
    for _ = 1, op[i + 3] do
      local cur = state
      if cur == nil and kind ~= 2 then cur = A.initial(c, now) end
      if kind == 0 then
        local o = A.step(c, cur, now, cost)
        -- a denial keeps the state it produced (the same one, or an attempt logged)
        if state == nil or o.state ~= cur then dirty = true end
        state = o.state
        answer(o.allowed, o.remaining, o.retry, o.reset, o.limit)
      elseif kind == 5 then
        -- a waiter's try: only an admission changes the state (a fresh key
        -- still gets its initial one)
        local o = A.step(c, cur, now, cost)
        local next = cur
        if o.allowed then next = o.state end
        if state == nil or next ~= cur then dirty = true end
        state = next
        answer(o.allowed, o.remaining, o.retry, o.reset, o.limit)
      elseif kind == 1 then
        -- Decision.peekOutcome: allowed and retryAfter for the cost, the rest as it stands
        local o = A.step(c, cur, now, cost)
        local asIs = A.step(c, cur, now, 0)
        answer(o.allowed, asIs.remaining, o.retry, asIs.reset, o.limit)
      elseif kind == 2 then
        if state ~= nil then
          state = A.initial(c, now)
          dirty = true
        end
        answer(true, 0, 0, 0, A.maxCost(c))
      elseif kind == 3 then
        if P.canRelease then
          state = A.release(c, cur, now, cost)
          dirty = true
        end
        answer(true, 0, 0, 0, A.maxCost(c))
      else
        local limit = A.maxCost(c)
        answer(false, 0, A.waitTime(c, cur, now, queued, cost), A.waitTime(c, cur, now, queued, limit), limit)
      end
    end
  end
  flush()
  if dirty then
    local ttl = A.settledAt(c, state) + keep - now
    if ttl <= 0 then
      if raw then redis.call("DEL", key) end
    else
      local encoded = { code }
      A.encode(c, state, encoded)
      local value = packNums(encoded)
      if ttl == huge then
        redis.call("SET", key, value)
      else
        -- whole milliseconds, at least 1; beyond 2^50 ms (35 000 years) it makes no difference
        redis.call("SET", key, value, "PX", format("%d", ceil(jmin(ttl, 1125899906842624))))
      end
    end
  end
  return concat(out, " ", 1, n)
end

local policies = {}
local results = {}
for k = 1, #KEYS do
  local text = ARGV[1 + 2 * k]
  local P = policies[text]
  if P == nil then
    local ca = nums(text)
    local A = ALG[ca[1]]
    P = { code = ca[1], canRelease = ca[2] == 1, A = A, c = (A.config(ca, 3)) }
    policies[text] = P
  end
  results[k] = applyOps(KEYS[k], P, ARGV[2 + 2 * k])
end
return results
`
