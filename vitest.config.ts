import { spawnSync } from "node:child_process"
import { defineConfig } from "vitest/config"
import { BaseSequencer, type Reporter, type TestModule, type TestSpecification } from "vitest/node"

// What the tests that need a server look for; without it they are registered
// and skipped, and the run ends by saying what to install.
const installed = (commands: ReadonlyArray<string>, flag: string): boolean =>
  commands.some((c) => spawnSync(c, [flag], { stdio: "ignore" }).status === 0)
const missing = (): Array<string> => [
  ...(process.env.REDIS_URL ? [] : ["a Redis server in REDIS_URL (e.g. REDIS_URL=redis://127.0.0.1:6379)"]),
  ...(installed(["redis-server"], "--version") ? [] : ["redis-server"]),
  ...(installed(["nginx", "/usr/sbin/nginx"], "-v") ? [] : ["nginx"]),
  ...(installed(["openssl"], "version") ? [] : ["openssl"])
]

// Ends every run with one plain line, "tests: N passed, N failed, N skipped",
// that any CI can read whatever it knows about vitest; before it, when tests
// were skipped for want of a server, one line naming what to install.
const summary: Reporter = {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors) {
    let passed = 0
    let failed = 0
    let skipped = 0
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state
        if (state === "passed") passed++
        else if (state === "failed") failed++
        else skipped++
      }
      if (module.state() === "failed" && module.children.size === 0) failed++
    }
    failed += unhandledErrors.length
    const needs = skipped > 0 ? missing() : []
    if (needs.length > 0) {
      process.stdout.write(
        `\n${skipped} tests skipped: the full suite needs ${needs.join(", ")} (.ci/run installs and starts them)`
      )
    }
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`)
  }
}

// Files that run in a process of their own (vitest's isolation): those that
// start servers, npm, nginx or Postgres runners, or measure the heap. The
// rest share their worker's modules: loading Effect again for each of them
// was 43 % of their time (in process alone: 47.5 s isolated, 16.1 s shared).
const isolated = [
  "test/bench/**/*.test.ts",
  "test/cluster/Processes.test.ts",
  "test/docs/**/*.test.ts",
  "test/gateway/**/*.test.ts",
  "test/package/**/*.test.ts",
  "test/recipes/**/*.test.ts",
  "test/reliability/**/*.test.ts",
  "test/server/**/*.test.ts"
]

// The files that take longest, in the order of their durations in a CI run
// (seconds). A fresh clone has no timings of its own, and vitest would start
// them by size (most of these are small files: last); started first, the
// other files fill the workers around them. Only the order of the run
// depends on this list.
const longest = [
  "test/package/Consumer.test.ts", // 247
  "test/redis/Conformance.test.ts", // 126
  "test/cluster/Processes.test.ts", // 104
  "test/redis/Failover.test.ts", // 104
  "test/docs/Commands.test.ts", // 71
  "test/server/Service.test.ts", // 67
  "test/server/Redis.test.ts", // 60
  "test/redis/ConformanceEval.test.ts", // 36
  "test/redis/Restart.test.ts", // 31
  "test/server/Abuse.test.ts", // 27
  "test/server/Process.test.ts", // 27
  "test/redis/ConformanceCluster.test.ts", // 24
  "test/server/Cluster.test.ts", // 20
  "test/redis/ConformanceNodeRedis.test.ts", // 19
  "test/gateway/Gateways.test.ts", // 18
  "test/redis/ConformanceSentinel.test.ts", // 16
  "test/algorithm/Laws.test.ts", // 15
  "test/reliability/Floods.test.ts" // 14
]
const rank = (spec: TestSpecification): number => {
  const i = longest.findIndex((file) => spec.moduleId.endsWith(file))
  return i === -1 ? longest.length : i
}
class LongestFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const sorted = await super.sort(files)
    // stable: the rest keep vitest's order (its timings when it has them, else size)
    return sorted.map((spec, i) => ({ spec, i })).sort((a, b) => rank(a.spec) - rank(b.spec) || a.i - b.i).map((
      { spec }
    ) => spec)
  }
}

export default defineConfig({
  test: {
    globalSetup: ["test/lua/setup.ts"],
    reporters: ["default", summary],
    testTimeout: 60_000,
    // Vitest's default is one worker fewer than the cores: one, on two cores.
    // Much of the suite waits on processes of its own (the service, npm,
    // nginx, redis-server), so three files at a time keep two cores busy.
    maxWorkers: 3,
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        extends: true,
        test: { name: "shared", include: ["test/**/*.test.ts"], exclude: isolated, isolate: false }
      },
      {
        extends: true,
        test: { name: "isolated", include: isolated }
      }
    ]
  }
})
