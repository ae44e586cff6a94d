/**
 * Where the service's Redis is, as the configuration says it (no server):
 * one server (`REDIS_URL`, `redis.url`), a Redis Cluster
 * (`REDIS_CLUSTER_NODES`, `redis.cluster.nodes`) or a primary behind
 * Sentinel (`REDIS_SENTINELS` and `REDIS_SENTINEL_NAME`, `redis.sentinel`),
 * checked at start: each mistake names its field and value, with the
 * password hidden.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import * as ServiceConfig from "../../src/server/ServiceConfig.ts"

const PASSWORD = "hunter2-not-to-be-shown"
const secret = (value: string) => Option.some(Redacted.make(value))

// The errors of a configuration that does not resolve, as field, value and reason.
const errorsOf = (input: ServiceConfig.Input) => Effect.map(Effect.flip(ServiceConfig.resolve(input)), (e) => e.errors)

describe("the service's Redis: one server, a cluster, or behind Sentinel", () => {
  it.effect("REDIS_CLUSTER_NODES: a cluster, its nodes as given", () =>
    Effect.gen(function*() {
      const settings = yield* ServiceConfig.resolve({
        redisClusterNodes: secret("redis://10.0.0.1:6379, redis://10.0.0.2:6379,")
      })
      const redis = Option.getOrThrow(settings.redis)
      assert.strictEqual(redis.topology, "cluster")
      assert.strictEqual(redis.urlField, "REDIS_CLUSTER_NODES")
      assert.strictEqual(Redacted.value(redis.url), "redis://10.0.0.1:6379, redis://10.0.0.2:6379,")
      assert.include(settings.sources, "REDIS_CLUSTER_NODES")
    }))

  it.effect("REDIS_SENTINELS and REDIS_SENTINEL_NAME, or the file's redis.sentinel", () =>
    Effect.gen(function*() {
      const fromEnv = yield* ServiceConfig.resolve({
        redisSentinels: secret("rediss://:pw@s1:26379,rediss://:pw@s2:26379"),
        env: { REDIS_SENTINEL_NAME: "mymaster" }
      })
      const redis = Option.getOrThrow(fromEnv.redis)
      assert.strictEqual(redis.topology, "sentinel")
      assert.strictEqual(redis.sentinelName, "mymaster")
      const fromFile = yield* ServiceConfig.resolve({
        file: { redis: { sentinel: { name: "primary", sentinels: ["redis://s1:26379"] }, prefix: "api:" } }
      })
      const file = Option.getOrThrow(fromFile.redis)
      assert.strictEqual(file.topology, "sentinel")
      assert.strictEqual(file.sentinelName, "primary")
      assert.strictEqual(file.urlField, "redis.sentinel.sentinels")
      assert.strictEqual(file.prefix, "api:")
      const cluster = yield* ServiceConfig.resolve({
        file: { redis: { cluster: { nodes: ["redis://n1:6379", "redis://n2:6379"] } } }
      })
      assert.strictEqual(Option.getOrThrow(cluster.redis).topology, "cluster")
    }))

  it.effect("the environment's place wins over the file's", () =>
    Effect.gen(function*() {
      const settings = yield* ServiceConfig.resolve({
        file: { redis: { url: "redis://file:6379" } },
        redisClusterNodes: secret("redis://n1:6379")
      })
      assert.strictEqual(Option.getOrThrow(settings.redis).urlField, "REDIS_CLUSTER_NODES")
    }))

  it.effect("mistakes name the field and the value, never the password", () =>
    Effect.gen(function*() {
      const badNode = yield* errorsOf({
        redisClusterNodes: secret(`redis://:${PASSWORD}@n1:6379,http://:${PASSWORD}@n2:6379`)
      })
      assert.strictEqual(badNode[0].field, "REDIS_CLUSTER_NODES[1]")
      assert.include(badNode[0].reason, "redis://")
      assert.notInclude(JSON.stringify(badNode), PASSWORD)

      const credentials = yield* errorsOf({
        redisClusterNodes: secret(`redis://:${PASSWORD}@n1:6379,redis://n2:6379`)
      })
      assert.strictEqual(credentials[0].field, "REDIS_CLUSTER_NODES[1]")
      assert.strictEqual(credentials[0].value, "\"redis://n2:6379\"")
      assert.include(credentials[0].reason, "scheme and credentials of REDIS_CLUSTER_NODES[0]")

      const database = yield* errorsOf({ file: { redis: { cluster: { nodes: ["redis://n1:6379/2"] } } } })
      assert.deepStrictEqual(database.map((e) => [e.field, e.reason]), [[
        "redis.cluster.nodes[0]",
        "a Redis Cluster has only database 0"
      ]])

      const two = yield* errorsOf({ redisUrl: secret("redis://a:6379"), redisSentinels: secret("redis://s:26379") })
      assert.strictEqual(two[0].field, "REDIS_SENTINELS")
      assert.include(two[0].reason, "give one of REDIS_URL, REDIS_SENTINELS")

      const twoInFile = yield* errorsOf({
        file: { redis: { url: "redis://a:6379", cluster: { nodes: ["redis://n1:6379"] } } }
      })
      assert.strictEqual(twoInFile[0].field, "redis.cluster.nodes")

      const noName = yield* errorsOf({ redisSentinels: secret("redis://s:26379") })
      assert.strictEqual(noName[0].field, "REDIS_SENTINEL_NAME")
      assert.include(noName[0].reason, "is required with REDIS_SENTINELS")

      const nameAlone = yield* errorsOf({ redisUrl: secret("redis://a:6379"), env: { REDIS_SENTINEL_NAME: "x" } })
      assert.strictEqual(nameAlone[0].field, "REDIS_SENTINEL_NAME")
      assert.strictEqual(nameAlone[0].value, "\"x\"")

      const fileNode = yield* errorsOf({
        file: { redis: { cluster: { nodes: [`redis://:${PASSWORD}@n1:6379`, "n2:6379"] } } }
      })
      assert.strictEqual(fileNode[0].field, "redis.cluster.nodes[1]")
      assert.notInclude(JSON.stringify(fileNode), PASSWORD)
      const emptyName = yield* errorsOf({ file: { redis: { sentinel: { name: "", sentinels: ["redis://s:1"] } } } })
      assert.strictEqual(emptyName[0].field, "redis.sentinel.name")
    }))
})
