/**
 * Model-based random testing with the fast path on (the default):
 * random commands against the reference model in model.ts. With Model.actor.test.ts,
 * over 100,000 commands per run in CI (test/size.ts: a quarter in a developer's
 * run). Replay a failure with
 * TOLLGATE_SEED=<seed>; scale with TOLLGATE_MODEL_RUNS=<runs>.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { size } from "../size.ts"
import { check } from "./model.ts"

const runs = size("TOLLGATE_MODEL_RUNS", 150, 600)

describe("model-based (fastPath: true)", () => {
  it.effect(`${runs} random runs of up to 200 commands agree with the reference model`, () =>
    Effect.gen(function*() {
      const summary = yield* check({ fastPath: true, runs, length: 200 })
      console.log(`model (fastPath: true): ${JSON.stringify(summary)}`)
      assert.isAtLeast(summary.commands, runs * 100)
      // the runs reached every part of the model: waiters, admissions from the line, interruptions,
      // shutdowns, reaps, clocks stepping back and reservations
      for (const [name, count] of Object.entries(summary)) {
        if (name !== "seed") assert.isAbove(count, 0, `no run reached ${name}`)
      }
    }), { timeout: 120_000 })
})
