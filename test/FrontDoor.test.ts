import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, References, Scope } from "effect"
import { TestClock } from "effect/testing"
import { type InvalidPolicy, MemoryStore, Policy, RateLimiter, Store } from "../src/index.ts"
import { onStore } from "./stores.ts"

// The front door: every operation checks what it is given before it does
// anything, and a bad value is refused with an error that says, in one
// line, which field, what value and why (the message users read in a log).
// Each row is one bad input and the whole message it must give; nothing is
// taken from the key (the same call with a good input then finds it full).

const bucket = Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "1 second" } })
const adaptive = Policy.adaptive({
  capacity: 3,
  rate: { tokens: 1, per: "1 second" },
  floor: 1,
  ceiling: 10,
  increase: 1
})

type Limiter = RateLimiter["Service"]
type Row = readonly [name: string, call: (l: Limiter) => Effect.Effect<unknown, unknown>, message: string]

const bad = (x: unknown) => x as never
const long = "k".repeat(513)

const rows: ReadonlyArray<Row> = [
  ["a key that is no string", (l) => l.peek(bad(42)), "invalid request: key = number: must be a string"],
  ["an empty key", (l) => l.acquire(""), "invalid request: key = \"\": must not be empty"],
  [
    "a key over maxKeyLength",
    (l) => l.consume(long),
    `invalid request: key = ${JSON.stringify("k".repeat(32) + "…")}: is 513 long; the limit is 512`
  ],
  [
    "keys that are neither a string nor an array",
    (l) => l.acquire(bad({ a: 1 })),
    "invalid request: key = object: must be a string or an array of strings"
  ],
  ["no keys", (l) => l.acquire([]), "invalid request: keys = 0: must name between 1 and 64 keys"],
  [
    "65 keys",
    (l) => l.consume(Array.from({ length: 65 }, (_, i) => `k${i}`)),
    "invalid request: keys = 65: must name between 1 and 64 keys"
  ],
  ["a key named twice", (l) => l.acquire(["a", "b", "a"]), "invalid request: keys[2] = \"a\": is named twice"],
  // the doors of one key only, given several (a caller without types): refused,
  // so withPermit never takes what its release could not give back
  [
    "withPermit given an array",
    (l) => l.withPermit(bad(["a", "b"]))(Effect.void),
    "invalid request: key = object: must be a string"
  ],
  [
    "limit given an array",
    (l) => l.limit(bad(["a", "b"]))(Effect.void),
    "invalid request: key = object: must be a string"
  ],
  ["reserve given an array", (l) => l.reserve(bad(["a", "b"])), "invalid request: key = object: must be a string"],
  ["a bad key among several", (l) => l.wait(["a", ""]), "invalid request: keys[1] = \"\": must not be empty"],
  ["a negative cost", (l) => l.acquire("k", { cost: -1 }), "invalid request: cost = -1: must be an integer >= 0"],
  ["a cost of 1.5", (l) => l.consume("k", { cost: 1.5 }), "invalid request: cost = 1.5: must be an integer >= 0"],
  [
    "a cost that is no number",
    (l) => l.acquire("k", { cost: bad("2") }),
    "invalid request: cost = string: must be an integer >= 0"
  ],
  [
    "a call's duration of 0",
    (l) => l.acquire("k", { duration: 0 }),
    "invalid request: duration = 0: must be a positive duration (or Duration.infinity)"
  ],
  [
    "a call's duration that is no duration",
    (l) => l.consume("k", { duration: bad({}) }),
    "invalid request: duration = object: must be a positive duration (or Duration.infinity)"
  ],
  [
    "a force's duration of NaN",
    (l) => l.force("k", { duration: Number.NaN }),
    "invalid request: duration = NaN: must be a positive duration (or Duration.infinity)"
  ],
  [
    "a set's duration of -1 second",
    (l) => l.set("k", 1, { duration: "-1 second" }),
    "invalid request: duration = -1 second: must be a positive duration (or Duration.infinity)"
  ],
  [
    "a block of 0",
    (l) => l.block("k", "0 millis"),
    "invalid request: duration = 0 millis: must be a positive duration (or Duration.infinity)"
  ],
  ["a force's cost of -1", (l) => l.force("k", { cost: -1 }), "invalid request: cost = -1: must be an integer >= 0"],
  ["a penalty of 0.5", (l) => l.penalty("k", 0.5), "invalid request: points = 0.5: must be an integer >= 0"],
  ["an add of 0", (l) => l.add("k", 0), "invalid request: amount = 0: must be a positive integer"],
  ["a reward of -2", (l) => l.reward("k", -2), "invalid request: amount = -2: must be a positive integer"],
  [
    "a consumeUpTo of 0",
    (l) => l.consumeUpTo("k", { cost: 0 }),
    "invalid request: cost = 0: must be a positive integer"
  ],
  ["a set of -1 used", (l) => l.set("k", -1), "invalid request: used = -1: must be an integer >= 0"],
  [
    "a set of a used that is no number",
    (l) => l.set("k", bad("1")),
    "invalid request: used = string: must be an integer >= 0"
  ],
  ["a force on an empty key", (l) => l.force(""), "invalid request: key = \"\": must not be empty"],
  ["a fill of an empty key", (l) => l.fill(""), "invalid request: key = \"\": must not be empty"],
  ["a get of an empty key", (l) => l.get(""), "invalid request: key = \"\": must not be empty"],
  ["a delete of an empty key", (l) => l.delete(""), "invalid request: key = \"\": must not be empty"],
  ["a reset of an empty key", (l) => l.reset(""), "invalid request: key = \"\": must not be empty"],
  ["a release of 0", (l) => l.release("k", 0), "invalid request: amount = 0: must be a positive integer"],
  [
    "a maxWait below 0",
    (l) => l.wait("k", { maxWait: -1 }),
    "invalid request: maxWait = -1: must be a duration >= 0"
  ],
  [
    "a maxWait of NaN over several keys",
    (l) => l.wait(["a", "b"], { maxWait: Number.NaN }),
    "invalid request: maxWait = NaN: must be a duration >= 0"
  ],
  [
    "a maxWait that is no duration",
    (l) => l.reserve("k", { maxWait: bad(true) }),
    "invalid request: maxWait = boolean: must be a duration >= 0"
  ],
  [
    "a priority of 1.5",
    (l) => l.wait("k", { priority: 1.5 }),
    "invalid request: priority = 1.5: must be an integer"
  ],
  [
    "an empty tenant",
    (l) => l.wait("k", { tenant: "" }),
    "invalid request: tenant = \"\": must be a non-empty string of at most 512"
  ],
  [
    "a tenant over maxKeyLength",
    (l) => l.wait("k", { tenant: long }),
    `invalid request: tenant = ${JSON.stringify("k".repeat(32))}: must be a non-empty string of at most 512`
  ],
  [
    "a tenant that is no string",
    (l) => l.wait("k", { tenant: bad(7) }),
    "invalid request: tenant = number: must be a non-empty string of at most 512"
  ],
  [
    "a weight of 0",
    (l) => l.wait("k", { tenant: "t", weight: 0 }),
    "invalid request: weight = 0: must be a positive number"
  ],
  [
    "a weight without a tenant",
    (l) => l.wait("k", { weight: 2 }),
    "invalid request: weight = 2: needs a tenant"
  ],
  [
    "a feedback signal that is no signal",
    (l) => l.feedback("k", bad("fine")),
    "invalid request: signal = \"fine\": must be \"ok\", \"throttled\" or { latency }"
  ],
  [
    "a feedback signal that is no string",
    (l) => l.feedback("k", bad(3)),
    "invalid request: signal = number: must be \"ok\", \"throttled\" or { latency }"
  ],
  [
    "a throttled signal's retryAfter below 0",
    (l) => l.feedback("k", "throttled", { retryAfter: -5 }),
    "invalid request: retryAfter = -5: must be a duration >= 0"
  ],
  [
    "a latency below 0",
    (l) => l.feedback("k", { latency: -1 }),
    "invalid request: latency = -1: must be a duration >= 0"
  ],
  [
    "a reconfigure to what is no Policy",
    (l) => l.reconfigure("k", bad({ rule: 1 })),
    "invalid policy: policy = object: must be a Policy"
  ],
  [
    "a reconfigure with an unknown carry",
    (l) => l.reconfigure("k", bucket, { carry: bad("keep") }),
    "invalid policy: carry = keep: must be reset, proportional or as-is"
  ],
  ["a reconfigure of an empty key", (l) => l.reconfigure("", bucket), "invalid request: key = \"\": must not be empty"],
  ["a setRate of an empty key", (l) => l.setRate("", 2), "invalid request: key = \"\": must not be empty"],
  ["a feedback on an empty key", (l) => l.feedback("", "ok"), "invalid request: key = \"\": must not be empty"]
]

