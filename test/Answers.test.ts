import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, Duration, Effect, Exit, Fiber, Option, type Scope } from "effect"
import { TestClock } from "effect/testing"
import { MemoryStore, Policy, RateLimiter, Store } from "../src/index.ts"
import * as Engine from "../src/internal/actor/Engine.ts"
import { onStore } from "./stores.ts"

// How each kind of request's answer is made from its operation's reply, in
// process and on a store alike: what is counted allowed or denied, a
// shaper's delay (slept by `acquire`, told by `consume`, absent when there is
// none), and a partial take behind waiters.

const bucket = Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } })
// one per second, two more may queue, every one after the first delayed
const shaper = Policy.leakyBucket({ rate: { tokens: 1, per: "1 second" }, burst: 2 })

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

type Make = (options: RateLimiter.Options) => Effect.Effect<RateLimiter["Service"], unknown, Scope.Scope>

const backends: ReadonlyArray<readonly [string, Make]> = [
  ["in process", (options) => RateLimiter.make(options)],
  ["in process, actors only", (options) => RateLimiter.make({ fastPath: false, ...options })],
  [
    "on a store",
    onStore
  ]
]

for (const [where, make] of backends) {
  describe(`answers, ${where}`, () => {
    it.effect("a partial take is counted allowed when it takes some, denied when it takes none", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: bucket })
        const some = yield* limiter.consumeUpTo("k", { cost: 3 })
        assert.strictEqual(some.taken, 2)
        assert.isTrue(some.allowed)
        assert.deepStrictEqual([(yield* limiter.stats).allowed, (yield* limiter.stats).denied], [1, 0])
        const none = yield* limiter.consumeUpTo("k", { cost: 3 })
        assert.strictEqual(none.taken, 0)
        assert.isFalse(none.allowed)
        assert.deepStrictEqual([(yield* limiter.stats).allowed, (yield* limiter.stats).denied], [1, 1])
      }))

    it.effect("a partial take behind a waiter takes nothing, is told its turn behind the line, and counted denied", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: bucket })
        assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
        // a waiter for 1 unit stands in line (its turn: 1 s)
        const waiter = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
        yield* settle
        const before = yield* limiter.stats
        const d = yield* limiter.consumeUpTo("k", { cost: 2 })
        assert.strictEqual(d.taken, 0)
        assert.isFalse(d.allowed)
        assert.strictEqual(d.remaining, 0)
        // one unit behind the waiter's: 2 s
        assert.strictEqual(Duration.toMillis(d.retryAfter), 2000)
        const after = yield* limiter.stats
        assert.deepStrictEqual([after.allowed - before.allowed, after.denied - before.denied], [0, 1])
        // the waiter's turn is untouched: 1 s
        yield* TestClock.adjust("1 second")
        yield* Fiber.join(waiter)
        assert.isFalse(yield* limiter.acquire("k"))
      }))

    it.effect("acquire under a shaper proceeds after its delay, and answers true", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: shaper })
        assert.isTrue(yield* limiter.acquire("k"))
        // the second is admitted now and spaced out: it proceeds 1 s later
        const second = yield* Effect.forkChild(limiter.acquire("k"), { startImmediately: true })
        yield* settle
        yield* TestClock.adjust("999 millis")
        yield* settle
        assert.isUndefined(second.pollUnsafe())
        yield* TestClock.adjust("1 millis")
        assert.isTrue(yield* Fiber.join(second))
        assert.strictEqual((yield* limiter.stats).allowed, 2)
      }))

    it.effect("a waiter admitted from the line under a shaper proceeds after its delay too", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: shaper })
        // the first now, two more spaced out to 1 s and 2 s: the shaper is full
        for (let i = 0; i < 3; i++) assert.isTrue((yield* limiter.consume("k")).allowed)
        const waiter = yield* Effect.forkChild(Effect.andThen(limiter.wait("k"), Clock.currentTimeMillis), {
          startImmediately: true
        })
        yield* settle
        // admitted at 1 s, when the first has drained, to go at 3 s (after the one at 2 s)
        yield* TestClock.adjust("1 second")
        yield* settle
        assert.isUndefined(waiter.pollUnsafe())
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual(yield* Fiber.join(waiter), 3000)
      }))

    it.effect("a decision carries a delay only when a shaper spaces the request out", () =>
      Effect.gen(function*() {
        const limiter = yield* make({ policy: (key) => key.startsWith("shaped") ? shaper : bucket })
        const plain = yield* limiter.consume("plain")
        assert.isTrue(plain.allowed)
        assert.isFalse("delay" in plain)
        const first = yield* limiter.consume("shaped")
        assert.isTrue(first.allowed)
        assert.isFalse("delay" in first)
        const second = yield* limiter.consume("shaped")
        assert.isTrue(second.allowed)
        assert.strictEqual(Duration.toMillis(second.delay!), 1000)
        // a refusal carries none
        assert.isTrue((yield* limiter.consume("plain")).allowed)
        const refused = yield* limiter.consume("plain")
        assert.isFalse(refused.allowed)
        assert.isFalse("delay" in refused)
      }))
  })
}

