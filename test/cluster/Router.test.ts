/**
 * The cluster's router on its own (TestClock): the rules by which a caller's
 * operations reach their owners. The other runners are a script here (what
 * each `Batch` or `Wait` message gets back), so that each rule is pinned:
 * rounds per destination and what they carry, owners learnt from replies,
 * `Moved` and `NotHere`, a full mailbox, deadlines and the fallback, a
 * stalled round giving its slot up, a moving gateway. The same router runs
 * between real runner processes in `Processes.test.ts`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { type Owner, Partition } from "../../src/cluster/internal/owner.ts"
import {
  type BatchReply,
  Kind,
  type Op,
  packResults,
  type Result,
  Tag,
  type WaitRequest,
  type WaitResult
} from "../../src/cluster/internal/protocol.ts"
import * as Router from "../../src/cluster/internal/router.ts"
import { Overloaded } from "../../src/Errors.ts"
import { settle } from "./local.ts"

const unused = Effect.die("not used by a client-only router")
// A runner that owns no shard: every operation goes out as a message.
const owner: Owner = {
  local: () => undefined,
  run: () => unused,
  batch: () => unused,
  wait: () => unused,
  begin: () => {
    throw new Error("not used by a client-only router")
  },
  open: () => unused,
  close: () => unused,
  closeAll: unused,
  stats: unused,
  recorders: () => [],
  runnerIs: () => {}
}

interface Sent {
  readonly entityId: string
  readonly keys: ReadonlyArray<string>
  readonly version: number
}

type Reply = (ops: ReadonlyArray<Op>, version: number) => Effect.Effect<BatchReply, unknown>

// Every operation of a message answered `result`, by `runner` (and `open`: the shards it serves now).
const answering = (result: Result, runner: string, open?: ReadonlyArray<number>): Reply => (ops) =>
  Effect.succeed(packResults(ops.map(() => result), runner, 1, open))
const admitAll = (runner: string, open?: ReadonlyArray<number>): Reply =>
  answering({ t: Tag.Ok, b: true }, runner, open)
const moved = answering({ t: Tag.Moved }, "runner:a")
const notHere = answering({ t: Tag.NotHere }, "runner:a")

// `effect` running on a fiber of its own, once it has gone as far as it can.
const started = <A, E>(effect: Effect.Effect<A, E>) => Effect.tap(Effect.forkChild(effect), () => settle)

// The test clock moved on by `millis`, `step` at a time, the fibers let run after each.
const advance = (millis: number, step = 20) =>
  Effect.gen(function*() {
    for (let t = 0; t < millis; t += step) {
      yield* TestClock.adjust(step)
      yield* settle
    }
  })

// A router over a scripted transport: each Batch gets the next reply of
// `replies` (the last one again once they run out).
const setup = (
  replies: ReadonlyArray<Reply>,
  overrides: Partial<Router.Options> = {}
) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(0)
    const sent: Array<Sent> = []
    const router = yield* Router.make({
      owner,
      batch: (entityId, ops, version) =>
        Effect.suspend(() => {
          sent.push({ entityId, keys: ops.map((o) => o.key), version })
          return replies[Math.min(sent.length - 1, replies.length - 1)](ops, version)
        }),
      waitCall: () => Effect.die("no waits here"),
      entityIdOf: (shard) => `entity:${shard}`,
      timeoutMillis: 250,
      retryMillis: 1000,
      handoffMillis: 2000,
      maxInFlight: 1,
      maxBatch: 1024,
      fallback: {
        decide: (op, reason) => Effect.succeed(`fallback ${op.key}: ${reason}`),
        wait: (req, maxWait, reason) =>
          Effect.succeed<WaitResult>({ t: Tag.Ok, dl: maxWait, e: undefined }).pipe(
            Effect.tap(() => Effect.sync(() => fallbackWaits.push({ key: req.key, maxWait, reason })))
          )
      },
      ...overrides
    })
    const fallbackWaits: Array<{ key: string; maxWait: number; reason: string }> = []
    return { router, sent, fallbackWaits }
  })

const acquire = (key: string, shard: number): Op => ({ k: Kind.Acquire, s: shard, key, n: 1 })

describe("Router (the cluster's caller side)", () => {
  it.effect("calls made together go in one round to their destination, each answered from its own result", () =>
    Effect.gen(function*() {
      let i = 0
      const { router, sent } = yield* setup([
        (ops) =>
          Effect.succeed(
            packResults(ops.map((): Result => ({ t: Tag.Ok, b: i++ % 2 === 0 })), "runner:a", 1, undefined)
          )
      ])
      const answers = yield* Effect.forEach(
        ["k0", "k1", "k2", "k3"],
        (key) => router.decide(acquire(key, 7)),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(answers, [true, false, true, false])
      assert.deepStrictEqual(sent, [{ entityId: "entity:7", keys: ["k0", "k1", "k2", "k3"], version: 0 }])
      assert.deepStrictEqual(router.counts, { calls: 1, ops: 4, failures: 0, degraded: 0 })
    }))

  it.effect("a round carries at most maxBatch operations; the rest go in the next", () =>
    Effect.gen(function*() {
      const { router, sent } = yield* setup([admitAll("runner:a")], { maxBatch: 3 })
      const answers = yield* Effect.forEach(
        ["k0", "k1", "k2", "k3", "k4"],
        (key) => router.decide(acquire(key, 7)),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(answers, [true, true, true, true, true])
      assert.deepStrictEqual(sent.map((s) => s.keys), [["k0", "k1", "k2"], ["k3", "k4"]])
    }))

  it.effect("a shard's owner is learnt from the replies: then its calls share that runner's rounds", () =>
    Effect.gen(function*() {
      const { router, sent } = yield* setup([admitAll("runner:a")])
      // not known yet: a queue per shard, sent to the shard's own entity
      yield* Effect.forEach([acquire("x", 1), acquire("y", 2)], router.decide, { concurrency: "unbounded" })
      assert.deepStrictEqual(sent.map((s) => s.entityId).sort(), ["entity:1", "entity:2"])
      // both answered by runner:a: one round now, and its version of runner:a's shards
      yield* Effect.forEach([acquire("x", 1), acquire("y", 2)], router.decide, { concurrency: "unbounded" })
      assert.strictEqual(sent.length, 3)
      assert.deepStrictEqual(sent[2].keys, ["x", "y"])
      assert.strictEqual(sent[2].version, 1)
    }))

  it.effect("Moved: the call goes again after a pause, to the shard's next owner", () =>
    Effect.gen(function*() {
      const { router, sent } = yield* setup([moved, admitAll("runner:b")])
      const fiber = yield* started(router.decide(acquire("k", 3)))
      assert.strictEqual(sent.length, 1)
      assert.isUndefined(fiber.pollUnsafe())
      yield* advance(19, 19)
      assert.strictEqual(sent.length, 1)
      yield* advance(1, 1)
      assert.strictEqual(sent.length, 2)
      assert.isTrue(yield* Fiber.join(fiber))
    }))

  it.effect("Moved: the call waits for the next owner up to handoffMillis, not only its timeout", () =>
    Effect.gen(function*() {
      const { router } = yield* setup([moved])
      const fiber = yield* started(router.decide(acquire("k", 3)))
      // past the timeout (250 ms) the shard is still moving: no fallback yet
      yield* advance(1960)
      assert.isUndefined(fiber.pollUnsafe())
      yield* advance(100)
      assert.isDefined(fiber.pollUnsafe(), "answered once the move's handoffMillis are over")
      const answer = yield* Fiber.join(fiber)
      assert.strictEqual(answer, "fallback k: the owner of shard 3 did not answer in time")
      assert.strictEqual(router.counts.degraded, 1)
      assert.strictEqual(router.counts.failures, 1)
    }))

  it.effect("NotHere: sent again at once up to three times, then after a pause", () =>
    Effect.gen(function*() {
      const { router, sent } = yield* setup([notHere, notHere, notHere, notHere, admitAll("runner:b")])
      const fiber = yield* started(router.decide(acquire("k", 4)))
      assert.strictEqual(sent.length, 4)
      assert.isUndefined(fiber.pollUnsafe())
      yield* advance(20, 20)
      assert.strictEqual(sent.length, 5)
      assert.isTrue(yield* Fiber.join(fiber))
    }))

  it.effect("NotHere from the runner that served the shard: it is moving, and the call waits for its next owner", () =>
    Effect.gen(function*() {
      const { router } = yield* setup([admitAll("runner:a"), notHere])
      assert.isTrue(yield* router.decide(acquire("k", 4))) // runner:a serves shard 4
      const fiber = yield* started(router.decide(acquire("k", 4)))
      yield* advance(1000)
      // far past the timeout: still waiting for the shard's next owner
      assert.isUndefined(fiber.pollUnsafe())
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("a full mailbox at the owner answers Overloaded", () =>
    Effect.gen(function*() {
      const full: Reply = () => Effect.fail({ _tag: "MailboxFull" })
      const { router } = yield* setup([full])
      const exit = yield* Effect.exit(router.decide(acquire("k", 5)))
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? exit.cause.reasons[0] : undefined
      assert.strictEqual(error?._tag, "Fail")
      if (error?._tag === "Fail") {
        assert.strictEqual(error.error._tag, "Overloaded")
        assert.strictEqual((error.error as { readonly reason: string }).reason, "mailbox")
      }
    }))

  it.effect("a failed message is sent again until the deadline; then the fallback answers, and the shard is left alone for retryMillis", () =>
    Effect.gen(function*() {
      const broken: Reply = () => Effect.fail({ _tag: "RunnerUnavailable" })
      const { router, sent } = yield* setup([...Array.from({ length: 14 }, () => broken), admitAll("runner:a")])
      const fiber = yield* started(router.decide(acquire("k", 6)))
      yield* advance(240)
      assert.isUndefined(fiber.pollUnsafe())
      assert.isAbove(sent.length, 5) // sent again every pause
      yield* advance(20, 20)
      assert.strictEqual(yield* Fiber.join(fiber), "fallback k: the owner of shard 6 did not answer in time")
      // skipped: answered at once by the fallback, no message
      const before = sent.length
      const skipped = yield* started(router.decide(acquire("j", 6)))
      assert.isDefined(skipped.pollUnsafe(), "answered at once")
      assert.strictEqual(yield* Fiber.join(skipped), "fallback j: the owner of shard 6 did not answer lately")
      assert.strictEqual(sent.length, before)
      yield* TestClock.adjust("999 millis")
      assert.strictEqual(
        yield* router.decide(acquire("j", 6)),
        "fallback j: the owner of shard 6 did not answer lately"
      )
      yield* advance(1, 1)
      const sentBefore = sent.length
      yield* started(router.decide(acquire("j", 6)))
      assert.strictEqual(sent.length, sentBefore + 1) // tried again after retryMillis
      assert.strictEqual(router.counts.degraded, 3)
    }))

  it.effect("a round out for half the timeout gives its slot up: the next round goes out meanwhile", () =>
    Effect.gen(function*() {
      const { router, sent } = yield* setup([() => Effect.never, admitAll("runner:a")])
      const stuck = yield* started(router.decide(acquire("a", 8)))
      const next = yield* started(router.decide(acquire("b", 8)))
      assert.strictEqual(sent.length, 1) // one round out at a time
      yield* advance(124, 124)
      assert.strictEqual(sent.length, 1)
      yield* advance(1, 1)
      assert.strictEqual(sent.length, 2)
      assert.isTrue(yield* Fiber.join(next))
      // the stuck round's runner has answered since: its gateway is moving,
      // so its call waits for the next owner instead of falling back
      yield* advance(200, 200)
      assert.isUndefined(stuck.pollUnsafe())
      yield* advance(2000, 100)
      assert.strictEqual(yield* Fiber.join(stuck), "fallback a: the owner of shard 8 did not answer in time")
    }))

  it.effect("a round with no answer at all falls back at the deadline", () =>
    Effect.gen(function*() {
      const { router, sent } = yield* setup([() => Effect.never])
      const fiber = yield* started(router.decide(acquire("a", 9)))
      yield* advance(249, 249)
      assert.isUndefined(fiber.pollUnsafe())
      yield* advance(1, 1)
      assert.strictEqual(yield* Fiber.join(fiber), "fallback a: the owner of shard 9 did not answer in time")
      assert.strictEqual(sent.length, 1)
      assert.deepStrictEqual(router.counts, { calls: 1, ops: 1, failures: 1, degraded: 1 })
    }))

  it.effect("a reply's open shards: a shard its runner no longer serves is moving, and its calls wait for the next owner", () =>
    Effect.gen(function*() {
      const { router, sent } = yield* setup([
        admitAll("runner:a", [1, 2]),
        admitAll("runner:a", [1, 2]),
        admitAll("runner:a", [2]),
        () => Effect.never
      ])
      yield* Effect.forEach([acquire("x", 1), acquire("y", 2)], router.decide, { concurrency: "unbounded" })
      assert.isTrue(yield* router.decide(acquire("y", 2))) // runner:a now says it serves only shard 2

      const fiber = yield* started(router.decide(acquire("x", 1)))
      assert.strictEqual(sent[sent.length - 1].entityId, "entity:1") // shard 1's owner is no longer known
      yield* advance(1000, 100)
      assert.isUndefined(fiber.pollUnsafe()) // past its timeout: waiting for the next owner
      yield* Fiber.interrupt(fiber)
    }))
})

const waitReq = (key: string, shard: number): WaitRequest => ({
  id: `w:${key}`,
  s: shard,
  key,
  n: 1,
  reserve: false,
  resume: false
})

describe("Router, waits", () => {
  it.effect("a wait told Moved asks the next owner for its place, with resume set", () =>
    Effect.gen(function*() {
      const asked: Array<WaitRequest> = []
      const { router } = yield* setup([admitAll("runner:a")], {
        waitCall: (_, req) =>
          Effect.sync((): WaitResult => {
            asked.push(req)
            return asked.length === 1 ? { t: Tag.Moved } : { t: Tag.Ok }
          })
      })
      const fiber = yield* started(router.wait(waitReq("k", 3), 1000))
      yield* advance(20, 20)
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.t, Tag.Ok)
      assert.deepStrictEqual(asked.map((r) => r.resume), [false, true])
    }))

  it.effect("a wait told Moved again and again gets the fallback once the move's handoffMillis are over", () =>
    Effect.gen(function*() {
      const { router, fallbackWaits } = yield* setup([admitAll("runner:a")], {
        waitCall: () => Effect.succeed<WaitResult>({ t: Tag.Moved })
      })
      const fiber = yield* started(router.wait(waitReq("k", 3), 1000))
      yield* advance(1960)
      assert.isUndefined(fiber.pollUnsafe()) // past maxWait plus the timeout: the shard is moving
      yield* advance(100)
      assert.isDefined(fiber.pollUnsafe(), "answered once the move's handoffMillis are over")
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(fallbackWaits.map((w) => [w.key, w.maxWait]), [["k", 0]])
    }))

  it.effect("a wait whose owner does not answer gets the fallback at maxWait plus the timeout, with what is left of maxWait", () =>
    Effect.gen(function*() {
      const { router, fallbackWaits } = yield* setup([admitAll("runner:a")], { waitCall: () => Effect.never })
      const fiber = yield* started(router.wait(waitReq("k", 3), 1000))
      yield* advance(1249, 1249)
      assert.isUndefined(fiber.pollUnsafe())
      yield* advance(1, 1)
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(fallbackWaits, [{
        key: "k",
        maxWait: 0,
        reason: "the owner of shard 3 did not answer in time"
      }])
      assert.deepStrictEqual(router.counts, { calls: 0, ops: 0, failures: 1, degraded: 1 })
    }))

  it.effect("a wait whose message fails otherwise (its runner stopped with it out) asks the next owner, resume set", () =>
    Effect.gen(function*() {
      const asked: Array<WaitRequest> = []
      const { router, fallbackWaits } = yield* setup([admitAll("runner:a")], {
        waitCall: (_, req) =>
          Effect.suspend(() => {
            asked.push(req)
            return asked.length === 1
              ? Effect.fail({ _tag: "EntityNotAssignedToRunner" })
              : Effect.succeed<WaitResult>({ t: Tag.Ok })
          })
      })
      const fiber = yield* started(router.wait(waitReq("k", 3), 1000))
      yield* advance(20, 20)
      assert.strictEqual((yield* Fiber.join(fiber)).t, Tag.Ok)
      assert.deepStrictEqual(asked.map((r) => r.resume), [false, true])
      assert.deepStrictEqual(fallbackWaits, [])
    }))

  it.effect("a wait whose caller leaves ends its message to the owner and its timer", () =>
    Effect.gen(function*() {
      let ended = 0
      const { router } = yield* setup([admitAll("runner:a")], {
        waitCall: () => Effect.onInterrupt(Effect.never, () => Effect.sync(() => ended++))
      })
      const fiber = yield* started(router.wait(waitReq("k", 3), 1000))
      assert.strictEqual(ended, 0)
      yield* Fiber.interrupt(fiber)
      yield* settle
      assert.strictEqual(ended, 1, "the message to the owner was interrupted with its caller")
      // and nothing of it fires later: no fallback, no failure counted
      yield* advance(2000, 500)
      assert.deepStrictEqual(router.counts, { calls: 0, ops: 0, failures: 0, degraded: 0 })
    }))

  it.effect("a wait refused by a full mailbox fails with Overloaded (waiters)", () =>
    Effect.gen(function*() {
      const { router } = yield* setup([admitAll("runner:a")], {
        waitCall: () => Effect.fail({ _tag: "MailboxFull" })
      })
      const error = yield* Effect.flip(router.wait(waitReq("k", 3), 1000))
      assert.strictEqual(error._tag, "Overloaded")
      assert.strictEqual((error as { readonly reason: string }).reason, "waiters")
    }))

  it.effect("a wait's place asked of a crashed owner: the shard is left alone, and the next wait falls back at once", () =>
    Effect.gen(function*() {
      let calls = 0
      const { router, fallbackWaits } = yield* setup([admitAll("runner:a")], {
        waitCall: () => Effect.suspend(() => (calls++, Effect.never))
      })
      const first = yield* started(router.wait(waitReq("k", 3), 100))
      yield* advance(350, 350)
      yield* Fiber.join(first)
      yield* router.wait(waitReq("j", 3), 100)
      assert.strictEqual(calls, 1)
      assert.deepStrictEqual(fallbackWaits.map((w) => w.key), ["k", "j"])
    }))
})

// A runner that owns `shards` itself: their operations run here, answered
// from `runs` (one reply per call, the last one again once they run out);
// `waits` likewise for a wait's place.
const owning = (
  shards: ReadonlyArray<number>,
  runs: ReadonlyArray<Result>,
  waits: ReadonlyArray<WaitResult> = [{ t: Tag.Ok }]
) => {
  const partitions = new Map(shards.map((shard) => [shard, new Partition(shard, "tollgate")]))
  const ran: Array<{ readonly shard: number; readonly key: string }> = []
  const waited: Array<WaitRequest> = []
  let owned = true
  const local: Owner = {
    ...owner,
    local: (shard) => owned ? partitions.get(shard) : undefined,
    run: (partition, op) =>
      Effect.sync(() => {
        ran.push({ shard: partition.shard, key: op.key })
        return runs[Math.min(ran.length - 1, runs.length - 1)]
      }),
    wait: (req) =>
      Effect.sync(() => {
        waited.push(req)
        const result = waits[Math.min(waited.length - 1, waits.length - 1)]
        // told Moved: the shard has gone, and the next look finds it elsewhere
        if (result.t === Tag.Moved) owned = false
        return result
      })
  }
  return { local, ran, waited }
}

describe("Router, a round's gateway", () => {
  it.effect("a round goes through one of its shards that is not moving", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const { router, sent } = yield* setup([
        admitAll("runner:a", [1, 2]),
        // runner:a, once let go: shard 1 has left it (it is moving)
        (ops, version) => Effect.andThen(Deferred.await(gate), admitAll("runner:a", [2])(ops, version)),
        admitAll("runner:a")
      ], { maxInFlight: 2 })
      assert.isTrue(yield* router.decide(acquire("w", 1))) // runner:a serves shards 1 and 2
      const first = yield* started(router.decide(acquire("z", 2)))
      // x and y queue for runner:a; the first round's answer comes in before
      // their round takes its queue, and says shard 1 is moving
      const both = yield* Effect.forkChild(
        Effect.forEach([acquire("x", 1), acquire("y", 2)], router.decide, { concurrency: "unbounded" }),
        { startImmediately: true }
      )
      yield* Deferred.succeed(gate, undefined)
      yield* settle
      assert.isTrue(yield* Fiber.join(first))
      assert.deepStrictEqual(yield* Fiber.join(both), [true, true])
      assert.deepStrictEqual(sent.map((m) => [m.entityId, m.keys]), [
        ["entity:1", ["w"]],
        ["entity:2", ["z"]],
        ["entity:2", ["x", "y"]]
      ])
    }))
})

describe("Router, on a runner that owns the shard itself", () => {
  it.effect("an operation on a shard owned here runs here: no message, its own result", () =>
    Effect.gen(function*() {
      const here = owning([5], [{ t: Tag.Ok, b: false }])
      const { router, sent } = yield* setup([admitAll("runner:a")], { owner: here.local })
      assert.isFalse(yield* router.decide(acquire("k", 5)))
      assert.deepStrictEqual(here.ran, [{ shard: 5, key: "k" }])
      assert.deepStrictEqual(sent, [])
      // a shard owned elsewhere still goes out
      assert.isTrue(yield* router.decide(acquire("j", 6)))
      assert.deepStrictEqual(sent.map((m) => m.keys), [["j"]])
      assert.deepStrictEqual(router.counts, { calls: 1, ops: 1, failures: 0, degraded: 0 })
    }))

  for (const [name, result] of [["Moved", { t: Tag.Moved }], ["NotHere", { t: Tag.NotHere }]] as const) {
    it.effect(`${name} from this runner's own partition: the operation goes out to the shard's owner`, () =>
      Effect.gen(function*() {
        const here = owning([5], [result])
        const { router, sent } = yield* setup([admitAll("runner:b")], { owner: here.local })
        assert.isTrue(yield* router.decide(acquire("k", 5)))
        assert.deepStrictEqual(here.ran, [{ shard: 5, key: "k" }])
        assert.deepStrictEqual(sent.map((m) => [m.entityId, m.keys]), [["entity:5", ["k"]]])
      }))
  }

  it.effect("a failure from this runner's own partition is the call's failure, not the fallback's answer", () =>
    Effect.gen(function*() {
      const error = new Overloaded({ key: "k", reason: "mailbox", capacity: 1 })
      const here = owning([5], [{ t: Tag.Failed, e: error }])
      const { router } = yield* setup([admitAll("runner:a")], { owner: here.local })
      const failure = yield* Effect.flip(router.decide(acquire("k", 5)))
      assert.strictEqual(failure, error)
      assert.strictEqual(router.counts.degraded, 0)
    }))

  it.effect("a shard owned here is served here even while it is left alone as down elsewhere", () =>
    Effect.gen(function*() {
      // shard 5's remote owner fails: the shard is left alone (the fallback answers)
      const { router: remoteOnly } = yield* setup([() => Effect.fail("gone")])
      const first = yield* started(remoteOnly.decide(acquire("k", 5)))
      yield* advance(300)
      assert.strictEqual(yield* Fiber.join(first), "fallback k: the owner of shard 5 did not answer in time")
      assert.strictEqual(
        yield* remoteOnly.decide(acquire("k", 5)),
        "fallback k: the owner of shard 5 did not answer lately"
      )
      // the same history on a runner that has since taken the shard: it decides
      const here = owning([5], [{ t: Tag.Ok, b: true }])
      let owned = false
      const taking: Owner = { ...here.local, local: (shard) => owned ? here.local.local(shard) : undefined }
      const { router } = yield* setup([() => Effect.fail("gone")], { owner: taking })
      const before = yield* started(router.decide(acquire("k", 5)))
      yield* advance(300)
      yield* Fiber.join(before)
      owned = true
      assert.isTrue(yield* router.decide(acquire("k", 5)))
      assert.deepStrictEqual(here.ran, [{ shard: 5, key: "k" }])
    }))

  it.effect("a wait on a shard owned here waits here; told Moved, it asks the next owner, with resume set", () =>
    Effect.gen(function*() {
      const asked: Array<WaitRequest> = []
      const here = owning([3], [{ t: Tag.Ok, b: true }], [{ t: Tag.Moved }])
      const { router } = yield* setup([admitAll("runner:a")], {
        owner: here.local,
        waitCall: (_, req) => Effect.sync((): WaitResult => (asked.push(req), { t: Tag.Ok }))
      })
      const fiber = yield* started(router.wait(waitReq("k", 3), 1000))
      assert.deepStrictEqual(here.waited.map((r) => r.resume), [false])
      assert.deepStrictEqual(asked, [])
      yield* advance(20, 20)
      assert.strictEqual((yield* Fiber.join(fiber)).t, Tag.Ok)
      assert.deepStrictEqual(asked.map((r) => [r.key, r.resume]), [["k", true]])
    }))

  it.effect("a wait answered here needs no message and no fallback", () =>
    Effect.gen(function*() {
      const here = owning([3], [{ t: Tag.Ok, b: true }], [{ t: Tag.Ok, dl: 40, e: undefined }])
      const { router, fallbackWaits } = yield* setup([admitAll("runner:a")], { owner: here.local })
      const result = yield* router.wait(waitReq("k", 3), 1000)
      assert.deepStrictEqual(result, { t: Tag.Ok, dl: 40, e: undefined })
      assert.deepStrictEqual(fallbackWaits, [])
      assert.deepStrictEqual(router.counts, { calls: 0, ops: 0, failures: 0, degraded: 0 })
    }))
})
