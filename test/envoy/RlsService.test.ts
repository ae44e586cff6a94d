// ShouldRateLimit against envoyproxy/ratelimit's README examples (configuration
// and expected behaviour as that README states them), in-process, time driven
// by TestClock. The gRPC server itself is tested in Grpc.test.ts.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Metric, Result, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as RlsConfig from "../../src/envoy/RlsConfig.ts"
import * as RlsService from "../../src/envoy/RlsService.ts"
import * as Policy from "../../src/Policy.ts"

const compile = (yaml: string, options?: RlsConfig.CompileOptions): RlsConfig.Config => {
  const parsed = RlsConfig.parseYaml(yaml, "test.yaml")
  if (Result.isFailure(parsed)) throw new Error(parsed.failure.reason)
  const document = Schema.decodeUnknownSync(RlsConfig.Document)(parsed.success, { onExcessProperty: "error" })
  const config = RlsConfig.compile([{ file: "test.yaml", document }], options)
  if (Result.isFailure(config)) throw new Error(JSON.stringify(config.failure))
  return config.success
}

const issues = (yaml: string): ReadonlyArray<RlsConfig.Issue> => {
  const parsed = RlsConfig.parseYaml(yaml, "bad.yaml")
  if (Result.isFailure(parsed)) return [parsed.failure]
  const decoded = Schema.decodeUnknownResult(RlsConfig.Document)(parsed.success, { onExcessProperty: "error" })
  if (Result.isFailure(decoded)) return [{ field: "bad.yaml", reason: decoded.failure.message }]
  const config = RlsConfig.compile([{ file: "bad.yaml", document: decoded.success }])
  return Result.isFailure(config) ? config.failure : []
}

type Descriptor = ReadonlyArray<readonly [string, string]>

const service = (yaml: string, options?: RlsConfig.CompileOptions) =>
  RlsService.RlsService.make({ config: compile(yaml, options) }).pipe(
    Effect.provideService(Metric.MetricRegistry, new Map())
  )

const ask = (
  rls: RlsService.RlsService["Service"],
  domain: string,
  descriptors: ReadonlyArray<Descriptor>,
  extra?: { readonly hits_addend?: number }
) =>
  rls.shouldRateLimit({
    domain,
    descriptors: descriptors.map((entries) => ({ entries: entries.map(([key, value]) => ({ key, value })) })),
    ...extra
  }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))

const codes = (response: RlsService.RateLimitResponse) => response.statuses.map((s) => s.code)

// How many of n calls pass.
const passes = (
  rls: RlsService.RlsService["Service"],
  domain: string,
  descriptors: ReadonlyArray<Descriptor>,
  n: number
) =>
  Effect.gen(function*() {
    let ok = 0
    for (let i = 0; i < n; i++) if ((yield* ask(rls, domain, descriptors)).overall_code === "OK") ok++
    return ok
  })

