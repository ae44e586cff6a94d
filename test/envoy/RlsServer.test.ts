// The gRPC server over 127.0.0.1, called by a grpc-js client as Envoy calls
// it: with the in-process limiter (each decision made before the call's fiber
// is observed, answered at once) and on Redis (each decision a round trip, so
// the call waits on its fiber and is answered when it ends). Both answer the
// same: OK, then OVER_LIMIT on a limit of two; an empty domain is
// INVALID_ARGUMENT.
import { assert, describe, it } from "@effect/vitest"
import * as grpc from "@grpc/grpc-js"
import { Effect, Layer, Result, Schema } from "effect"
import * as RlsConfig from "../../src/envoy/RlsConfig.ts"
import * as RlsServer from "../../src/envoy/RlsServer.ts"
import * as RlsService from "../../src/envoy/RlsService.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"
import { uniquePrefix } from "../redis/redis.ts"

const yaml =
  "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: hour, requests_per_unit: 2 }\n"

const config = (() => {
  const parsed = RlsConfig.parseYaml(yaml, "edge.yaml")
  if (Result.isFailure(parsed)) throw new Error(parsed.failure.reason)
  const document = Schema.decodeUnknownSync(RlsConfig.Document)(parsed.success)
  const compiled = RlsConfig.compile([{ file: "edge.yaml", document }])
  if (Result.isFailure(compiled)) throw new Error(JSON.stringify(compiled.failure))
  return compiled.success
})()

type Client = grpc.Client & {
  ShouldRateLimit: (
    request: unknown,
    callback: (error: grpc.ServiceError | null, response: RlsService.RateLimitResponse) => void
  ) => void
}

const call = (client: Client, request: unknown) =>
  Effect.callback<RlsService.RateLimitResponse, grpc.ServiceError>((resume) => {
    client.ShouldRateLimit(
      request,
      (error, response) => resume(error === null ? Effect.succeed(response) : Effect.fail(error))
    )
  })

// Serves on a free port, asks four times (three for one address, one malformed), and returns what came back.
const exercise = (store: Layer.Layer<never, unknown>) =>
  Effect.gen(function*() {
    const port = yield* RlsServer.make({ host: "127.0.0.1", port: 0 })
    const definition = RlsServer.loadDefinition()
    if (!("ShouldRateLimit" in definition)) return yield* Effect.die(definition)
    const Client = grpc.makeGenericClientConstructor(definition as grpc.ServiceDefinition, "RateLimitService")
    const client = yield* Effect.acquireRelease(
      Effect.sync(() => new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as Client),
      (client) => Effect.sync(() => client.close())
    )
    const request = { domain: "edge", descriptors: [{ entries: [{ key: "remote_address", value: "203.0.113.7" }] }] }
    const codes: Array<string> = []
    for (let i = 0; i < 3; i++) codes.push((yield* call(client, request)).overall_code)
    const malformed = yield* Effect.flip(call(client, { domain: "", descriptors: request.descriptors }))
    return { codes, malformed: malformed.code }
  }).pipe(
    Effect.provideServiceEffect(RlsService.RlsService, RlsService.RlsService.make({ config })),
    Effect.provide(store),
    Effect.scoped
  )

describe("the gRPC rate limit service over 127.0.0.1", () => {
  it.live("in process: OK, OK, OVER_LIMIT on a limit of 2; an empty domain is INVALID_ARGUMENT", () =>
    Effect.gen(function*() {
      const { codes, malformed } = yield* exercise(Layer.empty)
      assert.deepStrictEqual(codes, ["OK", "OK", "OVER_LIMIT"])
      assert.strictEqual(malformed, grpc.status.INVALID_ARGUMENT)
    }))

  it.live.skipIf(process.env.REDIS_URL === undefined)(
    "on Redis (each decision a round trip, answered when the call's fiber ends): the same answers (REDIS_URL)",
    () =>
      Effect.gen(function*() {
        const store = RedisStore.layer({ url: process.env.REDIS_URL!, prefix: uniquePrefix("rls-server") })
        const { codes, malformed } = yield* exercise(store)
        assert.deepStrictEqual(codes, ["OK", "OK", "OVER_LIMIT"])
        assert.strictEqual(malformed, grpc.status.INVALID_ARGUMENT)
      })
  )
})
