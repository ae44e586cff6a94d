/**
 * The token bucket in Lua: `src/internal/algorithm/TokenBucket.ts` expression by
 * expression (scaled level, refill anchor that only moves forwards, ceil of
 * the deficit over the rate; greedy or interval refill, optionally aligned).
 *
 * @since 0.1.0
 */
import type * as TokenBucket from "../../internal/algorithm/TokenBucket.ts"

/**
 * The module's code in `ALG` and in stored states.
 *
 * @example
 * ```ts
 * import { code } from "./tokenBucket.ts"
 *
 * code // 1
 * ```
 *
 * @since 0.1.0
 */
export const code = 1

/**
 * The configuration as the numbers the Lua module reads.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "../../internal/algorithm/TokenBucket.ts"
 * import { config } from "./tokenBucket.ts"
 *
 * config(TokenBucket.config({ capacity: 10, tokens: 1, periodMillis: 1000 })) // [10, 1, 1000, 10, 10000, 0, 0, 0, -Infinity, 0]
 * ```
 *
 * @since 0.1.0
 */
export const config = (c: TokenBucket.Config): ReadonlyArray<number> => [
  c.capacity,
  c.tokens,
  c.periodMillis,
  c.initialTokens,
  c.full,
  c.interval ? 1 : 0,
  c.aligned ? 1 : 0,
  c.origin,
  c.floor,
  c.adaptive ? 1 : 0
]

/**
 * The Lua module: registers `ALG[1]`. State: `level at`.
 *
 * @example
 * ```ts
 * import { lua } from "./tokenBucket.ts"
 *
 * lua.includes("ALG[1] = TB") // true
 * ```
 *
 * @since 0.1.0
 */
export const lua = `
local TB = {}
function TB.config(a, i)
  return {
    capacity = a[i], tokens = a[i + 1], period = a[i + 2], initial = a[i + 3], full = a[i + 4],
    interval = a[i + 5] == 1, aligned = a[i + 6] == 1, origin = a[i + 7], floor = a[i + 8], adaptive = a[i + 9] == 1
  }, i + 10
end
-- Aligned periods: the index of the last boundary at or before t (times
-- before the first refill count as the boundary before it).
local function tbBoundary(c, t)
  if not (t > c.floor) then t = c.floor end
  return floor((t - c.origin) / c.period)
end
-- Whole periods that ended in (s.at, now].
local function tbPeriods(c, s, now)
  if now <= s.at then return 0 end
  if c.aligned then return tbBoundary(c, now) - tbBoundary(c, s.at) end
  return floor((now - s.at) / c.period)
end
local function tbLevelAt(c, s, now)
  -- a surplus above capacity (a forced add) neither grows nor shrinks
  if now <= s.at or s.level >= c.full then return s.level end
  local elapsed = now - s.at
  if c.interval then elapsed = tbPeriods(c, s, now) * c.period end
  return jmin(c.full, s.level + elapsed * c.tokens)
end
local function tbAnchorAt(c, s, now)
  if now <= s.at then return s.at end
  if c.interval and not c.aligned then return s.at + tbPeriods(c, s, now) * c.period end
  return now
end
local function tbMillisFor(c, s, now, deficit)
  if deficit <= 0 then return 0 end
  if not c.interval then
    local behind = 0
    if s.at > now then behind = s.at - now end
    return ceil(deficit / c.tokens) + behind
  end
  local k = ceil(deficit / (c.tokens * c.period))
  local from = s.at
  if now > s.at then from = now end
  local nxt
  if c.aligned then
    nxt = c.origin + (tbBoundary(c, from) + 1) * c.period
  else
    nxt = tbAnchorAt(c, s, from) + c.period
  end
  return nxt + (k - 1) * c.period - now
end
function TB.initial(c, now)
  if c.adaptive and now < c.origin then
    -- Bucket4j's adaptive initial tokens, before the first refill
    return { level = jmin(c.full, jmax(0, c.capacity - c.tokens) * c.period + (c.origin - now) * c.tokens), at = now }
  end
  return { level = c.initial * c.period, at = now }
end
function TB.step(c, s, now, cost)
  local level = tbLevelAt(c, s, now)
  local need = cost * c.period
  if level >= need and need <= c.full then
    local nxt = level - need
    return {
      allowed = true, state = { level = nxt, at = tbAnchorAt(c, s, now) }, remaining = floor(nxt / c.period), retry = 0,
      reset = tbMillisFor(c, s, now, c.full - nxt), limit = c.capacity
    }
  end
  local retry = huge
  if not (need > c.full) then retry = tbMillisFor(c, s, now, need - level) end
  return {
    allowed = false, state = s, remaining = level > 0 and floor(level / c.period) or 0, retry = retry,
    reset = tbMillisFor(c, s, now, c.full - level), limit = c.capacity
  }
end
function TB.waitTime(c, s, now, queued, cost)
  if cost > c.capacity then return huge end
  return tbMillisFor(c, s, now, (queued + cost) * c.period - tbLevelAt(c, s, now))
end
function TB.settledAt(c, s)
  if s.level > c.full then return huge end
  return s.at + tbMillisFor(c, s, s.at, c.full - s.level)
end
function TB.maxCost(c)
  return c.capacity
end
function TB.release(c, s, now, amount)
  local level = tbLevelAt(c, s, now)
  -- capped at capacity; a surplus above it is kept
  if level < c.full then level = jmin(c.full, level + amount * c.period) end
  return { level = level, at = tbAnchorAt(c, s, now) }
end
function TB.force(c, s, now, cost)
  return { level = tbLevelAt(c, s, now) - cost * c.period, at = tbAnchorAt(c, s, now) }
end
function TB.forceAdd(c, s, now, amount)
  return { level = tbLevelAt(c, s, now) + amount * c.period, at = tbAnchorAt(c, s, now) }
end
function TB.full(c, now)
  return { level = c.full, at = now }
end
-- x/time/rate's SetLimit: the level at the old rate (tokens per period), kept
-- (rescaled to the new period), capped at the new capacity.
function TB.carryRate(c, tokens, period, s, now)
  local from = {
    capacity = c.capacity, tokens = tokens, period = period, initial = c.initial, full = c.capacity * period,
    interval = c.interval, aligned = c.aligned, origin = c.origin, floor = c.floor, adaptive = c.adaptive
  }
  if c.floor ~= -huge then from.floor = c.origin - period end
  local level = tbLevelAt(from, s, now)
  local kept = level
  if period ~= c.period then kept = (level * c.period) / period end
  local at = s.at
  if now > s.at then at = now end
  return { level = jmin(c.full, kept), at = at }
end
function TB.decode(c, a, i)
  if a[i + 1] == nil then return nil end
  return { level = a[i], at = a[i + 1] }, i + 2
end
function TB.encode(c, s, out)
  out[#out + 1] = s.level
  out[#out + 1] = s.at
end
ALG[1] = TB
`
