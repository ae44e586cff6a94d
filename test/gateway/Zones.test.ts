// Several zones in one forward-auth check (nginx: several `limit_req` in one
// location), with `forwardAuth.match: "all"`: every matching rule applies, all
// or nothing, on the real service over 127.0.0.1, in process and, with
// REDIS_URL, on Redis.
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { request, type Service, start, startFailing } from "../server/harness.ts"

const config = (match: "first" | "all", siteCost?: number, redis?: { readonly prefix: string }) => ({
  ...(redis === undefined ? {} : { redis }),
  policies: {
    "per-user": { kind: "tokenBucket", capacity: 2, refill: { tokens: 1, per: "1 hour" } },
    "per-site": { kind: "fixedWindow", limit: 3, window: "1 hour" }
  },
  defaultPolicy: "per-user",
  forwardAuth: {
    match,
    rules: [
      { name: "user", pathPrefix: "/api/", policy: "per-user", key: [{ header: "x-api-key" }] },
      { name: "site", policy: "per-site", key: ["host"], ...(siteCost === undefined ? {} : { cost: siteCost }) }
    ]
  }
})

const check = (service: Service, user: string, uri = "/api/items") =>
  request(service, "GET", "/v1/check", {
    headers: { "x-forwarded-uri": uri, "x-forwarded-host": "shop.example", "x-api-key": user }
  })

// On Redis, keys of a prefix of their own: a window of an hour outlives the test.
// Without REDIS_URL the Redis case is registered and skipped, saying why.
const redisUrl = process.env.REDIS_URL === "" ? undefined : process.env.REDIS_URL
const stores: ReadonlyArray<readonly [string, Record<string, string>, { readonly prefix: string } | undefined]> = [
  ["in process", {}, undefined],
  [
    redisUrl === undefined ? "on Redis: skipped, REDIS_URL is not set (.ci/run starts a redis-server)" : "on Redis",
    redisUrl === undefined ? {} : { REDIS_URL: redisUrl },
    { prefix: `zones-${process.pid}-${Math.random().toString(36).slice(2)}:` }
  ]
]

describe("forward auth over several zones (match: all)", () => {
  for (const [name, env, redis] of stores) {
    it.live.skipIf(redis !== undefined && redisUrl === undefined)(
      `every matching rule takes the request or none does; the headers name the binding rule (${name})`,
      () =>
        Effect.gen(function*() {
          const service = yield* start({ config: config("all", undefined, redis), env })
          const a1 = yield* check(service, "alice")
          const a2 = yield* check(service, "alice")
          assert.deepStrictEqual([a1.status, a2.status], [200, 200])
          // alice's own zone refuses: the site's zone is not charged for it
          const a3 = yield* check(service, "alice")
          assert.strictEqual(a3.status, 429)
          assert.strictEqual(a3.headers.get("ratelimit-policy"), "\"user\";q=2;w=7200")
          // the site has taken 2 of its 3: bob gets the last one, then the site refuses
          const b1 = yield* check(service, "bob")
          assert.strictEqual(b1.status, 200)
          assert.match(b1.headers.get("ratelimit") ?? "", /^"site";r=0;t=\d+$/)
          const b2 = yield* check(service, "bob")
          assert.strictEqual(b2.status, 429)
          assert.match(b2.headers.get("ratelimit-policy") ?? "", /^"site";q=3;w=3600$/)
          // and bob's own zone was not charged for that refusal: a path only the
          // user rule would not match is the site's alone, refused too
          const c = yield* check(service, "carol", "/about")
          assert.strictEqual(c.status, 429)
          assert.match(c.headers.get("ratelimit-policy") ?? "", /^"site"/)
        })
    )
  }

  it.live("match: first (the default) lets the first matching rule decide alone", () =>
    Effect.gen(function*() {
      const service = yield* start({ config: config("first") })
      const statuses: Array<number> = []
      for (const user of ["alice", "alice", "alice", "bob", "bob", "carol", "dave"]) {
        statuses.push((yield* check(service, user)).status)
      }
      // the user rule alone: two each, the site zone never consulted for /api/
      assert.deepStrictEqual(statuses, [200, 200, 429, 200, 200, 200, 200])
    }))

  it.live("rules with different costs under match: all are refused, naming the field", () =>
    Effect.gen(function*() {
      const { code, output } = yield* startFailing({ config: config("all", 2) })
      assert.notStrictEqual(code, 0)
      assert.include(output, "forwardAuth.rules[1].cost")
      assert.include(output, "match \"all\"")
    }))

  it.live("a rule whose cost its policy can never admit is refused at start, naming the field", () =>
    Effect.gen(function*() {
      // the site's window admits 3 at most
      const { code, output } = yield* startFailing({ config: config("first", 4) })
      assert.notStrictEqual(code, 0)
      assert.include(output, "forwardAuth.rules[1].cost")
      assert.include(output, "can ever admit at once")
      const fits = yield* start({ config: config("first", 3) })
      assert.strictEqual((yield* check(fits, "alice", "/about")).status, 200)
    }))
})
