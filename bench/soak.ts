/**
 * @effect-diagnostics globalDate:off
 *
 * Soak: a million distinct keys streamed through one limiter with a short
 * idleTimeout, under a TestClock that the program advances as it goes (so a
 * virtual minute of traffic runs as fast as the CPU allows). Not part of
 * `npm test`.
 *
 *   npm run soak                          1,000,000 keys, fast path on and off
 *   npm run soak -- --keys=200000         fewer keys
 *   npm run soak -- --fast-path=false     one mode only (true or false)
 *   npm run soak -- --write               also writes the figures into
 *                                         docs/reliability.md ("Last soak run")
 *
 * The traffic, per virtual millisecond: PER_MS new keys, each acquired once
 * (one in ten then takes the rest of its bucket with a consume, one in a
 * hundred waits up to 100 ms, one in a thousand peeks), and as many repeat
 * visits to keys seen in the last second. Prints the commands run, the
 * buckets started and reaped (keys churned), the peak of live buckets and
 * actors, the heap before, at its highest (sampled twice a virtual second)
 * and after (each after two full collections: run with --expose-gc, as
 * `npm run soak` does), and the wall time; then checks that every bucket was
 * reaped and every waiter answered, and exits non-zero if not.
 */
import { Effect, Exit, Fiber, Scope } from "effect"
import { TestClock } from "effect/testing"
import { readFileSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as Policy from "../src/Policy.ts"
import { RateLimiter } from "../src/RateLimiter.ts"

const args = process.argv.slice(2)
const flag = (name: string): string | undefined => {
  const hit = args.find((a) => a === `--${name}` || a.startsWith(`--${name}=`))
  return hit === undefined ? undefined : hit.includes("=") ? hit.slice(hit.indexOf("=") + 1) : "true"
}

const KEYS = Number(flag("keys") ?? 1_000_000)
const PER_MS = 50 // new keys per virtual millisecond
const IDLE_MS = 250
const modes = flag("fast-path") === undefined ? [true, false] : [flag("fast-path") !== "false"]
const write = flag("write") !== undefined

// 5 tokens, 5 more every 100 ms: a used bucket has settled 100 ms later
const policy = Policy.tokenBucket({ capacity: 5, refill: { tokens: 5, per: "100 millis" } })

const gc = (): void => {
  globalThis.gc?.()
  globalThis.gc?.()
}
const heapMB = (): number => process.memoryUsage().heapUsed / 1024 / 1024

interface Figures {
  readonly fastPath: boolean
  readonly keys: number
  readonly commands: number
  readonly started: number
  readonly reaped: number
  readonly peakBuckets: number
  readonly peakActors: number
  readonly allowed: number
  readonly denied: number
  readonly overloaded: number
  readonly waits: number
  readonly virtualSeconds: number
  readonly heapBefore: number
  readonly heapPeak: number
  readonly heapAfterReap: number
  readonly heapAfterClose: number
  readonly wallSeconds: number
}

const soak = (fastPath: boolean) =>
  Effect.gen(function*() {
    gc()
    const heapBefore = heapMB()
    const scope = yield* Scope.make()
    const limiter = yield* RateLimiter.make({ policy, fastPath, idleTimeout: IDLE_MS }).pipe(Scope.provide(scope))
    let commands = 0
    let peakBuckets = 0
    let peakActors = 0
    let heapPeak = 0
    let waitsAnswered = 0
    const waits: Array<Fiber.Fiber<void>> = []
    let seed = 42
    const random = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
      return seed % n
    }
    const count = Effect.sync(() => {
      waitsAnswered++
    })

    for (let i = 0; i < KEYS; i++) {
      const key = `user:${i}`
      yield* limiter.acquire(key)
      commands++
      if (i % 10 === 0) {
        yield* limiter.consume(key, { cost: 4 })
        commands++
      }
      if (i % 100 === 0) {
        const fiber = yield* limiter.wait(key, { cost: 5, maxWait: 100 }).pipe(
          Effect.exit,
          Effect.andThen(count),
          Effect.forkChild({ startImmediately: true })
        )
        waits.push(fiber)
        commands++
      }
      if (i % 1000 === 0) {
        yield* limiter.peek(key)
        commands++
      }
      // a repeat visit to a key seen in the last second (maybe reaped since)
      if (i > 0) {
        yield* Effect.exit(limiter.acquire(`user:${i - 1 - random(Math.min(i, PER_MS * 1000))}`))
        commands++
      }
      if (i % PER_MS === PER_MS - 1) {
        yield* TestClock.adjust(1)
        const stats = yield* limiter.stats
        if (stats.buckets > peakBuckets) peakBuckets = stats.buckets
        if (stats.actors > peakActors) peakActors = stats.actors
        if (i % (PER_MS * 500) === PER_MS * 500 - 1) {
          gc() // live heap, twice a virtual second
          heapPeak = Math.max(heapPeak, heapMB())
          for (let j = waits.length - 1; j >= 0; j--) if (waits[j].pollUnsafe() !== undefined) waits.splice(j, 1)
        }
      }
    }
    // the stream stops: everything settles and is reaped
    yield* TestClock.adjust(IDLE_MS * 2 + 200)
    yield* Effect.repeat(Effect.yieldNow, { times: 20 })
    const stats = yield* limiter.stats
    gc()
    heapPeak = Math.max(heapPeak, heapMB())
    const heapAfterReap = heapMB()
    const unanswered = waits.filter((f) => f.pollUnsafe() === undefined).length
    yield* Scope.close(scope, Exit.void)
    waits.length = 0
    gc()
    const heapAfterClose = heapMB()
    const problems = [
      stats.buckets !== 0 && `${stats.buckets} buckets left after idling`,
      stats.actors !== 0 && `${stats.actors} actors left after idling`,
      stats.started !== stats.reaped && `started ${stats.started} but reaped ${stats.reaped}`,
      unanswered !== 0 && `${unanswered} waits never answered`,
      stats.queued !== 0 && `${stats.queued} requests still queued`
    ].filter((p): p is string => typeof p === "string")
    return {
      figures: {
        fastPath,
        keys: KEYS,
        commands,
        started: stats.started,
        reaped: stats.reaped,
        peakBuckets,
        peakActors,
        allowed: stats.allowed,
        denied: stats.denied,
        overloaded: stats.overloaded,
        waits: waitsAnswered,
        virtualSeconds: (KEYS / PER_MS + IDLE_MS * 2 + 200) / 1000,
        heapBefore,
        heapPeak,
        heapAfterReap,
        heapAfterClose,
        wallSeconds: 0
      } satisfies Figures,
      problems
    }
  })

