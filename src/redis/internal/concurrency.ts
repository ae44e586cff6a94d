/**
 * The concurrency limit (capped release, optionally replenished at a rate) in
 * Lua: `src/internal/algorithm/Concurrency.ts` expression by expression. A key with
 * units out never settles, so it gets no TTL.
 *
 * @since 0.1.0
 */
import type * as Concurrency from "../../internal/algorithm/Concurrency.ts"

/**
 * The module's code in `ALG` and in stored states.
 *
 * @example
 * ```ts
 * import { code } from "./concurrency.ts"
 *
 * code // 7
 * ```
 *
 * @since 0.1.0
 */
export const code = 7

/**
 * The configuration as the numbers the Lua module reads (`gradual` as 1 or 0).
 *
 * @example
 * ```ts
 * import * as Concurrency from "../../internal/algorithm/Concurrency.ts"
 * import { config } from "./concurrency.ts"
 *
 * config(Concurrency.config({ capacity: 10 })) // [10, 0, 0, 1, 10]
 * ```
 *
 * @since 0.1.0
 */
export const config = (c: Concurrency.Config): ReadonlyArray<number> => [
  c.capacity,
  c.gradual ? 1 : 0,
  c.tokens,
  c.periodMillis,
  c.full
]

/**
 * The Lua module: registers `ALG[7]`. State: `level pending at`.
 *
 * @example
 * ```ts
 * import { lua } from "./concurrency.ts"
 *
 * lua.includes("ALG[7] = CC") // true
 * ```
 *
 * @since 0.1.0
 */
export const lua = `
local CC = {}
function CC.config(a, i)
  return { capacity = a[i], gradual = a[i + 1] == 1, tokens = a[i + 2], period = a[i + 3], full = a[i + 4] }, i + 5
end
function CC.initial(c, now)
  return { level = c.full, pending = 0, at = now }
end
local function ccStateAt(c, s, now)
  if now <= s.at then return s end
  if not c.gradual or s.pending <= 0 then return { level = s.level, pending = s.pending, at = now } end
  local back = jmin(s.pending, (now - s.at) * c.tokens)
  return { level = s.level + back, pending = s.pending - back, at = now }
end
local function ccMillisFor(c, s, m, now, deficit)
  if deficit <= 0 then return 0 end
  if not c.gradual or deficit > m.pending then return huge end
  local behind = 0
  if s.at > now then behind = s.at - now end
  return ceil(deficit / c.tokens) + behind
end
local function ccResetMillis(c, s, m, now)
  if m.level + m.pending < c.full then return huge end
  return ccMillisFor(c, s, m, now, m.pending)
end
function CC.step(c, s, now, cost)
  local m = ccStateAt(c, s, now)
  local need = cost * c.period
  if m.level >= need then
    local nxt = { level = m.level - need, pending = m.pending, at = m.at }
    return {
      allowed = true, state = nxt, remaining = floor(nxt.level / c.period), retry = 0,
      reset = ccResetMillis(c, s, nxt, now), limit = c.capacity
    }
  end
  local retry = huge
  if not (cost > c.capacity) then retry = ccMillisFor(c, s, m, now, need - m.level) end
  return {
    allowed = false, state = s, remaining = m.level > 0 and floor(m.level / c.period) or 0, retry = retry,
    reset = ccResetMillis(c, s, m, now), limit = c.capacity
  }
end
function CC.release(c, s, now, units)
  if not (units > 0) then return s end
  local m = ccStateAt(c, s, now)
  local back = jmin(c.full - m.level - m.pending, units * c.period)
  if back <= 0 then return m end
  if c.gradual then return { level = m.level, pending = m.pending + back, at = m.at } end
  return { level = m.level + back, pending = 0, at = m.at }
end
function CC.force(c, s, now, cost)
  local m = ccStateAt(c, s, now)
  return { level = m.level - cost * c.period, pending = m.pending, at = m.at }
end
function CC.waitTime(c, s, now, queued, cost)
  if cost > c.capacity then return huge end
  local m = ccStateAt(c, s, now)
  return ccMillisFor(c, s, m, now, (queued + cost) * c.period - m.level)
end
function CC.settledAt(c, s)
  return s.at + ccResetMillis(c, s, s, s.at)
end
function CC.maxCost(c)
  return c.capacity
end
function CC.decode(c, a, i)
  if a[i + 2] == nil then return nil end
  return { level = a[i], pending = a[i + 1], at = a[i + 2] }, i + 3
end
function CC.encode(c, s, out)
  out[#out + 1] = s.level
  out[#out + 1] = s.pending
  out[#out + 1] = s.at
end
ALG[7] = CC
`
