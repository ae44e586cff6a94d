import * as grpc from "@grpc/grpc-js"
import { loadDefinition } from "./src/envoy/RlsServer.ts"
const def = loadDefinition() as grpc.ServiceDefinition
const Client = grpc.makeGenericClientConstructor(def, "RateLimitService")
const client = new Client(process.argv[2], grpc.credentials.createInsecure()) as any
const req = JSON.parse(process.argv[3])
for (let i = 0; i < Number(process.argv[4] ?? 1); i++) {
  const res = await new Promise((ok) => client.ShouldRateLimit(req, (err: any, r: any) => ok(err ? { err: err.code, details: err.details } : r)))
  console.log(JSON.stringify(res))
}
client.close()
