/**
 * The leaky bucket (nginx `limit_req` accounting) in Lua:
 * `src/internal/algorithm/LeakyBucket.ts` expression by expression. A store's reply
 * carries no `delay`, so the shaping delay is not computed here.
 *
 * @since 0.1.0
 */
import type * as LeakyBucket from "../../internal/algorithm/LeakyBucket.ts"

/**
 * The module's code in `ALG` and in stored states.
 *
 * @example
 * ```ts
 * import { code } from "./leakyBucket.ts"
 *
 * code // 3
 * ```
 *
 * @since 0.1.0
 */
export const code = 3

/**
 * The configuration as the numbers the Lua module reads.
 *
 * @example
 * ```ts
 * import * as LeakyBucket from "../../internal/algorithm/LeakyBucket.ts"
 * import { config } from "./leakyBucket.ts"
 *
 * config(LeakyBucket.config({ tokens: 10, periodMillis: 1000, burst: 4 })) // [10, 1000, 5, 5000]
 * ```
 *
 * @since 0.1.0
 */
export const config = (c: LeakyBucket.Config): ReadonlyArray<number> => [
  c.tokens,
  c.periodMillis,
  c.capacity,
  c.full,
  c.delay
]

/**
 * The Lua module: registers `ALG[3]`. State: `level at`.
 *
 * @example
 * ```ts
 * import { lua } from "./leakyBucket.ts"
 *
 * lua.includes("ALG[3] = LB") // true
 * ```
 *
 * @since 0.1.0
 */
export const lua = `
local LB = {}
function LB.config(a, i)
  return { tokens = a[i], period = a[i + 1], capacity = a[i + 2], full = a[i + 3], delay = a[i + 4] }, i + 5
end
local function lbLevelAt(c, s, now)
  -- a credit below empty (a forced add) does not leak further
  if now <= s.at or s.level <= 0 then return s.level end
  return jmax(0, s.level - (now - s.at) * c.tokens)
end
local function lbMillisFor(c, s, now, excess)
  if excess <= 0 then return 0 end
  local behind = 0
  if s.at > now then behind = s.at - now end
  return ceil(excess / c.tokens) + behind
end
function LB.initial(c, now)
  return { level = 0, at = now }
end
function LB.step(c, s, now, cost)
  local level = lbLevelAt(c, s, now)
  local need = cost * c.period
  if level + need <= c.full and need <= c.full then
    local nxt = level + need
    local at = s.at
    if now > s.at then at = now end
    return {
      allowed = true, state = { level = nxt, at = at }, remaining = floor((c.full - nxt) / c.period), retry = 0,
      reset = lbMillisFor(c, s, now, nxt), limit = c.capacity,
      -- nodelay: the delay is Infinity and the excess -Infinity
      delay = lbMillisFor(c, s, now, level - c.delay * c.period)
    }
  end
  local retry = huge
  if not (need > c.full) then retry = lbMillisFor(c, s, now, level + need - c.full) end
  return {
    allowed = false, state = s, remaining = level < c.full and floor((c.full - level) / c.period) or 0,
    retry = retry,
    reset = lbMillisFor(c, s, now, level), limit = c.capacity
  }
end
function LB.waitTime(c, s, now, queued, cost)
  if cost > c.capacity then return huge end
  return lbMillisFor(c, s, now, lbLevelAt(c, s, now) + (queued + cost) * c.period - c.full)
end
function LB.settledAt(c, s)
  if s.level < 0 then return huge end
  return s.at + lbMillisFor(c, s, s.at, s.level)
end
function LB.maxCost(c)
  return c.capacity
end
function LB.release(c, s, now, amount)
  if not (amount > 0) then return s end
  local at = s.at
  if now > s.at then at = now end
  local level = lbLevelAt(c, s, now)
  -- never below empty; a credit is kept as it is
  if level > 0 then level = jmax(0, level - amount * c.period) end
  return { level = level, at = at }
end
function LB.force(c, s, now, cost)
  local at = s.at
  if now > s.at then at = now end
  return { level = lbLevelAt(c, s, now) + cost * c.period, at = at }
end
function LB.forceAdd(c, s, now, amount)
  local at = s.at
  if now > s.at then at = now end
  return { level = lbLevelAt(c, s, now) - amount * c.period, at = at }
end
function LB.decode(c, a, i)
  if a[i + 1] == nil then return nil end
  return { level = a[i], at = a[i + 1] }, i + 2
end
function LB.encode(c, s, out)
  out[#out + 1] = s.level
  out[#out + 1] = s.at
end
ALG[3] = LB
`
