/**
 * Nothing a user can build acts before it runs: every method of the
 * limiter returns a description, so building one changes no key, and an
 * effect built once and run twice acts twice (users build once and run many
 * times). The same holds for the middleware and `AdaptiveClient`, which
 * call the limiter only when a request goes through them.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Ref } from "effect"
import { HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import { TestClock } from "effect/testing"
import { AdaptiveClient } from "../src/http/index.ts"
import { MemoryStore, Policy } from "../src/index.ts"
import { RateLimiter } from "../src/RateLimiter.ts"
import { CurrentStore } from "../src/Store.ts"

const policy = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 hour" } })
const adaptive = Policy.adaptive({ capacity: 10, rate: { tokens: 10, per: "1 hour" }, floor: 1, ceiling: 100 })

type Limiter = RateLimiter["Service"]

// Every method, built for key "k" (or "k" and "j"), none of them run.
const everything = (limiter: Limiter): ReadonlyArray<Effect.Effect<unknown, unknown>> => [
  limiter.acquire("k"),
  limiter.acquire(["k", "j"]),
  limiter.consume("k"),
  limiter.consume(["k", "j"]),
  limiter.wait("k"),
  limiter.wait(["k", "j"]),
  limiter.reserve("k"),
  limiter.limit("k")(Effect.void),
  limiter.withPermit("k")(Effect.void),
  limiter.release("k", 1),
  limiter.reset("k"),
  limiter.reconfigure("k", Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 hour" } })),
  limiter.force("k", { cost: 3 }),
  limiter.penalty("k", 2),
  limiter.add("k", 1),
  limiter.reward("k", 1),
  limiter.fill("k"),
  limiter.consumeUpTo("k", { cost: 4 }),
  limiter.set("k", 5),
  limiter.delete("k"),
  limiter.block("k", "1 minute"),
  limiter.setRate("k", 5),
  limiter.feedback("k", "throttled")
]

const untouched = (limiter: Limiter) =>
  Effect.gen(function*() {
    const stats = yield* limiter.stats
    assert.strictEqual(stats.buckets, 0, "a bucket started")
    assert.strictEqual(stats.allowed + stats.denied, 0, "a decision was made")
    // (a reconfiguration or a new rate of a key starts no bucket: it is an override)
    assert.strictEqual(stats.overrides, 0, "a key was given a policy or a rate")
    assert.strictEqual((yield* limiter.peek("k")).remaining, 10)
    assert.strictEqual((yield* limiter.peek("j")).remaining, 10)
  })

describe("nothing acts before it runs", () => {
  for (const fastPath of [true, false]) {
    for (const [name, p] of [["token bucket", policy], ["adaptive", adaptive]] as const) {
      it.effect(`every RateLimiter method, built and not run, changes nothing (${name}, fastPath: ${fastPath})`, () =>
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.make({ policy: p, fastPath })
          const built = everything(limiter)
          assert.isAbove(built.length, 20)
          yield* untouched(limiter)
        }))
    }

    it.effect(`an effect built once and run twice acts twice (fastPath: ${fastPath})`, () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ policy, fastPath })
        const remaining = (key: string) => Effect.map(limiter.peek(key), (d) => d.remaining)
        const twice = <A, E>(effect: Effect.Effect<A, E>) => Effect.andThen(effect, effect)
        // each case's key, the built effect, and what the key has left after two runs
        const cases: ReadonlyArray<readonly [string, Effect.Effect<unknown, unknown>, number]> = [
          ["a", limiter.acquire("a"), 8],
          ["b", limiter.consume("b"), 8],
          ["c", limiter.wait("c"), 8],
          ["d", limiter.reserve("d"), 8],
          ["e", limiter.limit("e")(Effect.void), 8],
          ["f", limiter.force("f", { cost: 3 }), 4],
          ["g", limiter.consumeUpTo("g", { cost: 2 }), 6],
          ["h", limiter.acquire(["h", "i"]), 8],
          ["j", limiter.penalty("j", 4), 2]
        ]
        for (const [key, effect, left] of cases) {
          yield* twice(effect)
          assert.strictEqual(yield* remaining(key), left, key)
        }
      }))

    it.effect(`each run of a built effect is decided at the time it runs (fastPath: ${fastPath})`, () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({
          policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } }),
          fastPath
        })
        const acquire = limiter.acquire("k")
        assert.isTrue(yield* acquire)
        assert.isFalse(yield* acquire)
        yield* TestClock.adjust("1 second")
        assert.isTrue(yield* acquire)
      }))
  }

  it.effect("a single-key call is an Effect like any other: it pipes, prints, fails typed and runs anywhere", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy })
      const acquire = limiter.acquire("k")
      assert.isTrue(Effect.isEffect(acquire))
      assert.isTrue(Effect.isEffect(limiter.consume("k")) && Effect.isEffect(limiter.peek("k")))
      assert.isString(String(acquire))
      assert.doesNotThrow(() => JSON.stringify(acquire))
      // piped, mapped and run synchronously outside any fiber the test made
      assert.strictEqual(Effect.runSync(acquire.pipe(Effect.map((ok) => ok ? "yes" : "no"))), "yes")
      assert.strictEqual((yield* limiter.consume("k")).remaining, 8)
      const bad = yield* Effect.flip(limiter.acquire(""))
      assert.strictEqual(bad._tag, "InvalidRequest")
      const negative = yield* Effect.flip(limiter.consume("k", { cost: -1 }))
      assert.strictEqual(negative._tag === "InvalidRequest" ? negative.field : negative._tag, "cost")
    }))

  it.effect("a store's apply, built and not run, changes nothing", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const limiter = yield* RateLimiter.make({ policy }).pipe(Effect.provideService(CurrentStore, store))
      assert.isAbove(everything(limiter).length, 20)
      yield* untouched(limiter)
    }))

  it.effect("AdaptiveClient waits and reports only when a request is sent", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: adaptive })
      const sent = yield* Ref.make(0)
      const client = HttpClient.make((request) =>
        Effect.as(Ref.update(sent, (n) => n + 1), HttpClientResponse.fromWeb(request, new Response("ok")))
      ).pipe(AdaptiveClient.make(limiter, { key: "api" }))
      const get = client.execute(HttpClientRequest.get("http://127.0.0.1/"))
      yield* untouched(limiter)
      yield* get
      yield* get
      assert.strictEqual(yield* Ref.get(sent), 2)
      assert.strictEqual((yield* limiter.peek("api")).remaining, 8)
      assert.strictEqual(Duration.toMillis((yield* limiter.peek("api")).retryAfter), 0)
    }))
})
