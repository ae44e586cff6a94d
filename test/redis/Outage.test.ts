/**
 * Every fallback mode x every operation answers within its bound while Redis
 * is down and after it comes back: on a redis-server of the test's own,
 * killed (calls refused at once), stopped (SIGSTOP: its socket open, calls
 * time out) and started again. The bound of a call is `maxWait` (for those
 * that wait) plus the store timeout, with room for a loaded machine; what
 * each call answers is the mode's (a local share, allow, deny,
 * StoreUnavailable), and a waiter already in line when Redis goes away is
 * answered too (with `deny` it once waited for ever).
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Duration, Effect, Exit, Fiber, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Policy from "../../src/Policy.ts"
import { RateLimiter } from "../../src/RateLimiter.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"
import * as Store from "../../src/Store.ts"
import { freePort, hasServer, killServer, startServer } from "./redis.ts"

const skipped = "redis-server is not installed (.ci/run installs it)"
const modes = ["local", "allow", "deny", "error"] as const
type Mode = typeof modes[number]

const TIMEOUT = 300
const MAX_WAIT = 1500
// Room for a loaded machine's scheduling: a bound on hanging, not on speed.
const SLACK = 2500

type Limiter = RateLimiter["Service"]

// What a call ended with, in a word.
type Outcome = "allowed" | "denied" | "exceeded" | "unavailable" | "other"

const outcomeOf = (exit: Exit.Exit<unknown, unknown>): Outcome => {
  if (Exit.isFailure(exit)) {
    const error = Cause.squash(exit.cause) as { readonly _tag?: string }
    return error._tag === "RateLimitExceeded"
      ? "exceeded"
      : error._tag === "StoreUnavailable"
      ? "unavailable"
      : "other"
  }
  const value = exit.value as unknown
  if (value === true || value === undefined) return "allowed"
  if (value === false) return "denied"
  if (typeof value === "object" && value !== null && "allowed" in value) {
    return (value as { readonly allowed: boolean }).allowed ? "allowed" : "denied"
  }
  if (typeof value === "object" && value !== null && "delay" in value) return "allowed" // a reservation
  return "other"
}

// Each operation, on keys of its own, and whether it waits (bound by maxWait).
const operations: ReadonlyArray<
  readonly [name: string, waits: boolean, run: (limiter: Limiter, key: string) => Effect.Effect<unknown, unknown>]
> = [
  ["acquire", false, (l, k) => l.acquire(k)],
  ["consume", false, (l, k) => l.consume(k)],
  ["wait", true, (l, k) => l.wait(k, { maxWait: Duration.millis(MAX_WAIT) })],
  ["reserve", true, (l, k) => l.reserve(k, { maxWait: Duration.millis(MAX_WAIT) })],
  ["limit", true, (l, k) => l.limit(k, { maxWait: Duration.millis(MAX_WAIT) })(Effect.void)],
  ["withPermit", true, (l, k) => l.withPermit(k, { maxWait: Duration.millis(MAX_WAIT) })(Effect.void)],
  ["acquire over keys", false, (l, k) => l.acquire([`${k}:a`, `${k}:b`])],
  ["consume over keys", false, (l, k) => l.consume([`${k}:a`, `${k}:b`])],
  ["wait over keys", true, (l, k) => l.wait([`${k}:a`, `${k}:b`], { maxWait: Duration.millis(MAX_WAIT) })]
]

// What a fresh key gets from each mode while the store does not answer.
const expected = (mode: Mode, waits: boolean): Outcome => {
  switch (mode) {
    case "local":
    case "allow":
      return "allowed"
    case "deny":
      return waits ? "exceeded" : "denied"
    case "error":
      return "unavailable"
  }
}

const suite = hasServer ? describe : describe.skip
suite(hasServer ? "Redis down: every mode, every operation" : `Redis down (${skipped})`, () => {
  it.live(
    "answers within maxWait + the store timeout while Redis is down (killed, then hung) and after it is back",
    () =>
      Effect.gen(function*() {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tollgate-outage-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
        const port = yield* freePort
        const server = { current: yield* startServer(port, dir) }
        yield* Effect.addFinalizer(() => killServer(server.current))
        const context = yield* Layer.build(RedisStore.layer({ url: `redis://127.0.0.1:${port}`, prefix: "outage:" }))
        const store = Context.get(context, Store.CurrentStore)!
        const limiters = yield* Effect.forEach(modes, (mode) =>
          RateLimiter.make({
            policy: Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 second" } }),
            fallback: { mode, share: 0.5, timeout: Duration.millis(TIMEOUT), retryAfter: "200 millis" }
          }).pipe(Effect.provideService(Store.CurrentStore, store)))

        // Runs every operation of every mode at once; each must end within its bound.
        let round = 0
        const everyCall = (
          phase: string,
          check: (mode: Mode, waits: boolean, outcome: Outcome, what: string) => void
        ) =>
          Effect.gen(function*() {
            round++
            const calls = modes.flatMap((mode, i) =>
              operations.map(([name, waits, run]) =>
                Effect.timed(Effect.exit(run(limiters[i], `${mode}:${phase}:${round}:${name}`))).pipe(
                  Effect.map(([took, exit]) => ({ mode, name, waits, took: Duration.toMillis(took), exit }))
                )
              )
            )
            const results = yield* Effect.all(calls, { concurrency: "unbounded" }).pipe(
              Effect.timeoutOrElse({
                duration: Duration.millis(MAX_WAIT + TIMEOUT + 2 * SLACK),
                orElse: () => Effect.die(`${phase}: a call hung`)
              })
            )
            for (const r of results) {
              const bound = (r.waits ? MAX_WAIT : 0) + TIMEOUT + SLACK
              assert.isBelow(r.took, bound, `${phase}: ${r.mode} ${r.name} took ${r.took} ms`)
              check(
                r.mode,
                r.waits,
                outcomeOf(r.exit),
                `${phase}: ${r.mode} ${r.name} (${r.took} ms): ${String(r.exit).slice(0, 300)}`
              )
            }
          })

        // A waiter in line (a key used up, its turn a second away) when Redis goes away.
        const waitersInLine = Effect.gen(function*() {
          round++
          const fibers = yield* Effect.forEach(limiters, (limiter, i) =>
            Effect.gen(function*() {
              const key = `${modes[i]}:line:${round}`
              const used = yield* limiter.consume(key, { cost: 2 })
              assert.isTrue(used.allowed && used.degraded === undefined, modes[i])
              return yield* Effect.forkChild(
                Effect.timed(Effect.exit(limiter.wait(key, { maxWait: Duration.millis(MAX_WAIT) })))
              )
            }))
          yield* Effect.sleep("100 millis") // each has joined its line
          return fibers
        })
        const answeredInTime = (
          fibers: ReadonlyArray<Fiber.Fiber<readonly [Duration.Duration, Exit.Exit<void, unknown>]>>
        ) =>
          Effect.gen(function*() {
            for (let i = 0; i < modes.length; i++) {
              const [took, exit] = yield* Fiber.join(fibers[i]).pipe(
                Effect.timeoutOrElse({
                  duration: Duration.millis(MAX_WAIT + TIMEOUT + SLACK),
                  orElse: () => Effect.die(`${modes[i]}: the waiter in line hung`)
                })
              )
              assert.isBelow(Duration.toMillis(took), MAX_WAIT + TIMEOUT + SLACK, modes[i])
              const outcome = outcomeOf(exit)
              // its turn came on the local share (a second), or the mode answered
              const allowed: ReadonlyArray<Outcome> = modes[i] === "deny"
                ? ["exceeded"]
                : modes[i] === "error"
                ? ["unavailable"]
                : ["allowed"]
              assert.include(allowed, outcome, `${modes[i]}: the waiter in line got ${outcome}`)
            }
          })

        // up: decided by Redis
        yield* everyCall("up", (_, __, outcome, what) => assert.strictEqual(outcome, "allowed", what))

        // killed: refused at once, the fallback answers; a waiter in line is answered too
        const killedLine = yield* waitersInLine
        yield* killServer(server.current)
        yield* everyCall(
          "killed",
          (mode, waits, outcome, what) => assert.strictEqual(outcome, expected(mode, waits), what)
        )
        yield* answeredInTime(killedLine)

        // back: every limiter is decided by Redis again
        server.current = yield* startServer(port, dir)
        yield* Effect.sleep("1500 millis") // reconnected, and past the fallback's retryAfter
        yield* everyCall("back", (_, __, outcome, what) => assert.strictEqual(outcome, "allowed", what))

        // hung (stopped: its socket open): calls time out into the fallback
        const hungLine = yield* waitersInLine
        server.current.kill("SIGSTOP")
        yield* everyCall(
          "hung",
          (mode, waits, outcome, what) => assert.strictEqual(outcome, expected(mode, waits), what)
        )
        yield* answeredInTime(hungLine)
        server.current.kill("SIGCONT")

        yield* Effect.sleep("1500 millis")
        yield* everyCall("back again", (_, __, outcome, what) => assert.strictEqual(outcome, "allowed", what))
      }),
    120_000
  )
})