// A MemoryStore that can be made to fail every call (with or without calls
// over several keys).
const failingWith = (several: boolean) =>
  Effect.gen(function*() {
    const inner = Engine.engineOf(yield* MemoryStore.make)
    const control = {
      down: false,
      dies: false,
      hangs: false,
      // calls wait for it while it is set
      gate: undefined as Deferred.Deferred<void> | undefined,
      // the store answers with no replies (a store's bug)
      empty: false
    }
    const fail = <A>(run: Effect.Effect<A, Store.StoreUnavailable>) => {
      const now = Effect.suspend(() =>
        control.hangs
          ? Effect.never
          : control.dies
          ? Effect.die(new Error("boom"))
          : control.down
          ? Effect.fail(new Store.StoreUnavailable({ store: "failing", reason: "down" }))
          : run
      )
      // (gated: what the store does is decided once the gate opens)
      return Effect.suspend(() => control.gate === undefined ? now : Effect.andThen(Deferred.await(control.gate), now))
    }
    const store = Engine.pluggable({
      name: "failing",
      apply: (key, policy, ops) =>
        fail(Effect.map(inner.apply(key, policy, ops), (replies) => control.empty ? [] : replies)),
      applyAll: several ? (entries) => fail(inner.applyAll!(entries)) : undefined,
      // (as on Redis Cluster: keys of different slots cannot be taken together)
      checkKeys: several
        ? (keys) => keys.some((k) => k.startsWith("x")) ? `cannot take ${keys.join(", ")} together` : undefined
        : undefined
    })
    return { store, control } as const
  })
const failing = failingWith(false)

describe("answers, on a store that fails, with the fallback allow", () => {
  it.effect("calls and waiters that find waiters in line are admitted at once (fail open), and so is the line", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failing
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 hour" } }),
        fallback: { mode: "allow", retryAfter: "1 second" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      // a waiter in line on each key (its turn an hour away), while the store answers
      const waiters = yield* Effect.forEach(["a", "b", "c"], (key) =>
        Effect.gen(function*() {
          assert.isTrue(yield* limiter.acquire(key, { cost: 2 }))
          return yield* Effect.forkChild(limiter.wait(key), { startImmediately: true })
        }))
      yield* settle
      const before = yield* limiter.stats
      control.down = true
      const d = yield* limiter.consume("a")
      assert.isTrue(d.allowed)
      assert.isTrue(d.degraded)
      assert.strictEqual(d.remaining, 2)
      const upTo = yield* limiter.consumeUpTo("b", { cost: 2 })
      assert.strictEqual(upTo.taken, 2)
      assert.isTrue(upTo.allowed)
      assert.isTrue(upTo.degraded)
      const newcomer = yield* Effect.forkChild(limiter.wait("c"), { startImmediately: true })
      yield* settle
      // the newcomer and the waiters in line go at once too, the clock never moved
      for (const waiter of [...waiters, newcomer]) assert.deepStrictEqual(waiter.pollUnsafe(), Exit.void)
      const after = yield* limiter.stats
      // the two calls, the new waiter and the three in line
      assert.deepStrictEqual([after.allowed - before.allowed, after.denied - before.denied], [6, 0])
    }))
})

