/**
 * A base limit with a burst allowance beside it (`Policy.burst`) in Lua:
 * `src/internal/algorithm/Burst.ts` expression by expression. Each of the
 * two is any module of `ALG` (a composite too), so the burst's script
 * carries every module, and the composite's first (its helpers for parts).
 *
 * @since 0.2.0
 */

/**
 * The module's code in `ALG` and in stored states.
 *
 * @example
 * ```ts
 * import { code } from "./burst.ts"
 *
 * code // 10
 * ```
 *
 * @since 0.2.0
 */
export const code = 10

/**
 * The Lua module: registers `ALG[10]`. Configuration: `code canRelease
 * config…` of the base, then of the burst allowance; state: `code state…` of
 * each, a part whose code does not match reads as no state at all.
 *
 * @example
 * ```ts
 * import { lua } from "./burst.ts"
 *
 * lua.includes("ALG[10] = BU") // true
 * ```
 *
 * @since 0.2.0
 */
export const lua = `
local BU = {}
function BU.config(a, i)
  local base, burst
  base, i = partConfig(a, i)
  burst, i = partConfig(a, i)
  return { base = base, burst = burst, parts = { base, burst } }, i
end
function BU.initial(c, now)
  return { c.base.A.initial(c.base.c, now), c.burst.A.initial(c.burst.c, now) }
end
local function buProbe(p, s, now)
  return p.A.step(p.c, s, now, 0)
end
function BU.step(c, s, now, cost)
  local base, burst = c.base, c.burst
  local ob = base.A.step(base.c, s[1], now, cost)
  if ob.allowed then
    local rest = buProbe(burst, s[2], now)
    return {
      allowed = true, state = { ob.state, s[2] }, remaining = ob.remaining + rest.remaining, retry = 0,
      reset = jmax(ob.reset, rest.reset), limit = ob.limit + rest.limit, delay = ob.delay
    }
  end
  local ox = burst.A.step(burst.c, s[2], now, cost)
  local state = s
  if not (ob.state == s[1] and ox.state == s[2]) then state = { ob.state, ox.state } end
  if ox.allowed then
    local left = buProbe(base, ob.state, now)
    return {
      allowed = true, state = state, remaining = left.remaining + ox.remaining, retry = 0,
      reset = jmax(left.reset, ox.reset), limit = ob.limit + ox.limit, delay = ox.delay
    }
  end
  return {
    allowed = false, state = state, remaining = ob.remaining + ox.remaining, retry = jmin(ob.retry, ox.retry),
    reset = jmax(ob.reset, ox.reset), limit = ob.limit + ox.limit
  }
end
function BU.waitTime(c, s, now, queued, cost)
  return jmin(
    c.base.A.waitTime(c.base.c, s[1], now, queued, cost), c.burst.A.waitTime(c.burst.c, s[2], now, queued, cost)
  )
end
function BU.settledAt(c, s)
  return jmax(c.base.A.settledAt(c.base.c, s[1]), c.burst.A.settledAt(c.burst.c, s[2]))
end
function BU.maxCost(c)
  return jmax(c.base.A.maxCost(c.base.c), c.burst.A.maxCost(c.burst.c))
end
local function buOnBase(s, base)
  if base == s[1] then return s end
  return { base, s[2] }
end
function BU.release(c, s, now, amount)
  if not c.base.canRelease then return s end
  return buOnBase(s, c.base.A.release(c.base.c, s[1], now, amount))
end
function BU.force(c, s, now, cost)
  return buOnBase(s, c.base.A.force(c.base.c, s[1], now, cost))
end
function BU.forceAdd(c, s, now, amount)
  if c.base.A.forceAdd == nil then return s end
  return buOnBase(s, c.base.A.forceAdd(c.base.c, s[1], now, amount))
end
function BU.full(c, now)
  return partsFull(c.parts, now)
end
function BU.decode(c, a, i)
  return partsDecode(c.parts, a, i)
end
function BU.encode(c, s, out)
  partsEncode(c.parts, s, out)
end
ALG[10] = BU
`
