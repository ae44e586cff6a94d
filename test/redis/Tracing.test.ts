/**
 * A round trip to Redis is one `RedisStore.apply` span, with the script and
 * the number of keys it carried, when a tracer is installed; several keys
 * sent at once share one span. (With Effect's native tracer the store skips
 * the span: nothing could see it.)
 */
import { assert } from "@effect/vitest"
import { Effect, type Exit, Tracer } from "effect"
import * as Engine from "../../src/internal/actor/Engine.ts"
import { Kind as OpKind } from "../../src/internal/operation/Op.ts"
import * as Policy from "../../src/Policy.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"
import { cleanup, describeRedis, uniquePrefix } from "./redis.ts"

const policy = Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
const take = [{ kind: OpKind.Take, cost: 1, queued: 0 }]

describeRedis("RedisStore spans", (it) => {
  it.effect("one RedisStore.apply span per round trip, named after its script, with its keys", () =>
    Effect.gen(function*() {
      const started: Array<Tracer.Span> = []
      // The callers are answered on the round trip's fiber, before its span
      // ends: the test waits for the spans' ends themselves, not for a while.
      let ended = 0
      const waiting: Array<readonly [number, () => void]> = []
      class Recorded extends Tracer.NativeSpan {
        override end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
          super.end(endTime, exit)
          if (this.name !== "RedisStore.apply") return
          ended++
          for (const [n, resume] of waiting.splice(0)) {
            if (ended >= n) resume()
            else waiting.push([n, resume])
          }
        }
      }
      const spansEnded = (n: number) =>
        Effect.callback<void>((resume) => {
          if (ended >= n) resume(Effect.void)
          else waiting.push([n, () => resume(Effect.void)])
        })
      const tracer = Tracer.make({
        span: (options) => {
          const span = new Recorded(options)
          started.push(span)
          return span
        }
      })
      const prefix = uniquePrefix("tracing")
      // one command out at a time, so what is called meanwhile waits and shares one
      const store = yield* Effect.map(RedisStore.make({ prefix, maxInFlight: 1 }), Engine.engineOf)
      const traced = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.withTracer(effect, tracer)

      const one = yield* traced(store.apply("a", policy, take))
      assert.strictEqual(one[0].allowed, true)
      yield* spansEnded(1)
      const spans = () => started.filter((s) => s.name === "RedisStore.apply")
      assert.strictEqual(spans().length, 1)
      assert.strictEqual(spans()[0].attributes.get("tollgate.script"), "token-bucket")
      assert.strictEqual(spans()[0].attributes.get("tollgate.keys"), 1)
      assert.strictEqual(spans()[0].status._tag, "Ended")

      // the first goes out at once; the next three wait and share one round trip
      yield* traced(Effect.forEach(["b", "c", "d", "e"], (key) => store.apply(key, policy, take), { concurrency: 4 }))
      yield* spansEnded(3)
      assert.deepStrictEqual(spans().slice(1).map((s) => s.attributes.get("tollgate.keys")), [1, 3])
      assert.isTrue(spans().every((s) => s.status._tag === "Ended"))
      yield* cleanup(prefix)
    }))
})
