/**
 * `RedisStore.make` where `@effect/platform-node` is installed but its peer
 * `redis` is not: the application's `Redis` cannot be a `NodeRedis` then,
 * and the store runs on it as on any other `Redis`.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import * as Module from "node:module"
import * as path from "node:path"

const fixtures = path.join(import.meta.dirname, "fixtures")
const make = (imports: ReadonlyArray<string>) =>
  execFileSync(process.execPath, [...imports, path.join(fixtures, "make.ts")], { encoding: "utf8" }).trim()

describe("RedisStore.make and @effect/platform-node's peer", () => {
  it("builds over the application's Redis with redis installed", () => {
    assert.strictEqual(make([]), "built")
  })

  // (the hook that hides `redis` needs Node's synchronous module hooks: Node 22.15 and later)
  it.skipIf(!("registerHooks" in Module))("builds over the application's Redis without redis installed", () => {
    assert.strictEqual(make(["--import", path.join(fixtures, "without-redis.mjs")]), "built")
  })
})