describe("answers, on a store: a change to a key wakes the head of its line", () => {
  const changes: ReadonlyArray<
    readonly [string, (limiter: RateLimiter["Service"]) => Effect.Effect<unknown, unknown>]
  > = [
    ["reset", (l) => l.reset("k")],
    ["fill", (l) => l.fill("k")],
    ["release", (l) => l.release("k", 1)],
    ["add", (l) => l.add("k", 1)],
    ["add over the limit", (l) => l.add("k", 1, { overLimit: true })],
    ["set", (l) => l.set("k", 0)],
    ["delete", (l) => l.delete("k")],
    [
      "reconfigure",
      (l) =>
        l.reconfigure("k", Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "1 hour" } }), {
          carry: "reset"
        })
    ]
  ]
  for (const [name, change] of changes) {
    it.effect(`${name}: the waiter it makes room for goes at once, not at its estimated turn`, () =>
      Effect.gen(function*() {
        const store = yield* MemoryStore.make
        const limiter = yield* RateLimiter.make({
          policy: Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 hour" } })
        }).pipe(Effect.provideService(Store.CurrentStore, store))
        assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
        // its turn: an hour away
        const waiter = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
        yield* settle
        assert.isUndefined(waiter.pollUnsafe())
        yield* change(limiter)
        yield* settle
        assert.deepStrictEqual(waiter.pollUnsafe(), Exit.void)
      }))
  }
})

describe("answers, on a store that fails, with the fallback error", () => {
  it.effect("each call fails with StoreUnavailable saying why: the store died, or is skipped while it is down", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failing
      const limiter = yield* RateLimiter.make({ policy: bucket, fallback: { mode: "error", retryAfter: "1 second" } })
        .pipe(Effect.provideService(Store.CurrentStore, store))
      control.down = true
      const first = yield* Effect.flip(limiter.acquire("k"))
      assert.strictEqual(first._tag, "StoreUnavailable")
      // the store's own error
      assert.strictEqual(first._tag === "StoreUnavailable" && first.reason, "down")
      // skipped for a second: not asked again
      const second = yield* Effect.flip(limiter.consume("k"))
      assert.strictEqual(second._tag === "StoreUnavailable" && second.reason, "down; retrying shortly")
      // a store that dies, or does not answer within the timeout
      yield* TestClock.adjust("1 second")
      control.down = false
      control.dies = true
      const died = yield* Effect.flip(limiter.acquire("k"))
      assert.isTrue(died._tag === "StoreUnavailable" && died.reason.startsWith("it died: "), String(died))
      yield* TestClock.adjust("1 second")
      control.dies = false
      control.hangs = true
      const hung = yield* Effect.forkChild(Effect.flip(limiter.acquire("k")), { startImmediately: true })
      yield* settle
      yield* TestClock.adjust("1 second")
      const timedOut = yield* Fiber.join(hung)
      assert.isTrue(timedOut._tag === "StoreUnavailable" && timedOut.reason.startsWith("timed out after "))
    }))
})

describe("answers, on a store: a batch in order", () => {
  it.effect("a call and a waiter in one batch are decided in the order they came", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const limiter = yield* RateLimiter.make({
        fastPath: false,
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } })
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      const first = yield* Effect.forkChild(limiter.consume("k"), { startImmediately: true })
      const second = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
      yield* settle
      assert.isTrue((yield* Fiber.join(first)).allowed)
      assert.isUndefined(second.pollUnsafe())
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(second)
    }))
})

