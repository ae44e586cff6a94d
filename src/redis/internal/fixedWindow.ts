/**
 * The fixed window counter in Lua: `src/internal/algorithm/FixedWindow.ts` expression
 * by expression (first-hit or clock-aligned windows).
 *
 * @since 0.1.0
 */
import type * as FixedWindow from "../../internal/algorithm/FixedWindow.ts"

/**
 * The module's code in `ALG` and in stored states.
 *
 * @example
 * ```ts
 * import { code } from "./fixedWindow.ts"
 *
 * code // 4
 * ```
 *
 * @since 0.1.0
 */
export const code = 4

/**
 * The configuration as the numbers the Lua module reads (`align` as 1 or 0).
 *
 * @example
 * ```ts
 * import * as FixedWindow from "../../internal/algorithm/FixedWindow.ts"
 * import { config } from "./fixedWindow.ts"
 *
 * config(FixedWindow.config({ limit: 100, windowMillis: 60_000, align: true })) // [100, 60000, 1, 0, 0, 600]
 * ```
 *
 * @since 0.1.0
 */
export const config = (c: FixedWindow.Config): ReadonlyArray<number> => [
  c.limit,
  c.windowMillis,
  c.align ? 1 : 0,
  c.countBlocked ? 1 : 0,
  c.execEvenly ? 1 : 0,
  c.minDelay
]

/**
 * Whether a configuration runs the lean step: not with `execEvenly`, whose
 * delays the batch script answers.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "../../internal/algorithm/FixedWindow.ts"
 * import { leans } from "./fixedWindow.ts"
 *
 * leans(FixedWindow.config({ limit: 100, windowMillis: 60_000 })) // true
 * ```
 *
 * @since 0.2.0
 */
export const leans = (c: FixedWindow.Config): boolean => !c.execEvenly

/**
 * The Lua module: registers `ALG[4]`. State: `start count`.
 *
 * @example
 * ```ts
 * import { lua } from "./fixedWindow.ts"
 *
 * lua.includes("ALG[4] = FW") // true
 * ```
 *
 * @since 0.1.0
 */
export const lua = `
local FW = {}
function FW.config(a, i)
  return {
    limit = a[i], window = a[i + 1], align = a[i + 2] == 1, countBlocked = a[i + 3] == 1, execEvenly = a[i + 4] == 1,
    minDelay = a[i + 5]
  }, i + 6
end
local function fwOpen(c, now)
  local start = now
  if c.align then start = alignedStart(c.window, now) end
  return { start = start, count = 0, stop = start + c.window }
end
local function fwWindowAt(c, s, now)
  if now < s.stop and (c.align or s.count ~= 0) then return s end
  if c.align then return fwOpen(c, now) end
  -- a window opens now, as long as this call says (never before the last one's start)
  local start = s.start
  if now > s.start then start = now end
  if start == s.start and s.stop == start + c.window then return s end
  return { start = start, count = 0, stop = start + c.window }
end
function FW.initial(c, now)
  return fwOpen(c, now)
end
function FW.step(c, s, now, cost)
  local w = fwWindowAt(c, s, now)
  local count = w.count + cost
  if count <= c.limit and cost <= c.limit then
    local state = s
    if not (count == s.count and w.start == s.start and w.stop == s.stop) then
      state = { start = w.start, count = count, stop = w.stop }
    end
    local reset = 0
    if count ~= 0 then reset = w.stop - now end
    -- execEvenly: the admitted request waits, spread over what is left of the window
    local delay = 0
    local left = w.stop - now
    if c.execEvenly and w.count ~= 0 and left > 0 then
      delay = ceil(left / (jmax(c.limit - count, 0) + 2))
      if delay < c.minDelay then delay = count * c.minDelay end
    end
    return {
      allowed = true, state = state, remaining = floor(c.limit - count), retry = 0, reset = reset, limit = c.limit,
      delay = delay
    }
  end
  local counted = c.countBlocked and not (cost > c.limit)
  local after, state = w.count, s
  if counted then
    after = count
    state = { start = w.start, count = count, stop = w.stop }
  end
  local retry = huge
  if not (cost > c.limit) then retry = w.stop - now end
  local reset = 0
  if after ~= 0 then reset = w.stop - now end
  local remaining = 0
  if after < c.limit then remaining = floor(c.limit - after) end
  return { allowed = false, state = state, remaining = remaining, retry = retry, reset = reset, limit = c.limit }
end
function FW.waitTime(c, s, now, queued, cost)
  if cost > c.limit then return huge end
  local w = fwWindowAt(c, s, now)
  local free = c.limit - w.count
  if queued + cost <= free then return 0 end
  local spill = jmax(0, queued - jmax(0, free))
  local full = floor(spill / c.limit)
  local left = spill - full * c.limit
  local windows = full
  if left + cost > c.limit then windows = windows + 1 end
  return w.stop + windows * c.window - now
end
function FW.settledAt(c, s)
  if s.count ~= 0 then return s.stop end
  return s.start
end
function FW.maxCost(c)
  return c.limit
end
function FW.release(c, s, now, amount)
  if not (amount > 0) then return s end
  local w = fwWindowAt(c, s, now)
  local count = w.count
  -- never below 0; a credit is kept as it is
  if count > 0 then count = jmax(0, count - amount) end
  return { start = w.start, count = count, stop = w.stop }
end
function FW.force(c, s, now, cost)
  local w = fwWindowAt(c, s, now)
  return { start = w.start, count = w.count + cost, stop = w.stop }
end
function FW.forceAdd(c, s, now, amount)
  local w = fwWindowAt(c, s, now)
  return { start = w.start, count = w.count - amount, stop = w.stop }
end
function FW.withWindow(c, millis)
  if c.align then return nil end
  return {
    limit = c.limit, window = millis, align = false, countBlocked = c.countBlocked, execEvenly = c.execEvenly,
    minDelay = c.minDelay
  }
end
function FW.decode(c, a, i)
  if a[i + 2] == nil then return nil end
  return { start = a[i], count = a[i + 1], stop = a[i + 2] }, i + 3
end
function FW.encode(c, s, out)
  out[#out + 1] = s.start
  out[#out + 1] = s.count
  out[#out + 1] = s.stop
end
ALG[4] = FW
`
