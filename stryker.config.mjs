// Mutation testing of the core: `npm run test:mutation` (docs/reliability.md,
// "Mutation testing"). Each mutant of the files in `mutate` is run against the
// in-process tests that cover it (vitest.mutation.config.ts).
/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  packageManager: "npm",
  testRunner: "vitest",
  plugins: ["@stryker-mutator/vitest-runner"],
  vitest: { configFile: "vitest.mutation.config.ts", related: false },
  mutate: [
    "src/internal/**/*.ts",
    "src/RateLimiter.ts",
    "src/Policy.ts",
    "src/MemoryStore.ts",
    "src/Store.ts",
    "src/http/RateLimitHeaders.ts"
  ],
  // Only the tests that reach a mutant run against it.
  coverageAnalysis: "perTest",
  // A mutant in code that runs once, when a module loads (a constant table),
  // would need every test re-run in a fresh process: about nine tenths of the
  // time for a few percent of the mutants. They are reported as ignored, and
  // counted in docs/reliability.md.
  ignoreStatic: true,
  // Two cores: one test process each.
  concurrency: 2,
  // A re-run tests only the mutants whose code or tests changed since the
  // last run (the file stays out of git, beside the report).
  incremental: true,
  incrementalFile: "reports/mutation/incremental.json",
  reporters: ["progress", "clear-text", "html", "json"],
  htmlReporter: { fileName: "reports/mutation/index.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  clearTextReporter: { allowColor: false, logTests: false, reportScoreTable: true },
  thresholds: { high: 90, low: 80, break: null },
  timeoutMS: 10_000,
  // The first run (every test, with coverage) takes minutes on a busy machine.
  dryRunTimeoutMinutes: 30,
  // TypeScript 7 (tsgo) has no JavaScript compiler API: the TypeScript checker
  // cannot load it, and Stryker's tsconfig rewriting neither. The sandbox is a
  // folder of this project, so the tsconfig needs no rewriting: point the
  // rewriter at a file that does not exist. Mutants that do not type-check run
  // like any other (vitest strips types) and are killed or survive on behaviour.
  tsconfigFile: "tsconfig.mutation-none.json",
  tempDirName: ".stryker-tmp",
  cleanTempDir: "always"
}
