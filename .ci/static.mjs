// The static checks of `npm test`, run at once: the type check, the lint, the
// format and the API reference with its examples. They read the sources and
// write nothing that another reads (the Lua is generated once before them), so
// running them side by side only shortens the wait. Each one's output is
// printed whole, in this order, once all have ended, so that a failure reads
// as it would alone; exits 1 when any failed.
import { spawn } from "node:child_process"

const scripts = ["typecheck", "lint", "fmt:check", "docs"]
const npm = process.env.npm_execpath

const run = (script) =>
  new Promise((resolve) => {
    const started = Date.now()
    // npm's own runner (the one running `npm test`) when known, else `npm` on the PATH
    const [command, args] = npm === undefined
      ? ["npm", ["run", "-s", script]]
      : [process.execPath, [npm, "run", "-s", script]]
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    child.on("error", (error) => resolve({ script, code: 1, output: String(error), seconds: 0 }))
    child.on("close", (code) => resolve({ script, code, output, seconds: (Date.now() - started) / 1000 }))
  })

const results = await Promise.all(scripts.map(run))
let failed = 0
for (const { script, code, output, seconds } of results) {
  process.stdout.write(`\n> npm run ${script} (${seconds.toFixed(1)} s)${code === 0 ? "" : `: exit code ${code}`}\n`)
  process.stdout.write(output)
  if (code !== 0) failed++
}
if (failed > 0) {
  process.stdout.write(`\n${failed} of the static checks failed\n`)
  process.exit(1)
}
