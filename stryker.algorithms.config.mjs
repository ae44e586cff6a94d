// The pure algorithms' own mutation run (`npm run test:mutation:algorithms`):
// each mutant of src/internal/algorithm/ against the algorithm tests alone
// (vitest.mutation.algorithms.config.ts). Every limiter test runs a step, so
// under the core's run each of these mutants would run hundreds of tests; the
// algorithm tests (independent models, peer tables, exact rationals) are the
// ones that claim to hold the arithmetic, and 7 s for all of them keeps the
// run to minutes. A mutant they miss is a gap in them even if a limiter test
// would catch it.
import base from "./stryker.config.mjs"

/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  ...base,
  vitest: { configFile: "vitest.mutation.algorithms.config.ts", related: false },
  mutate: ["src/internal/algorithm/**/*.ts"],
  incrementalFile: "reports/mutation/algorithms-incremental.json",
  htmlReporter: { fileName: "reports/mutation/algorithms.html" },
  jsonReporter: { fileName: "reports/mutation/algorithms.json" }
}
