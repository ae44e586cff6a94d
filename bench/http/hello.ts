/**
 * The baseline for `npm run bench:http`: a bare effect/http hello-world
 * server: `GET /` answers "hello"; `POST /json` reads a JSON body and answers
 * with a small JSON object, the same HTTP work as a `/v1/consume` minus the
 * validation and the limiter; `POST /json-body` does the same but reads the body
 * with tollgate's own reader (`Body.json`, straight from Node's request stream),
 * as the service does. With `--middleware` every request also goes through tollgate's
 * RateLimitMiddleware (a policy no client can exhaust), to show what the
 * middleware costs. Listens on 127.0.0.1:$PORT (0: any free port).
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer, Schema } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { createServer } from "node:http"
import { RateLimitMiddleware } from "../../src/http/index.ts"
import { Policy } from "../../src/index.ts"
import * as Body from "../../src/server/internal/Body.ts"

const route = Layer.mergeAll(
  HttpRouter.add("GET", "/", HttpServerResponse.text("hello")),
  HttpRouter.add(
    "POST",
    "/json",
    HttpServerRequest.HttpServerRequest.use((request) =>
      Effect.map(request.json, (body) => HttpServerResponse.jsonUnsafe({ ok: true, received: typeof body }))
    )
  ),
  HttpRouter.add(
    "POST",
    "/json-body",
    Effect.map(
      Body.json(Schema.Unknown, 4096),
      (body) => HttpServerResponse.jsonUnsafe({ ok: true, received: typeof body })
    )
  )
)
const app = process.argv.includes("--middleware")
  ? route.pipe(
    Layer.provide(RateLimitMiddleware.layer({
      policy: Policy.tokenBucket({ capacity: 1e12, refill: { tokens: 1e9, per: "1 second" } })
    }))
  )
  : route

HttpRouter.serve(app, { disableLogger: true }).pipe(
  Layer.provide(NodeHttpServer.layer(createServer, { host: "127.0.0.1", port: Number(process.env.PORT ?? 0) })),
  Layer.launch,
  NodeRuntime.runMain
)