const backends = [
  ["in process", RateLimiter.make] as const,
  [
    "on a store",
    onStore
  ] as const
]

for (const [where, make] of backends) {
  describe(`the front door, ${where}`, () => {
    for (const [name, call, message] of rows) {
      it.effect(`${name}: ${message}`, () =>
        Effect.gen(function*() {
          const limiter = yield* make({ policy: bucket })
          const error = yield* Effect.flip(call(limiter))
          assert.strictEqual((error as Error).message, message)
          // the call took nothing: the key still has its 3 units
          const keys = ["k", "a", "b"]
          for (const key of keys) assert.strictEqual((yield* limiter.peek(key, { cost: 3 })).allowed, true)
        }))
    }

    it.effect("64 keys at once are taken, the most a call may name", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: bucket })
        const keys = Array.from({ length: 64 }, (_, i) => `k${i}`)
        assert.isTrue(yield* limiter.acquire(keys, { cost: 3 }))
        assert.isFalse(yield* limiter.acquire(keys.slice(63)))
      }))

    it.effect("a setRate the policy cannot take names the rate and says why", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: bucket })
        const error = yield* Effect.flip(limiter.setRate("k", -1))
        assert.strictEqual(error._tag, "InvalidRequest")
        if (error._tag !== "InvalidRequest") return
        assert.strictEqual(error.field, "rate")
        assert.strictEqual(error.value, "-1")
        assert.isAbove(error.reason.length, 0)
      }))

    it.effect("a tenant exactly maxKeyLength long is taken", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: bucket })
        yield* limiter.wait("k", { tenant: "t".repeat(512) })
        assert.isFalse((yield* limiter.peek("k", { cost: 3 })).allowed)
        assert.isTrue((yield* limiter.peek("k", { cost: 2 })).allowed)
      }))

    it.effect("a throttled signal needs no options", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: adaptive })
        yield* limiter.feedback("k", "throttled")
        assert.isTrue(yield* limiter.acquire("k"))
      }))

    it.effect("withPermit holds the cost it was given while the effect runs, and gives it back", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: Policy.concurrency({ capacity: 2 }) })
        const inside = yield* limiter.withPermit("k", { cost: 2 })(limiter.peek("k"))
        assert.deepStrictEqual([inside.allowed, inside.remaining], [false, 0])
        assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
      }))

    it.effect("setRate keeps the key's level as it is", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: bucket })
        assert.isTrue(yield* limiter.acquire("k", { cost: 3 }))
        yield* limiter.setRate("k", 2)
        assert.isFalse(yield* limiter.acquire("k"))
        // the new rate: 2 per second
        yield* TestClock.adjust("500 millis")
        assert.isTrue(yield* limiter.acquire("k"))
      }))

    it.effect("setRate back to the policy's own rate gives up the key's override; rates are shared by value", () =>
      Effect.gen(function*() {
        // the policy refills 1 per second
        const limiter = yield* make({ policy: bucket })
        yield* limiter.setRate("a", 2)
        yield* limiter.setRate("b", 2)
        assert.strictEqual((yield* limiter.stats).overrides, 2)
        // back to its own rate: a is the policy's again, not a key reconfigured
        yield* limiter.setRate("a", 1)
        assert.strictEqual((yield* limiter.stats).overrides, 1)
        // b at 2, then 3, then its own 1 again
        yield* limiter.setRate("b", 3)
        assert.strictEqual((yield* limiter.stats).overrides, 1)
        yield* limiter.setRate("b", 1)
        assert.strictEqual((yield* limiter.stats).overrides, 0)
        // many rates in turn (more than the cache keeps), each decided at its own rate
        for (let rate = 2; rate <= 300; rate++) yield* limiter.setRate("c", rate)
        yield* limiter.setRate("c", 1)
        assert.strictEqual((yield* limiter.stats).overrides, 0)
        yield* limiter.setRate("c", 2)
        assert.isTrue(yield* limiter.acquire("c", { cost: 3 }))
        assert.isFalse(yield* limiter.acquire("c"))
        yield* TestClock.adjust("500 millis")
        assert.isTrue(yield* limiter.acquire("c"))
      }))

    it.effect("setRate to a count the policy has per another period is that rate, not the policy's", () =>
      Effect.gen(function*() {
        // ten a minute; set to ten a second: same count, another period
        const limiter = yield* make({
          policy: Policy.tokenBucket({ capacity: 10, refill: { tokens: 10, per: "1 minute" } })
        })
        yield* limiter.setRate("k", 10)
        assert.strictEqual((yield* limiter.stats).overrides, 1)
        assert.isTrue(yield* limiter.acquire("k", { cost: 10 }))
        yield* TestClock.adjust("1 second")
        assert.isTrue(yield* limiter.acquire("k", { cost: 10 }))
      }))

    it.effect("setRate on a key whose policy function throws fails with its InvalidPolicy", () =>
      Effect.gen(function*() {
        const limiter = yield* make({
          policy: () => {
            throw new Error("no tier")
          }
        })
        const error = yield* Effect.flip(limiter.setRate("k", 2))
        assert.strictEqual(
          error.message,
          "invalid policy: policy = function: the policy function threw: Error: no tier"
        )
      }))

    it.effect("a throttled signal's retryAfter is kept to a day", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: adaptive })
        yield* limiter.feedback("k", "throttled", { retryAfter: "30 days" })
        // the key is held back for a day, not thirty
        assert.isFalse((yield* limiter.peek("k")).allowed)
        yield* TestClock.adjust("1 day")
        assert.isTrue((yield* limiter.peek("k")).allowed)
      }))
  })
}

