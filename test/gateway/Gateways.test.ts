// The service as Traefik, Envoy (ext_authz over HTTP, and the rate limit
// service over gRPC) call it, with the configurations of docs/gateway/: the
// sub-requests are shaped from those files (Traefik's address, Envoy's
// path_prefix, allowed headers and rate_limits actions), and the service runs
// docs/gateway/tollgate.json and ratelimit.yaml. Also: the batch endpoint, and
// configuration reload on SIGHUP of the real process.
import { assert, describe, it } from "@effect/vitest"
import * as grpc from "@grpc/grpc-js"
import { Effect, Schedule } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parse } from "yaml"
import { loadDefinition } from "../../src/envoy/RlsServer.ts"
import type { RateLimitResponse } from "../../src/envoy/RlsService.ts"
import { post, request, type Service, start } from "../server/harness.ts"

const docs = fileURLToPath(new URL("../../docs/gateway/", import.meta.url))
const doc = (name: string): any => parse(readFileSync(join(docs, name), "utf8"))

const startDocumented = (env: Record<string, string> = {}) =>
  start({ env: { TOLLGATE_CONFIG: join(docs, "tollgate.json"), TOLLGATE_RLS_PORT: "0", ...env } })

const rlsAddress = (service: Service) =>
  Effect.gen(function*() {
    const match = /Envoy rate limit service \(gRPC\) listening on (127\.0\.0\.1:\d+)/.exec(service.output())
    if (match === null) return yield* Effect.fail(`no RLS address in the log:\n${service.output()}`)
    return match[1]
  }).pipe(Effect.retry({ times: 50, schedule: Schedule.spaced("100 millis") }), Effect.orDie)

const rlsClient = (address: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const definition = loadDefinition()
      if (!("ShouldRateLimit" in definition)) throw new Error("no RateLimitService definition")
      const Client = grpc.makeGenericClientConstructor(definition, "RateLimitService")
      return new Client(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
        ShouldRateLimit: (
          request: unknown,
          callback: (error: grpc.ServiceError | null, response: RateLimitResponse) => void
        ) => void
      }
    }),
    (client) => Effect.sync(() => client.close())
  )

type RlsClient = Effect.Success<ReturnType<typeof rlsClient>>

const shouldRateLimit = (client: RlsClient, request: unknown) =>
  Effect.callback<RateLimitResponse, grpc.ServiceError>((resume) => {
    client.ShouldRateLimit(
      request,
      (error, response) => resume(error === null ? Effect.succeed(response) : Effect.fail(error))
    )
  })

// The descriptors Envoy's rate limit filter makes from docs/gateway/envoy-ratelimit.yaml's
// rate_limits actions for a request (only the action kinds that file uses).
const envoyDescriptors = (original: { path: string; address: string; headers: Record<string, string> }) => {
  const hcm = doc("envoy-ratelimit.yaml").static_resources.listeners[0].filter_chains[0].filters[0].typed_config
  const rateLimits = hcm.route_config.virtual_hosts[0].rate_limits as ReadonlyArray<{ actions: ReadonlyArray<any> }>
  const out: Array<{ entries: Array<{ key: string; value: string }> }> = []
  for (const { actions } of rateLimits) {
    const entries: Array<{ key: string; value: string }> = []
    let complete = true
    for (const action of actions) {
      if (action.remote_address !== undefined) entries.push({ key: "remote_address", value: original.address })
      else if (action.request_headers !== undefined) {
        const name = action.request_headers.header_name as string
        const value = name === ":path" ? original.path : original.headers[name]
        if (value === undefined) complete = false
        else entries.push({ key: action.request_headers.descriptor_key, value })
      } else throw new Error(`action not simulated: ${JSON.stringify(action)}`)
    }
    if (complete) out.push({ entries })
  }
  const filter = hcm.http_filters.find((f: any) => f.name === "envoy.filters.http.ratelimit")
  return { domain: filter.typed_config.domain as string, descriptors: out }
}

