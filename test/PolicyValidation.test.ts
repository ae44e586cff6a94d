/**
 * What a policy's constructor refuses, and what it says: the field, the value
 * and the rule, as a user reads them in `InvalidPolicy`. Each policy is made
 * inside its test, so a mutation run counts the test against the checks it
 * goes through (docs/reliability.md, "Policy.ts survivors").
 */
import { assert, describe, it } from "@effect/vitest"
import { Policy } from "../src/index.ts"

const per = "1 second"

// [field, value, reason] of an invalid policy, or its tag when it is valid.
const refusal = (policy: Policy.Policy) =>
  policy._tag === "Invalid" ? [policy.error.field, policy.error.value, policy.error.reason] : policy._tag

describe("a rate is { tokens, per } or { every }, never both", () => {
  it("every with tokens, or with per, is refused naming every", () => {
    const reason = "must not be given with tokens and per"
    assert.deepStrictEqual(
      refusal(Policy.tokenBucket({ capacity: 5, refill: { every: per, tokens: 2 } as any })),
      ["refill.every", "\"1 second\"", reason]
    )
    assert.deepStrictEqual(
      refusal(Policy.tokenBucket({ capacity: 5, refill: { every: per, per: "2 seconds" } as any })),
      ["refill.every", "\"1 second\"", reason]
    )
    assert.deepStrictEqual(
      refusal(Policy.gcra({ rate: { every: per, count: 3 } as any })),
      ["rate.every", "\"1 second\"", "must not be given with count and per"]
    )
  })

  it("every alone is one unit per interval", () => {
    const policy = Policy.tokenBucket({ capacity: 5, refill: { every: "200 millis" } })
    assert.strictEqual(policy._tag, "TokenBucket")
    if (policy._tag !== "TokenBucket") return
    assert.strictEqual(policy.refill.tokens, 1)
    assert.strictEqual(policy.config.periodMillis, 200)
  })

  it("tokens without per: per is required", () => {
    assert.deepStrictEqual(
      refusal(Policy.leakyBucket({ rate: { tokens: 3 } as any })),
      ["rate.per", "undefined", "is required"]
    )
  })
})

describe("a token bucket's rules between its options", () => {
  it("initialTokens above capacity is refused, the capacity said", () => {
    assert.deepStrictEqual(
      refusal(Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per }, initialTokens: 6 })),
      ["initialTokens", "6", "must not exceed capacity (5)"]
    )
  })

  it("a capacity whose refill time overflows is refused, naming capacity", () => {
    assert.deepStrictEqual(
      refusal(Policy.tokenBucket({ capacity: 1e308, refill: { tokens: 1, per: "1 hour" } })),
      ["capacity", "1e+308", "capacity * refill.per overflows"]
    )
  })

  it("options that need another are refused when made at run time too", () => {
    assert.deepStrictEqual(
      refusal(Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per }, firstRefill: 100 })),
      ["firstRefill", "100", "needs mode \"interval\" (refills at whole periods)"]
    )
    assert.deepStrictEqual(
      refusal(
        Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per }, mode: "interval", adaptiveInitialTokens: true })
      ),
      ["adaptiveInitialTokens", "boolean", "needs firstRefill"]
    )
    assert.deepStrictEqual(
      refusal(Policy.tokenBucket({
        capacity: 5,
        refill: { tokens: 1, per },
        mode: "interval",
        firstRefill: 100,
        adaptiveInitialTokens: true,
        initialTokens: 2
      })),
      ["initialTokens", "2", "must be left out with adaptiveInitialTokens (Bucket4j refuses both)"]
    )
    assert.deepStrictEqual(
      refusal(Policy.fixedWindow({ limit: 5, window: per, execEvenlyMinDelay: "10 millis" })),
      ["execEvenlyMinDelay", "\"10 millis\"", "needs execEvenly"]
    )
  })
})

describe("a smooth rate's initialPermits", () => {
  it("above what the rate stores is refused, the most said; up to it is taken", () => {
    // 5 per second, 1 second of idle time stored: at most 5 permits
    assert.deepStrictEqual(
      refusal(Policy.smooth({ permits: 5, per, initialPermits: 6 })),
      ["initialPermits", "6", "must not exceed the most permits stored (5)"]
    )
    assert.strictEqual(refusal(Policy.smooth({ permits: 5, per, initialPermits: 5 })), "Smooth")
  })
})

