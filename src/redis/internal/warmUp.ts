/**
 * Guava's smooth rate limiters (warming up and bursty) in Lua:
 * `src/internal/algorithm/WarmUp.ts` expression by expression. The derived values
 * (intervals, thresholds, slope) are computed once in TypeScript and sent as
 * they are, so both sides use the very same doubles.
 *
 * @since 0.1.0
 */
import type * as WarmUp from "../../internal/algorithm/WarmUp.ts"

/**
 * The module's code in `ALG` and in stored states.
 *
 * @example
 * ```ts
 * import { code } from "./warmUp.ts"
 *
 * code // 8
 * ```
 *
 * @since 0.1.0
 */
export const code = 8

/**
 * The configuration as the numbers the Lua module reads.
 *
 * @example
 * ```ts
 * import * as WarmUp from "../../internal/algorithm/WarmUp.ts"
 * import { config } from "./warmUp.ts"
 *
 * config(WarmUp.config({ permits: 10, periodMillis: 1000 })) // [10, 0, 0, 100, 10, 10, 0, 100]
 * ```
 *
 * @since 0.1.0
 */
export const config = (c: WarmUp.Config): ReadonlyArray<number> => [
  c.permits,
  c.warmupMillis,
  c.initialPermits,
  c.stableInterval,
  c.maxPermits,
  c.thresholdPermits,
  c.slope,
  c.coolDownInterval
]

/**
 * The Lua module: registers `ALG[8]`. State: `stored ahead at` (`nextFree = at + ahead`).
 *
 * @example
 * ```ts
 * import { lua } from "./warmUp.ts"
 *
 * lua.includes("ALG[8] = WU") // true
 * ```
 *
 * @since 0.1.0
 */
export const lua = `
local WU = {}
function WU.config(a, i)
  return {
    permits = a[i], warmup = a[i + 1], initial = a[i + 2], stable = a[i + 3], maxPermits = a[i + 4],
    threshold = a[i + 5], slope = a[i + 6], coolDown = a[i + 7]
  }, i + 8
end
function WU.initial(c, now)
  return { stored = c.initial, ahead = 0, at = now }
end
local function wuPermitsToTime(c, permits)
  return c.stable + permits * c.slope
end
local function wuStoredPermitsToWaitTime(c, stored, take)
  if c.warmup <= 0 then return 0 end
  local above = stored - c.threshold
  local rest = take
  local wait = 0
  if above > 0.0 then
    local aboveTake = jmin(above, rest)
    local length = wuPermitsToTime(c, above) + wuPermitsToTime(c, above - aboveTake)
    wait = aboveTake * length / 2.0
    rest = rest - aboveTake
  end
  return wait + c.stable * rest
end
local function wuFreshIn(c, s)
  if s.stored >= c.maxPermits then return s.ahead end
  return s.ahead + (c.maxPermits - s.stored) * c.coolDown
end
local function wuResync(c, s, t)
  local idle = (t - s.at) - s.ahead
  if not (idle > 0) then return s end
  local stored
  if t - s.at >= wuFreshIn(c, s) then
    stored = c.maxPermits
  else
    stored = jmin(c.maxPermits, s.stored + idle / c.coolDown)
  end
  return { stored = stored, ahead = 0, at = t }
end
local function wuMillisUntil(now, at, offset)
  local e = 0
  if now > at then e = now - at end
  if offset <= e then return 0 end
  return ceil(offset) + (at - now)
end
function WU.step(c, s, now, cost)
  local t = s.at
  if now > s.at then t = now end
  if s.ahead > t - s.at then
    return {
      allowed = false, state = s, remaining = 0, retry = wuMillisUntil(now, s.at, s.ahead),
      reset = wuMillisUntil(now, s.at, wuFreshIn(c, s)), limit = c.permits
    }
  end
  local r = wuResync(c, s, t)
  local spend = jmin(cost, r.stored)
  local fresh = cost - spend
  local wait = wuStoredPermitsToWaitTime(c, r.stored, spend) + fresh * c.stable
  local nxt = { stored = r.stored - spend, ahead = wait, at = t }
  local remaining
  if wait > 0 then
    remaining = 0
  elseif c.warmup > 0 then
    remaining = 1
  else
    remaining = floor(nxt.stored) + 1
  end
  return {
    allowed = true, state = nxt, remaining = remaining, retry = 0, reset = wuMillisUntil(now, t, wuFreshIn(c, nxt)),
    limit = c.permits
  }
end
function WU.force(c, s, now, cost)
  local t = s.at
  if now > s.at then t = now end
  local r = wuResync(c, s, t)
  local spend = jmin(cost, r.stored)
  local wait = wuStoredPermitsToWaitTime(c, r.stored, spend) + (cost - spend) * c.stable
  return { stored = r.stored - spend, ahead = r.ahead + wait, at = r.at }
end
function WU.full(c, now)
  return { stored = c.maxPermits, ahead = 0, at = now }
end
-- Guava's setRate: resync at the old rate (its store limit and cool-down),
-- keep nextFree, rescale the stored permits to the new store.
function WU.carryRate(c, fromMax, fromCoolDown, s, now)
  local old = {}
  for k, v in pairs(c) do old[k] = v end
  old.maxPermits, old.coolDown = fromMax, fromCoolDown
  local t = s.at
  if now > s.at then t = now end
  local r = wuResync(old, s, t)
  local stored
  if fromMax == 0 then
    stored = 0
    if c.warmup > 0 then stored = c.maxPermits end
  else
    stored = r.stored * c.maxPermits / fromMax
  end
  return { stored = stored, ahead = r.ahead, at = r.at }
end
function WU.waitTime(c, s, now, queued, cost)
  if queued <= 0 then return wuMillisUntil(now, s.at, s.ahead) end
  local t = s.at
  if now > s.at then t = now end
  local r = wuResync(c, s, t)
  local spend = jmin(queued, r.stored)
  local free = r.ahead + wuStoredPermitsToWaitTime(c, r.stored, spend) + (queued - spend) * c.stable
  return wuMillisUntil(now, r.at, free)
end
function WU.settledAt(c, s)
  return s.at + ceil(wuFreshIn(c, s))
end
function WU.maxCost(c)
  return huge
end
function WU.decode(c, a, i)
  if a[i + 2] == nil then return nil end
  return { stored = a[i], ahead = a[i + 1], at = a[i + 2] }, i + 3
end
function WU.encode(c, s, out)
  out[#out + 1] = s.stored
  out[#out + 1] = s.ahead
  out[#out + 1] = s.at
end
ALG[8] = WU
`