describe("Traefik ForwardAuth and Envoy ext_authz (docs/gateway)", () => {
  it.live("Traefik: the address of its forwardAuth, its X-Forwarded-* headers; a 429 is passed on as is", () =>
    Effect.gen(function*() {
      const service = yield* startDocumented()
      const address = new URL(doc("traefik.yml").http.middlewares.tollgate.forwardAuth.address)
      const traefik = (uri: string, method: string, client: string) =>
        request(service, "GET", address.pathname, {
          headers: {
            "x-forwarded-method": method,
            "x-forwarded-proto": "https",
            "x-forwarded-host": "shop.example",
            "x-forwarded-uri": uri,
            "x-forwarded-for": client
          }
        })
      const statuses = []
      for (let i = 0; i < 4; i++) statuses.push((yield* traefik("/login", "POST", "198.51.100.7")).status)
      assert.deepStrictEqual(statuses, [200, 200, 200, 429])
      const denied = yield* traefik("/login", "POST", "198.51.100.7")
      assert.strictEqual(denied.headers.get("content-type"), "application/problem+json")
      assert.strictEqual(denied.json.type, "urn:tollgate:problem:rate-limited")
      assert.match(denied.headers.get("ratelimit") ?? "", /^"login";r=0;t=\d+$/)
      assert.strictEqual(denied.headers.get("ratelimit-policy"), "\"login\";q=3;w=60")
      assert.isAtLeast(Number(denied.headers.get("retry-after")), 1)
      // a GET of /login is not the login rule: the per-client rule
      const get = yield* traefik("/login", "GET", "198.51.100.7")
      assert.strictEqual(get.status, 200)
      assert.strictEqual(get.json.rule, "per-client")
    }))

  it.live("Envoy ext_authz: its own method, the path after path_prefix, only the allowed headers", () =>
    Effect.gen(function*() {
      const service = yield* startDocumented()
      const extAuthz = doc("envoy-ext-authz.yaml").static_resources.listeners[0].filter_chains[0].filters[0]
        .typed_config.http_filters[0].typed_config.http_service
      const prefix = extAuthz.path_prefix as string
      const allowed = new Set(
        (extAuthz.authorization_request.allowed_headers.patterns as ReadonlyArray<{ exact: string }>).map((p) =>
          p.exact
        )
      )
      const envoy = (method: string, path: string, headers: Record<string, string>) =>
        request(service, method, prefix + path, {
          headers: Object.fromEntries(Object.entries(headers).filter(([name]) => allowed.has(name)))
        })
      const client = { "x-forwarded-for": "198.51.100.9", "x-forwarded-uri": "/spoofed" }
      const statuses = []
      for (let i = 0; i < 4; i++) statuses.push((yield* envoy("POST", "/login?next=/home", client)).status)
      assert.deepStrictEqual(statuses, [200, 200, 200, 429])
      // The API key rule, with an allowed header.
      const keyed = yield* envoy("DELETE", "/api/orders/7", { ...client, "x-api-key": "k-9" })
      assert.strictEqual(keyed.status, 200)
      assert.strictEqual(keyed.json.rule, "api-key")
      // The client headers Envoy passes on are those tollgate sends.
      const passed = (extAuthz.authorization_response.allowed_client_headers.patterns as ReadonlyArray<{
        exact: string
      }>).map((p) => p.exact)
      const denied = yield* envoy("POST", "/login", client)
      for (const name of passed) assert.isNotNull(denied.headers.get(name), name)
    }))
})

describe("Envoy rate limit service over gRPC (docs/gateway/ratelimit.yaml, envoy-ratelimit.yaml)", () => {
  it.live("the descriptors Envoy makes from the documented actions are limited as documented", () =>
    Effect.gen(function*() {
      const service = yield* startDocumented()
      const client = yield* rlsClient(yield* rlsAddress(service))
      const call = (original: { path: string; address: string; headers: Record<string, string> }) =>
        shouldRateLimit(client, envoyDescriptors(original))

      // a blocked address
      const blocked = yield* call({ path: "/", address: "192.0.2.1", headers: {} })
      assert.strictEqual(blocked.overall_code, "OVER_LIMIT")
      // logins: the service's "login" policy (3 per minute, sliding window), per address
      const login = { path: "/login", address: "198.51.100.20", headers: {} }
      const codes = []
      for (let i = 0; i < 4; i++) codes.push((yield* call(login)).overall_code)
      assert.deepStrictEqual(codes, ["OK", "OK", "OK", "OVER_LIMIT"])
      const over = yield* call(login)
      const headers = Object.fromEntries(over.response_headers_to_add.map((h) => [h.key, h.value]))
      assert.strictEqual(headers["ratelimit-policy"], "\"edge.path_/login.remote_address\";q=3;w=60")
      assert.isAtLeast(Number(headers["retry-after"]), 1)
      // per address: 60 a minute in a sliding window
      let ok = 0
      for (let i = 0; i < 61; i++) {
        if ((yield* call({ path: "/items", address: "198.51.100.21", headers: {} })).overall_code === "OK") ok++
      }
      assert.strictEqual(ok, 60)
      // an API key's token bucket, reported with its limit
      const keyed = yield* call({ path: "/a", address: "198.51.100.22", headers: { "x-api-key": "k" } })
      assert.strictEqual(keyed.overall_code, "OK")
      assert.strictEqual(keyed.statuses[2].current_limit?.requests_per_unit, 100)
    }))

  it.live("a malformed request is INVALID_ARGUMENT", () =>
    Effect.gen(function*() {
      const service = yield* startDocumented()
      const client = yield* rlsClient(yield* rlsAddress(service))
      const error = yield* Effect.flip(shouldRateLimit(client, { domain: "", descriptors: [] }))
      assert.strictEqual(error.code, grpc.status.INVALID_ARGUMENT)
    }))
})

