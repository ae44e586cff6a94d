// Summarises Stryker's report (reports/mutation/mutation.json) after
// `npm run test:mutation`: the score of each file of the core and overall, and
// the mutants that survived or were never reached, by place. With --write it
// replaces the block between <!-- mutation:begin --> and <!-- mutation:end -->
// in docs/reliability.md.
//
// Reports to read may be named (`node .ci/mutation-summary.mjs a.json b.json`):
// each file of the core is taken from the first that has it. By default the
// last run's report, or, for a run that was stopped before its end, the
// incremental file (which holds every mutant tested so far).
import { existsSync, readFileSync, writeFileSync } from "node:fs"

const root = new URL("../", import.meta.url)
const named = process.argv.slice(2).filter((a) => !a.startsWith("--"))
const sources = named.length > 0
  ? named
  : ["reports/mutation/mutation.json", "reports/mutation/incremental.json"].filter((f) => existsSync(new URL(f, root)))
const report = { files: {} }
for (const source of sources) {
  const files = JSON.parse(readFileSync(new URL(source, root), "utf8")).files
  for (const [path, file] of Object.entries(files)) report.files[path] ??= file
}
const rows = []
const survivors = []
const total = { killed: 0, survived: 0, timeout: 0, noCoverage: 0, ignored: 0, other: 0 }
for (const [path, file] of Object.entries(report.files).sort(([a], [b]) => a.localeCompare(b))) {
  const count = { killed: 0, survived: 0, timeout: 0, noCoverage: 0, ignored: 0, other: 0 }
  for (const m of file.mutants) {
    const key = m.status === "Killed"
      ? "killed"
      : m.status === "Survived"
      ? "survived"
      : m.status === "Timeout"
      ? "timeout"
      : m.status === "NoCoverage"
      ? "noCoverage"
      : m.status === "Ignored"
      ? "ignored"
      : "other"
    count[key]++
    total[key]++
    if (key === "survived" || key === "noCoverage") {
      const line = file.source.split("\n")[m.location.start.line - 1] ?? ""
      survivors.push({ path, line: m.location.start.line, mutator: m.mutatorName, status: m.status, code: line.trim(), replacement: m.replacement })
    }
  }
  rows.push([path, count])
}
const score = (c) => {
  const detected = c.killed + c.timeout
  const valid = detected + c.survived + c.noCoverage
  return valid === 0 ? "n/a" : `${((100 * detected) / valid).toFixed(1)} %`
}
const fmt = (n) => n.toLocaleString("en-US")
const lines = [
  `| file | score | killed | timed out | survived | not covered | ignored (static) |`,
  `|---|---:|---:|---:|---:|---:|---:|`,
  ...rows.map(([path, c]) =>
    `| \`${path}\` | ${score(c)} | ${fmt(c.killed)} | ${fmt(c.timeout)} | ${fmt(c.survived)} | ${fmt(c.noCoverage)} | ${fmt(c.ignored)} |`
  ),
  `| **the core** | **${score(total)}** | ${fmt(total.killed)} | ${fmt(total.timeout)} | ${fmt(total.survived)} | ${fmt(total.noCoverage)} | ${fmt(total.ignored)} |`
]
const text = lines.join("\n")
console.log(text)
console.log(`\n${survivors.length} mutants survived or were not covered`)
writeFileSync(new URL("reports/mutation/survivors.json", root), JSON.stringify(survivors, null, 2))
if (process.argv.includes("--write")) {
  const docs = new URL("docs/reliability.md", root)
  const page = readFileSync(docs, "utf8")
  const begin = "<!-- mutation:begin -->"
  const end = "<!-- mutation:end -->"
  const at = page.indexOf(begin)
  const to = page.indexOf(end)
  if (at < 0 || to < at) throw new Error(`docs/reliability.md has no ${begin} ... ${end} block`)
  writeFileSync(docs, page.slice(0, at + begin.length) + "\n" + text + "\n" + page.slice(to))
  console.log("docs/reliability.md updated")
}
