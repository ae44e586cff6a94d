/**
 * The batch entry point: `MemoryStore.applyOps` in Lua, for one key or
 * several, any operations. For each key it reads the state, applies that
 * key's operations in order with its policy's module from `ALG`, writes the
 * state back with a TTL, and answers every operation. Keys are independent:
 * a call with several keys is several atomic `applyOps` in one round trip.
 * A hot key's batch (many operations on one key) and any call the lean entry
 * point does not take (peeks, resets, releases, waiting times, composites)
 * come here.
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
 * The entry point comes in two parts: `definitions` (functions, made once
 * when a Redis Functions library is loaded, or at the start of each
 * `EVAL`), and `body` (what runs per call).
 *
 * @since 0.1.0
 */
import * as Prelude from "./prelude.ts"

/**
 * The functions of the batch entry point (after the prelude and the
 * modules): made once in a library.
 *
 * @example
 * ```ts
 * import { definitions } from "./batch.ts"
 *
 * definitions.includes("local function applyOps") // true
 * ```
 *
 * @since 0.2.0
 */
export const definitions = `
-- Set by each call.
local now, keep

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

-- In a batch most keys carry the same operations ("0 1 0"): parse each once
-- (per call: a library's functions outlive calls, and callers send what they like).
local parsedOps

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

-- A key's new state, kept until it settles; a settled key is deleted.
local function writeState(key, raw, A, c, code, state)
  local ttl = A.settledAt(c, state) + keep - now
  if ttl <= 0 then
    if raw then redis.call("DEL", key) end
    return
  end
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
      elseif kind == 16 then
        -- a signal for an adaptive rate (cost: the signal, queued: its ms)
        if A.adapt ~= nil then
          state = A.adapt(c, cur, now, cost, queued)
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
  if dirty then writeState(key, raw, A, c, code, state) end
  return concat(out, " ", 1, n)
end

`

/**
 * What runs per call, with `KEYS` and `ARGV` in scope (the body of an
 * `EVAL` script, or of the library's function).
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
parsedOps = {}
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