describe("the front door: the limiter's own options", () => {
  const refused = (options: unknown, message: string) =>
    it.effect(`${JSON.stringify(options) ?? String(options)}: ${message}`, () =>
      Effect.gen(function*() {
        // (options a type would refuse: the limiter needs no store for them)
        const made = RateLimiter.make(bad(options)) as Effect.Effect<unknown, InvalidPolicy, Scope.Scope>
        const error = yield* Effect.flip(made)
        assert.strictEqual(error.message, message)
      }))

  refused(undefined, "invalid policy: options = undefined: must be an object")
  refused(7, "invalid policy: options = 7: must be an object")
  refused({ policy: 5 }, "invalid policy: policy = number: must be a Policy")
  refused(
    { policy: bucket, fallback: { share: 1.5 } },
    "invalid policy: fallback.share = 1.5: must be a number in (0, 1]"
  )
  refused(
    { policy: bucket, shared: true },
    "invalid policy: shared = true: needs a store to share keys through: provide Store.CurrentStore (RedisStore.layer, MemoryStore.layer)"
  )

  it.effect("a fallback share of exactly 1 is the whole policy", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: bucket, fallback: { share: 1 } })
      assert.isTrue(yield* limiter.acquire("k", { cost: 3 }))
    }))

  it.effect("a policy function that returns no Policy fails the call with the key's error", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: (key) => key === "ok" ? bucket : bad(undefined) })
      assert.isTrue(yield* limiter.acquire("ok"))
      const error = yield* Effect.flip(limiter.acquire("other"))
      assert.strictEqual(error.message, "invalid policy: policy = undefined: the policy function returned no Policy")
    }))

  it.effect("a policy function that throws fails the call, naming what it threw", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: () => {
          throw new Error("no tier for this key")
        }
      })
      const error = yield* Effect.flip(limiter.acquire("k"))
      assert.strictEqual(
        error.message,
        "invalid policy: policy = function: the policy function threw: Error: no tier for this key"
      )
    }))

  it.effect("the startup line names the limiter and where its keys live", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const logger = Logger.make<unknown, void>(({ message }) => {
        lines.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
      })
      const run = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) =>
        effect.pipe(
          Effect.provide(Logger.layer([logger])),
          Effect.provideService(References.MinimumLogLevel, "Debug"),
          Effect.scoped
        )
      yield* run(RateLimiter.make({ policy: bucket }))
      yield* run(
        Effect.flatMap(
          MemoryStore.make,
          (store) =>
            RateLimiter.make({ policy: bucket, name: "api" }).pipe(Effect.provideService(Store.CurrentStore, store))
        )
      )
      assert.isTrue(
        lines.some((l) => l.includes("limiter \"default\" keeps its keys in this process")),
        lines.join("\n")
      )
      assert.isTrue(
        lines.some((l) => l.includes("limiter \"api\" keeps its keys in the memory store")),
        lines.join("\n")
      )
    }))
})
