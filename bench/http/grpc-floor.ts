/**
 * The floor of the gRPC scenario of `npm run bench:http`: a bare
 * `@grpc/grpc-js` server with the same RateLimitService definition (the
 * vendored `.proto`, loaded as tollgate loads it) and a `ShouldRateLimit`
 * handler that answers OK at once: no Effect, no limiter, no metrics. What
 * grpc-js itself costs per unary call on this machine. Listens on
 * 127.0.0.1:$PORT (0: any free port) and prints the address.
 */
import * as grpc from "@grpc/grpc-js"
import * as protoLoader from "@grpc/proto-loader"
import { fileURLToPath } from "node:url"

const dir = fileURLToPath(new URL("../../src/envoy/proto/", import.meta.url))
const definition = protoLoader.loadSync("envoy/service/ratelimit/v3/rls.proto", {
  includeDirs: [dir],
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true
})
const loaded = grpc.loadPackageDefinition(definition) as unknown as {
  envoy: { service: { ratelimit: { v3: { RateLimitService: { service: grpc.ServiceDefinition } } } } }
}
const OK = { overall_code: "OK", statuses: [{ code: "OK" }], response_headers_to_add: [] }
const server = new grpc.Server()
server.addService(loaded.envoy.service.ratelimit.v3.RateLimitService.service, {
  ShouldRateLimit: (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback(null, OK)
})
server.bindAsync(`127.0.0.1:${process.env.PORT ?? 0}`, grpc.ServerCredentials.createInsecure(), (error, port) => {
  if (error !== null) throw error
  console.log(`gRPC listening on 127.0.0.1:${port}`)
})
process.on("SIGTERM", () => server.forceShutdown())
