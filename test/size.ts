/**
 * How large the long randomized and load tests run. A developer's `npm test`
 * runs them at a quick size; CI (`CI=true`, as `.ci/run` runs) and
 * `TOLLGATE_TEST_SIZE=full` run the full sizes. A test's own variable
 * (`TOLLGATE_MODEL_RUNS`, `BEYOND_RUNS`, ...) wins over both.
 */

/** Whether this run uses the full sizes. */
export const full: boolean = process.env.TOLLGATE_TEST_SIZE === "full" ||
  (process.env.TOLLGATE_TEST_SIZE !== "quick" && process.env.CI === "true")

/** A test's size: its own variable when set, else the quick or the full size. */
export const size = (variable: string, quick: number, fullSize: number): number => {
  const own = process.env[variable]
  return own !== undefined && own !== "" ? Number(own) : full ? fullSize : quick
}