describe("RLS: envoyproxy/ratelimit README examples", () => {
  it.effect("Example 1: two values of one key, 500 per second each", () =>
    Effect.gen(function*() {
      const rls = yield* service(`
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
`)
      assert.strictEqual(yield* passes(rls, "mongo_cps", [[["database", "users"]]], 501), 500)
      // the other value has its own 500
      assert.strictEqual(yield* passes(rls, "mongo_cps", [[["database", "default"]]], 500), 500)
      // a value that is not configured has no limit
      const other = yield* ask(rls, "mongo_cps", [[["database", "other"]]])
      assert.strictEqual(other.overall_code, "OK")
      assert.isNull(other.statuses[0].current_limit)
      // the window is a clock-aligned second: the next one starts afresh
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* passes(rls, "mongo_cps", [[["database", "users"]]], 500), 500)
      const status = (yield* ask(rls, "mongo_cps", [[["database", "users"]]])).statuses[0]
      assert.strictEqual(status.code, "OVER_LIMIT")
      assert.deepStrictEqual(status.current_limit, { name: "", requests_per_unit: 500, unit: "SECOND" })
      assert.strictEqual(status.limit_remaining, 0)
      assert.deepStrictEqual(status.duration_until_reset, { seconds: 1, nanos: 0 })
    }))

  it.effect("Example 2: nested descriptors; several descriptors in one request, over if any is", () =>
    Effect.gen(function*() {
      const rls = yield* service(`
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`)
      const marketing = (n: string): Descriptor => [["message_type", "marketing"], ["to_number", n]]
      const any = (n: string): Descriptor => [["to_number", n]]
      // 5 marketing messages a day to each number
      assert.strictEqual(yield* passes(rls, "messaging", [marketing("2061111111"), any("2061111111")], 6), 5)
      // each number has its own limits
      assert.strictEqual(yield* passes(rls, "messaging", [marketing("2062222222")], 5), 5)
      // the per-number limit counted every request, the denied one too: 6 so far of 100
      const status = (yield* ask(rls, "messaging", [any("2061111111")])).statuses[0]
      assert.strictEqual(status.code, "OK")
      assert.strictEqual(status.limit_remaining, 93)
      assert.deepStrictEqual(status.current_limit, { name: "", requests_per_unit: 100, unit: "DAY" })
    }))

  it.effect("Example 3: the most specific match: one address blocked (0 per second), the others 10", () =>
    Effect.gen(function*() {
      const rls = yield* service(`
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
`)
      assert.strictEqual(yield* passes(rls, "edge_proxy_per_ip", [[["remote_address", "50.0.0.1"]]], 11), 10)
      assert.strictEqual(yield* passes(rls, "edge_proxy_per_ip", [[["remote_address", "50.0.0.5"]]], 3), 0)
      const blocked = (yield* ask(rls, "edge_proxy_per_ip", [[["remote_address", "50.0.0.5"]]])).statuses[0]
      assert.strictEqual(blocked.code, "OVER_LIMIT")
      assert.strictEqual(blocked.current_limit?.requests_per_unit, 0)
    }))

  it.effect("Example 4: a limit applies only at the depth of the request's descriptor", () =>
    Effect.gen(function*() {
      const flat = yield* service(`
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
`)
      const deep: Descriptor = [["key", "value"], ["subkey", "subvalue"]]
      const unmatched = yield* ask(flat, "example4", [deep])
      assert.isNull(unmatched.statuses[0].current_limit)
      const nested = yield* service(`
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
`)
      const matched = yield* ask(nested, "example4", [deep])
      assert.deepStrictEqual(matched.statuses[0].current_limit, { name: "", requests_per_unit: 300, unit: "SECOND" })
      assert.strictEqual(matched.statuses[0].limit_remaining, 299)
    }))

  it.effect("Example 5: unlimited: OK with limit_remaining 4294967295; the other key 100 a minute", () =>
    Effect.gen(function*() {
      const rls = yield* service(`
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true
  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
`)
      const ldap = yield* ask(rls, "internal", [[["ldap", "x"]]])
      assert.strictEqual(ldap.statuses[0].code, "OK")
      assert.strictEqual(ldap.statuses[0].limit_remaining, 4_294_967_295)
      assert.strictEqual(yield* passes(rls, "internal", [[["ldap", "x"]]], 1000), 1000)
      assert.strictEqual(yield* passes(rls, "internal", [[["azure", "x"]]], 101), 100)
    }))

  it.effect("Example 6: shadow_mode counts but always answers OK", () =>
    Effect.gen(function*() {
      const rls = yield* service(`
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
`)
      const a: Descriptor = [["service", "auth-service"], ["user", "user-a"]]
      const b: Descriptor = [["service", "auth-service"], ["user", "user-b"]]
      assert.strictEqual(yield* passes(rls, "example6", [a], 30), 30)
      // counted all the same: nothing left
      assert.strictEqual((yield* ask(rls, "example6", [a])).statuses[0].limit_remaining, 0)
      assert.strictEqual(yield* passes(rls, "example6", [b], 30), 20)
    }))

  it.effect("Example 7: replaces drops the named limit when both match", () =>
    Effect.gen(function*() {
      const rls = yield* service(`
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`)
      const one: Descriptor = [["key_1", "value_1"], ["user", "bkthomps"]]
      const two: Descriptor = [["key_2", "value_2"], ["user", "bkthomps"]]
      // both: 10 / s, and the 5 / s limit is not touched
      assert.strictEqual(yield* passes(rls, "example7", [one, two], 11), 10)
      assert.strictEqual(yield* passes(rls, "example7", [one], 6), 5)
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* passes(rls, "example7", [two], 11), 10)
    }))

  it.effect("Example 8: a key without value gives each value its own limit, beside an explicit value", () =>
    Effect.gen(function*() {
      const rls = yield* service(`
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
`)
      assert.strictEqual(yield* passes(rls, "example8", [[["key1", "unspecified_value"]]], 11), 10)
      assert.strictEqual(yield* passes(rls, "example8", [[["key1", "unspecified_value2"]]], 11), 10)
      assert.strictEqual(yield* passes(rls, "example8", [[["key1", "value1"]]], 21), 20)
    }))

  it.effect("Example 9: wildcards: trailing, middle and several", () =>
    Effect.gen(function*() {
      const rls = yield* service(`
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: path
    value: /api/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: route
    value: /api/*/resource/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
`)
      const limited = (key: string, value: string) =>
        Effect.map(ask(rls, "example9", [[[key, value]]]), (r) => r.statuses[0].current_limit !== null)
      assert.isTrue(yield* limited("key1", "value1"))
      assert.isTrue(yield* limited("key1", "valueXYZ"))
      assert.isFalse(yield* limited("key1", "other"))
      assert.isTrue(yield* limited("path", "/api/123/action"))
      assert.isTrue(yield* limited("path", "/api/user-id/action"))
      assert.isFalse(yield* limited("path", "/api/123/other"))
      assert.isTrue(yield* limited("route", "/api/v1/resource/123/action"))
      assert.isFalse(yield* limited("route", "/api/v1/resource/123/other"))
      // without share_threshold each value has its own 20
      assert.strictEqual(yield* passes(rls, "example9", [[["key1", "value2"]]], 21), 20)
      assert.strictEqual(yield* passes(rls, "example9", [[["key1", "value3"]]], 1), 1)
    }))

  it.effect("Example 11: share_threshold: every value matching the wildcard shares one counter", () =>
    Effect.gen(function*() {
      const rls = yield* service(`
domain: example11
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit:
      unit: hour
      requests_per_unit: 10
`)
      assert.strictEqual(yield* passes(rls, "example11", [[["files", "files/a.pdf"]]], 5), 5)
      assert.strictEqual(yield* passes(rls, "example11", [[["files", "files/b.csv"]]], 5), 5)
      assert.strictEqual((yield* ask(rls, "example11", [[["files", "files/c.txt"]]])).overall_code, "OVER_LIMIT")
      assert.strictEqual(yield* passes(rls, "example11", [[["files_no_share", "files_no_share/a.pdf"]]], 11), 10)
      assert.strictEqual(yield* passes(rls, "example11", [[["files_no_share", "files_no_share/b.csv"]]], 10), 10)
    }))
})

