/**
 * The compiler keeps JavaScript's arithmetic where Lua 5.1's differs
 * (`Math.max`/`Math.min` with -0, `%`, `Infinity`, and the replies'
 * `%.17g`): a module of such expressions (fixtures/Semantics.ts) is
 * compiled as the algorithms are, run in Redis, and every figure must be
 * the one JavaScript computes, to the bit. Needs `REDIS_URL`.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { Redis } from "effect/persistence"
import { join } from "node:path"
import * as Entries from "../../src/redis/internal/entries.ts"
import * as Compile from "../../tools/lua/compile.ts"
import { describeRedis } from "../redis/redis.ts"
import { figures } from "./fixtures/Semantics.ts"

const compiled = Compile.compile([join(import.meta.dirname, "fixtures", "Semantics.ts")]).modules[0]

// each figure as "%.17g" (inf, -inf, nan as Lua writes them), as the entry points reply
const script = `${Compile.runtime}${Entries.prelude}bind()
${compiled.lua}
local out = {}
for _, x in ipairs(require(${JSON.stringify(compiled.path)}).figures(num(ARGV[1]), num(ARGV[2]))) do
  if x ~= x then out[#out + 1] = "nan"
  elseif x == huge then out[#out + 1] = "inf"
  elseif x == -huge then out[#out + 1] = "-inf"
  else out[#out + 1] = string.format("%.17g", x) end
end
return table.concat(out, " ")
`

const show = (n: number): string =>
  n === Infinity ? "inf" : n === -Infinity ? "-inf" : Object.is(n, -0) ? "-0" : String(n)
const read = (s: string): number =>
  s === "inf" ? Infinity : s === "-inf" ? -Infinity : s === "nan" || s === "-nan" ? NaN : Number(s)

const pairs: ReadonlyArray<readonly [number, number]> = [
  [-0, 0],
  [0, -0],
  [-0, -0],
  [-7, 3],
  [7, -3],
  [-7.5, 2],
  [5.5, -0],
  [-1, Infinity],
  [Infinity, -Infinity],
  [1e308, 1e-308],
  [-0.5, 1],
  [0.1, 0.2],
  [1 / 3, 3],
  [2 ** 53 + 2, 2],
  [-1e-320, 1]
]

describeRedis("JavaScript's arithmetic compiled to Lua", (it) => {
  for (const [a, b] of pairs) {
    it.effect(`${show(a)} and ${show(b)}`, () =>
      Effect.gen(function*() {
        const redis = yield* Redis.Redis
        const reply = yield* redis.send<string>("EVAL", script, "0", show(a), show(b))
        const got = reply.split(" ").map(read)
        const want = figures(a, b)
        assert.strictEqual(got.length, want.length)
        for (let i = 0; i < want.length; i++) {
          assert.isTrue(Object.is(got[i], want[i]), `figure ${i}: Lua ${show(got[i])}, JavaScript ${show(want[i])}`)
        }
      }))
  }
})
