/**
 * No limit at all (`Policy.unlimited`) in Lua: every request admitted, a
 * state of nothing that is settled from the start (a key is never kept).
 *
 * @since 0.2.0
 */

/**
 * The module's code in `ALG` and in stored states.
 *
 * @example
 * ```ts
 * import { code } from "./unlimited.ts"
 *
 * code // 11
 * ```
 *
 * @since 0.2.0
 */
export const code = 11

/**
 * The Lua module: registers `ALG[11]`. No configuration; state: none.
 *
 * @example
 * ```ts
 * import { lua } from "./unlimited.ts"
 *
 * lua.includes("ALG[11] = UL") // true
 * ```
 *
 * @since 0.2.0
 */
export const lua = `
local UL = {}
local ulState = {}
function UL.config(a, i)
  return {}, i
end
function UL.initial(c, now)
  return ulState
end
function UL.step(c, s, now, cost)
  return { allowed = true, state = s, remaining = huge, retry = 0, reset = 0, limit = huge }
end
function UL.waitTime(c, s, now, queued, cost)
  return 0
end
function UL.settledAt(c, s)
  return -huge
end
function UL.maxCost(c)
  return huge
end
function UL.release(c, s, now, amount)
  return s
end
function UL.force(c, s, now, cost)
  return s
end
function UL.forceAdd(c, s, now, amount)
  return s
end
function UL.decode(c, a, i)
  return ulState, i
end
function UL.encode(c, s, out)
end
ALG[11] = UL
`
