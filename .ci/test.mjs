// `npm test` after the Lua is generated: the static checks (.ci/static.mjs)
// and vitest at the same time. The test files keep the machine busy but for
// the end of the run, when the last long files run alone; the static checks
// fill that room instead of running first. They still fail fast: their
// output is printed as soon as they end, and if one failed, vitest is stopped
// and the run exits 1. Arguments are vitest's (`npm test -- test/redis`).
// Exits with vitest's code, or 1 when a static check failed.
import { spawn } from "node:child_process"

const checks = spawn(process.execPath, [".ci/static.mjs"], { stdio: ["ignore", "pipe", "pipe"] })
let output = ""
checks.stdout.on("data", (chunk) => (output += chunk))
checks.stderr.on("data", (chunk) => (output += chunk))

// vitest from the PATH npm sets (node_modules/.bin), in this process's group, so Ctrl-C stops it too
const vitest = spawn("vitest", ["run", ...process.argv.slice(2)], { stdio: "inherit" })

const exited = (child) =>
  new Promise((resolve) => {
    child.on("error", (error) => {
      process.stderr.write(`${String(error)}\n`)
      resolve(1)
    })
    child.on("close", (code, signal) => resolve(code ?? (signal === null ? 1 : 128)))
  })
const tests = exited(vitest)

const checked = await exited(checks)
process.stdout.write(output)
if (checked !== 0) {
  process.stdout.write("\nthe static checks failed: the tests are stopped\n")
  vitest.kill("SIGTERM")
  await tests
  process.exit(1)
}
process.exit(await tests)
