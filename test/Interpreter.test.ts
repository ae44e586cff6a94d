import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { Policy } from "../src/index.ts"
import * as Block from "../src/internal/algorithm/Block.ts"
import * as Interpreter from "../src/internal/operation/Interpreter.ts"
import * as Op from "../src/internal/operation/Op.ts"

// Interpreter.apply answers an operation repeated (the same object) on a key
// it left unchanged with the reply it gave: a shortcut that must be
// invisible. Each run here draws its operations from a small pool of objects
// (so the same object recurs) and must answer as the operations applied one
// at a time (Interpreter.applyOne, each on the value the last one left).

const policies: ReadonlyArray<readonly [string, Interpreter.Policy]> = [
  ["token bucket", Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid],
  [
    "fixed window blocking for 5 s",
    Policy.fixedWindow({ limit: 2, window: "1 second", blockDuration: "5 seconds" }) as Policy.Valid
  ],
  ["sliding log (denials are logged)", Policy.slidingLog({ limit: 2, window: "1 second" }) as Policy.Valid],
  ["concurrency", Policy.concurrency({ capacity: 2 }) as Policy.Valid]
]

const pool: ReadonlyArray<Op.Op> = [
  Op.make(Op.Kind.Take, 1),
  Op.make(Op.Kind.Take, 2),
  Op.make(Op.Kind.Admit, 1),
  Op.make(Op.Kind.Peek, 1),
  Op.make(Op.Kind.Release, 1),
  Op.make(Op.Kind.WaitTime, 1, 2),
  Op.make(Op.Kind.Block, 300),
  Op.make(Op.Kind.Reset, 0),
  Op.make(Op.Kind.Delete, 0),
  Op.make(Op.Kind.Get, 0),
  Op.make(Op.Kind.TakeUpTo, 2),
  Op.make(Op.Kind.Force, 1)
]

// Runs of repeats: an index into the pool and how many times in a row.
const runs = fc.array(fc.record({ op: fc.nat({ max: pool.length - 1 }), times: fc.integer({ min: 1, max: 6 }) }), {
  minLength: 1,
  maxLength: 12
})

describe("Interpreter.apply: a repeated operation", () => {
  for (const [name, policy] of policies) {
    it(`answers as copies of it do (${name})`, () => {
      fc.assert(
        fc.property(runs, fc.integer({ min: 0, max: 3000 }), (spec, now) => {
          const shared = spec.flatMap(({ op, times }) => Array.from({ length: times }, () => pool[op]))
          // the reference: one operation at a time, each on the value the last left
          let stored: unknown = undefined
          const replies: Array<Op.Reply> = []
          for (const op of shared) {
            const [reply, next] = Interpreter.applyOne(policy, stored, now, op)
            replies.push(reply)
            stored = next
          }
          const [got, after] = Interpreter.apply(policy, undefined, now, shared)
          assert.deepStrictEqual(got, replies)
          assert.deepStrictEqual(after, stored)
        }),
        { numRuns: 300 }
      )
    })
  }

  it("a run of admissions steps; a run of refusals is one reply", () => {
    const [, policy] = policies[0]
    const take = Op.make(Op.Kind.Take, 1)
    const [replies] = Interpreter.apply(policy, undefined, 0, [take, take, take, take, take])
    assert.deepStrictEqual(replies.map((r) => [r.allowed, r.remaining]), [
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
      [false, 0]
    ])
    // the last refusal left the key as it was: the same answer, not a new one
    assert.strictEqual(replies[4], replies[3])
    assert.notStrictEqual(replies[1], replies[0])
  })
})

