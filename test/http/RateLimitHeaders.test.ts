/**
 * The header values at their edges (IETF draft-ietf-httpapi-ratelimit-headers,
 * RFC 8941 structured fields), written and read back: exact strings, so that a
 * change of rounding, clamping or quoting fails here.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import { RateLimitHeaders } from "../../src/http/index.ts"
import { Policy } from "../../src/index.ts"

const decision = (fields: {
  readonly allowed?: boolean
  readonly remaining?: number
  readonly retryAfter?: Duration.Duration
  readonly resetAfter?: Duration.Duration
}) => ({
  allowed: fields.allowed ?? true,
  remaining: fields.remaining ?? 0,
  limit: 10,
  retryAfter: fields.retryAfter ?? Duration.zero,
  resetAfter: fields.resetAfter ?? Duration.zero
})

const MAX = 999_999_999_999_999 // the largest sf-integer

describe("RateLimitHeaders", () => {
  it("names: 1 to 64 printable ASCII characters, the value shown in the error", () => {
    for (const ok of ["a", " ", "~", "x".repeat(64), "api-key"]) {
      assert.isUndefined(RateLimitHeaders.checkName(ok), JSON.stringify(ok))
    }
    for (const bad of ["", "x".repeat(65), "é", "\x7f", "\x1f", "tab\there"]) {
      const error = RateLimitHeaders.checkName(bad)
      assert.isDefined(error, JSON.stringify(bad))
      assert.strictEqual(error?.field, "name")
      assert.strictEqual(error?.value, JSON.stringify(bad.slice(0, 64)))
      assert.strictEqual(error?.reason, "must be 1 to 64 printable ASCII characters")
    }
    assert.strictEqual(RateLimitHeaders.checkName(42, "policies.api.name")?.field, "policies.api.name")
    assert.strictEqual(RateLimitHeaders.checkName(42)?.value, "number")
  })

  it("sf-strings escape backslashes and quotes, and nothing else", () => {
    assert.strictEqual(RateLimitHeaders.sfString("default"), "\"default\"")
    assert.strictEqual(RateLimitHeaders.sfString("a\"b"), "\"a\\\"b\"")
    assert.strictEqual(RateLimitHeaders.sfString("a\\b"), "\"a\\\\b\"")
    assert.strictEqual(RateLimitHeaders.sfString("a'b c"), "\"a'b c\"")
  })

  it("RateLimit: r is what remains, whole and within sf-integer range; t the seconds to full, rounded up", () => {
    const value = (remaining: number, resetMillis: number) =>
      RateLimitHeaders.rateLimitValue("q", decision({ remaining, resetAfter: Duration.millis(resetMillis) }))
    assert.strictEqual(value(5, 0), "\"q\";r=5;t=0")
    assert.strictEqual(value(5.9, 1), "\"q\";r=5;t=1")
    assert.strictEqual(value(0, 1000), "\"q\";r=0;t=1")
    assert.strictEqual(value(0, 1001), "\"q\";r=0;t=2")
    assert.strictEqual(value(-3, -5), "\"q\";r=0;t=0")
    assert.strictEqual(value(1e20, 1e20), `"q";r=${MAX};t=${MAX}`)
    assert.strictEqual(value(Infinity, Infinity), `"q";r=${MAX};t=${MAX}`)
    assert.strictEqual(value(NaN, 0), `"q";r=${MAX};t=0`)
  })

  it("Retry-After: whole seconds rounded up, at least 1, at most the largest sf-integer", () => {
    const value = (millis: number) => RateLimitHeaders.retryAfterValue(Duration.millis(millis))
    assert.deepStrictEqual([0, 1, 999, 1000, 1001, 2000, 2001].map(value), ["1", "1", "1", "1", "2", "2", "3"])
    assert.strictEqual(RateLimitHeaders.retryAfterValue(Duration.infinity), String(MAX))
  })

  it("RateLimit-Policy: q and w, w left out when the quota has no window", () => {
    assert.strictEqual(
      RateLimitHeaders.policyValue({ name: "api", limit: 100, windowSeconds: 60 }),
      "\"api\";q=100;w=60"
    )
    assert.strictEqual(RateLimitHeaders.policyValue({ name: "api", limit: 100.7 }), "\"api\";q=100")
    assert.strictEqual(
      RateLimitHeaders.policyValue({ name: "a\"b", limit: -1, windowSeconds: 0 }),
      "\"a\\\"b\";q=0;w=0"
    )
  })

  it("a policy's quota: its limit, and its window in whole seconds rounded up, at least 1", () => {
    const quota = (policy: Policy.Policy) => {
      assert.notStrictEqual(policy._tag, "Invalid")
      return policy._tag === "Invalid" ? undefined : RateLimitHeaders.quotaOf("p", policy)
    }
    // 100 tokens at 10 a second: 10 s from empty to full
    assert.deepStrictEqual(
      quota(Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })),
      { name: "p", limit: 100, windowSeconds: 10 }
    )
    // 1.5 s rounds up to 2; 10 ms up to 1
    assert.deepStrictEqual(
      quota(Policy.fixedWindow({ limit: 3, window: "1500 millis" })),
      { name: "p", limit: 3, windowSeconds: 2 }
    )
    assert.deepStrictEqual(
      quota(Policy.fixedWindow({ limit: 3, window: "10 millis" })),
      { name: "p", limit: 3, windowSeconds: 1 }
    )
  })

  it("the quota each kind advertises: its limit and the time it takes to come back, no limit the largest", () => {
    const quota = (policy: Policy.Policy) => {
      assert.notStrictEqual(policy._tag, "Invalid")
      return policy._tag === "Invalid" ? undefined : RateLimitHeaders.quotaOf("p", policy)
    }
    assert.deepStrictEqual(
      quota(Policy.smooth({ permits: 5, per: "2 seconds" })),
      { name: "p", limit: 5, windowSeconds: 2 }
    )
    assert.deepStrictEqual(
      quota(Policy.concurrency({ capacity: 3, replenish: { tokens: 1, per: "4 seconds" } })),
      { name: "p", limit: 3, windowSeconds: 4 }
    )
    // released units come back at once: a second is the window
    assert.deepStrictEqual(quota(Policy.concurrency({ capacity: 3 })), { name: "p", limit: 3, windowSeconds: 1 })
    // a meter's burst (maxBurst + 1) and the time it takes to come back:
    // 16 at 30 a minute, 32 s; 21 at 10 a second, 2.1 s rounded up
    assert.deepStrictEqual(
      quota(Policy.gcra({ rate: { count: 30, per: "1 minute" }, maxBurst: 15 })),
      { name: "p", limit: 16, windowSeconds: 32 }
    )
    assert.deepStrictEqual(
      quota(Policy.leakyBucket({ rate: { tokens: 10, per: "1 second" }, burst: 20 })),
      { name: "p", limit: 21, windowSeconds: 3 }
    )
    // windows advertise their limit and window
    assert.deepStrictEqual(
      quota(Policy.slidingWindow({ limit: 100, window: "1 minute" })),
      { name: "p", limit: 100, windowSeconds: 60 }
    )
    assert.deepStrictEqual(
      quota(Policy.slidingLog({ limit: 5, window: "15 minutes" })),
      { name: "p", limit: 5, windowSeconds: 900 }
    )
    // an adaptive rate: its capacity, refilled at its starting rate (20 at 4 a second: 5 s)
    assert.deepStrictEqual(
      quota(Policy.adaptive({ capacity: 20, rate: { tokens: 4, per: "1 second" }, floor: 2, ceiling: 8 })),
      { name: "p", limit: 20, windowSeconds: 5 }
    )
    // a burst allowance: the two limits added up, over the base's window
    assert.deepStrictEqual(
      quota(Policy.burst(
        Policy.fixedWindow({ limit: 10, window: "2 seconds" }),
        Policy.fixedWindow({ limit: 20, window: "1 minute" })
      )),
      { name: "p", limit: 30, windowSeconds: 2 }
    )
    // no limit: the largest integer a header carries, per second
    assert.deepStrictEqual(quota(Policy.unlimited()), { name: "p", limit: 999_999_999_999_999, windowSeconds: 1 })
  })

  it("all advertises the part that allows the least per unit of time; the first of equals", () => {
    const quota = (policy: Policy.Policy) => {
      assert.notStrictEqual(policy._tag, "Invalid")
      return policy._tag === "Invalid" ? undefined : RateLimitHeaders.quotaOf("p", policy)
    }
    const perMinute = Policy.fixedWindow({ limit: 100, window: "1 minute" })
    const perSecond = Policy.fixedWindow({ limit: 10, window: "1 second" })
    // 100 a minute is less than 10 a second, whichever comes first
    assert.deepStrictEqual(quota(Policy.all(perMinute, perSecond)), { name: "p", limit: 100, windowSeconds: 60 })
    assert.deepStrictEqual(quota(Policy.all(perSecond, perMinute)), { name: "p", limit: 100, windowSeconds: 60 })
    // 10 a second and 20 every two seconds are the same rate: the first is told
    const perTwo = Policy.fixedWindow({ limit: 20, window: "2 seconds" })
    assert.deepStrictEqual(quota(Policy.all(perSecond, perTwo)), { name: "p", limit: 10, windowSeconds: 1 })
    assert.deepStrictEqual(quota(Policy.all(perTwo, perSecond)), { name: "p", limit: 20, windowSeconds: 2 })
  })

  it("make: RateLimit and RateLimit-Policy always, Retry-After on a denial only, the legacy fields when asked", () => {
    const quota = { name: "api", limit: 10, windowSeconds: 60 }
    const allowed = decision({ remaining: 4, resetAfter: Duration.millis(2500) })
    assert.deepStrictEqual(RateLimitHeaders.make(quota, allowed), {
      "ratelimit": "\"api\";r=4;t=3",
      "ratelimit-policy": "\"api\";q=10;w=60"
    })
    assert.deepStrictEqual(RateLimitHeaders.make(quota, allowed, { legacy: false }), {
      "ratelimit": "\"api\";r=4;t=3",
      "ratelimit-policy": "\"api\";q=10;w=60"
    })
    const denied = decision({ allowed: false, retryAfter: Duration.millis(1500), resetAfter: Duration.millis(9000) })
    assert.deepStrictEqual(RateLimitHeaders.make(quota, denied, { legacy: true }), {
      "ratelimit": "\"api\";r=0;t=9",
      "ratelimit-policy": "\"api\";q=10;w=60",
      "retry-after": "2",
      "ratelimit-limit": "10",
      "ratelimit-remaining": "0",
      "ratelimit-reset": "9"
    })
  })

  it("parse reads back what the writers write: several items, escapes, negative parameters; stops at garbage", () => {
    assert.deepStrictEqual(RateLimitHeaders.parse("\"api\";r=42;t=30"), [{ name: "api", params: { r: 42, t: 30 } }])
    assert.deepStrictEqual(
      RateLimitHeaders.parse(" \"a\\\"b\";q=10;w=60 , \"c\\\\d\";r=-1,\"e\""),
      [
        { name: "a\"b", params: { q: 10, w: 60 } },
        { name: "c\\d", params: { r: -1 } },
        { name: "e", params: {} }
      ]
    )
    assert.deepStrictEqual(RateLimitHeaders.parse("\"a\";r=1, junk, \"b\";r=2"), [{ name: "a", params: { r: 1 } }])
    // keys of several characters (RFC 8941: a lower-case letter or *, then letters, digits, _ - . *)
    assert.deepStrictEqual(
      RateLimitHeaders.parse("\"p\";q=5;w_2=7;x-y=1;a.b=2;*c=3"),
      [{ name: "p", params: { q: 5, w_2: 7, "x-y": 1, "a.b": 2, "*c": 3 } }]
    )
    assert.deepStrictEqual(RateLimitHeaders.parse(""), [])
    assert.deepStrictEqual(RateLimitHeaders.parse("api;r=1"), [])
    const written = RateLimitHeaders.rateLimitValue("x\"y", decision({ remaining: 7, resetAfter: Duration.seconds(3) }))
    assert.deepStrictEqual(RateLimitHeaders.parse(written), [{ name: "x\"y", params: { r: 7, t: 3 } }])
  })
})