describe("answers, on a store that fails, with the fallback deny", () => {
  it.effect("a waiter is refused at once, told when the store is tried again, and counted denied", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failing
      const limiter = yield* RateLimiter.make({ policy: bucket, fallback: { mode: "deny", retryAfter: "2 seconds" } })
        .pipe(Effect.provideService(Store.CurrentStore, store))
      control.down = true
      const error = yield* Effect.flip(limiter.wait("k"))
      assert.strictEqual(error._tag, "RateLimitExceeded")
      assert.strictEqual(error._tag === "RateLimitExceeded" && Duration.toMillis(error.retryAfter), 2000)
      assert.strictEqual((yield* limiter.stats).denied, 1)
    }))
})

describe("answers, on a store: calls over several keys", () => {
  it.effect("a store that cannot take from several keys at once says so", () =>
    Effect.gen(function*() {
      const { store } = yield* failing
      const limiter = yield* RateLimiter.make({ policy: bucket }).pipe(Effect.provideService(Store.CurrentStore, store))
      const error = yield* Effect.flip(limiter.acquire(["a", "b"]))
      assert.strictEqual(error._tag, "InvalidRequest")
      assert.deepStrictEqual(
        error._tag === "InvalidRequest" ? [error.field, error.value, error.reason] : [],
        ["keys", "2", "the failing store cannot take from several keys at once"]
      )
    }))

  it.effect("while the store is down, the local fallback takes all or nothing from each key's share", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failingWith(true)
      const limiter = yield* RateLimiter.make({
        policy: (key: string) =>
          Policy.tokenBucket({ capacity: key === "a" ? 4 : 2, refill: { tokens: 1, per: "1 hour" } }),
        fallback: { mode: "local", share: 1 }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      control.down = true
      const first = yield* limiter.consume(["a", "b"])
      assert.isTrue(first.allowed && first.degraded === true)
      assert.isTrue(yield* limiter.acquire(["a", "b"]))
      // "b"'s share is spent: nothing is taken from "a" either
      assert.isFalse(yield* limiter.acquire(["a", "b"]))
      assert.isTrue(yield* limiter.acquire("a", { cost: 2 }))
      assert.isFalse(yield* limiter.acquire("a"))
    }))

  it.effect("with the fallback error, a call over several keys fails with StoreUnavailable", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failingWith(true)
      const limiter = yield* RateLimiter.make({ policy: bucket, fallback: { mode: "error", retryAfter: "1 second" } })
        .pipe(Effect.provideService(Store.CurrentStore, store))
      control.down = true
      const first = yield* Effect.flip(limiter.acquire(["a", "b"]))
      assert.strictEqual(first._tag === "StoreUnavailable" && first.reason, "down")
      const second = yield* Effect.flip(limiter.acquire(["a", "b"]))
      assert.strictEqual(second._tag === "StoreUnavailable" && second.reason, "down; retrying shortly")
    }))
})

describe("answers, on a store: dry runs and waiters", () => {
  it.effect("a waiter under a dry run goes at once, counted, and takes nothing", () =>
    Effect.gen(function*() {
      const limiter = yield* onStore({
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 hour" }, dryRun: true })
      })
      assert.isTrue(yield* limiter.acquire("k"))
      const waiter = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
      yield* settle
      assert.deepStrictEqual(waiter.pollUnsafe(), Exit.void)
      assert.strictEqual((yield* limiter.stats).dryRun, 1)
      assert.strictEqual((yield* limiter.peek("k")).remaining, 0)
    }))
})

describe("answers, in process: dry runs and waiters", () => {
  for (const fastPath of [true, false]) {
    it.effect(`a waiter under a dry run goes at once, counted, and takes nothing (fastPath: ${fastPath})`, () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({
          fastPath,
          policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 hour" }, dryRun: true })
        })
        assert.isTrue(yield* limiter.acquire("k"))
        const waiter = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
        yield* settle
        assert.deepStrictEqual(waiter.pollUnsafe(), Exit.void)
        assert.strictEqual((yield* limiter.stats).dryRun, 1)
        assert.strictEqual((yield* limiter.peek("k")).remaining, 0)
      }))
  }
})

