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
 * - `ARGV[1 + 2i]`: the i-th key's policy, `code canRelease config…`, then
 *   its blockDuration if it has one (parsed once per call for each distinct
 *   policy).
 * - `ARGV[2 + 2i]`: the i-th key's operations, `kind cost queued window
 *   times` for each run of `times` equal operations (`window` 0: the
 *   policy's own).
 *
 * The reply is an array with one string per key, `allowed remaining
 * retryAfter resetAfter limit` for each of its operations (`allowed` is 1 or
 * 0, numbers as `%.17g`, `inf` for Infinity), then `=value` for an
 * operation that answers one (TakeUpTo, Get, Delete); a reply followed by
 * `*count` answers that many operations in a row.
 *
 * A block is kept before the state, `0 until` (0 is no algorithm's code);
 * a block seen over is dropped (the state is written without it).
 *
 * State: one string of 8-byte little-endian doubles, `code numbers…`. A key
 * with no state reads as fresh; a Reset leaves an absent key absent, and a
 * Release gives its units back to an absent key's initial state, unless
 * that is settled (a key that starts full: it stays absent); a state of
 * another algorithm reads as no state. After the batch the key expires when its state has settled
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
import * as Op from "../../internal/operation/Op.ts"
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

-- In a batch most keys carry the same operations ("0 1 0 0 1"): parse each once
-- (per call: a library's functions outlive calls, and callers send what they like).
local parsedOps

-- Replies of the key being applied, equal ones in a row sent once with
-- "*count" after them (a hot key under attack answers the same denial a
-- thousand times). Kept here, not in closures per key: a call with many keys
-- allocates less (and leaves the Lua collector less to do).
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
-- (delay: a shaper's, for an admission; nil when 0)
local function answer(allowed, remaining, retry, reset, limit, value, delay)
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

-- Decision.peekOutcome: allowed, retryAfter and limit for the cost, the rest as it stands.
local function peek(A, c, s, cost)
  local o = A.step(c, s, now, cost)
  local asIs = A.step(c, s, now, 0)
  return { allowed = o.allowed, remaining = asIs.remaining, retry = o.retry, reset = asIs.reset, limit = o.limit }
end

-- Block.outcome: what a request of cost is told while the key is blocked until u.
local function blockedOutcome(A, c, s, u, cost)
  local o = peek(A, c, s, cost)
  local left = u - now
  return {
    allowed = false, remaining = 0, retry = jmax(left, A.waitTime(c, s, now, 0, cost)), reset = jmax(left, o.reset),
    limit = o.limit
  }
end

local function answerWith(o, value)
  local delay = nil
  if o.allowed then delay = o.delay end
  answer(o.allowed, o.remaining, o.retry, o.reset, o.limit, value, delay)
end

-- Algorithm.takeUpTo: the largest cost up to most, and what is there, that
-- one step admits; none: the figures of a unit request, denied.
local function takeUpTo(A, c, s, most)
  local there = A.step(c, s, now, 0).remaining
  local hi = floor(jmin(most, there))
  if hi >= 1 then
    local o = A.step(c, s, now, hi)
    if o.allowed then return hi, o end
    local lo, best = 0, nil
    while lo + 1 < hi do
      local mid = floor((lo + hi) / 2)
      local m = A.step(c, s, now, mid)
      if m.allowed then
        lo, best = mid, m
      else
        hi = mid
      end
    end
    if best ~= nil then return lo, best end
  end
  local probe = peek(A, c, s, 1)
  probe.allowed = false
  return 0, probe
end

-- A key's new state, kept until it settles (a block beside it while it
-- lasts); a settled key is deleted.
local function writeState(key, raw, A, c, code, state, blockedUntil)
  local blockedNow = state ~= nil and now < blockedUntil
  local ttl = huge
  if state ~= nil then
    local settled = A.settledAt(c, state)
    if blockedNow then settled = jmax(blockedUntil, settled) end
    -- settled from the start (no limit at all): nothing to keep, however long settled keys are kept
    if settled == -huge then ttl = -huge else ttl = settled + keep - now end
  end
  if state == nil or ttl <= 0 then
    if raw then redis.call("DEL", key) end
  else
    local encoded = { code }
    if blockedNow then encoded = { 0, blockedUntil, code } end
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

-- A key's stored value: the algorithm's code and state, after "0 until"
-- while a block lasts (0 is no algorithm's code). Returns the raw value, the
-- state (nil: none) and until when it is blocked (-huge: not).
local function readState(key, A, c, code)
  local raw = redis.call("GET", key)
  local state, blockedUntil = nil, -huge
  if raw then
    local sa = unpackNums(raw)
    local at = 1
    if sa[1] == 0 and sa[2] ~= nil then
      blockedUntil = sa[2]
      at = 3
    end
    if sa[at] == code then state = A.decode(c, sa, at + 1) end
    if state == nil then blockedUntil = -huge end
  end
  return raw, state, blockedUntil
end

local function applyOps(key, P, opsText)
  local A, c, code = P.A, P.c, P.code
  local raw, state, blockedUntil = readState(key, A, c, code)
  -- a block seen over is over, even if the clock steps back: written without it
  local dirty = blockedUntil > -huge and not (now < blockedUntil)
  if dirty then blockedUntil = -huge end
  n, times = 0, 0
  local op = parsedOps[opsText]
  if op == nil then
    op = nums(opsText)
    parsedOps[opsText] = op
  end
  local function current()
    if state == nil then return A.initial(c, now) end
    return state
  end
  -- The configuration a windowed operation runs (a duration per call), else the policy's.
  local function windowed(w)
    if w == 0 or A.withWindow == nil then return c end
    return A.withWindow(c, w) or c
  end
  -- Whether the key has state worth keeping: blocked, or not yet settled.
  local function live()
    return state ~= nil and (now < blockedUntil or now < A.settledAt(c, state))
  end
  -- The key as it stands, as a request of one unit sees it.
  local function standing(value)
    local s = current()
    if now < blockedUntil then answerWith(blockedOutcome(A, c, s, blockedUntil, 1), value)
    else answerWith(peek(A, c, s, 1), value) end
  end
  for i = 1, #op, 5 do
    local kind, cost, queued, window = op[i], op[i + 1], op[i + 2], op[i + 3]
    for _ = 1, op[i + 4] do
      local blocked = now < blockedUntil
      if kind == ${Op.Kind.Take} or kind == ${Op.Kind.Admit} then
        -- the hot path (a hot key's batch is mostly this): no function but the step
        local before = state
        if before == nil then before = A.initial(c, now) end
        if blocked then
          if state == nil then
            state = before
            dirty = true
          end
          answerWith(blockedOutcome(A, c, before, blockedUntil, cost))
        else
          local cw = c
          if window ~= 0 then cw = windowed(window) end
          local o = A.step(cw, before, now, cost)
          -- a Take's denial keeps the state it produced (the same one, or an
          -- attempt logged); an Admit's keeps the state as it was
          local next = o.state
          if kind == ${Op.Kind.Admit} and not o.allowed then next = before end
          if state == nil or next ~= before then dirty = true end
          state = next
          if kind == ${Op.Kind.Take} and not o.allowed and P.block > 0 then
            -- a request the policy refuses blocks the key (blockDuration)
            blockedUntil = now + P.block
            dirty = true
            answerWith(blockedOutcome(A, c, state, blockedUntil, cost))
          else
            answerWith(o)
          end
        end
      elseif kind == ${Op.Kind.Peek} then
        if blocked then answerWith(blockedOutcome(A, c, current(), blockedUntil, cost))
        else answerWith(peek(A, c, current(), cost)) end
      elseif kind == ${Op.Kind.Reset} then
        if state ~= nil then
          state = A.initial(c, now)
          dirty = true
        end
        if blockedUntil > -huge then
          blockedUntil = -huge
          dirty = true
        end
        answer(true, 0, 0, 0, A.maxCost(c))
      elseif kind == ${Op.Kind.Release} then
        -- a key with no state whose initial state is settled (it starts
        -- full) stays without: a release gives it nothing
        if P.canRelease and not (state == nil and now >= A.settledAt(c, A.initial(c, now))) then
          state = A.release(c, current(), now, cost)
          dirty = true
        end
        standing()
      elseif kind == ${Op.Kind.WaitTime} then
        local limit = A.maxCost(c)
        local s = current()
        local wait, full = A.waitTime(c, s, now, queued, cost), A.waitTime(c, s, now, queued, limit)
        if blocked then
          wait, full = jmax(blockedUntil - now, wait), jmax(blockedUntil - now, full)
        end
        answer(false, 0, wait, full, limit)
      elseif kind == ${Op.Kind.Force} then
        local cw = windowed(window)
        state = A.force(cw, current(), now, cost)
        dirty = true
        -- how long the debt lasts: until a request of no units is admitted again
        local within
        if blocked then within = blockedOutcome(A, c, state, blockedUntil, 0) else within = A.step(cw, state, now, 0) end
        local retry = within.retry
        if within.allowed then retry = 0 end
        answer(true, within.remaining, retry, within.reset, within.limit)
      elseif kind == ${Op.Kind.ForceAdd} then
        if A.forceAdd ~= nil then
          state = A.forceAdd(c, current(), now, cost)
          dirty = true
        end
        standing()
      elseif kind == ${Op.Kind.Fill} then
        if A.full ~= nil then state = A.full(c, now) else state = A.initial(c, now) end
        blockedUntil = -huge
        dirty = true
        standing()
      elseif kind == ${Op.Kind.TakeUpTo} then
        local before = current()
        if state == nil then
          state = before
          dirty = true
        end
        if blocked then
          answerWith(blockedOutcome(A, c, before, blockedUntil, 1), 0)
        else
          local taken, o = takeUpTo(A, c, before, cost)
          if taken > 0 then
            state = o.state
            dirty = true
          end
          answerWith(o, taken)
        end
      elseif kind == ${Op.Kind.Get} then
        local had = 0
        if live() then had = 1 end
        standing(had)
      elseif kind == ${Op.Kind.Set} then
        local cw = windowed(window)
        local full
        if A.full ~= nil then full = A.full(cw, now) else full = A.initial(cw, now) end
        state = A.force(cw, full, now, cost)
        blockedUntil = -huge
        dirty = true
        standing()
      elseif kind == ${Op.Kind.Delete} then
        local had = 0
        if live() then had = 1 end
        state = nil
        blockedUntil = -huge
        dirty = true
        standing(had)
      elseif kind == ${Op.Kind.Block} then
        state = current()
        blockedUntil = now + cost
        dirty = true
        standing()
      elseif kind == ${Op.Kind.SetRate} then
        -- a key with no state stays so: it starts under the new rate
        if A.carryRate ~= nil and state ~= nil then
          state = A.carryRate(c, cost, queued, state, now)
          dirty = true
        end
        standing()
      elseif kind == ${Op.Kind.Adapt} then
        -- a signal for an adaptive rate (cost: the signal, queued: its ms)
        if A.adapt ~= nil then
          state = A.adapt(c, current(), now, cost, queued)
          dirty = true
        end
        answer(true, 0, 0, 0, A.maxCost(c))
      end
    end
  end
  flush()
  if dirty then writeState(key, raw, A, c, code, state, blockedUntil) end
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
    local c, after = A.config(ca, 3)
    -- after the configuration: the policy's blockDuration, if it has one
    P = { code = ca[1], canRelease = ca[2] == 1, A = A, c = c, block = ca[after] or 0 }
    policies[text] = P
  end
  results[k] = applyOps(KEYS[k], P, ARGV[2 + 2 * k])
end
return results
`
