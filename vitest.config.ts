import { defineConfig } from "vitest/config"
import type { Reporter, TestModule } from "vitest/node"

// Ends every run with one plain line, "tests: N passed, N failed", that any
// CI can read whatever it knows about vitest.
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
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`)
  }
}

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/lua/setup.ts"],
    reporters: ["default", summary],
    testTimeout: 60_000
  }
})