describe("answers, on a store: a key others wait on", () => {
  it.effect("a key with a waiter in line is live for get, even in the instant its state settles", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } })
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      yield* limiter.block("k", "1 second")
      // a get that comes exactly when the block ends (its sleep starts before the line's)
      const get = yield* Effect.forkChild(Effect.andThen(Effect.sleep("1 second"), limiter.get("k")), {
        startImmediately: true
      })
      const waiter = yield* Effect.forkChild(limiter.wait("k", { cost: 0 }), { startImmediately: true })
      yield* settle
      assert.isUndefined(waiter.pollUnsafe())
      yield* TestClock.adjust("1 second")
      assert.isTrue(Option.isSome(yield* Fiber.join(get)))
      yield* Fiber.join(waiter)
    }))
})

describe("answers, on a store: the actor's path when the store fails", () => {
  it.effect("with the fallback error, requests served by the actor fail with StoreUnavailable, and so do waiters", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failing
      const limiter = yield* RateLimiter.make({
        fastPath: false,
        policy: bucket,
        fallback: { mode: "error", retryAfter: "1 second" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      control.down = true
      const first = yield* Effect.flip(limiter.consume("k"))
      assert.strictEqual(first._tag === "StoreUnavailable" && first.reason, "down")
      const second = yield* Effect.flip(limiter.peek("k"))
      assert.strictEqual(second._tag === "StoreUnavailable" && second.reason, "down; retrying shortly")
    }))

  it.effect("with the fallback error, a store that fails while the head is asked fails the head, then the next", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failing
      const limiter = yield* RateLimiter.make({
        policy: Policy.concurrency({ capacity: 1 }),
        fallback: { mode: "error", retryAfter: "1 second" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      assert.isTrue(yield* limiter.acquire("k"))
      const first = yield* Effect.forkChild(Effect.flip(limiter.wait("k")), { startImmediately: true })
      const second = yield* Effect.forkChild(Effect.flip(limiter.wait("k")), { startImmediately: true })
      yield* settle
      control.down = true
      // the head asks again at its next look (a release elsewhere wakes nobody here)
      yield* TestClock.adjust("100 millis")
      const errors = [yield* Fiber.join(first), yield* Fiber.join(second)]
      assert.deepStrictEqual(errors.map((e) => e._tag === "StoreUnavailable" && e.reason), [
        "down",
        "down; retrying shortly"
      ])
      assert.strictEqual((yield* limiter.stats).waiting, 0)
    }))
})

describe("answers, on a store: the head of a line whose caller leaves while it is asked", () => {
  const holder = Effect.gen(function*() {
    const { control, store } = yield* failing
    const make = RateLimiter.make({ policy: Policy.concurrency({ capacity: 1 }), fallback: { mode: "error" } }).pipe(
      Effect.provideService(Store.CurrentStore, store)
    )
    // this process, and another one sharing the store
    const here = yield* make
    const there = yield* make
    assert.isTrue(yield* here.acquire("k"))
    const waiter = yield* Effect.forkChild(here.wait("k"), { startImmediately: true })
    yield* settle
    return { control, here, there, waiter } as const
  })

  it.effect("admitted by the store: the permit it took is given back", () =>
    Effect.gen(function*() {
      const { control, here, there, waiter } = yield* holder
      // released in another process: the head learns it at its next look
      yield* there.release("k")
      control.gate = yield* Deferred.make<void>()
      yield* TestClock.adjust("100 millis")
      yield* Fiber.interrupt(waiter)
      const allowed = (yield* here.stats).allowed
      yield* Deferred.succeed(control.gate, undefined)
      control.gate = undefined
      yield* settle
      assert.strictEqual((yield* here.peek("k")).remaining, 1)
      assert.strictEqual((yield* here.stats).allowed, allowed)
      assert.isTrue(yield* there.acquire("k"))
    }))

  it.effect("the store fails while it is asked (fallback error): nothing is given back, and the next is answered", () =>
    Effect.gen(function*() {
      const { control, here, waiter } = yield* holder
      const next = yield* Effect.forkChild(Effect.flip(here.wait("k")), { startImmediately: true })
      yield* settle
      control.gate = yield* Deferred.make<void>()
      yield* TestClock.adjust("100 millis")
      yield* Fiber.interrupt(waiter)
      control.down = true
      yield* Deferred.succeed(control.gate, undefined)
      control.gate = undefined
      const error = yield* Fiber.join(next)
      assert.deepStrictEqual(error._tag === "StoreUnavailable" ? error.reason : error._tag, "down; retrying shortly")
    }))

  it.effect("one behind the head, gone while the head is asked, is not asked for once the head is admitted", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failing
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } }),
        fallback: { mode: "error", timeout: "10 seconds" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
      const head = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
      const behind = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
      yield* settle
      // the head is asked at its turn (1 s), and the store answers at 2 s,
      // when there is room for both; the one behind has left meanwhile
      control.gate = yield* Deferred.make<void>()
      yield* TestClock.adjust("1 second")
      yield* TestClock.adjust("1 second")
      yield* Fiber.interrupt(behind)
      yield* Deferred.succeed(control.gate, undefined)
      control.gate = undefined
      yield* Fiber.join(head)
      yield* settle
      assert.strictEqual((yield* limiter.peek("k")).remaining, 1)
    }))

  it.effect("refused by the store: nothing is given back", () =>
    Effect.gen(function*() {
      const { control, here, there, waiter } = yield* holder
      control.gate = yield* Deferred.make<void>()
      yield* TestClock.adjust("100 millis")
      yield* Fiber.interrupt(waiter)
      yield* Deferred.succeed(control.gate, undefined)
      control.gate = undefined
      yield* settle
      assert.strictEqual((yield* here.peek("k")).remaining, 0)
      assert.isFalse(yield* there.acquire("k"))
    }))
})