// Each operation's reply and effect, one at a time, against what Op.names
// says it means (the figures worked out from each policy's definition).
describe("Interpreter: each operation", () => {
  const bucket = Policy.tokenBucket({ capacity: 5, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
  const one = (policy: Interpreter.Policy, stored: unknown, op: Op.Op, now = 0) =>
    Interpreter.applyOne(policy, stored, now, op)

  it("replyOf: a delay only for an admission delayed, a value only when given", () => {
    const o = { allowed: true, state: 0, remaining: 1, retryAfter: 0, resetAfter: 10, limit: 2 }
    assert.deepStrictEqual(Interpreter.replyOf({ ...o, delay: 5 }), {
      allowed: true,
      remaining: 1,
      retryAfter: 0,
      resetAfter: 10,
      limit: 2,
      delay: 5
    })
    assert.isFalse("delay" in Interpreter.replyOf({ ...o, delay: 0 }))
    assert.isFalse("delay" in Interpreter.replyOf({ ...o, allowed: false, delay: 5 }))
    assert.isFalse("value" in Interpreter.replyOf(o))
    assert.strictEqual(Interpreter.replyOf(o, 3).value, 3)
  })

  it("fit: units held count as taken, and remaining is what is left after both", () => {
    const rule = bucket.rule
    // capacity 5: 2 held and 1 taken leave 2
    const o = Interpreter.fit(rule, rule.initial(0), 0, 1, 2)
    assert.isTrue(o.allowed)
    assert.strictEqual(o.remaining, 2)
  })

  it("a window of 0 is the policy's own", () => {
    // (a window that opens at its first hit takes a length per call)
    const fixed = Policy.fixedWindow({ limit: 1, window: "1 second" }) as Policy.Valid
    const zero: Op.Op = { kind: Op.Kind.Take, cost: 1, queued: 0, window: 0 }
    // the first take opens the policy's window of 1 s, which still holds it 1 ms later
    const [, first] = one(fixed, undefined, zero)
    assert.deepStrictEqual(first, one(fixed, undefined, Op.make(Op.Kind.Take, 1))[1])
    assert.isFalse(one(fixed, first, zero, 1)[0].allowed)
  })

  it("Get: a key others wait on is live even with no state", () => {
    assert.strictEqual(one(bucket, undefined, Op.make(Op.Kind.Get, 1, 0))[0].value, 0)
    assert.strictEqual(one(bucket, undefined, Op.make(Op.Kind.Get, 1, 2))[0].value, 1)
  })

  it("Reset, WaitTime, Force: their replies", () => {
    const [taken] = Interpreter.apply(bucket, undefined, 0, [Op.make(Op.Kind.Take, 5)])
    const stored = Interpreter.apply(bucket, undefined, 0, [Op.make(Op.Kind.Take, 5)])[1]
    assert.isTrue(taken[0].allowed)
    // Reset decides nothing: allowed, nothing else but the limit
    assert.deepStrictEqual(one(bucket, stored, Op.make(Op.Kind.Reset, 0))[0], {
      allowed: true,
      remaining: 0,
      retryAfter: 0,
      resetAfter: 0,
      limit: 5
    })
    // WaitTime answers a denial that says when 1 unit fits behind 2 queued: 3 s on an empty bucket
    const wait = one(bucket, stored, Op.make(Op.Kind.WaitTime, 1, 2))[0]
    assert.isFalse(wait.allowed)
    assert.strictEqual(wait.retryAfter, 3000)
    // Force takes whatever the limit: admitted, and a debt of 1 unit lasts 1 s
    // (until a request of no units would be admitted again)
    const force = one(bucket, stored, Op.make(Op.Kind.Force, 1))[0]
    assert.isTrue(force.allowed)
    assert.strictEqual(force.retryAfter, 1000)
  })

  it("Peek with units held: as a take behind them would be", () => {
    // capacity 5, 5 held: one more does not fit, though the key itself is full
    const peek = one(bucket, undefined, Op.make(Op.Kind.Peek, 1, 5))[0]
    assert.isFalse(peek.allowed)
    assert.isTrue(one(bucket, undefined, Op.make(Op.Kind.Peek, 1, 0))[0].allowed)
  })

  it("Admit: a denial keeps the state as it was, where a Take logs it", () => {
    const log = Policy.slidingLog({ limit: 1, window: "1 second", countBlocked: true }) as Policy.Valid
    const [, full] = one(log, undefined, Op.make(Op.Kind.Take, 1))
    // a refused Admit leaves the log as it was; a refused Take logs the attempt
    assert.strictEqual(one(log, full, Op.make(Op.Kind.Admit, 1))[1], full)
    assert.notStrictEqual(one(log, full, Op.make(Op.Kind.Take, 1))[1], full)
  })

  it("operations a policy cannot do leave the key as it was", () => {
    const log = Policy.slidingLog({ limit: 2, window: "1 second" }) as Policy.Valid
    // a key that starts full: a release gives it nothing, and it stays without state
    assert.isUndefined(one(bucket, undefined, Op.make(Op.Kind.Release, 1))[1])
    // no forceAdd (a sliding log), no adapt (a token bucket), a rate on a key with no state
    assert.isUndefined(one(log, undefined, Op.make(Op.Kind.ForceAdd, 1))[1])
    assert.isUndefined(one(bucket, undefined, Op.make(Op.Kind.Adapt, 1, 20))[1])
    assert.isUndefined(one(bucket, undefined, Op.make(Op.Kind.SetRate, 2, 1000))[1])
    assert.isTrue(one(bucket, undefined, Op.make(Op.Kind.Adapt, 1, 20))[0].allowed)
  })

  it("only a refused Take starts a policy's block; a refused Admit (a waiter's try) does not", () => {
    const blocking = Policy.fixedWindow({ limit: 1, window: "1 second", blockDuration: "5 seconds" }) as Policy.Valid
    const [, full] = one(blocking, undefined, Op.make(Op.Kind.Take, 1))
    const [admit, afterAdmit] = one(blocking, full, Op.make(Op.Kind.Admit, 1), 10)
    assert.isFalse(admit.allowed)
    assert.notInstanceOf(afterAdmit, Block.Stored)
    const [take, afterTake] = one(blocking, full, Op.make(Op.Kind.Take, 1), 10)
    assert.isFalse(take.allowed)
    assert.instanceOf(afterTake, Block.Stored)
  })

  it("a release or a rate a policy cannot take leaves a key with state as it was", () => {
    const warm = Policy.smooth({ permits: 1, per: "1 second" }) as Policy.Valid
    const [, warmed] = one(warm, undefined, Op.make(Op.Kind.Take, 1))
    assert.strictEqual(one(warm, warmed, Op.make(Op.Kind.Release, 1), 10)[1], warmed)
    const conc = Policy.concurrency({ capacity: 2 }) as Policy.Valid
    const [, held] = one(conc, undefined, Op.make(Op.Kind.Take, 1))
    assert.strictEqual(one(conc, held, Op.make(Op.Kind.SetRate, 2, 1000), 10)[1], held)
  })

  it("TakeUpTo on a blocked key takes nothing", () => {
    const [, blocked] = one(bucket, undefined, Op.make(Op.Kind.Block, 1000))
    const [reply, after] = one(bucket, blocked, Op.make(Op.Kind.TakeUpTo, 3), 10)
    assert.isFalse(reply.allowed)
    assert.strictEqual(reply.value, 0)
    assert.strictEqual(reply.retryAfter, 990)
    assert.deepStrictEqual(after, blocked)
  })

  it("TakeUpTo with units held takes only what fits beside them, as a take would", () => {
    // 5 there, 2 held: up to 3 taken, and the reply counts the held units out
    const [some, after] = one(bucket, undefined, Op.make(Op.Kind.TakeUpTo, 4, 2))
    assert.isTrue(some.allowed)
    assert.strictEqual(some.value, 3)
    assert.strictEqual(some.remaining, 0)
    assert.strictEqual(one(bucket, after, Op.make(Op.Kind.Peek, 1))[0].remaining, 2)
    // a cost below what is free is taken whole
    assert.strictEqual(one(bucket, undefined, Op.make(Op.Kind.TakeUpTo, 2, 2))[0].value, 2)
    // everything held: nothing taken, the key left as it was, told when one unit fits
    const [none, untouched] = one(bucket, after, Op.make(Op.Kind.TakeUpTo, 4, 2), 0)
    assert.isFalse(none.allowed)
    assert.strictEqual(none.value, 0)
    assert.strictEqual(none.retryAfter, 1000)
    assert.strictEqual(untouched, after)
    // for every amount held, the units taken and those held never pass what a take admits
    for (let held = 0; held <= 6; held++) {
      const [r] = one(bucket, undefined, Op.make(Op.Kind.TakeUpTo, 10, held))
      assert.strictEqual(r.value, Math.max(0, 5 - held))
    }
  })

  it("a block that is over is not kept beside the state; no state settles at once", () => {
    const [, taken] = one(bucket, undefined, Op.make(Op.Kind.Take, 1))
    assert.notInstanceOf(taken, Block.Stored)
    const [, blocked] = one(bucket, undefined, Op.make(Op.Kind.Block, 0))
    assert.notInstanceOf(blocked, Block.Stored)
    assert.strictEqual(Interpreter.settledAt(bucket, undefined), -Infinity)
  })
})