describe("an adaptive rate's bounds", () => {
  const adaptive = (o: Partial<Policy.AdaptiveOptions>) =>
    Policy.adaptive({ capacity: 10, rate: { tokens: 4, per }, floor: 2, ceiling: 8, ...o })

  it("decrease is strictly between 0 and 1", () => {
    const reason = "must be a number between 0 and 1 (excluded)"
    assert.deepStrictEqual(refusal(adaptive({ decrease: 0 })), ["decrease", "0", reason])
    assert.deepStrictEqual(refusal(adaptive({ decrease: 1 })), ["decrease", "1", reason])
    assert.deepStrictEqual(refusal(adaptive({ decrease: 1.5 })), ["decrease", "1.5", reason])
    assert.strictEqual(refusal(adaptive({ decrease: 0.01 })), "Adaptive")
  })

  it("a floor above the ceiling is refused naming the ceiling; a floor equal to it is a fixed rate", () => {
    assert.deepStrictEqual(
      refusal(adaptive({ rate: { tokens: 6, per }, floor: 6, ceiling: 5 })),
      ["ceiling", "5", "must be at least the floor (6)"]
    )
    assert.strictEqual(refusal(adaptive({ rate: { tokens: 5, per }, floor: 5, ceiling: 5 })), "Adaptive")
  })

  it("a starting rate outside floor and ceiling is refused; at either bound it is taken", () => {
    const reason = "must be between the floor (2) and the ceiling (8)"
    assert.deepStrictEqual(refusal(adaptive({ rate: { tokens: 1, per } })), ["rate.tokens", "1", reason])
    assert.deepStrictEqual(refusal(adaptive({ rate: { tokens: 9, per } })), ["rate.tokens", "9", reason])
    assert.strictEqual(refusal(adaptive({ rate: { tokens: 2, per } })), "Adaptive")
    assert.strictEqual(refusal(adaptive({ rate: { tokens: 8, per } })), "Adaptive")
  })

  it("a capacity whose refill time overflows is refused, naming capacity", () => {
    assert.deepStrictEqual(
      refusal(adaptive({ capacity: 1e308, rate: { tokens: 4, per: "1 hour" } })),
      ["capacity", "1e+308", "capacity * rate.per overflows"]
    )
  })
})

describe("the value of a bad field is shown as the user gave it", () => {
  it("an array is shown as [] when empty, as its type otherwise; null as null", () => {
    const limit = (value: unknown) => refusal(Policy.fixedWindow({ limit: value as number, window: per }))
    assert.strictEqual((limit([]) as Array<string>)[1], "[]")
    assert.strictEqual((limit([1, 2]) as Array<string>)[1], "object")
    assert.strictEqual((limit(null) as Array<string>)[1], "null")
    assert.strictEqual((limit({}) as Array<string>)[1], "object")
  })
})

describe("the combinators take policies only", () => {
  // Values that look like a policy but are not one: each lacks a field every
  // policy has (an invalid one has its error; a valid one its algorithm and
  // configuration, and an error field left undefined).
  const good = Policy.fixedWindow({ limit: 5, window: per })
  const lookalikes = (): ReadonlyArray<readonly [string, unknown]> => {
    if (good._tag === "Invalid") throw new Error("the good policy is invalid")
    const { error: _, ...noError } = good
    const { algorithm: __, ...noAlgorithm } = good
    const { config: ___, ...noConfig } = good
    return [
      ["without its error field", noError],
      ["without its algorithm", noAlgorithm],
      ["without its configuration", noConfig],
      ["a tag alone", { _tag: "FixedWindow", error: undefined }]
    ]
  }

  it("withOptions, burst and all refuse a look-alike, naming where it was", () => {
    for (const [label, value] of lookalikes()) {
      assert.deepStrictEqual(refusal(Policy.withOptions(value as Policy.Policy, {})), [
        "policy",
        "object",
        "must be a Policy"
      ], label)
      assert.deepStrictEqual(refusal(Policy.burst(good, value as Policy.Policy)), [
        "burst",
        "object",
        "must be a Policy"
      ], label)
      assert.deepStrictEqual(refusal(Policy.all(good, value as Policy.Policy)), [
        "all[1]",
        "object",
        "must be a Policy"
      ], label)
    }
  })

  it("an invalid policy is a policy: the combinators pass its error on", () => {
    const bad = Policy.fixedWindow({ limit: 0, window: per })
    assert.strictEqual(Policy.withOptions(bad, { dryRun: true }), bad)
    assert.deepStrictEqual(refusal(Policy.burst(good, bad)), ["burst.limit", "0", "must be a positive integer"])
  })
})

