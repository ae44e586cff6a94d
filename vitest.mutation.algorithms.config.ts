import { defineConfig } from "vitest/config"

// The tests the algorithms' mutation run uses (stryker.algorithms.config.mjs):
// the algorithm tests alone, with the property runs of the core's run.
export default defineConfig({
  test: {
    include: ["test/algorithm/*.test.ts"],
    testTimeout: 60_000,
    env: { TOLLGATE_MODEL_RUNS: "40" }
  }
})
