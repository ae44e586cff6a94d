/**
 * The sliding window counter in Lua: `src/internal/algorithm/SlidingWindow.ts`
 * expression by expression (two aligned windows, the estimate multiplied out
 * by the window length, the corrected floor division).
 *
 * @since 0.1.0
 */
import type * as SlidingWindow from "../../internal/algorithm/SlidingWindow.ts"

/**
 * The module's code in `ALG` and in stored states.
 *
 * @example
 * ```ts
 * import { code } from "./slidingWindow.ts"
 *
 * code // 5
 * ```
 *
 * @since 0.1.0
 */
export const code = 5

/**
 * The configuration as the numbers the Lua module reads.
 *
 * @example
 * ```ts
 * import * as SlidingWindow from "../../internal/algorithm/SlidingWindow.ts"
 * import { config } from "./slidingWindow.ts"
 *
 * config(SlidingWindow.config({ limit: 100, windowMillis: 60_000 })) // [100, 60000]
 * ```
 *
 * @since 0.1.0
 */
export const config = (c: SlidingWindow.Config): ReadonlyArray<number> => [c.limit, c.windowMillis]

/**
 * The Lua module: registers `ALG[5]`. State: `start current previous at`.
 *
 * @example
 * ```ts
 * import { lua } from "./slidingWindow.ts"
 *
 * lua.includes("ALG[5] = SW") // true
 * ```
 *
 * @since 0.1.0
 */
export const lua = `
local SW = {}
function SW.config(a, i)
  return { limit = a[i], window = a[i + 1] }, i + 2
end
local function swFloorDiv(a, b)
  local q = floor(a / b)
  while q > 0 and q * b > a do q = q - 1 end
  while (q + 1) * b <= a do q = q + 1 end
  return q
end
function SW.initial(c, now)
  return { start = alignedStart(c.window, now), current = 0, previous = 0, at = now }
end
local function swRollTo(c, s, now)
  local at = s.at
  if now > s.at then at = now end
  local start = alignedStart(c.window, at)
  if start == s.start then
    if at == s.at then return s end
    return { start = start, current = s.current, previous = s.previous, at = at }
  end
  if start == s.start + c.window then return { start = start, current = 0, previous = s.current, at = at } end
  return { start = start, current = 0, previous = 0, at = at }
end
local function swScaledEstimate(c, r)
  return r.previous * (r.start + c.window - r.at) + r.current * c.window
end
local function swEarliest(c, r, cost)
  local w = c.window
  local room = (c.limit - r.current - cost) * w
  if room >= 0 then
    if r.previous * (r.start + w - r.at) <= room then return r.at end
    local y = w - swFloorDiv(room, r.previous)
    if y < w then return r.start + y end
  end
  local nxt = (c.limit - cost) * w
  if r.current * w <= nxt then return r.start + w end
  return r.start + w + (w - swFloorDiv(nxt, r.current))
end
local function swFreshAt(c, r)
  if r.current > 0 then return r.start + 2 * c.window end
  if r.previous > 0 then return r.start + c.window end
  return r.at
end
function SW.step(c, s, now, cost)
  local r = swRollTo(c, s, now)
  local w = c.window
  local estimate = swScaledEstimate(c, r)
  if estimate + cost * w <= c.limit * w then
    local nxt = { start = r.start, current = r.current + cost, previous = r.previous, at = r.at }
    local reset = 0
    if not (swFreshAt(c, nxt) <= nxt.at) then reset = swFreshAt(c, nxt) - now end
    return {
      allowed = true, state = nxt, remaining = swFloorDiv(c.limit * w - estimate - cost * w, w), retry = 0,
      reset = reset, limit = c.limit
    }
  end
  local retry = huge
  if not (cost > c.limit) then retry = swEarliest(c, r, cost) - now end
  local reset = 0
  if r.current > 0 or r.previous > 0 then reset = swFreshAt(c, r) - now end
  return {
    allowed = false, state = s, remaining = jmax(0, swFloorDiv(jmax(0, c.limit * w - estimate), w)), retry = retry,
    reset = reset, limit = c.limit
  }
end
function SW.waitTime(c, s, now, queued, cost)
  if cost > c.limit then return huge end
  local r = swRollTo(c, s, now)
  local room = c.limit - r.current
  local at
  if queued <= jmax(room, 0) then
    at = swEarliest(c, { start = r.start, current = r.current + queued, previous = r.previous, at = r.at }, cost)
  else
    at = r.start + c.window + ceil((queued + cost - room) * c.window / c.limit)
  end
  if at <= r.at then return 0 end
  return at - now
end
function SW.settledAt(c, s)
  return swFreshAt(c, s)
end
function SW.maxCost(c)
  return c.limit
end
function SW.force(c, s, now, cost)
  local r = swRollTo(c, s, now)
  return { start = r.start, current = r.current + cost, previous = r.previous, at = r.at }
end
function SW.release(c, s, now, amount)
  if not (amount > 0) then return s end
  local r = swRollTo(c, s, now)
  local current = jmax(0, r.current - amount)
  local previous = jmax(0, r.previous - (amount - (r.current - current)))
  return { start = r.start, current = current, previous = previous, at = r.at }
end
function SW.decode(c, a, i)
  if a[i + 3] == nil then return nil end
  return { start = a[i], current = a[i + 1], previous = a[i + 2], at = a[i + 3] }, i + 4
end
function SW.encode(c, s, out)
  out[#out + 1] = s.start
  out[#out + 1] = s.current
  out[#out + 1] = s.previous
  out[#out + 1] = s.at
end
ALG[5] = SW
`
