import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    sequence: { concurrent: false },
    testTimeout: 60_000
  }
})