describe("answers, on a store: a defect in serving a batch", () => {
  it.effect("fails the batch and the line with BucketFailed naming the key, and the key goes on", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failing
      const limiter = yield* RateLimiter.make({
        fastPath: false,
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 hour" } })
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      assert.isTrue(yield* limiter.acquire("k"))
      const waiter = yield* Effect.forkChild(Effect.flip(limiter.wait("k")), { startImmediately: true })
      yield* settle
      // a store whose answer cannot be read: a bug, not a failure of the store
      control.empty = true
      const call = yield* Effect.flip(limiter.consume("k"))
      const inLine = yield* Fiber.join(waiter)
      for (const error of [call, inLine]) {
        assert.deepStrictEqual(error._tag === "BucketFailed" ? error.key : error._tag, "k")
      }
      control.empty = false
      yield* TestClock.adjust("1 hour")
      assert.isTrue((yield* limiter.consume("k")).allowed)
    }))
})

describe("answers, on a store: more on calls over several keys", () => {
  it.effect("keys the store cannot take together are refused, saying why, before any is taken", () =>
    Effect.gen(function*() {
      const { store } = yield* failingWith(true)
      const limiter = yield* RateLimiter.make({ policy: bucket }).pipe(Effect.provideService(Store.CurrentStore, store))
      const error = yield* Effect.flip(limiter.acquire(["a", "x"]))
      assert.deepStrictEqual(
        error._tag === "InvalidRequest" ? [error.field, error.value, error.reason] : [],
        ["keys", "2", "cannot take a, x together"]
      )
      assert.strictEqual((yield* limiter.peek("a")).remaining, 2)
      assert.isTrue(yield* limiter.acquire(["a", "b"]))
    }))

  it.effect("with the fallback error, a call over several keys the store does not answer in time says so", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failingWith(true)
      const limiter = yield* RateLimiter.make({
        policy: bucket,
        fallback: { mode: "error", timeout: "100 millis", retryAfter: "1 second" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      control.hangs = true
      const hung = yield* Effect.forkChild(Effect.flip(limiter.acquire(["a", "b"])), { startImmediately: true })
      yield* settle
      yield* TestClock.adjust("100 millis")
      const error = yield* Fiber.join(hung)
      assert.deepStrictEqual(error._tag === "StoreUnavailable" ? [error.store, error.reason] : [], [
        "failing",
        "timed out after 100 ms"
      ])
    }))

  it.effect("the local fallback's shares are dropped once the store answers a call over several keys", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failingWith(true)
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 4, refill: { tokens: 1, per: "1 hour" } }),
        fallback: { mode: "local", share: 0.5, retryAfter: "1 second" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      control.down = true
      assert.deepStrictEqual(
        [
          yield* limiter.acquire(["a", "b"]),
          yield* limiter.acquire(["a", "b"]),
          yield* limiter.acquire(["a", "b"])
        ],
        [true, true, false]
      )
      control.down = false
      yield* TestClock.adjust("1 second")
      const back = yield* limiter.consume(["a", "b"])
      assert.isTrue(back.allowed && back.degraded === undefined)
      // the next outage starts from whole shares
      control.down = true
      const again = yield* limiter.consume(["a", "b"])
      assert.isTrue(again.allowed && again.degraded === true)
    }))
})

