// SIGTERM under load with keep-alive clients: the drain answers every request
// the server has read, and a request it has not read is refused before it is
// written (the connection is refused), never reset after it was written.
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import { start } from "./harness.ts"

type Outcome =
  | { readonly _tag: "Answered"; readonly status: number; readonly connection: string | undefined }
  // The connection failed before the request was written: nothing was read.
  | { readonly _tag: "Refused"; readonly code: string }
  // The request was written, then the connection was reset or closed without an answer.
  | { readonly _tag: "Reset"; readonly code: string; readonly reused: boolean }

const errorCode = (error: unknown): string =>
  error instanceof Error ? (error as NodeJS.ErrnoException).code ?? error.message : String(error)

// One POST /v1/consume on the agent; `finish` marks the request as handed to the kernel whole.
const consume = (agent: http.Agent, url: URL, key: string): Promise<Outcome> =>
  new Promise((resolve) => {
    const body = JSON.stringify({ key })
    let written = false
    const req = http.request({
      agent,
      host: url.hostname,
      port: url.port,
      method: "POST",
      path: "/v1/consume",
      headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) }
    })
    req.on("finish", () => {
      written = true
    })
    req.on("response", (res) => {
      res.resume()
      res.on(
        "end",
        () => resolve({ _tag: "Answered", status: res.statusCode ?? 0, connection: res.headers.connection })
      )
      res.on("error", (error) => resolve({ _tag: "Reset", code: errorCode(error), reused: req.reusedSocket }))
    })
    req.on("error", (error) =>
      resolve(
        written
          ? { _tag: "Reset", code: errorCode(error), reused: req.reusedSocket }
          : { _tag: "Refused", code: errorCode(error) }
      ))
    req.end(body)
  })

const CLIENTS = 100

describe("service: SIGTERM drain with keep-alive clients", () => {
  it.live(
    `${CLIENTS} keep-alive clients under load, SIGTERM: every request answered or refused before it was written`,
    () =>
      Effect.gen(function*() {
        const service = yield* start({
          config: {
            policies: { default: { kind: "tokenBucket", capacity: 1_000_000, refill: { tokens: 1, per: "1 hour" } } }
          }
        })
        const url = new URL(service.url)
        const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS })
        yield* Effect.addFinalizer(() => Effect.sync(() => agent.destroy()))
        let signalled = false
        let answeredBeforeSignal = 0
        // Each client sends requests one after another on its kept-alive connection until the service refuses
        // a connection (it has stopped listening); the test's timeout bounds it.
        const client = async (i: number) => {
          const outcomes: Array<Outcome & { readonly afterSignal: boolean }> = []
          for (let n = 0; n < 1_000_000; n++) {
            const afterSignal = signalled
            const outcome = await consume(agent, url, `c${i}:${n}`)
            outcomes.push({ ...outcome, afterSignal })
            if (outcome._tag === "Answered" && !signalled) answeredBeforeSignal++
            if (outcome._tag !== "Answered") break
          }
          return outcomes
        }
        const clients = Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)))
        // Under load: every client has a kept-alive connection and requests in flight when the signal lands.
        for (let polls = 0; answeredBeforeSignal < CLIENTS * 20 && polls < 750; polls++) {
          yield* Effect.sleep("20 millis")
        }
        signalled = true
        service.child.kill("SIGTERM")
        const all = yield* Effect.promise(() => clients)
        const code = yield* service.exited

        const resets = all.flat().filter((o) => o._tag === "Reset")
        assert.deepStrictEqual(
          resets,
          [],
          `${resets.length} requests were reset after they were written (of ${all.flat().length})`
        )
        assert.isAtLeast(answeredBeforeSignal, CLIENTS * 20, "the load did not build up")
        for (const [i, outcomes] of all.entries()) {
          const last = outcomes[outcomes.length - 1]
          // every client ends refused: the service stopped listening
          assert.strictEqual(last._tag, "Refused", `client ${i} did not end refused: ${JSON.stringify(last)}`)
          assert.isTrue(outcomes.some((o) => o._tag === "Answered"), `client ${i} got no answer`)
        }
        // Answers given while draining tell the client the connection closes. (Not every client's last answer
        // can: a client whose agent opens a new connection for its next request, rather than the kept-alive one,
        // is refused before writing it, its last answer given before the signal.)
        assert.isTrue(all.flat().some((o) => o._tag === "Answered" && o.afterSignal), "nothing answered during drain")
        assert.isTrue(
          all.flat().some((o) => o._tag === "Answered" && o.connection === "close"),
          "no answer during the drain said the connection closes"
        )
        assert.strictEqual(code, 0, service.output())
      }),
    60_000
  )
})
