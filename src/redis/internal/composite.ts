/**
 * Composite limits in Lua: `src/internal/algorithm/Composite.ts` expression by
 * expression. Every part is any module of `ALG` (composites nest), so the
 * composite's script carries every module.
 *
 * @since 0.1.0
 */

/**
 * The module's code in `ALG` and in stored states.
 *
 * @example
 * ```ts
 * import { code } from "./composite.ts"
 *
 * code // 9
 * ```
 *
 * @since 0.1.0
 */
export const code = 9

/**
 * The Lua module: registers `ALG[9]`. Configuration: `n code₁ canRelease₁ config₁ …`;
 * state: `n code₁ state₁ …`, a part whose code does not match reads as no
 * state at all.
 *
 * @example
 * ```ts
 * import { lua } from "./composite.ts"
 *
 * lua.includes("ALG[9] = CP") // true
 * ```
 *
 * @since 0.1.0
 */
export const lua = `
-- A part of a composite or a burst policy: \`code canRelease config…\` from
-- index i, and the index after it.
local function partConfig(a, i)
  local code = a[i]
  local A = ALG[code]
  local pc, after = A.config(a, i + 2)
  return { code = code, A = A, c = pc, canRelease = a[i + 1] == 1 }, after
end
-- Parts' states, \`code state…\` each from index i; nil if one does not match.
local function partsDecode(parts, a, i)
  local s = {}
  for k = 1, #parts do
    local p = parts[k]
    if a[i] ~= p.code then return nil end
    local ps
    ps, i = p.A.decode(p.c, a, i + 1)
    if ps == nil then return nil end
    s[k] = ps
  end
  return s, i
end
local function partsEncode(parts, s, out)
  for k = 1, #parts do
    local p = parts[k]
    out[#out + 1] = p.code
    p.A.encode(p.c, s[k], out)
  end
end
-- Parts full (nothing used): their own full state, or their initial one.
local function partsFull(parts, now)
  local out = {}
  for k = 1, #parts do
    local p = parts[k]
    if p.A.full ~= nil then out[k] = p.A.full(p.c, now) else out[k] = p.A.initial(p.c, now) end
  end
  return out
end
local CP = {}
function CP.config(a, i)
  local n = a[i]
  local parts = {}
  i = i + 1
  for k = 1, n do parts[k], i = partConfig(a, i) end
  return { parts = parts }, i
end
function CP.initial(c, now)
  local s = {}
  for k = 1, #c.parts do
    local p = c.parts[k]
    s[k] = p.A.initial(p.c, now)
  end
  return s
end
function CP.step(c, s, now, cost)
  local n = #c.parts
  local outcomes = {}
  local allowed = true
  for k = 1, n do
    local p = c.parts[k]
    local o = p.A.step(p.c, s[k], now, cost)
    outcomes[k] = o
    if not o.allowed then allowed = false end
  end
  if not allowed then
    for k = 1, n do
      if outcomes[k].allowed then
        local p = c.parts[k]
        local probe = p.A.step(p.c, s[k], now, 0)
        outcomes[k] = {
          allowed = true, state = s[k], remaining = probe.remaining, retry = 0, reset = probe.reset,
          limit = probe.limit
        }
      end
    end
  end
  local remaining, retry, reset, binding = huge, 0, 0, 0
  for k = 1, n do
    local o = outcomes[k]
    if o.remaining < remaining then remaining = o.remaining end
    if o.reset > reset then reset = o.reset end
    if binding == 0 then
      binding = k
    else
      local b = outcomes[binding]
      local better
      if allowed then
        better = o.remaining < b.remaining
      else
        better = (not o.allowed) and (b.allowed or o.retry > b.retry)
      end
      if better then binding = k end
    end
    if o.retry > retry then retry = o.retry end
  end
  local state = s
  local changed = allowed
  if not allowed then
    for k = 1, n do
      if outcomes[k].state ~= s[k] then changed = true end
    end
  end
  if changed then
    state = {}
    for k = 1, n do state[k] = outcomes[k].state end
  end
  if allowed then retry = 0 end
  local limit = huge
  if binding > 0 then limit = outcomes[binding].limit end
  return { allowed = allowed, state = state, remaining = remaining, retry = retry, reset = reset, limit = limit }
end
function CP.waitTime(c, s, now, queued, cost)
  local wait = 0
  for k = 1, #c.parts do
    local p = c.parts[k]
    local w = p.A.waitTime(p.c, s[k], now, queued, cost)
    if w > wait then wait = w end
  end
  return wait
end
function CP.settledAt(c, s)
  local at = -huge
  for k = 1, #c.parts do
    local p = c.parts[k]
    local t = p.A.settledAt(p.c, s[k])
    if t > at then at = t end
  end
  return at
end
function CP.maxCost(c)
  local max = huge
  for k = 1, #c.parts do
    local p = c.parts[k]
    local m = p.A.maxCost(p.c)
    if m < max then max = m end
  end
  return max
end
function CP.release(c, s, now, amount)
  if not (amount > 0) then return s end
  local out = {}
  for k = 1, #c.parts do
    local p = c.parts[k]
    if p.canRelease then out[k] = p.A.release(p.c, s[k], now, amount) else out[k] = s[k] end
  end
  return out
end
function CP.force(c, s, now, cost)
  local out = {}
  for k = 1, #c.parts do
    local p = c.parts[k]
    out[k] = p.A.force(p.c, s[k], now, cost)
  end
  return out
end
function CP.forceAdd(c, s, now, amount)
  local out = {}
  for k = 1, #c.parts do
    local p = c.parts[k]
    if p.A.forceAdd ~= nil then out[k] = p.A.forceAdd(p.c, s[k], now, amount) else out[k] = s[k] end
  end
  return out
end
function CP.full(c, now)
  return partsFull(c.parts, now)
end
function CP.decode(c, a, i)
  if a[i] ~= #c.parts then return nil end
  return partsDecode(c.parts, a, i + 1)
end
function CP.encode(c, s, out)
  out[#out + 1] = #c.parts
  partsEncode(c.parts, s, out)
end
ALG[9] = CP
`
