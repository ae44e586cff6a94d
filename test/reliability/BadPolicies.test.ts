/**
 * Bad input for every `Policy.*` constructor besides `tokenBucket` (which
 * BadInput.test.ts covers field by field): each bad field gives an `Invalid`
 * policy naming the field and the value, never a throw; `RateLimiter.make`
 * and `reconfigure` refuse it with that `InvalidPolicy`, and nothing changes.
 *
 * The constructors are named in a table checked by the compiler: one renamed
 * or removed fails the type check, never skips its rows.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, type Exit } from "effect"
import { Policy, RateLimiter } from "../../src/index.ts"
import { failureOf } from "./probe.ts"

// Called with bad arguments on purpose, hence the loose signature.
const constructors: Record<
  "gcra" | "leakyBucket" | "fixedWindow" | "slidingWindow" | "slidingLog" | "smooth" | "all" | "concurrency",
  (...args: Array<any>) => any
> = {
  gcra: Policy.gcra,
  leakyBucket: Policy.leakyBucket,
  fixedWindow: Policy.fixedWindow,
  slidingWindow: Policy.slidingWindow,
  slidingLog: Policy.slidingLog,
  smooth: Policy.smooth,
  all: Policy.all,
  concurrency: Policy.concurrency
}
const per = "1 second"
const bad = Policy.tokenBucket({ capacity: -1, refill: { tokens: 1, per } })
const good = Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per } })

// [constructor, a valid call, rows of [label, arguments, field, value]]
const table: ReadonlyArray<
  [keyof typeof constructors, Array<unknown>, ReadonlyArray<[string, Array<unknown>, string, string]>]
> = [
  ["gcra", [{ rate: { count: 10, per }, maxBurst: 5 }], [
    ["no options", [undefined], "rate", "undefined"],
    ["rate null", [{ rate: null }], "rate", "null"],
    ["rate.count NaN", [{ rate: { count: NaN, per } }], "rate.count", "NaN"],
    ["rate.count zero", [{ rate: { count: 0, per } }], "rate.count", "0"],
    ["rate.count negative", [{ rate: { count: -1, per } }], "rate.count", "-1"],
    ["rate.count Infinity", [{ rate: { count: Infinity, per } }], "rate.count", "Infinity"],
    ["rate.count a string", [{ rate: { count: "10", per } }], "rate.count", "\"10\""],
    ["maxBurst negative", [{ rate: { count: 10, per }, maxBurst: -1 }], "maxBurst", "-1"],
    ["maxBurst NaN", [{ rate: { count: 10, per }, maxBurst: NaN }], "maxBurst", "NaN"],
    ["maxBurst Infinity", [{ rate: { count: 10, per }, maxBurst: Infinity }], "maxBurst", "Infinity"],
    ["rate.per zero", [{ rate: { count: 10, per: 0 } }], "rate.per", "0"],
    ["rate.per unparsable", [{ rate: { count: 10, per: "soon" } }], "rate.per", "\"soon\""],
    ["rate.per negative", [{ rate: { count: 10, per: -5 } }], "rate.per", "-5"],
    ["rate.per Infinity", [{ rate: { count: 10, per: Infinity } }], "rate.per", "Infinity"],
    ["rate.per missing", [{ rate: { count: 10 } }], "rate.per", "undefined"]
  ]],
  ["leakyBucket", [{ rate: { tokens: 10, per }, burst: 20, delay: 8 }], [
    ["no options", [undefined], "rate", "undefined"],
    ["rate.tokens NaN", [{ rate: { tokens: NaN, per } }], "rate.tokens", "NaN"],
    ["rate.tokens zero", [{ rate: { tokens: 0, per } }], "rate.tokens", "0"],
    ["rate.tokens Infinity", [{ rate: { tokens: Infinity, per } }], "rate.tokens", "Infinity"],
    ["burst negative", [{ rate: { tokens: 10, per }, burst: -1 }], "burst", "-1"],
    ["burst NaN", [{ rate: { tokens: 10, per }, burst: NaN }], "burst", "NaN"],
    ["burst Infinity", [{ rate: { tokens: 10, per }, burst: Infinity }], "burst", "Infinity"],
    ["delay negative", [{ rate: { tokens: 10, per }, delay: -1 }], "delay", "-1"],
    ["delay NaN", [{ rate: { tokens: 10, per }, delay: NaN }], "delay", "NaN"],
    ["nodelay a string", [{ rate: { tokens: 10, per }, nodelay: "yes" }], "nodelay", "\"yes\""],
    ["rate.per zero", [{ rate: { tokens: 10, per: 0 } }], "rate.per", "0"],
    ["rate.per unparsable", [{ rate: { tokens: 10, per: "1 fortnight" } }], "rate.per", "\"1 fortnight\""]
  ]],
  ["fixedWindow", [{ limit: 100, window: "1 minute", aligned: true }], [
    ["no options", [undefined], "limit", "undefined"],
    ["limit zero", [{ limit: 0, window: per }], "limit", "0"],
    ["limit negative", [{ limit: -1, window: per }], "limit", "-1"],
    ["limit fractional", [{ limit: 1.5, window: per }], "limit", "1.5"],
    ["limit NaN", [{ limit: NaN, window: per }], "limit", "NaN"],
    ["limit Infinity", [{ limit: Infinity, window: per }], "limit", "Infinity"],
    ["limit 2^53", [{ limit: 2 ** 53, window: per }], "limit", "9007199254740992"],
    ["limit a string", [{ limit: "5", window: per }], "limit", "\"5\""],
    ["aligned a number", [{ limit: 5, window: per, aligned: 1 }], "aligned", "1"],
    ["window missing", [{ limit: 5 }], "window", "undefined"],
    ["window null", [{ limit: 5, window: null }], "window", "null"],
    ["window zero", [{ limit: 5, window: 0 }], "window", "0"],
    ["window negative", [{ limit: 5, window: "-1 minutes" }], "window", "\"-1 minutes\""],
    ["window Infinity", [{ limit: 5, window: Infinity }], "window", "Infinity"]
  ]],
  ["slidingWindow", [{ limit: 100, window: "1 minute" }], [
    ["no options", [undefined], "limit", "undefined"],
    ["limit zero", [{ limit: 0, window: per }], "limit", "0"],
    ["limit fractional", [{ limit: 2.5, window: per }], "limit", "2.5"],
    ["limit NaN", [{ limit: NaN, window: per }], "limit", "NaN"],
    ["window unparsable", [{ limit: 5, window: "a while" }], "window", "\"a while\""],
    ["window NaN", [{ limit: 5, window: NaN }], "window", "NaN"]
  ]],
  ["slidingLog", [{ limit: 5, window: "15 minutes", minGap: "2 seconds", countBlocked: true }], [
    ["no options", [undefined], "limit", "undefined"],
    ["limit zero", [{ limit: 0, window: per }], "limit", "0"],
    ["limit NaN", [{ limit: NaN, window: per }], "limit", "NaN"],
    ["window zero", [{ limit: 5, window: 0 }], "window", "0"],
    ["minGap unparsable", [{ limit: 5, window: per, minGap: "soon" }], "minGap", "\"soon\""],
    ["minGap negative", [{ limit: 5, window: per, minGap: -1 }], "minGap", "-1"],
    ["countBlocked a string", [{ limit: 5, window: per, countBlocked: "yes" }], "countBlocked", "\"yes\""]
  ]],
  ["smooth", [{ permits: 100, per, warmup: "10 seconds" }], [
    ["no options", [undefined], "permits", "undefined"],
    ["permits zero", [{ permits: 0, per }], "permits", "0"],
    ["permits NaN", [{ permits: NaN, per }], "permits", "NaN"],
    ["permits Infinity", [{ permits: Infinity, per }], "permits", "Infinity"],
    ["initialPermits negative", [{ permits: 1, per, initialPermits: -1 }], "initialPermits", "-1"],
    ["initialPermits NaN", [{ permits: 1, per, initialPermits: NaN }], "initialPermits", "NaN"],
    ["coldFactor below one", [{ permits: 1, per, coldFactor: 0.5 }], "coldFactor", "0.5"],
    ["coldFactor NaN", [{ permits: 1, per, coldFactor: NaN }], "coldFactor", "NaN"],
    ["coldFactor Infinity", [{ permits: 1, per, coldFactor: Infinity }], "coldFactor", "Infinity"],
    ["per zero", [{ permits: 1, per: 0 }], "per", "0"],
    ["warmup unparsable", [{ permits: 1, per, warmup: "a bit" }], "warmup", "\"a bit\""],
    ["warmup negative", [{ permits: 1, per, warmup: -1 }], "warmup", "-1"],
    ["maxBurst unparsable", [{ permits: 1, per, maxBurst: "lots" }], "maxBurst", "\"lots\""]
  ]],
  ["all", [good, Policy.tokenBucket({ capacity: 50, refill: { tokens: 50, per: "1 hour" } })], [
    ["no parts", [], "all", "[]"],
    ["a number", [42], "all[0]", "42"],
    ["null", [null], "all[0]", "null"],
    ["an invalid part", [bad], "all[0].capacity", "-1"],
    ["an invalid second part", [good, bad], "all[1].capacity", "-1"]
  ]],
  ["concurrency", [{ capacity: 10, replenish: { tokens: 5, per } }], [
    ["no options", [undefined], "capacity", "undefined"],
    ["capacity zero", [{ capacity: 0 }], "capacity", "0"],
    ["capacity NaN", [{ capacity: NaN }], "capacity", "NaN"],
    ["capacity Infinity", [{ capacity: Infinity }], "capacity", "Infinity"],
    ["capacity a string", [{ capacity: "5" }], "capacity", "\"5\""],
    ["replenish.tokens zero", [{ capacity: 5, replenish: { tokens: 0, per } }], "replenish.tokens", "0"],
    ["replenish.tokens NaN", [{ capacity: 5, replenish: { tokens: NaN, per } }], "replenish.tokens", "NaN"],
    ["replenish.per missing", [{ capacity: 5, replenish: { tokens: 1 } }], "replenish.per", "undefined"],
    ["replenish.per zero", [{ capacity: 5, replenish: { tokens: 1, per: 0 } }], "replenish.per", "0"]
    // replenish: null throws (KNOWN-FAILURES.md #6)
  ]]
]

// Calls a constructor; what it throws is returned, to fail the test with.
const build = (construct: (...args: Array<any>) => any, args: Array<unknown>): any => {
  try {
    return construct(...args)
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error))
  }
}

for (const fastPath of [true, false]) {
  describe(`bad policies (fastPath: ${fastPath})`, () => {
    for (const [name, valid, rows] of table) {
      const construct = constructors[name]
      it.effect(
        `Policy.${name}: every bad field is named, and refused by make and reconfigure`,
        () =>
          Effect.gen(function*() {
            // the valid call builds a policy a limiter runs with
            const ok = construct(...valid)
            assert.notStrictEqual(ok._tag, "Invalid", `${name}: the valid call`)
            const limiter = yield* RateLimiter.make({ fastPath, policy: (key) => key === "other" ? ok : good })
            assert.isTrue(yield* limiter.acquire("other"))
            assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
            const before = [yield* limiter.peek("k"), yield* limiter.peek("other"), yield* limiter.stats]
            for (const [label, args, field, value] of rows) {
              const what = `${name} ${label}`
              const policy = build(construct, args)
              if (policy instanceof Error) assert.fail(`${what}: the constructor threw ${policy}`)
              assert.strictEqual(policy._tag, "Invalid", what)
              assert.strictEqual(policy.error.field, field, `${what}: field`)
              assert.strictEqual(policy.error.value, value, `${what}: value`)
              assert.include(policy.error.message, field, what)
              for (
                const exit of [
                  yield* Effect.exit(Effect.scoped(RateLimiter.make({ fastPath, policy }))),
                  yield* Effect.exit(limiter.reconfigure("k", policy)),
                  yield* Effect.exit(limiter.reconfigure("other", policy))
                ] as Array<Exit.Exit<unknown, unknown>>
              ) {
                const error = failureOf(exit)
                assert.strictEqual(error?._tag, "InvalidPolicy", what)
                assert.strictEqual(error.field, field, what)
              }
            }
            assert.deepStrictEqual(
              [yield* limiter.peek("k"), yield* limiter.peek("other"), yield* limiter.stats],
              before
            )
          })
      )
    }
  })
}