describe("answers, on a store: a key's policy and activity on the actor's path and the caller's", () => {
  it.effect("a key reconfigured, then deleted, goes back to its own policy", () =>
    Effect.gen(function*() {
      const limiter = yield* onStore({ policy: bucket })
      yield* limiter.reconfigure("k", Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }))
      yield* settle
      assert.strictEqual((yield* limiter.consume("k")).limit, 5)
      yield* settle
      yield* limiter.delete("k")
      yield* settle
      assert.strictEqual((yield* limiter.consume("k")).limit, 2)
    }))

  it.effect("a key served by its actor counts as active from each batch (the sweep spares it)", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const limiter = yield* RateLimiter.make({ fastPath: false, policy: bucket, idleTimeout: "1 second" }).pipe(
        Effect.provideService(Store.CurrentStore, store)
      )
      assert.isTrue(yield* limiter.acquire("k"))
      yield* TestClock.adjust("900 millis")
      assert.isTrue(yield* limiter.acquire("k"))
      yield* TestClock.adjust("600 millis")
      assert.deepStrictEqual([(yield* limiter.stats).buckets, (yield* limiter.stats).reaped], [1, 0])
      yield* TestClock.adjust("500 millis")
      assert.deepStrictEqual([(yield* limiter.stats).buckets, (yield* limiter.stats).reaped], [0, 1])
    }))
})

