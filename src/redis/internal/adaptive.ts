/**
 * The adaptive rate in Lua: `src/internal/algorithm/Adaptive.ts` expression
 * by expression (a greedy token bucket whose rate is in the state, and the
 * AIMD signal `adapt`).
 *
 * @since 0.2.0
 */
import type * as Adaptive from "../../internal/algorithm/Adaptive.ts"

/**
 * The module's code in `ALG` and in stored states.
 *
 * @example
 * ```ts
 * import { code } from "./adaptive.ts"
 *
 * code // 20
 * ```
 *
 * @since 0.2.0
 */
export const code = 20

/**
 * The configuration as the numbers the Lua module reads.
 *
 * @example
 * ```ts
 * import * as Adaptive from "../../internal/algorithm/Adaptive.ts"
 * import { config } from "./adaptive.ts"
 *
 * config(Adaptive.config({ capacity: 10, periodMillis: 1000, initial: 100, floor: 10, ceiling: 1000 }))
 * ```
 *
 * @since 0.2.0
 */
export const config = (c: Adaptive.Config): ReadonlyArray<number> => [
  c.capacity,
  c.periodMillis,
  c.initial,
  c.floor,
  c.ceiling,
  c.increase,
  c.decrease,
  c.latencyMillis,
  c.full
]

/**
 * The Lua module: registers `ALG[20]`. State: `level at rate cut`.
 *
 * @example
 * ```ts
 * import { lua } from "./adaptive.ts"
 *
 * lua.includes("ALG[20] = AD") // true
 * ```
 *
 * @since 0.2.0
 */
export const lua = `
local AD = {}
function AD.config(a, i)
  return {
    capacity = a[i], period = a[i + 1], initial = a[i + 2], floor = a[i + 3], ceiling = a[i + 4],
    increase = a[i + 5], decrease = a[i + 6], latency = a[i + 7], full = a[i + 8]
  }, i + 9
end
local function adLevelAt(c, s, now)
  if now <= s.at then return s.level end
  return jmin(c.full, s.level + (now - s.at) * s.rate)
end
local function adMillisFor(s, now, deficit)
  if deficit <= 0 then return 0 end
  local behind = 0
  if s.at > now then behind = s.at - now end
  return ceil(deficit / s.rate) + behind
end
local function adLater(s, now)
  if now > s.at then return now end
  return s.at
end
function AD.initial(c, now)
  return { level = c.full, at = now, rate = c.initial, cut = -huge }
end
function AD.step(c, s, now, cost)
  local level = adLevelAt(c, s, now)
  local need = cost * c.period
  if level >= need then
    local nxt = level - need
    return {
      allowed = true, state = { level = nxt, at = adLater(s, now), rate = s.rate, cut = s.cut },
      remaining = floor(nxt / c.period), retry = 0, reset = adMillisFor(s, now, c.full - nxt), limit = c.capacity
    }
  end
  local retry = huge
  if not (need > c.full) then retry = adMillisFor(s, now, need - level) end
  return {
    allowed = false, state = s, remaining = jmax(0, floor(level / c.period)), retry = retry,
    reset = adMillisFor(s, now, c.full - level), limit = c.capacity
  }
end
function AD.waitTime(c, s, now, queued, cost)
  if cost > c.capacity then return huge end
  return adMillisFor(s, now, (queued + cost) * c.period - adLevelAt(c, s, now))
end
function AD.settledAt(c, s)
  if s.rate < c.initial then return huge end
  return s.at + adMillisFor(s, s.at, c.full - s.level)
end
function AD.maxCost(c)
  return c.capacity
end
function AD.release(c, s, now, amount)
  return { level = jmin(c.full, adLevelAt(c, s, now) + amount * c.period), at = adLater(s, now), rate = s.rate, cut = s.cut }
end
function AD.force(c, s, now, cost)
  return { level = adLevelAt(c, s, now) - cost * c.period, at = adLater(s, now), rate = s.rate, cut = s.cut }
end
-- signal: 0 ok, 1 throttled, 2 latency (millis: the wait asked for, or the latency)
function AD.adapt(c, s, now, signal, millis)
  local level = adLevelAt(c, s, now)
  local at = adLater(s, now)
  local throttled = signal == 1 or (signal == 2 and millis > c.latency)
  if not throttled then
    return { level = level, at = at, rate = jmin(c.ceiling, s.rate + c.increase), cut = s.cut }
  end
  local rate, cut = s.rate, s.cut
  if not (at - s.cut < c.period) then
    rate = jmax(c.floor, s.rate * c.decrease)
    cut = at
  end
  local wait = 0
  if signal == 1 then wait = millis end
  if wait > 0 then level = jmin(level, c.period - wait * rate) end
  return { level = level, at = at, rate = rate, cut = cut }
end
function AD.decode(c, a, i)
  if a[i + 3] == nil then return nil end
  return { level = a[i], at = a[i + 1], rate = a[i + 2], cut = a[i + 3] }, i + 4
end
function AD.encode(c, s, out)
  out[#out + 1] = s.level
  out[#out + 1] = s.at
  out[#out + 1] = s.rate
  out[#out + 1] = s.cut
end
ALG[20] = AD
`
