/**
 * GCRA in Lua: `src/internal/algorithm/Gcra.ts` expression by expression (the TAT kept
 * as a scaled distance `ahead` of the anchor `at`).
 *
 * @since 0.1.0
 */
import type * as Gcra from "../../internal/algorithm/Gcra.ts"

/**
 * The module's code in `ALG` and in stored states.
 *
 * @example
 * ```ts
 * import { code } from "./gcra.ts"
 *
 * code // 2
 * ```
 *
 * @since 0.1.0
 */
export const code = 2

/**
 * The configuration as the numbers the Lua module reads.
 *
 * @example
 * ```ts
 * import * as Gcra from "../../internal/algorithm/Gcra.ts"
 * import { config } from "./gcra.ts"
 *
 * config(Gcra.config({ maxBurst: 4, count: 10, periodMillis: 1000 })) // [10, 1000, 5, 5000]
 * ```
 *
 * @since 0.1.0
 */
export const config = (c: Gcra.Config): ReadonlyArray<number> => [c.count, c.periodMillis, c.limit, c.tolerance]

/**
 * The Lua module: registers `ALG[2]`. State: `ahead at`.
 *
 * @example
 * ```ts
 * import { lua } from "./gcra.ts"
 *
 * lua.includes("ALG[2] = GCRA") // true
 * ```
 *
 * @since 0.1.0
 */
export const lua = `
local GCRA = {}
function GCRA.config(a, i)
  return { count = a[i], period = a[i + 1], limit = a[i + 2], tolerance = a[i + 3] }, i + 4
end
local function gcraAheadAt(c, s, now)
  -- a credit (a forced add) does not drain further
  if now <= s.at or s.ahead <= 0 then return s.ahead end
  return jmax(0, s.ahead - (now - s.at) * c.count)
end
local function gcraMillisFor(c, s, now, excess)
  if excess <= 0 then return 0 end
  local behind = 0
  if s.at > now then behind = s.at - now end
  return ceil(excess / c.count) + behind
end
function GCRA.initial(c, now)
  return { ahead = 0, at = now }
end
function GCRA.step(c, s, now, cost)
  local ahead = gcraAheadAt(c, s, now)
  local need = cost * c.period
  if ahead + need <= c.tolerance and need <= c.tolerance then
    local nxt = ahead + need
    local at = s.at
    if now > s.at then at = now end
    return {
      allowed = true, state = { ahead = nxt, at = at }, remaining = floor((c.tolerance - nxt) / c.period),
      retry = 0, reset = gcraMillisFor(c, s, now, nxt), limit = c.limit
    }
  end
  local retry = huge
  if not (need > c.tolerance) then retry = gcraMillisFor(c, s, now, ahead + need - c.tolerance) end
  return {
    allowed = false, state = s, remaining = ahead < c.tolerance and floor((c.tolerance - ahead) / c.period) or 0,
    retry = retry,
    reset = gcraMillisFor(c, s, now, ahead), limit = c.limit
  }
end
function GCRA.waitTime(c, s, now, queued, cost)
  if cost > c.limit then return huge end
  return gcraMillisFor(c, s, now, gcraAheadAt(c, s, now) + (queued + cost) * c.period - c.tolerance)
end
function GCRA.settledAt(c, s)
  if s.ahead < 0 then return huge end
  return s.at + gcraMillisFor(c, s, s.at, s.ahead)
end
function GCRA.maxCost(c)
  return c.limit
end
function GCRA.release(c, s, now, amount)
  if not (amount > 0) then return s end
  local at = s.at
  if now > s.at then at = now end
  local ahead = gcraAheadAt(c, s, now)
  -- never before now; a credit is kept as it is
  if ahead > 0 then ahead = jmax(0, ahead - amount * c.period) end
  return { ahead = ahead, at = at }
end
function GCRA.force(c, s, now, cost)
  local at = s.at
  if now > s.at then at = now end
  return { ahead = gcraAheadAt(c, s, now) + cost * c.period, at = at }
end
function GCRA.forceAdd(c, s, now, amount)
  local at = s.at
  if now > s.at then at = now end
  return { ahead = gcraAheadAt(c, s, now) - amount * c.period, at = at }
end
function GCRA.decode(c, a, i)
  if a[i + 1] == nil then return nil end
  return { ahead = a[i], at = a[i + 1] }, i + 2
end
function GCRA.encode(c, s, out)
  out[#out + 1] = s.ahead
  out[#out + 1] = s.at
end
ALG[2] = GCRA
`