describe("withOptions, withRate and share keep what they are given", () => {
  const bucket = () =>
    Policy.tokenBucket({ capacity: 10, refill: { tokens: 2, per }, dryRun: true, blockDuration: 5000 })

  it("withOptions refuses bad options, naming the field", () => {
    const good = bucket()
    assert.deepStrictEqual(refusal(Policy.withOptions(good, { blockDuration: "never" as any })), [
      "blockDuration",
      "\"never\"",
      "must be a positive finite duration such as \"1 second\""
    ])
    assert.deepStrictEqual(refusal(Policy.withOptions(good, { dryRun: "yes" as any })).slice(0, 2), [
      "dryRun",
      "\"yes\""
    ])
  })

  it("withRate keeps dryRun and blockDuration; a policy without a block gets none", () => {
    const good = bucket()
    if (good._tag === "Invalid") return assert.fail("invalid")
    const faster = Policy.withRate(good, 4)
    assert.deepStrictEqual(
      faster._tag === "TokenBucket" && [faster.refill.tokens, faster.dryRun, faster.blockMillis],
      [4, true, 5000]
    )
    const plain = Policy.smooth({ permits: 5, per })
    if (plain._tag === "Invalid") return assert.fail("invalid")
    const slower = Policy.withRate(plain, 2)
    assert.deepStrictEqual(slower._tag === "Smooth" && [slower.dryRun, slower.blockMillis], [false, 0])
  })

  it("withRate says why it refuses a rate", () => {
    const smooth = Policy.smooth({ permits: 5, per })
    const window = Policy.fixedWindow({ limit: 5, window: per })
    if (smooth._tag === "Invalid" || window._tag === "Invalid") return assert.fail("invalid")
    assert.deepStrictEqual(refusal(Policy.withRate(smooth, 0)), ["rate", "0", "must be a positive finite number"])
    const [field, value, reason] = refusal(Policy.withRate(window, 3)) as Array<string>
    assert.deepStrictEqual([field, value], ["rate", "3"])
    assert.include(reason, "fixed-window has no one rate to set")
  })

  it("no limit at all is Unlimited, and any share of it is itself", () => {
    const none = Policy.unlimited()
    assert.strictEqual(none._tag, "Unlimited")
    if (none._tag === "Invalid") return
    assert.deepStrictEqual(Policy.share(none, 0.5), none)
  })

  it("share gives a smooth policy a fraction of its rate and of its store; its own initialPermits too", () => {
    const warm = Policy.smooth({ permits: 9, per, warmup: "3 seconds", initialPermits: 6, dryRun: true })
    const bursty = Policy.smooth({ permits: 9, per, maxBurst: "2 seconds" })
    if (warm._tag !== "Smooth" || bursty._tag !== "Smooth") return assert.fail("invalid")
    const figures = (p: Policy.Policy) =>
      p._tag === "Smooth"
        ? [p.config.permits, p.config.warmupMillis, p.config.maxPermits, p.config.initialPermits, p.dryRun].map((n) =>
          typeof n === "number" ? Math.round(n * 1e9) / 1e9 : n
        )
        : p._tag
    // warming up: 3 a second, the same warm-up; a store of 27 / 3 = 9, 6 / 3 = 2 to start with
    assert.deepStrictEqual(figures(Policy.share(warm, 1 / 3)), [3, 3000, 9, 2, true])
    // bursty: 2 seconds of idle time stored at 3 a second; starts with none
    assert.deepStrictEqual(figures(Policy.share(bursty, 1 / 3)), [3, 0, 6, 0, false])
    assert.deepStrictEqual(figures(Policy.share(bursty, 1)), figures(bursty))
  })

  it("share always gives a valid policy: where the fraction rounds a number to 0, the policy stays whole", () => {
    // 0.1 times the smallest double is 0: no token bucket can have it
    const tiny = Policy.tokenBucket({ capacity: 0.1, refill: { tokens: 0.1, per } })
    if (tiny._tag === "Invalid") return assert.fail("invalid")
    assert.strictEqual(Policy.share(tiny, Number.MIN_VALUE), tiny)
  })
})
