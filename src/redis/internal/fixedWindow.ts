/**
 * The fixed window counter in Lua: `src/internal/algorithm/FixedWindow.ts` expression
 * by expression (first-hit or clock-aligned windows).
 *
 * @since 0.1.0
 */
import type * as FixedWindow from "../../internal/algorithm/FixedWindow.ts"
import { alignedStart, type Lean, pack, readFixed } from "./lean.ts"

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
 * config(FixedWindow.config({ limit: 100, windowMillis: 60_000, align: true })) // [100, 60000, 1]
 * ```
 *
 * @since 0.1.0
 */
export const config = (c: FixedWindow.Config): ReadonlyArray<number> => [c.limit, c.windowMillis, c.align ? 1 : 0]

/**
 * What of a configuration the module does not run: `countBlocked` and
 * `execEvenly`.
 *
 * @example
 * ```ts
 * import * as FixedWindow from "../../internal/algorithm/FixedWindow.ts"
 * import { refuse } from "./fixedWindow.ts"
 *
 * refuse(FixedWindow.config({ limit: 100, windowMillis: 60_000 })) // undefined
 * ```
 *
 * @since 0.2.0
 */
export const refuse = (c: FixedWindow.Config): string | undefined =>
  c.countBlocked ? "a fixed window's countBlocked" : c.execEvenly ? "a fixed window's execEvenly" : undefined

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
  return { limit = a[i], window = a[i + 1], align = a[i + 2] == 1 }, i + 3
end
local function fwWindowAt(c, s, now)
  if now < s.start + c.window and (c.align or s.count > 0) then return s end
  if now <= s.start then return s end
  local start = now
  if c.align then start = alignedStart(c.window, now) end
  return { start = start, count = 0 }
end
function FW.initial(c, now)
  local start = now
  if c.align then start = alignedStart(c.window, now) end
  return { start = start, count = 0 }
end
function FW.step(c, s, now, cost)
  local w = fwWindowAt(c, s, now)
  local count = w.count + cost
  if count <= c.limit then
    local state = s
    if not (count == s.count and w.start == s.start) then state = { start = w.start, count = count } end
    local reset = 0
    if count > 0 then reset = w.start + c.window - now end
    return { allowed = true, state = state, remaining = floor(c.limit - count), retry = 0, reset = reset, limit = c.limit }
  end
  local retry = huge
  if not (cost > c.limit) then retry = w.start + c.window - now end
  local reset = 0
  if w.count > 0 then reset = w.start + c.window - now end
  return { allowed = false, state = s, remaining = floor(c.limit - w.count), retry = retry, reset = reset, limit = c.limit }
end
function FW.waitTime(c, s, now, queued, cost)
  if cost > c.limit then return huge end
  local w = fwWindowAt(c, s, now)
  local free = c.limit - w.count
  if queued + cost <= free then return 0 end
  local spill = jmax(0, queued - free)
  local full = floor(spill / c.limit)
  local left = spill - full * c.limit
  local windows = 1 + full
  if left + cost > c.limit then windows = windows + 1 end
  return w.start + windows * c.window - now
end
function FW.settledAt(c, s)
  if s.count > 0 then return s.start + c.window end
  return s.start
end
function FW.maxCost(c)
  return c.limit
end
function FW.release(c, s, now, amount)
  if not (amount > 0) then return s end
  local w = fwWindowAt(c, s, now)
  return { start = w.start, count = jmax(0, w.count - amount) }
end
function FW.decode(c, a, i)
  if a[i + 1] == nil then return nil end
  return { start = a[i], count = a[i + 1] }, i + 2
end
function FW.encode(c, s, out)
  out[#out + 1] = s.start
  out[#out + 1] = s.count
end
ALG[4] = FW
`

/**
 * The lean step (see `lean.ts`): `FixedWindow.step` inline.
 *
 * @example
 * ```ts
 * import { lean } from "./fixedWindow.ts"
 *
 * lean.config // ["cLimit", "cWindow", "cAlign"]
 * ```
 *
 * @since 0.2.0
 */
export const lean: Lean = {
  config: ["cLimit", "cWindow", "cAlign"],
  step: `${readFixed(code, ["start", "count"])}
  if fresh then
    if cAlign == 1 then ${alignedStart("start", "cWindow", "now")} else start = now end
    count = 0
  end
  -- windowAt(now)
  local ws, wc = start, count
  if not (now < start + cWindow and (cAlign == 1 or count > 0)) and not (now <= start) then
    if cAlign == 1 then ${alignedStart("ws", "cWindow", "now")} else ws = now end
    wc = 0
  end
  local total = wc + cost
  local ns, nc = start, count
  local changed = false
  limit = cLimit
  if total <= cLimit then
    allowed = true
    if not (total == count and ws == start) then
      ns, nc = ws, total
      changed = true
    end
    remaining = floor(cLimit - total)
    retry = 0
    reset = 0
    if total > 0 then reset = ws + cWindow - now end
  else
    allowed = false
    remaining = floor(cLimit - wc)
    retry = huge
    if not (cost > cLimit) then retry = ws + cWindow - now end
    reset = 0
    if wc > 0 then reset = ws + cWindow - now end
  end
  -- a denial changes nothing, so an Admit is a Take
  dirty = fresh or changed
  if dirty then
    if nc > 0 then settled = ns + cWindow else settled = ns end
    packed = ${pack(code, ["ns", "nc"])}
  end`
}