const fmt = (n: number) => n.toLocaleString("en-US")
const mb = (n: number) => `${n.toFixed(1)} MB`

const markdown = (runs: ReadonlyArray<Figures>): string => {
  const row = (label: string, f: (r: Figures) => string) => `| ${label} | ${runs.map(f).join(" | ")} |`
  return [
    `Run with \`npm run soak\` (Node ${process.version}, ${os.cpus().length} CPUs, ${os.platform()}/${os.arch()}):`,
    `${PER_MS} new keys per virtual millisecond, idleTimeout ${IDLE_MS} ms, a token bucket of 5 refilled`,
    "every 100 ms; each new key acquired once, one in ten consumed to empty, one in a hundred waits up to",
    "100 ms, one in a thousand peeked, plus one repeat visit to a key from the last second per new key.",
    "",
    `| | ${runs.map((r) => `fastPath: ${r.fastPath}`).join(" | ")} |`,
    `|---|${runs.map(() => "---:").join("|")}|`,
    row("distinct keys", (r) => fmt(r.keys)),
    row("commands run", (r) => fmt(r.commands)),
    row("buckets started (keys churned)", (r) => fmt(r.started)),
    row("buckets reaped", (r) => fmt(r.reaped)),
    row("peak live buckets", (r) => fmt(r.peakBuckets)),
    row("peak running actors", (r) => fmt(r.peakActors)),
    row("allowed / denied", (r) => `${fmt(r.allowed)} / ${fmt(r.denied)}`),
    row("overloaded", (r) => fmt(r.overloaded)),
    row("waits answered", (r) => fmt(r.waits)),
    row("virtual time", (r) => `${r.virtualSeconds.toFixed(1)} s`),
    row("heap before", (r) => mb(r.heapBefore)),
    row("heap at its highest", (r) => mb(r.heapPeak)),
    row("heap after reaping everything", (r) => mb(r.heapAfterReap)),
    row("heap after closing the limiter", (r) => mb(r.heapAfterClose)),
    row("wall time", (r) => `${r.wallSeconds.toFixed(1)} s`)
  ].join("\n")
}

const main = async () => {
  if (globalThis.gc === undefined) console.warn("run with node --expose-gc (npm run soak) for heap figures")
  const runs: Array<Figures> = []
  let failed = false
  for (const fastPath of modes) {
    const started = performance.now()
    const { figures, problems } = await Effect.runPromise(
      soak(fastPath).pipe(Effect.scoped, Effect.provide(TestClock.layer()))
    )
    const done = { ...figures, wallSeconds: (performance.now() - started) / 1000 }
    runs.push(done)
    console.log(JSON.stringify(done))
    for (const problem of problems) console.error(`soak (fastPath: ${fastPath}): ${problem}`)
    failed ||= problems.length > 0
  }
  const block = markdown(runs)
  console.log(`\n${block}\n`)
  if (write && !failed) {
    const path = new URL("../docs/reliability.md", import.meta.url)
    const doc = readFileSync(path, "utf8")
    const begin = "<!-- soak:begin -->"
    const end = "<!-- soak:end -->"
    const from = doc.indexOf(begin)
    const to = doc.indexOf(end)
    if (from < 0 || to < from) throw new Error(`docs/reliability.md has no ${begin} ... ${end} section`)
    writeFileSync(path, `${doc.slice(0, from + begin.length)}\n${block}\n${doc.slice(to)}`)
    console.log("wrote docs/reliability.md")
  }
  if (failed) process.exitCode = 1
}

await main()
