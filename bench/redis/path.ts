/**
 * The limiter's share of a lone call on Redis, without Redis: tollgate's
 * `acquire` and `RedisStore.apply` over a client that answers every command
 * at once (a resolved promise holding the lean script's reply), beside the
 * least an Effect call over that client can do (one `Effect.callback`
 * around the same promise). What separates the three is the JavaScript of
 * the limiter's path and the store's, on warm caches; a real round trip
 * adds the same socket and server time to each.
 *
 *   node bench/redis/path.ts     about 20 seconds
 */
import * as NodeRedis from "@effect/platform-node/NodeRedis"
import { Context, Effect } from "effect"
import { Redis } from "effect/persistence"
import * as Engine from "../../src/internal/actor/Engine.ts"
import { Kind as OpKind } from "../../src/internal/operation/Op.ts"
import * as Policy from "../../src/Policy.ts"
import { RateLimiter } from "../../src/RateLimiter.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"
import * as Store from "../../src/Store.ts"
import { median } from "../stats.ts"

const CALLS = 200_000
const ROUNDS = 7

// What the lean token-bucket function answers an admitted Take: allowed,
// remaining, retryAfter, resetAfter, limit.
const reply: ReadonlyArray<number> = [1, 999_999_999, 0, 1, 1_000_000_000]
const answer = Promise.resolve(reply)
// The one method of node-redis's client the store calls (`sendCommand`).
const client = { sendCommand: (_args: Array<string>) => answer }
type Client = NodeRedis.NodeRedis["Service"]["client"]
const context = Context.make(
  NodeRedis.NodeRedis,
  NodeRedis.NodeRedis.of({
    client: client as unknown as Client,
    use: (f) => Effect.promise(() => f(client as unknown as Client))
  })
).pipe(Context.add(Redis.Redis, Redis.Redis.of({} as Redis.Redis["Service"])))

const generous = Policy.tokenBucket({ capacity: 1e9, refill: { tokens: 1e6, per: "1 second" } }) as Policy.Valid
const ops = [{ kind: OpKind.Take, cost: 1, queued: 0 }]

const main = Effect.gen(function*() {
  const store = yield* Effect.map(RedisStore.make({ prefix: "path:" }), Engine.engineOf).pipe(
    Effect.provideContext(context)
  )
  const limiter = yield* RateLimiter.make({ policy: generous }).pipe(
    Effect.provideService(Store.CurrentStore, Engine.pluggable(store))
  )
  const contenders: ReadonlyArray<readonly [string, (key: string) => Effect.Effect<unknown, unknown>]> = [
    [
      "one Effect.callback around the client's promise",
      () => Effect.callback<unknown>((resume) => void client.sendCommand([]).then((r) => resume(Effect.succeed(r))))
    ],
    ["RedisStore.apply", (key) => store.apply(key, generous, ops)],
    ["tollgate acquire on RedisStore", (key) => limiter.acquire(key)]
  ]
  const samples = contenders.map(() => [] as Array<number>)
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < contenders.length; i++) {
      const call = contenders[i][1]
      const start = performance.now()
      for (let n = 0; n < CALLS; n++) yield* call("k")
      // (the first round warms up: it is not counted)
      if (round > 0) samples[i].push(((performance.now() - start) * 1000) / CALLS)
    }
  }
  const floor = median(samples[0])
  for (let i = 0; i < contenders.length; i++) {
    const m = median(samples[i])
    process.stdout.write(
      `${contenders[i][0].padEnd(50)} ${m.toFixed(2)} µs per call${
        i === 0 ? "" : ` (${(m - floor).toFixed(2)} over the first)`
      }\n`
    )
  }
})

Effect.runPromise(Effect.scoped(main)).then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(1)
  }
)