describe("answers, on a store: the figures of the actor's path and of calls over several keys", () => {
  it.effect("a waiter admitted at once costs one store call, is counted allowed, and leaves nothing queued", () =>
    Effect.gen(function*() {
      const limiter = yield* onStore({ fastPath: false, policy: bucket })
      yield* limiter.wait("k")
      // (the actor's batch is over)
      yield* settle
      const stats = yield* limiter.stats
      assert.deepStrictEqual([stats.storeCalls, stats.allowed, stats.queued], [1, 1, 0])
    }))

  it.effect("a waiter is admitted at its turn, even one sooner than the poll for a release", () =>
    Effect.gen(function*() {
      const limiter = yield* onStore({
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "50 millis" } })
      })
      assert.isTrue(yield* limiter.acquire("k"))
      const waiter = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
      yield* settle
      yield* TestClock.adjust("50 millis")
      assert.deepStrictEqual(waiter.pollUnsafe(), Exit.void)
    }))

  it.effect("a waiter for a release made in another process is admitted at a later poll", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const make = RateLimiter.make({ policy: Policy.concurrency({ capacity: 1 }) }).pipe(
        Effect.provideService(Store.CurrentStore, store)
      )
      const here = yield* make
      const there = yield* make
      assert.isTrue(yield* here.acquire("k"))
      const waiter = yield* Effect.forkChild(here.wait("k"), { startImmediately: true })
      yield* settle
      // the first poll is refused; then the permit comes back elsewhere
      yield* TestClock.adjust("100 millis")
      assert.isUndefined(waiter.pollUnsafe())
      yield* there.release("k")
      yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(waiter.pollUnsafe(), Exit.void)
    }))

  it.effect("a waiter whose caller left is not counted ahead of one that joins in the same batch", () =>
    Effect.gen(function*() {
      const limiter = yield* onStore({
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } })
      })
      assert.isTrue(yield* limiter.acquire("k"))
      const first = yield* Effect.forkChild(limiter.wait("k"), { startImmediately: true })
      yield* settle
      // the first leaves, and a second comes before the key's actor runs again:
      // its turn is the first's (1 s), within its maxWait
      first.interruptUnsafe()
      const second = yield* Effect.forkChild(limiter.wait("k", { maxWait: "1500 millis" }), {
        startImmediately: true
      })
      yield* settle
      assert.isUndefined(second.pollUnsafe())
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(second.pollUnsafe(), Exit.void)
    }))

  it.effect("with the fallback deny, a store that fails when the head is asked refuses the whole line, counted", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failing
      const limiter = yield* RateLimiter.make({
        policy: Policy.concurrency({ capacity: 1 }),
        fallback: { mode: "deny", retryAfter: "1 second" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      assert.isTrue(yield* limiter.acquire("k"))
      const waiters = yield* Effect.forEach(
        [1, 2],
        () => Effect.forkChild(Effect.flip(limiter.wait("k")), { startImmediately: true })
      )
      yield* settle
      const before = (yield* limiter.stats).denied
      control.down = true
      yield* TestClock.adjust("100 millis")
      for (const w of waiters) assert.strictEqual((yield* Fiber.join(w))._tag, "RateLimitExceeded")
      assert.strictEqual((yield* limiter.stats).denied - before, 2)
    }))

  it.effect("keys served by waits and by calls over several keys count as active (the sweep spares them)", () =>
    Effect.gen(function*() {
      const limiter = yield* onStore({ policy: bucket, idleTimeout: "1 second" })
      yield* limiter.wait("w")
      assert.isTrue(yield* limiter.acquire(["a", "b"]))
      assert.deepStrictEqual([(yield* limiter.stats).storeCalls, (yield* limiter.stats).storeOps], [2, 4])
      yield* TestClock.adjust("900 millis")
      yield* limiter.wait("w")
      assert.isTrue(yield* limiter.acquire(["a", "b"]))
      yield* TestClock.adjust("600 millis")
      assert.deepStrictEqual([(yield* limiter.stats).buckets, (yield* limiter.stats).reaped], [3, 0])
      yield* TestClock.adjust("500 millis")
      assert.deepStrictEqual([(yield* limiter.stats).buckets, (yield* limiter.stats).reaped], [0, 3])
    }))

  it.effect("with the fallback allow, a call over several keys is admitted, flagged degraded, and counted", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failingWith(true)
      const limiter = yield* RateLimiter.make({ policy: bucket, fallback: { mode: "allow" } }).pipe(
        Effect.provideService(Store.CurrentStore, store)
      )
      control.down = true
      const d = yield* limiter.consume(["a", "b"])
      assert.isTrue(d.allowed && d.degraded === true)
      assert.strictEqual((yield* limiter.stats).degraded, 2)
    }))

  it.effect("a call over several keys whose caller leaves while it is out is no failure of the store", () =>
    Effect.gen(function*() {
      const { control, store } = yield* failingWith(true)
      const limiter = yield* RateLimiter.make({ policy: bucket }).pipe(Effect.provideService(Store.CurrentStore, store))
      control.gate = yield* Deferred.make<void>()
      const call = yield* Effect.forkChild(limiter.acquire(["a", "b"]), { startImmediately: true })
      yield* settle
      yield* Fiber.interrupt(call)
      control.gate = undefined
      const next = yield* limiter.consume(["a", "b"])
      assert.isTrue(next.allowed && next.degraded === undefined)
      assert.strictEqual((yield* limiter.stats).storeFailures, 0)
    }))
})
