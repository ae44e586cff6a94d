// The service as a cluster, end to end: real service processes (see
// harness.ts) started as docs/service.md shows, three on one Postgres
// (TOLLGATE_PG_URL, a database of the test's own), share each key's limit
// through its one owner, and keep it when an instance stops; bad cluster
// settings stop the service at start, naming the field.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { database, describePostgres, freePort } from "../cluster/postgres.ts"
import { metrics, post, sample, type Service, start, startFailing } from "./harness.ts"

const hour = (capacity: number) => ({ kind: "tokenBucket", capacity, refill: { tokens: 1, per: "1 hour" } })
const consume = (service: Service, body: unknown) => post(service, "/v1/consume", body)
const poll = Effect.retry({ schedule: Schedule.spaced("100 millis"), times: 300 })

describe("service: cluster settings", () => {
  it.live(
    "a bad TOLLGATE_CLUSTER, port or combination stops the service with exit code 1, naming the field",
    () =>
      Effect.gen(function*() {
        const bad = yield* startFailing({ env: { TOLLGATE_CLUSTER: "mysql://app:s3cret@db/x" } })
        assert.strictEqual(bad.code, 1)
        assert.include(bad.output, "TOLLGATE_CLUSTER")
        assert.include(bad.output, "must start with postgres://")
        assert.notInclude(bad.output, "s3cret")
        const port = yield* startFailing({
          env: { TOLLGATE_CLUSTER: "postgres://db/x", TOLLGATE_CLUSTER_PORT: "70000" }
        })
        assert.strictEqual(port.code, 1)
        assert.include(port.output, "TOLLGATE_CLUSTER_PORT")
        const both = yield* startFailing({
          env: { TOLLGATE_CLUSTER: "postgres://db/x", REDIS_URL: "redis://127.0.0.1:6379" }
        })
        assert.strictEqual(both.code, 1)
        assert.include(both.output, "cannot be used with REDIS_URL")
        const file = yield* startFailing({ config: { cluster: { url: "postgres://db/x", handoffTimeout: "soon" } } })
        assert.strictEqual(file.code, 1)
        assert.include(file.output, "cluster.handoffTimeout")
      }),
    60_000
  )
})

describePostgres("service: three instances on one Postgres", () => {
  it.live("share one limit through each key's owner, and keep it when an instance stops", () =>
    Effect.gen(function*() {
      const db = yield* database
      const config = { policies: { default: hour(10) }, cluster: { fallback: { timeout: "5 seconds" } } }
      const ports = [yield* freePort, yield* freePort, yield* freePort]
      const services = yield* Effect.all(
        ports.map((port) => start({ env: { TOLLGATE_CLUSTER: db, TOLLGATE_CLUSTER_PORT: String(port) }, config })),
        { concurrency: "unbounded" }
      )
      for (const service of services) {
        yield* Effect.sync(() => service.output()).pipe(
          Effect.filterOrFail((output) => output.includes("store cluster on postgres://"), (output) => output),
          poll
        )
      }
      // every instance answers for every shard (each has taken its own)
      yield* Effect.forEach(services, (service) =>
        post(service, "/v1/peek", { key: "warm" }).pipe(
          Effect.filterOrFail((r) => r.status === 200 && r.json.degraded === undefined, (r) => r.text),
          poll
        ))
      const replies = []
      for (let i = 0; i < 15; i++) replies.push(yield* consume(services[i % 3], { key: "shared" }))
      assert.isTrue(replies.every((r) => r.status === 200), JSON.stringify(replies.map((r) => r.text)))
      assert.isTrue(replies.every((r) => r.json.degraded === undefined), JSON.stringify(replies.map((r) => r.text)))
      const admitted = replies.filter((r) => r.json.allowed === true)
      assert.deepStrictEqual(admitted.map((r) => r.json.remaining), [9, 8, 7, 6, 5, 4, 3, 2, 1, 0])
      // /metrics: the owner's decisions on one instance, rounds on the others
      const decided: Array<number> = []
      for (const service of services) {
        const text = yield* metrics(service)
        decided.push(
          (sample(text, "tollgate_decisions_total{limiter=\"service\",outcome=\"allowed\"}") ?? 0) +
            (sample(text, "tollgate_decisions_total{limiter=\"service\",outcome=\"denied\"}") ?? 0)
        )
      }
      const owner = decided.indexOf(Math.max(...decided))
      assert.isAtLeast(decided[owner], 15, JSON.stringify(decided))
      // the key's owner stops gracefully: the key's count goes on where it was, on its next owner
      services[owner].child.kill("SIGTERM")
      assert.strictEqual(yield* services[owner].exited, 0)
      for (const service of services.filter((_, i) => i !== owner)) {
        const r = yield* post(service, "/v1/peek", { key: "shared" })
        assert.strictEqual(r.json.remaining, 0, r.text)
        assert.isUndefined(r.json.degraded, r.text)
      }
    }), 120_000)
})
