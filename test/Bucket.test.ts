/**
 * What a key's bucket and its actor promise, through the public API: a
 * caller that leaves in the instant its answer is being sent keeps nothing
 * it was not given (a permit, a hold), and a decision already made stays
 * made; a store-backed limiter's actors give their fibers back once idle;
 * and the store's metrics are published exactly for limiters with a store.
 * Each test was written for mutants of the actor no other test caught
 * (docs/reliability.md, "The actor's Request, Engine, Limiter and Bucket
 * survivors").
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Equal, Exit, Fiber, Metric, Ref, Scope } from "effect"
import { TestClock } from "effect/testing"
import { inspect } from "node:util"
import { MemoryStore, Policy, RateLimiter, Store } from "../src/index.ts"
import * as Activity from "../src/internal/actor/Activity.ts"
import * as Bucket from "../src/internal/actor/Bucket.ts"
import * as Engine from "../src/internal/actor/Engine.ts"
import { bind } from "../src/internal/algorithm/Algorithm.ts"
import * as Block from "../src/internal/algorithm/Block.ts"
import * as Recorder from "../src/internal/Recorder.ts"

// Lets forked fibers and bucket actors run until they park.
const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

const perHour = (capacity: number) => Policy.tokenBucket({ capacity, refill: { tokens: 1, per: "1 hour" } })

// A token bucket (5, one per second) whose step throws for cost 3 from
// t = 1 s on: a stand-in for an algorithm bug.
const faulty = (() => {
  const base = Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }) as Policy.TokenBucket
  const algorithm: Policy.TokenBucket["algorithm"] = {
    ...base.algorithm,
    takeInPlace: undefined,
    step: (c, s, now, cost) => {
      if (cost === 3 && now >= 1000) throw new Error("step exploded")
      return base.algorithm.step(c, s, now, cost)
    }
  }
  return { ...base, algorithm, rule: bind(algorithm, base.config) } as Policy.Policy
})()

// A metric of the limiter named `limiter`, as an exporter reads it
// (`undefined`: not published).
const metricOf = (id: string, limiter: string) =>
  Effect.map(Metric.snapshot, (all) => {
    const found = all.find((s) => s.id === id && s.attributes?.limiter === limiter)
    if (found === undefined) return undefined
    const state: unknown = found.state
    return typeof state === "object" && state !== null && "count" in state ? state.count : undefined
  })

describe("a caller that leaves while its batch's answers are sent", () => {
  for (const fastPath of [true, false]) {
    const name = fastPath ? "fast path" : "actor only"
    // Both waiters are admitted by one release, in one batch; the first,
    // resumed as its answer is sent, wins the race, which interrupts the
    // second before its own answer is sent.
    it.effect(`a waiter that loses a race in the instant both are admitted gives its permit back (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ policy: Policy.concurrency({ capacity: 2 }), fastPath })
        assert.isTrue(yield* limiter.acquire("k"))
        assert.isTrue(yield* limiter.acquire("k"))
        const race = yield* Effect.race(limiter.wait("k"), limiter.wait("k")).pipe(
          Effect.forkChild({ startImmediately: true })
        )
        yield* settle
        assert.strictEqual((yield* limiter.stats).waiting, 2)
        yield* limiter.release("k", 2)
        yield* settle
        yield* Fiber.join(race)
        // the winner holds one permit; the loser's came back
        assert.isTrue(yield* limiter.acquire("k"))
        assert.isFalse(yield* limiter.acquire("k"))
      }))

    it.effect(`a call over several keys that loses such a race gives back what it held (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ policy: Policy.concurrency({ capacity: 2 }), fastPath })
        assert.isTrue(yield* limiter.acquire("a"))
        assert.isTrue(yield* limiter.acquire("a"))
        const race = yield* Effect.race(limiter.wait(["a", "b"]), limiter.wait(["a", "b"])).pipe(
          Effect.forkChild({ startImmediately: true })
        )
        yield* settle
        yield* limiter.release("a", 2)
        yield* settle
        yield* Fiber.join(race)
        // the winner took one unit of each key; nothing else is held
        for (const key of ["a", "b"]) {
          assert.isTrue(yield* limiter.acquire(key), key)
          assert.isFalse(yield* limiter.acquire(key), key)
        }
      }))
  }

  // The actor (no fast path: it keeps running) takes both calls in one
  // batch; the first, resumed as its answer is sent, wins the race.
  it.effect("a decision sent in the same batch as a race's winner stays made: nothing is given back", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: perHour(4), fastPath: false })
      assert.isTrue(yield* limiter.acquire("k"))
      const race = yield* Effect.race(limiter.consume("k"), limiter.consume("k")).pipe(
        Effect.forkChild({ startImmediately: true })
      )
      yield* settle
      assert.isTrue((yield* Fiber.join(race)).allowed)
      // both consumes took their unit: one is left of four
      assert.strictEqual((yield* limiter.peek("k")).remaining, 1)
      const last = yield* limiter.consume("k")
      assert.isTrue(last.allowed)
      assert.strictEqual(last.remaining, 0)
      assert.isFalse((yield* limiter.consume("k")).allowed)
      assert.strictEqual((yield* limiter.stats).allowed, 4)
    }))
})

describe("a limiter's actors and metrics", () => {
  it.effect("a store-backed limiter without the fast path gives its actors' fibers back once idle", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const limiter = yield* RateLimiter.make({ policy: perHour(2), fastPath: false }).pipe(
        Effect.provideService(Store.CurrentStore, store)
      )
      assert.isTrue(yield* limiter.acquire("k"))
      yield* settle
      const stats = yield* limiter.stats
      assert.strictEqual(stats.started, 1)
      assert.strictEqual(stats.actors, 0)
      // the state stayed in the store: the next call sees it
      assert.isTrue(yield* limiter.acquire("k"))
      assert.isFalse(yield* limiter.acquire("k"))
    }))

  it.effect("the store's metrics are published for a store-backed limiter, and only for one", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const shared = yield* RateLimiter.make({ policy: perHour(2), name: "with-store" }).pipe(
        Effect.provideService(Store.CurrentStore, store)
      )
      yield* RateLimiter.make({ policy: perHour(2), name: "in-process" })
      assert.isTrue(yield* shared.acquire("k"))
      assert.isTrue(yield* shared.acquire("k"))
      assert.strictEqual(yield* metricOf("tollgate_store_calls_total", "with-store"), 2)
      assert.strictEqual(yield* metricOf("tollgate_store_failures_total", "with-store"), 0)
      assert.strictEqual(yield* metricOf("tollgate_decisions_total", "in-process"), 0)
      assert.isUndefined(yield* metricOf("tollgate_store_calls_total", "in-process"))
      assert.isUndefined(yield* metricOf("tollgate_degraded_total", "in-process"))
    }))
})

describe("units held for a call over several keys, given back", () => {
  it.effect("a waiter behind units held by a call waiting on another key is admitted once they are given back", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: Policy.concurrency({ capacity: 1 }) })
      assert.isTrue(yield* limiter.acquire("b"))
      // holds a's only permit, and waits in b's line
      const both = yield* limiter.wait(["a", "b"]).pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      // waits in a's line, behind the hold
      const one = yield* limiter.wait("a").pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      assert.isUndefined(one.pollUnsafe())
      yield* Fiber.interrupt(both)
      yield* settle
      // the hold came back: the waiter on a is admitted at once, with no release of a
      const admitted = one.pollUnsafe()
      assert.isTrue(admitted !== undefined && Exit.isSuccess(admitted), "the waiter on a is admitted")
      yield* Fiber.join(one)
      assert.isFalse(yield* limiter.acquire("a"))
    }))

  it.effect("a key decided on the caller's fiber gets back the hold of a call another key refused", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: Policy.concurrency({ capacity: 1 }), fastPath: true })
      assert.isTrue(yield* limiter.acquire("b"))
      // someone waits on b: the call over a and b holds a (which has no actor), and b refuses
      yield* limiter.wait("b").pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      assert.isFalse(yield* limiter.acquire(["a", "b"]))
      assert.isTrue(yield* limiter.acquire("a"))
      assert.isFalse(yield* limiter.acquire("a"))
    }))

  it.effect("giving back a hold on a key nobody waits for puts nothing in its mailbox", () =>
    Effect.gen(function*() {
      // no fast path: a's actor keeps running, with a mailbox of one
      const limiter = yield* RateLimiter.make({
        policy: Policy.concurrency({ capacity: 1 }),
        fastPath: false,
        mailboxCapacity: 1
      })
      assert.isTrue(yield* limiter.acquire("b"))
      yield* limiter.wait("b").pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      // a held, then given back as b refuses; straight after, a's mailbox has room for a call
      assert.isFalse(yield* limiter.acquire(["a", "b"]))
      assert.isTrue(yield* limiter.acquire("a"))
      assert.strictEqual((yield* limiter.stats).overloaded, 0)
    }))
})

describe("a defect on the caller's fiber", () => {
  it.effect("restarts a key that never queued: the call fails with BucketFailed, and the key starts afresh", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: faulty, fastPath: true })
      yield* TestClock.adjust("1 second")
      assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
      assert.strictEqual((yield* limiter.peek("k")).remaining, 3)
      const error = yield* Effect.flip(limiter.acquire("k", { cost: 3 }))
      assert.strictEqual(error._tag, "BucketFailed")
      assert.strictEqual((yield* limiter.stats).actors, 0)
      // afresh: full again, not the 3 left before the defect
      assert.strictEqual((yield* limiter.peek("k")).remaining, 5)
      assert.isTrue(yield* limiter.acquire("k", { cost: 5 }))
    }))

  it.effect("is answered, not tried again: a step that throws once still fails its call with BucketFailed", () =>
    Effect.gen(function*() {
      // a step that throws on its first call of cost 3 only (a defect that would not recur)
      const base = Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }) as Policy.TokenBucket
      let thrown = false
      const algorithm: Policy.TokenBucket["algorithm"] = {
        ...base.algorithm,
        takeInPlace: undefined,
        step: (c, s, now, cost) => {
          if (cost === 3 && !thrown) {
            thrown = true
            throw new Error("step exploded")
          }
          return base.algorithm.step(c, s, now, cost)
        }
      }
      const once = { ...base, algorithm, rule: bind(algorithm, base.config) } as Policy.Policy
      const limiter = yield* RateLimiter.make({ policy: once, fastPath: true })
      assert.isTrue(yield* limiter.acquire("k", { cost: 2 }))
      // the state the step threw over may be half-written: the call is not decided on it again
      assert.strictEqual((yield* Effect.flip(limiter.acquire("k", { cost: 3 })))._tag, "BucketFailed")
      assert.strictEqual((yield* limiter.peek("k")).remaining, 5)
    }))

  it.effect("counts as the key's last activity: it is reaped idleTimeout after the defect, not before", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: faulty, fastPath: true, idleTimeout: "10 seconds" })
      assert.isTrue(yield* limiter.acquire("k"))
      yield* TestClock.adjust("4 seconds")
      assert.strictEqual((yield* Effect.flip(limiter.acquire("k", { cost: 3 })))._tag, "BucketFailed")
      // the sweeps at 5 s and 10 s find it idle for 1 s and 6 s
      yield* TestClock.adjust("6 seconds")
      yield* settle
      assert.strictEqual((yield* limiter.stats).reaped, 0)
      // at 15 s, idle for 11 s
      yield* TestClock.adjust("5 seconds")
      yield* settle
      assert.strictEqual((yield* limiter.stats).reaped, 1)
    }))
})

describe("a call over several keys decided at once only when every key is quiet", () => {
  it.effect("it does not jump a key's line: a waiting head keeps its turn though units are there", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } })
      })
      assert.isTrue(yield* limiter.acquire("a", { cost: 3 }))
      // the head wants 5 and waits; 2 are there
      const head = yield* limiter.wait("a", { cost: 5 }).pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      assert.isFalse(yield* limiter.acquire(["a", "b"]))
      yield* TestClock.adjust("2999 millis")
      yield* settle
      assert.isUndefined(head.pollUnsafe(), "admitted before its 5 units were there")
      yield* TestClock.adjust("1 millis")
      yield* settle
      const admitted = head.pollUnsafe()
      assert.isTrue(admitted !== undefined && Exit.isSuccess(admitted), "the head is admitted in its turn")
    }))

  it.effect("it counts units another call holds", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: Policy.concurrency({ capacity: 1 }) })
      assert.isTrue(yield* limiter.acquire("z"))
      // holds the only permit of a and of c while it waits for z
      yield* limiter.wait(["a", "c", "z"]).pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      assert.isFalse(yield* limiter.acquire(["a", "c"]))
      assert.isFalse(yield* limiter.acquire(["a", "d"]))
      assert.strictEqual((yield* limiter.peek("d")).remaining, 1)
    }))
})

describe("a bucket is reaped only when forgetting it changes nothing", () => {
  it.effect("not while a caller waits in its line on a store, however long the wait", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const limiter = yield* RateLimiter.make({
        policy: Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "10 seconds" } }),
        idleTimeout: "2 seconds"
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      assert.isTrue(yield* limiter.acquire("k"))
      const waiter = yield* Effect.exit(limiter.wait("k")).pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      // idle for 2 s, then 3 s, ..., 9 s: the key's state is in the store, but its line is here
      for (let i = 0; i < 9; i++) {
        yield* TestClock.adjust("1 second")
        yield* settle
      }
      assert.strictEqual((yield* limiter.stats).reaped, 0)
      assert.isUndefined(waiter.pollUnsafe())
      // its turn at 10 s
      yield* TestClock.adjust("1 second")
      yield* settle
      assert.isTrue(Exit.isSuccess(yield* Fiber.join(waiter)))
    }))

  it.effect("not while units of it are held by a call waiting on another key", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({ policy: Policy.concurrency({ capacity: 1 }), idleTimeout: "2 seconds" })
      assert.isTrue(yield* limiter.acquire("b"))
      // a is full (nothing taken) but its permit is held
      yield* limiter.wait(["a", "b"]).pipe(Effect.forkChild({ startImmediately: true }))
      yield* settle
      yield* TestClock.adjust("5 seconds")
      yield* settle
      assert.strictEqual((yield* limiter.stats).reaped, 0)
      assert.isFalse(yield* limiter.acquire("a"))
    }))

  it.effect("not while its batch is out at the store, so the waiter it brings stays in line", () =>
    Effect.gen(function*() {
      const inner = Engine.engineOf(yield* MemoryStore.make)
      // a store that answers each call 5 s after it is made (within the 10 s timeout)
      const store = Engine.pluggable({
        name: "slow",
        apply: (key, policy, ops) => Effect.andThen(Effect.sleep("5 seconds"), inner.apply(key, policy, ops))
      })
      const limiter = yield* RateLimiter.make({
        policy: perHour(1),
        idleTimeout: "2 seconds",
        fallback: { mode: "deny", timeout: "10 seconds" }
      }).pipe(Effect.provideService(Store.CurrentStore, store))
      const first = yield* Effect.forkChild(limiter.acquire("k"))
      yield* TestClock.adjust("5 seconds")
      assert.isTrue(yield* Fiber.join(first))
      const waiter = yield* Effect.forkChild(limiter.wait("k", { maxWait: "2 hours" }))
      // the sweep runs every second while the waiter's ask is out, the key idle past idleTimeout
      for (let i = 0; i < 6; i++) yield* TestClock.adjust("1 second")
      const stats = yield* limiter.stats
      assert.strictEqual(stats.reaped, 0)
      assert.strictEqual(stats.waiting, 1)
      // its turn comes with the token an hour on: admitted, not shut down with a reaped bucket
      yield* TestClock.adjust("1 hour")
      const exit = yield* Fiber.await(waiter)
      assert.isTrue(Exit.isSuccess(exit), String(exit))
    }))

  it.effect("not at the cap while a call to it is queued and not yet served", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.make({
        policy: perHour(2),
        fastPath: false,
        maxBuckets: 1,
        idleTimeout: "1 day"
      })
      assert.isTrue(yield* limiter.acquire("a"))
      // a is full again: safe to forget, until a call to it is queued
      yield* TestClock.adjust("2 hours")
      const [a, b] = yield* Effect.all([Effect.exit(limiter.acquire("a")), Effect.exit(limiter.acquire("b"))], {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual(a, Exit.succeed(true))
      assert.isTrue(Exit.isFailure(b) && String(b).includes("Overloaded"), String(b))
      // a kept what its queued call took: one of two left
      assert.strictEqual((yield* limiter.peek("a")).remaining, 1)
    }))
})

describe("shutdown", () => {
  it.effect("a store-backed actor retired while it gathers a batch stops once: no actor is left counted", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const scope = yield* Scope.make()
      const limiter = yield* RateLimiter.make({ policy: perHour(2), fastPath: false }).pipe(
        Effect.provideService(Store.CurrentStore, store),
        Scope.provide(scope)
      )
      const call = yield* Effect.exit(limiter.acquire("k")).pipe(Effect.forkChild({ startImmediately: true }))
      yield* Scope.close(scope, Exit.void)
      yield* settle
      yield* Fiber.join(call)
      assert.strictEqual((yield* limiter.stats).actors, 0)
    }))
})

describe("what a key's policy cannot do is refused for a key already in use, naming the field", () => {
  for (const fastPath of [true, false]) {
    const name = fastPath ? "fast path" : "actor only"
    it.effect(`a release on the smooth limiter (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ policy: Policy.smooth({ permits: 1, per: "1 second" }), fastPath })
        assert.isTrue(yield* limiter.acquire("k"))
        const error = yield* Effect.flip(limiter.release("k"))
        assert.strictEqual(error._tag, "InvalidRequest")
        assert.include(error.message, "key")
        assert.include(error.message, "no release")
        assert.isFalse(yield* limiter.acquire("k"))
      }))

    it.effect(`a window of its own on a token bucket (${name})`, () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.make({ policy: perHour(2), fastPath })
        assert.isTrue(yield* limiter.acquire("k"))
        const error = yield* Effect.flip(limiter.acquire("k", { duration: "5 seconds" }))
        assert.strictEqual(error._tag, "InvalidRequest")
        assert.include(error.message, "duration")
        assert.strictEqual((yield* limiter.peek("k")).remaining, 1)
      }))
  }
})

describe("a bucket is the Ref of its key's state", () => {
  const limit = Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "1 hour" } }) as Policy.TokenBucket
  // The bucket is its own Ref and that Ref's cell (one dependent load per
  // decision instead of three): Effect's own Ref functions must see it as one.
  it.effect("Ref.get, Ref.set and Ref.update read and write the state the bucket's decisions use", () =>
    Effect.gen(function*() {
      const bucket = new Bucket.Bucket("k", limit, 0)
      // Effect's marks of a Ref and of its cell, which the cell is
      assert.isTrue("~effect/Ref" in bucket && "~effect/MutableRef" in bucket)
      assert.strictEqual(bucket.ref, bucket)
      assert.isUndefined(yield* Ref.get(bucket))
      yield* Ref.set(bucket, { level: 1 })
      assert.deepStrictEqual(Bucket.read(bucket), { level: 1 })
      Bucket.write(bucket, { level: 2 })
      assert.deepStrictEqual(yield* Ref.get(bucket), { level: 2 })
      assert.deepStrictEqual(yield* Ref.updateAndGet(bucket, () => "next"), "next")
      assert.strictEqual(Bucket.read(bucket), "next")
      // two buckets are two Refs, each equal only to itself
      const other = new Bucket.Bucket("k", limit, 1)
      assert.isTrue(Equal.equals(bucket, bucket))
      assert.isFalse(Equal.equals(bucket, other))
    }))

  // An admission takes in place only on a state the bucket's own write found
  // plain: a block beside it, a policy with no in-place take, or a state
  // written past the bucket (Effect's Ref.set) go the operation's way.
  it("takes in place only on a plain state it wrote itself", () => {
    const limiter = { activity: new Activity.Activity<Bucket.Bucket>(), recorder: new Recorder.Recorder() }
    const slot = limiter.activity.take(0)
    const bucket = new Bucket.Bucket("k", limit, slot)
    const inPlace = (now: number) => Bucket.acquireInPlace(limiter as unknown as Bucket.Limiter, bucket, 1, now)
    assert.isUndefined(inPlace(0), "no state yet")
    Bucket.write(bucket, limit.rule.initial(0))
    assert.deepStrictEqual(inPlace(5), Exit.succeed(true))
    assert.strictEqual(limiter.activity.times[slot], 5)
    assert.strictEqual(limiter.recorder.allowed, 1)
    const plain = Bucket.read(bucket)
    Bucket.write(bucket, new Block.Stored(60_000, plain))
    assert.isUndefined(inPlace(6), "under a block")
    Bucket.write(bucket, plain)
    assert.deepStrictEqual(inPlace(7), Exit.succeed(true))
    Effect.runSync(Ref.set(bucket, new Block.Stored(60_000, plain)))
    assert.isUndefined(inPlace(8), "a state written past the bucket")
    Bucket.adopt(bucket, Policy.slidingWindow({ limit: 3, window: "1 hour" }) as Policy.SlidingWindow, plain)
    assert.isUndefined(inPlace(9), "a policy with no in-place take")
    assert.strictEqual(limiter.recorder.allowed, 2)
  })

  it("prints as its key and state, once (not its cell, which is itself, without end)", () => {
    const bucket = new Bucket.Bucket("user:42", limit, 0)
    Bucket.write(bucket, { level: 7, at: 0 })
    assert.deepStrictEqual(bucket.toJSON(), { _id: "Bucket", key: "user:42", state: { level: 7, at: 0 } })
    assert.include(String(bucket), "user:42")
    assert.include(inspect(bucket), "user:42")
  })
})