describe("batch", () => {
  it.live("POST /v1/batch: independent decisions in order, an error per bad item", () =>
    Effect.gen(function*() {
      const service = yield* start({
        config: { policies: { default: { kind: "tokenBucket", capacity: 2, refill: { tokens: 1, per: "1 hour" } } } }
      })
      const reply = yield* post(service, "/v1/batch", {
        requests: [{ key: "a" }, { key: "a" }, { key: "a" }, { key: "a", op: "peek" }, { key: "" }, {
          key: "b",
          cost: 3
        }]
      })
      assert.strictEqual(reply.status, 200)
      const results = reply.json.results
      assert.deepStrictEqual(results.slice(0, 4).map((r: any) => r.allowed), [true, true, false, false])
      assert.strictEqual(results[4].error.status, 400)
      assert.include(results[4].error.detail, "key")
      assert.strictEqual(results[5].error.status, 400)
      assert.include(results[5].error.detail, "cost")
      const tooMany = yield* post(service, "/v1/batch", { requests: Array.from({ length: 101 }, () => ({ key: "x" })) })
      assert.strictEqual(tooMany.status, 400)
      assert.strictEqual((yield* post(service, "/v1/batch", { requests: [] })).status, 400)
    }))
})

describe("reload on SIGHUP", () => {
  it.live("unchanged policies keep their keys' state; changed ones start afresh; a bad file is refused", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "tollgate-reload-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const file = join(dir, "tollgate.json")
      writeFileSync(
        join(dir, "ratelimit.yaml"),
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: { unit: minute, requests_per_unit: 10 }\n"
      )
      const hour = (capacity: number) => ({ kind: "tokenBucket", capacity, refill: { tokens: 1, per: "1 hour" } })
      const write = (config: unknown) =>
        writeFileSync(file, typeof config === "string" ? config : JSON.stringify(config))
      write({ policies: { default: hour(3), other: hour(3) }, rls: { port: 0, config: "ratelimit.yaml" } })
      const service = yield* start({ env: { TOLLGATE_CONFIG: file } })
      const consume = (policy: string) => Effect.map(post(service, "/v1/consume", { key: "k", policy }), (r) => r.json)
      yield* consume("default")
      yield* consume("other")
      assert.strictEqual((yield* consume("default")).remaining, 1)

      const reloaded = (n: number) =>
        Effect.suspend(() =>
          (service.output().match(/configuration reloaded/g) ?? []).length >= n
            ? Effect.void
            : Effect.fail("not yet")
        ).pipe(Effect.retry({ times: 100, schedule: Schedule.spaced("50 millis") }), Effect.orDie)

      // "default" unchanged, "other" changed, "new" added
      write({
        policies: { default: hour(3), other: hour(5), new: hour(1) },
        rls: { port: 0, config: "ratelimit.yaml" }
      })
      service.child.kill("SIGHUP")
      yield* reloaded(1)
      assert.include(service.output(), "unchanged (state kept): default")
      assert.include(service.output(), "changed (their keys start afresh): other")
      const kept = yield* consume("default")
      assert.strictEqual(kept.remaining, 0)
      assert.strictEqual(kept.limit, 3)
      const fresh = yield* consume("other")
      assert.strictEqual(fresh.remaining, 4)
      assert.strictEqual(fresh.limit, 5)
      assert.strictEqual((yield* consume("new")).allowed, true)

      // A bad file: one line on stderr, and the configuration in force stays.
      write({ policies: { default: { kind: "tokenBucket", capacity: -1, refill: { tokens: 1, per: "1 hour" } } } })
      service.child.kill("SIGHUP")
      yield* Effect.suspend(() => service.output().includes("reload refused") ? Effect.void : Effect.fail("not yet"))
        .pipe(Effect.retry({ times: 100, schedule: Schedule.spaced("50 millis") }), Effect.orDie)
      const line = service.output().split("\n").find((l) => l.includes("reload refused"))!
      assert.strictEqual(
        line,
        "tollgate: reload refused (the configuration in force stays): invalid configuration: policies.default.capacity = -1: must be a positive finite number"
      )
      assert.strictEqual((yield* consume("new")).allowed, false) // "new" is still configured, and used up
      assert.strictEqual((yield* consume("other")).remaining, 3)

      // A bad rate limit YAML is refused the same way.
      write({ policies: { default: hour(3) }, rls: { port: 0, config: "ratelimit.yaml" } })
      writeFileSync(
        join(dir, "ratelimit.yaml"),
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: { unit: fortnight }\n"
      )
      service.child.kill("SIGHUP")
      yield* Effect.suspend(() =>
        (service.output().match(/reload refused/g) ?? []).length >= 2 ? Effect.void : Effect.fail("not yet")
      ).pipe(Effect.retry({ times: 100, schedule: Schedule.spaced("50 millis") }), Effect.orDie)
      assert.include(service.output(), "ratelimit.yaml: descriptors[0].rate_limit.unit = \"fortnight\"")
      assert.strictEqual((yield* request(service, "GET", "/healthz")).status, 200)
    }))
})
