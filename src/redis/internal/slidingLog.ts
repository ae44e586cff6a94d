/**
 * The sliding log in Lua: `src/internal/algorithm/SlidingLog.ts` expression by
 * expression (unit times in order, at most `floor(limit)` kept, `minGap`,
 * `countBlocked`). Indices are JavaScript's (from 0); the Lua tables are read
 * at `index + 1`.
 *
 * @since 0.1.0
 */
import type * as SlidingLog from "../../internal/algorithm/SlidingLog.ts"

/**
 * The module's code in `ALG` and in stored states.
 *
 * @example
 * ```ts
 * import { code } from "./slidingLog.ts"
 *
 * code // 6
 * ```
 *
 * @since 0.1.0
 */
export const code = 6

/**
 * The configuration as the numbers the Lua module reads (`countBlocked` as 1
 * or 0).
 *
 * @example
 * ```ts
 * import * as SlidingLog from "../../internal/algorithm/SlidingLog.ts"
 * import { config } from "./slidingLog.ts"
 *
 * config(SlidingLog.config({ limit: 5, windowMillis: 10_000, minGap: 1000 })) // [5, 10000, 1000, 0, 5]
 * ```
 *
 * @since 0.1.0
 */
export const config = (c: SlidingLog.Config): ReadonlyArray<number> => [
  c.limit,
  c.windowMillis,
  c.minGap,
  c.countBlocked ? 1 : 0,
  c.size
]

/**
 * The Lua module: registers `ALG[6]`. State: `last at n t1 … tn`.
 *
 * @example
 * ```ts
 * import { lua } from "./slidingLog.ts"
 *
 * lua.includes("ALG[6] = SL") // true
 * ```
 *
 * @since 0.1.0
 */
export const lua = `
local SL = {}
function SL.config(a, i)
  return { limit = a[i], window = a[i + 1], minGap = a[i + 2], countBlocked = a[i + 3] == 1, size = a[i + 4] }, i + 5
end
function SL.initial(c, now)
  return { log = {}, last = now - c.minGap, at = now }
end
-- Index (from 0) of the first unit still in the window at t.
local function slFirstLive(c, log, t)
  local lo, hi = 0, #log
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if log[mid + 1] + c.window <= t then lo = mid + 1 else hi = mid end
  end
  return lo
end
local function slAppend(c, log, from, t, cost)
  local n = #log
  local keep = jmin(c.size, n - from + cost)
  local old = keep - jmin(cost, keep)
  local out, k = {}, 0
  for j = n - old + 1, n do
    k = k + 1
    out[k] = log[j]
  end
  while k < keep do
    k = k + 1
    out[k] = t
  end
  return out
end
local function slEarliest(c, s, e, cost)
  local from = slFirstLive(c, s.log, e)
  local excess = #s.log - from + cost - c.limit
  local slot = e
  if excess > 0 then slot = s.log[from + ceil(excess)] + c.window end
  local gap = s.last + c.minGap
  return jmax(jmax(slot, gap), e)
end
local function slFreshAt(c, s)
  local n = #s.log
  local tail = s.at
  if n > 0 then tail = s.log[n] + c.window end
  return jmax(jmax(s.at, s.last + c.minGap), tail)
end
local function slResetMillis(c, s, now)
  local fresh = slFreshAt(c, s)
  local e = s.at
  if now > s.at then e = now end
  if fresh <= e then return 0 end
  return fresh - now
end
function SL.step(c, s, now, cost)
  local e = s.at
  if now > s.at then e = now end
  local from = slFirstLive(c, s.log, e)
  local count = #s.log - from
  if count + cost <= c.limit and e >= s.last + c.minGap then
    local nxt = { log = slAppend(c, s.log, from, e, cost), last = e, at = e }
    return {
      allowed = true, state = nxt, remaining = floor(c.limit - count - cost), retry = 0,
      reset = slResetMillis(c, nxt, now), limit = c.limit
    }
  end
  if cost > c.limit then
    return {
      allowed = false, state = s, remaining = floor(c.limit - count), retry = huge,
      reset = slResetMillis(c, s, now), limit = c.limit
    }
  end
  local nxt = s
  if c.countBlocked then nxt = { log = slAppend(c, s.log, from, e, cost), last = s.last, at = e } end
  local live = count
  if nxt ~= s then live = #nxt.log end
  return {
    allowed = false, state = nxt, remaining = jmax(0, floor(c.limit - live)),
    retry = slEarliest(c, nxt, e, cost) - now, reset = slResetMillis(c, nxt, now), limit = c.limit
  }
end
function SL.waitTime(c, s, now, queued, cost)
  if cost > c.limit then return huge end
  local e = s.at
  if now > s.at then e = now end
  if queued <= 0 or c.size <= 0 then
    local t = slEarliest(c, s, e, cost)
    if t <= e then return 0 end
    return t - now
  end
  local from = slFirstLive(c, s.log, e)
  local count = #s.log - from
  local free = c.size - count
  local m = queued + cost - 1
  local round = floor(m / c.size)
  local i = m - round * c.size
  local slot
  if i < free then slot = e else slot = s.log[from + i - free + 1] + c.window end
  slot = slot + round * c.window
  local t = jmax(jmax(slot, s.last + c.minGap), e)
  if t <= e then return 0 end
  return t - now
end
function SL.settledAt(c, s)
  return slFreshAt(c, s)
end
function SL.maxCost(c)
  return c.limit
end
function SL.force(c, s, now, cost)
  local e = s.at
  if now > s.at then e = now end
  return { log = slAppend(c, s.log, slFirstLive(c, s.log, e), e, cost), last = e, at = e }
end
function SL.release(c, s, now, amount)
  if not (amount > 0) then return s end
  local e = s.at
  if now > s.at then e = now end
  local from = slFirstLive(c, s.log, e)
  local keep = jmax(from, #s.log - floor(amount))
  local log, k = {}, 0
  for j = from + 1, keep do
    k = k + 1
    log[k] = s.log[j]
  end
  return { log = log, last = s.last, at = e }
end
function SL.decode(c, a, i)
  local n = a[i + 2]
  if n == nil then return nil end
  local log = {}
  for j = 1, n do
    local t = a[i + 2 + j]
    if t == nil then return nil end
    log[j] = t
  end
  return { log = log, last = a[i], at = a[i + 1] }, i + 3 + n
end
function SL.encode(c, s, out)
  out[#out + 1] = s.last
  out[#out + 1] = s.at
  out[#out + 1] = #s.log
  for j = 1, #s.log do out[#out + 1] = s.log[j] end
end
ALG[6] = SL
`
