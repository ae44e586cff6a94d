import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { Policy } from "../src/index.ts"
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
