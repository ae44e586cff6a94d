// Keeps package-lock.json complete for `npm ci`.
//
// Tools such as @effect/tsgo, dprint and oxlint ship one optional package per
// platform. When the registry an install runs against serves only some of
// them, npm records none of the others, and `npm ci` then refuses the lock
// file ("Missing: @dprint/darwin-arm64@ from lock file"). This adds an entry
// for each missing platform package, marked optional and limited to its
// os/cpu/libc, so every platform's `npm ci` accepts the lock file and skips
// what is not for it. Runs as the root `postinstall`; idempotent.
import { readFileSync, writeFileSync } from "node:fs"

const file = new URL("../package-lock.json", import.meta.url)
const lock = JSON.parse(readFileSync(file, "utf8"))
const packages = lock.packages ?? {}

const OS = ["darwin", "linux", "win32", "android", "freebsd", "openbsd", "netbsd", "sunos", "aix"]
const CPU = ["arm64", "x64", "ia32", "arm", "loong64", "ppc64", "riscv64", "s390x", "mips64el"]
const tokens = (name) => name.split("/").pop().split(/[-_.]/)

let added = 0
for (const [path, entry] of Object.entries(packages)) {
  for (const [name, range] of Object.entries(entry.optionalDependencies ?? {})) {
    const key = `${path === "" ? "" : path + "/"}node_modules/${name}`
    if (packages[key] !== undefined || packages[`node_modules/${name}`] !== undefined) continue
    const parts = tokens(name)
    const os = OS.filter((o) => parts.includes(o))
    const cpu = CPU.filter((c) => parts.includes(c))
    const libc = parts.includes("musl") ? ["musl"] : parts.includes("glibc") || parts.includes("gnu") ? ["glibc"] : []
    if (os.length === 0 && cpu.length === 0) continue // not a platform package: leave it to npm
    packages[`node_modules/${name}`] = {
      version: String(range).replace(/^[\^~=]/, ""),
      dev: entry.dev === true ? true : undefined,
      optional: true,
      os: os.length > 0 ? os : undefined,
      cpu: cpu.length > 0 ? cpu : undefined,
      libc: libc.length > 0 ? libc : undefined
    }
    added++
  }
}

if (added > 0) {
  lock.packages = Object.fromEntries(Object.entries(packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a < b ? -1 : 1)))
  writeFileSync(file, JSON.stringify(lock, null, 2) + "\n")
  console.log(`complete-lockfile: added ${added} platform entries`)
}
