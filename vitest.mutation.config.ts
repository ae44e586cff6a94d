import { defineConfig } from "vitest/config"

// The tests `npm run test:mutation` runs against each mutant of the core
// (stryker.config.mjs): the in-process ones, which cover the core and need no
// server (the cluster's one-process tests among them: they hand keys over
// through the supervisor's snapshot and restore). Property runs are shorter
// than in `npm test`: a mutant that a thousand random runs catch is caught by
// the first dozens too, and the full sizes still run in `npm test`.
export default defineConfig({
  test: {
    include: [
      "test/*.test.ts",
      "test/algorithm/*.test.ts",
      "test/reliability/*.test.ts",
      "test/http/RateLimitHeaders.test.ts",
      "test/http/RateLimitMiddleware.test.ts",
      "test/cluster/ClusterLimiter.test.ts"
    ],
    testTimeout: 60_000,
    env: {
      TOLLGATE_MODEL_RUNS: "40",
      BEYOND_RUNS: "30",
      TOLLGATE_OVERLOAD_CALLERS: "5000",
      TOLLGATE_FLOOD_KEYS: "20000"
    }
  }
})