describe("RLS: the API's other fields", () => {
  const yaml = `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: minute
      requests_per_unit: 10
`
  it.effect("hits_addend: the request's (0 means 1), a descriptor's overrides it, and 0 there only checks", () =>
    Effect.gen(function*() {
      const rls = yield* service(yaml)
      const r1 = yield* ask(rls, "d", [[["k", "a"]]], { hits_addend: 4 })
      assert.strictEqual(r1.statuses[0].limit_remaining, 6)
      const r2 = yield* rls.shouldRateLimit({
        domain: "d",
        descriptors: [{ entries: [{ key: "k", value: "a" }], hits_addend: { value: 0 } }],
        hits_addend: 3
      })
      assert.strictEqual(r2.statuses[0].limit_remaining, 6)
      const r3 = yield* rls.shouldRateLimit({
        domain: "d",
        descriptors: [{ entries: [{ key: "k", value: "a" }], hits_addend: { value: 6 } }],
        hits_addend: 1
      })
      assert.strictEqual(r3.statuses[0].limit_remaining, 0)
      assert.strictEqual(r3.overall_code, "OK")
      // more hits than the limit can ever admit: over the limit
      const r4 = yield* ask(rls, "d", [[["k", "b"]]], { hits_addend: 11 })
      assert.strictEqual(r4.overall_code, "OVER_LIMIT")
    }))

  it.effect("a descriptor's limit override is a limit of its own", () =>
    Effect.gen(function*() {
      const rls = yield* service(yaml)
      const ask2 = rls.shouldRateLimit({
        domain: "d",
        descriptors: [{ entries: [{ key: "k", value: "a" }], limit: { requests_per_unit: 2, unit: "SECOND" } }]
      })
      assert.deepStrictEqual([
        (yield* ask2).overall_code,
        (yield* ask2).overall_code,
        (yield* ask2).overall_code
      ], ["OK", "OK", "OVER_LIMIT"])
    }))

  it.effect("RateLimit and RateLimit-Policy of the closest descriptor; Retry-After when over", () =>
    Effect.gen(function*() {
      const rls = yield* service(`
domain: d
descriptors:
  - key: a
    rate_limit: { name: wide, unit: minute, requests_per_unit: 100 }
  - key: b
    rate_limit: { name: narrow, unit: minute, requests_per_unit: 2 }
`)
      const headers = (r: RlsService.RateLimitResponse) =>
        Object.fromEntries(r.response_headers_to_add.map((h) => [h.key, h.value]))
      const first = yield* ask(rls, "d", [[["a", "x"]], [["b", "x"]]])
      assert.deepStrictEqual(headers(first), {
        ratelimit: "\"narrow\";r=1;t=60",
        "ratelimit-policy": "\"narrow\";q=2;w=60"
      })
      yield* ask(rls, "d", [[["b", "x"]]])
      const over = yield* ask(rls, "d", [[["a", "x"]], [["b", "x"]]])
      assert.strictEqual(over.overall_code, "OVER_LIMIT")
      assert.deepStrictEqual(codes(over), ["OK", "OVER_LIMIT"])
      assert.deepStrictEqual(headers(over), {
        ratelimit: "\"narrow\";r=0;t=60",
        "ratelimit-policy": "\"narrow\";q=2;w=60",
        "retry-after": "60"
      })
    }))

  it.effect("quota_mode: over only when every quota descriptor is", () =>
    Effect.gen(function*() {
      const rls = yield* service(`
domain: q
descriptors:
  - key: a
    quota_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: b
    quota_mode: true
    rate_limit: { unit: minute, requests_per_unit: 2 }
`)
      const both: ReadonlyArray<Descriptor> = [[["a", "x"]], [["b", "x"]]]
      assert.strictEqual((yield* ask(rls, "q", both)).overall_code, "OK")
      assert.strictEqual((yield* ask(rls, "q", both)).overall_code, "OK") // a over, b not
      assert.strictEqual((yield* ask(rls, "q", both)).overall_code, "OVER_LIMIT")
    }))

  it.effect("tollgate's extensions: another algorithm at the same rate, or any policy", () =>
    Effect.gen(function*() {
      const login = Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "1 minute" } })
      assert.notStrictEqual(login._tag, "Invalid")
      const rls = yield* service(
        `
domain: x
descriptors:
  - key: sliding
    rate_limit: { unit: minute, requests_per_unit: 10, algorithm: slidingWindow }
  - key: named
    rate_limit: { policy: login }
`,
        { policies: new Map([["login", login as Policy.Valid]]) }
      )
      // sliding window: 10 in the first minute; half-way through the next, half of them still count
      assert.strictEqual(yield* passes(rls, "x", [[["sliding", "s"]]], 11), 10)
      yield* TestClock.adjust("90 seconds")
      assert.strictEqual(yield* passes(rls, "x", [[["sliding", "s"]]], 10), 5)
      assert.strictEqual(yield* passes(rls, "x", [[["named", "n"]]], 4), 3)
      const status = (yield* ask(rls, "x", [[["named", "n"]]])).statuses[0]
      assert.deepStrictEqual(status.current_limit, { name: "", requests_per_unit: 3, unit: "UNKNOWN" })
    }))

  it.effect("malformed requests are INVALID_ARGUMENT; unknown domains answer OK", () =>
    Effect.gen(function*() {
      const rls = yield* service(yaml)
      assert.strictEqual(
        (yield* Effect.flip(rls.shouldRateLimit({ domain: "", descriptors: [] })))._tag,
        "InvalidArgument"
      )
      assert.strictEqual(
        (yield* Effect.flip(rls.shouldRateLimit({ domain: "d", descriptors: [] })))._tag,
        "InvalidArgument"
      )
      assert.strictEqual((yield* ask(rls, "nope", [[["k", "a"]]])).overall_code, "OK")
    }))

  it.effect("reload: unchanged limits keep their counters, changed ones start afresh", () =>
    Effect.gen(function*() {
      const rls = yield* service(`
domain: r
descriptors:
  - key: same
    rate_limit: { unit: hour, requests_per_unit: 3 }
  - key: changed
    rate_limit: { unit: hour, requests_per_unit: 3 }
`)
      assert.strictEqual(yield* passes(rls, "r", [[["same", "x"]]], 3), 3)
      assert.strictEqual(yield* passes(rls, "r", [[["changed", "x"]]], 3), 3)
      yield* rls.reload(compile(`
domain: r
descriptors:
  - key: same
    rate_limit: { unit: hour, requests_per_unit: 3 }
  - key: changed
    rate_limit: { unit: hour, requests_per_unit: 4 }
`))
      assert.strictEqual(yield* passes(rls, "r", [[["same", "x"]]], 1), 0)
      assert.strictEqual(yield* passes(rls, "r", [[["changed", "x"]]], 5), 4)
    }))
})

describe("RLS configuration errors (as envoyproxy/ratelimit refuses them)", () => {
  it("each names the file and the path", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n", "unit"],
      ["domain: d\ndescriptors:\n  - key: \"\"\n", "key"],
      ["domain: d\ndescriptors:\n  - key: a\n  - key: a\n", "repeats"],
      ["domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unlimited: true, unit: second }\n", "unlimited"],
      [
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: { name: n, unit: second, requests_per_unit: 1, replaces: [{ name: n }] }\n",
        "own limit"
      ],
      ["domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n", "wildcard"],
      ["domain: d\ndescriptors:\n  - key: a\n    rate_limit: { requests_per_unit: 1 }\n", "required"],
      ["domain: d\ndescriptors:\n  - key: a\n    rate_limt: {}\n", "rate_limt"],
      ["domain: \"\"\n", "domain"],
      ["domain: d\n  bad: [\n", "YAML"]
    ]
    for (const [yaml, expected] of cases) {
      const found = issues(yaml)
      assert.isAbove(found.length, 0, yaml)
      assert.include(JSON.stringify(found), expected, yaml)
      assert.include(JSON.stringify(found), "bad.yaml", yaml)
    }
  })
})
