/**
 * The all-or-nothing entry point: one take over several keys, from every
 * key or from none, in one atomic script (`MemoryStore.applyAllOps` in Lua).
 * Each key's state is read and stepped with its own policy's module; only if
 * every key admits are the states written (each with its TTL, as the batch
 * entry point writes them); a denial writes nothing, so no partial take can
 * survive.
 *
 * - `KEYS[i]`: the i-th key (with the store's prefix). On Redis Cluster the
 *   keys of one call must hash to one slot: give them a common `{hash tag}`.
 * - `ARGV[1]`: now in milliseconds, or `""` for the server's `TIME`.
 * - `ARGV[2]`: how long (ms, or `inf`) a settled key is kept.
 * - `ARGV[1 + 2i]`, `ARGV[2 + 2i]`: the i-th key's policy (`code canRelease
 *   config…`, as for the batch entry point) and cost.
 *
 * The reply is an array: `1` or `0` (whether every key admitted), then one
 * string per key, `allowed remaining retryAfter resetAfter limit` (what that
 * key took, or what it alone would decide).
 *
 * It is the `body` of a call only: it uses the batch entry point's
 * definitions (`readState`, `writeState`, `blockedOutcome`, `reply`) and
 * the algorithms' modules. A blocked key refuses the call.
 *
 * @since 0.2.0
 */
import * as Prelude from "./prelude.ts"

/**
 * What runs per call, with `KEYS` and `ARGV` in scope.
 *
 * @example
 * ```ts
 * import { body } from "./multi.ts"
 *
 * body.includes("writeState") // true
 * ```
 *
 * @since 0.2.0
 */
export const body = `
${Prelude.readNow("now")}
keep = num(ARGV[2])
local policies = {}
local n = #KEYS
local Ps, raws, outs = {}, {}, {}
local all = true
for k = 1, n do
  local text = ARGV[1 + 2 * k]
  local P = policies[text]
  if P == nil then
    local ca = nums(text)
    local A = ALG[ca[1]]
    P = { code = ca[1], A = A, c = (A.config(ca, 3)) }
    policies[text] = P
  end
  local raw, state, blockedUntil = readState(KEYS[k], P.A, P.c, P.code)
  if state == nil then state = P.A.initial(P.c, now) end
  local cost = num(ARGV[2 + 2 * k])
  local o
  -- a blocked key refuses, and takes nothing
  if now < blockedUntil then o = blockedOutcome(P.A, P.c, state, blockedUntil, cost) else o = P.A.step(P.c, state, now, cost) end
  if not o.allowed then all = false end
  Ps[k], raws[k], outs[k] = P, raw, o
end
local result = { 0 }
if all then result[1] = 1 end
for k = 1, n do
  local o = outs[k]
  -- (admitted: no key was blocked, and a block seen over is written without it)
  if all then writeState(KEYS[k], raws[k], Ps[k].A, Ps[k].c, Ps[k].code, o.state, -huge) end
  result[k + 1] = reply(o.allowed, o.remaining, o.retry, o.reset, o.limit)
end
return result
`
