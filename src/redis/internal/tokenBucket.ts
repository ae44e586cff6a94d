/**
 * The token bucket in Lua: `src/internal/algorithm/TokenBucket.ts` expression by
 * expression (scaled level, refill anchor that only moves forwards, ceil of
 * the deficit over the rate; greedy or interval refill, optionally aligned).
 *
 * @since 0.1.0
 */
import type * as TokenBucket from "../../internal/algorithm/TokenBucket.ts"
import { type Lean, min, pack, readFixed } from "./lean.ts"

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
 * config(TokenBucket.config({ capacity: 10, tokens: 1, periodMillis: 1000 })) // [10, 1, 1000, 10, 10000, 0, 0]
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
  c.aligned ? 1 : 0
]

/**
 * What of a configuration the module does not run: a first refill.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "../../internal/algorithm/TokenBucket.ts"
 * import { refuse } from "./tokenBucket.ts"
 *
 * refuse(TokenBucket.config({ capacity: 10, tokens: 1, periodMillis: 1000 })) // undefined
 * ```
 *
 * @since 0.2.0
 */
export const refuse = (c: TokenBucket.Config): string | undefined =>
  c.floor === -Infinity ? undefined : "a token bucket's first refill (firstRefill)"

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
    interval = a[i + 5] == 1, aligned = a[i + 6] == 1
  }, i + 7
end
-- Whole periods that ended in (s.at, now].
local function tbPeriods(c, s, now)
  if now <= s.at then return 0 end
  if c.aligned then return floor(now / c.period) - floor(s.at / c.period) end
  return floor((now - s.at) / c.period)
end
local function tbLevelAt(c, s, now)
  if now <= s.at then return s.level end
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
    nxt = (floor(from / c.period) + 1) * c.period
  else
    nxt = tbAnchorAt(c, s, from) + c.period
  end
  return nxt + (k - 1) * c.period - now
end
function TB.initial(c, now)
  return { level = c.initial * c.period, at = now }
end
function TB.step(c, s, now, cost)
  local level = tbLevelAt(c, s, now)
  local need = cost * c.period
  if level >= need then
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
  return s.at + tbMillisFor(c, s, s.at, c.full - s.level)
end
function TB.maxCost(c)
  return c.capacity
end
function TB.release(c, s, now, amount)
  return { level = jmin(c.full, tbLevelAt(c, s, now) + amount * c.period), at = tbAnchorAt(c, s, now) }
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

// `out = millisFor(s, now, deficit)` for the state (level, `at`).
const millisFor = (out: string, deficit: string, now: string, at: string): string => `
  do
    local d = ${deficit}
    if d <= 0 then
      ${out} = 0
    elseif cInterval ~= 1 then
      local behind = 0
      if ${at} > ${now} then behind = ${at} - ${now} end
      ${out} = ceil(d / cTokens) + behind
    else
      local k = ceil(d / (cTokens * cPeriod))
      local from = ${at}
      if ${now} > ${at} then from = ${now} end
      local nxt
      if cAligned == 1 then
        nxt = (floor(from / cPeriod) + 1) * cPeriod
      else
        if from <= ${at} then nxt = ${at} else nxt = ${at} + floor((from - ${at}) / cPeriod) * cPeriod end
        nxt = nxt + cPeriod
      end
      ${out} = nxt + (k - 1) * cPeriod - ${now}
    end
  end`

/**
 * The lean step (see `lean.ts`): `TokenBucket.step` inline.
 *
 * @example
 * ```ts
 * import { lean } from "./tokenBucket.ts"
 *
 * lean.config // ["cCapacity", "cTokens", ...]
 * ```
 *
 * @since 0.2.0
 */
export const lean: Lean = {
  config: ["cCapacity", "cTokens", "cPeriod", "cInitial", "cFull", "cInterval", "cAligned"],
  step: `${readFixed(code, ["level", "at"])}
  if fresh then level, at = cInitial * cPeriod, now end
  -- levelAt(now)
  local lvl = level
  if now > at then
    local elapsed = now - at
    if cInterval == 1 then
      if cAligned == 1 then
        elapsed = (floor(now / cPeriod) - floor(at / cPeriod)) * cPeriod
      else
        elapsed = floor((now - at) / cPeriod) * cPeriod
      end
    end
    local sum = level + elapsed * cTokens
    ${min("lvl", "cFull", "sum")}
  end
  local need = cost * cPeriod
  local nl, na = level, at
  limit = cCapacity
  if lvl >= need then
    allowed = true
    nl = lvl - need
    -- anchorAt(now)
    if now > at then
      if cInterval == 1 and cAligned ~= 1 then na = at + floor((now - at) / cPeriod) * cPeriod else na = now end
    end
    remaining = floor(nl / cPeriod)
    retry = 0
    ${millisFor("reset", "cFull - nl", "now", "at")}
  else
    allowed = false
    remaining = 0
    if lvl > 0 then remaining = floor(lvl / cPeriod) end
    retry = huge
    if not (need > cFull) then
      ${millisFor("retry", "need - lvl", "now", "at")}
    end
    ${millisFor("reset", "cFull - lvl", "now", "at")}
  end
  -- a denial changes nothing, so an Admit is a Take
  dirty = fresh or allowed
  if dirty then
    ${millisFor("settled", "cFull - nl", "na", "na")}
    settled = na + settled
    packed = ${pack(code, ["nl", "na"])}
  end`
}
