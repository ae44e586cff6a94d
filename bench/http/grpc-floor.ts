/**
 * The floor of the gRPC scenario of `npm run bench:http`: a bare
 * `@grpc/grpc-js` server with the same RateLimitService definition (the
 * vendored `.proto`, loaded as tollgate loads it) and a `ShouldRateLimit`
 * handler that answers OK at once: no Effect, no limiter, no metrics. What
 * grpc-js itself costs per unary call on this machine. Listens on
 * 127.0.0.1:$PORT (0: any free port) and prints the address.
 */
import * as grpc from "@grpc/grpc-js"
import { loadDefinition } from "../../src/envoy/RlsServer.ts"

// the service definition exactly as tollgate's server loads it
const service = loadDefinition()
if (!("ShouldRateLimit" in service)) throw new Error(`cannot load the service definition: ${String(service)}`)
const OK = { overall_code: "OK", statuses: [{ code: "OK" }], response_headers_to_add: [] }
const server = new grpc.Server()
server.addService(service, {
  ShouldRateLimit: (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback(null, OK)
})
server.bindAsync(`127.0.0.1:${process.env.PORT ?? 0}`, grpc.ServerCredentials.createInsecure(), (error, port) => {
  if (error !== null) throw error
  console.log(`gRPC listening on 127.0.0.1:${port}`)
})
process.on("SIGTERM", () => server.forceShutdown())
