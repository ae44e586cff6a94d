// The service's API for calls over several keys, adaptive feedback and
// waiters' order, on the real process (`node src/server/main.ts`).
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { post, start } from "./harness.ts"

const hour = (capacity: number) => ({ kind: "tokenBucket", capacity, refill: { tokens: 1, per: "1 hour" } })

const config = {
  policies: {
    default: hour(100),
    users: hour(3),
    orgs: hour(5),
    upstream: { kind: "adaptive", capacity: 1, rate: { tokens: 2, per: "1 second" }, floor: 1, ceiling: 10 }
  },
  rules: [
    { prefix: "user:", policy: "users" },
    { prefix: "org:", policy: "orgs" },
    { prefix: "up:", policy: "upstream" }
  ],
  limits: { maxBodyBytes: 4096, maxKeyLength: 64, maxWait: 60_000 }
}

describe("service: several keys, feedback, waiters' order", () => {
  it.live("consume-all takes from every key or from none, each key by its own policy", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      const call = (user: string) => post(service, "/v1/consume-all", { keys: [`user:${user}`, "org:a", "global"] })
      for (let i = 0; i < 3; i++) assert.strictEqual((yield* call("1")).json.allowed, true)
      const denied = yield* call("1")
      assert.strictEqual(denied.status, 200)
      assert.strictEqual(denied.json.allowed, false)
      const byKey = Object.fromEntries(
        (denied.json.keys as Array<{ key: string; allowed: boolean; policy: string; remaining: number }>).map((
          k
        ) => [k.key, k])
      )
      assert.strictEqual(byKey["user:1"].allowed, false)
      assert.strictEqual(byKey["user:1"].policy, "users")
      // the org and the global key paid for the three admitted calls only
      assert.strictEqual(byKey["org:a"].remaining, 2)
      assert.strictEqual(byKey["global"].remaining, 97)
      assert.strictEqual((yield* call("2")).json.allowed, true)
      assert.strictEqual((yield* call("2")).json.allowed, true)
      const org = yield* call("3")
      assert.strictEqual(org.json.allowed, false)
      assert.strictEqual(
        (org.json.keys as Array<{ key: string; allowed: boolean }>).find((k) => !k.allowed)?.key,
        "org:a"
      )
      const bad = yield* post(service, "/v1/consume-all", { keys: [] })
      assert.strictEqual(bad.status, 400)
      const twice = yield* post(service, "/v1/consume-all", { keys: ["user:9", "user:9"] })
      assert.strictEqual(twice.status, 400)
    }))

  it.live("feedback moves an adaptive key's rate; a fixed-rate key refuses it", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      assert.strictEqual((yield* post(service, "/v1/consume", { key: "up:api" })).json.allowed, true)
      const fed = yield* post(service, "/v1/feedback", { key: "up:api", signal: "throttled", retryAfter: 30_000 })
      assert.strictEqual(fed.status, 200)
      assert.deepStrictEqual(fed.json, { applied: true, policy: "upstream" })
      const held = yield* post(service, "/v1/consume", { key: "up:api" })
      assert.strictEqual(held.json.allowed, false)
      // nothing before the Retry-After: 30 s, give or take the time the calls took
      assert.isAbove(held.json.retryAfter, 25_000)
      // a throttled signal without a Retry-After halves the rate, 2 a second to 1: a unit that came within
      // 500 ms of the take now comes up to 1000 ms after the signal
      assert.strictEqual((yield* post(service, "/v1/consume", { key: "up:b" })).json.allowed, true)
      const before = yield* post(service, "/v1/consume", { key: "up:b" })
      assert.isAtMost(before.json.retryAfter, 500)
      assert.strictEqual((yield* post(service, "/v1/feedback", { key: "up:b", signal: "throttled" })).status, 200)
      const after = yield* post(service, "/v1/consume", { key: "up:b" })
      assert.strictEqual(after.json.allowed, false)
      assert.isAbove(after.json.retryAfter, 500, `${before.text} then ${after.text}`)
      const fixed = yield* post(service, "/v1/feedback", { key: "user:1", signal: "ok" })
      assert.strictEqual(fixed.status, 400)
      const badSignal = yield* post(service, "/v1/feedback", { key: "up:api", signal: "slow" })
      assert.strictEqual(badSignal.status, 400)
    }))

  it.live("wait takes a priority, a tenant and a weight, each checked", () =>
    Effect.gen(function*() {
      const service = yield* start({ config })
      const ok = yield* post(service, "/v1/wait", { key: "k", priority: 2, tenant: "acme", weight: 2, maxWait: 1000 })
      assert.strictEqual(ok.status, 200)
      assert.strictEqual(ok.json.allowed, true)
      assert.strictEqual((yield* post(service, "/v1/wait", { key: "k", weight: 0 })).status, 400)
      assert.strictEqual((yield* post(service, "/v1/wait", { key: "k", priority: 1.5 })).status, 400)
      // a weight needs a tenant
      assert.strictEqual((yield* post(service, "/v1/wait", { key: "k", weight: 2 })).status, 400)
    }))
})
