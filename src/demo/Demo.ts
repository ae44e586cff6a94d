/**
 * The live demo that `npm start` runs today: three keys with different token
 * bucket policies, each hammered by concurrent fibers for a few seconds. Every
 * second it prints how many requests each key admitted and denied (a table
 * that updates in place on a terminal, appended tables otherwise), then a
 * summary that checks the token bucket bound `capacity + rate × elapsed`.
 *
 * @since 0.1.0
 */
import { Clock, Config, Console, Duration, Effect, Layer, Random, Ref, Schema, Stdio } from "effect"
import type { InvalidPolicy } from "../Errors.ts"
import * as Policy from "../Policy.ts"
import { type CallError, RateLimiter } from "../RateLimiter.ts"

/**
 * A key of the demo and its token bucket.
 *
 * @since 0.1.0
 */
export interface Tier {
  readonly key: string
  /** Largest burst. */
  readonly capacity: number
  /** Tokens added per second, continuously. */
  readonly refillPerSecond: number
}

/**
 * The keys the demo hammers.
 *
 * @since 0.1.0
 */
export const tiers: ReadonlyArray<Tier> = [
  { key: "free", capacity: 5, refillPerSecond: 2 },
  { key: "pro", capacity: 20, refillPerSecond: 10 },
  { key: "burst", capacity: 50, refillPerSecond: 1 }
]

const policies: ReadonlyMap<string, Policy.Policy> = new Map(
  tiers.map((tier) => [
    tier.key,
    Policy.tokenBucket({ capacity: tier.capacity, refill: { tokens: tier.refillPerSecond, per: "1 second" } })
  ])
)

const fallbackPolicy = Policy.tokenBucket({ capacity: 1, refill: { tokens: 1, per: "1 second" } })

/**
 * The per-key policy function given to the limiter: each tier's own token
 * bucket; any other key gets 1 request per second.
 *
 * @since 0.1.0
 */
export const policyFor = (key: string): Policy.Policy => policies.get(key) ?? fallbackPolicy

/**
 * How the demo runs.
 *
 * @since 0.1.0
 */
export interface Options {
  /** How long to hammer the keys, in whole seconds (one table per second). */
  readonly seconds: number
  /** Concurrent fibers per key. */
  readonly fibersPerKey: number
  /** Each fiber pauses a random time in this range (milliseconds) between calls. */
  readonly pauseMillis: { readonly min: number; readonly max: number }
}

/**
 * The options, read from the environment: `DEMO_SECONDS` (default 5).
 *
 * @since 0.1.0
 */
export const options: Config.Config<Options> = Config.schema(
  Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 3600 })),
  "DEMO_SECONDS"
).pipe(
  Config.withDefault(5),
  Config.map((seconds) => ({ seconds, fibersPerKey: 20, pauseMillis: { min: 10, max: 50 } }))
)

interface Counts {
  readonly admitted: number
  readonly denied: number
}

const zero: Counts = { admitted: 0, denied: 0 }

const add = (a: Counts, b: Counts): Counts => ({ admitted: a.admitted + b.admitted, denied: a.denied + b.denied })

const count = (allowed: boolean) => (c: Counts): Counts =>
  allowed ? { admitted: c.admitted + 1, denied: c.denied } : { admitted: c.admitted, denied: c.denied + 1 }

const describePolicy = (tier: Tier): string => `${tier.capacity} burst, ${tier.refillPerSecond}/s`

const table = (rows: ReadonlyArray<ReadonlyArray<string>>): ReadonlyArray<string> => {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  return rows.map((row) =>
    row.map((cell, column) => column < 2 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!)).join("  ")
  )
}

// Erase the previous table: cursor up one line and clear it, `lines` times.
const eraseLines = (lines: number): string => "\x1b[1A\x1b[2K".repeat(lines)

/**
 * Runs the demo against the `RateLimiter` in context and prints to the
 * console; redraws in place when stdout is a terminal.
 *
 * @since 0.1.0
 */
export const run = Effect.fn("Demo.run")(function*(options: Options) {
  const limiter = yield* RateLimiter
  const tty = yield* (yield* Stdio.Stdio).stdoutIsTerminal
  const windows = yield* Effect.forEach(tiers, () => Ref.make(zero))
  const totals = tiers.map(() => zero)

  const worker = Effect.fnUntraced(function*(key: string, window: Ref.Ref<Counts>) {
    while (true) {
      const allowed = yield* limiter.acquire(key).pipe(
        Effect.catchTag("Overloaded", () => Effect.succeed(false)) // refused, took nothing: a denial here
      )
      yield* Ref.update(window, count(allowed))
      const pause = yield* Random.nextIntBetween(options.pauseMillis.min, options.pauseMillis.max)
      yield* Effect.sleep(Duration.millis(pause))
    }
  })

  const workers = Effect.forEach(
    tiers.flatMap((tier, i) => Array.from({ length: options.fibersPerKey }, () => worker(tier.key, windows[i]!))),
    (fiber) => fiber,
    { concurrency: "unbounded", discard: true }
  )

  let printedLines = 0
  const render = Effect.fnUntraced(function*(second: number) {
    const window = yield* Effect.forEach(windows, (ref) => Ref.getAndSet(ref, zero))
    window.forEach((counts, i) => {
      totals[i] = add(totals[i]!, counts)
    })
    const lines = [
      `second ${second} of ${options.seconds}`,
      ...table([
        ["key", "policy", "admitted/s", "denied/s", "admitted", "denied"],
        ...tiers.map((tier, i) => [
          tier.key,
          describePolicy(tier),
          String(window[i]!.admitted),
          String(window[i]!.denied),
          String(totals[i]!.admitted),
          String(totals[i]!.denied)
        ])
      ])
    ]
    const erase = tty && printedLines > 0 ? eraseLines(printedLines) : ""
    yield* Console.log(erase + lines.join("\n") + (tty ? "" : "\n"))
    printedLines = lines.length
  })

  yield* Console.log(
    `tollgate demo: ${tiers.length} keys × ${options.fibersPerKey} fibers calling acquire for ${options.seconds} s\n`
  )
  const start = yield* Clock.currentTimeMillis
  const sleepUntilSecond = Effect.fnUntraced(function*(second: number) {
    const now = yield* Clock.currentTimeMillis
    yield* Effect.sleep(Duration.millis(Math.max(0, start + second * 1000 - now)))
  })

  // Tables for seconds 1 .. n-1 while the workers run; at second n the workers
  // stop (interrupted by the race) before the last table, so the tables add up.
  yield* Effect.raceFirst(
    workers,
    Effect.gen(function*() {
      for (let second = 1; second < options.seconds; second++) {
        yield* sleepUntilSecond(second)
        yield* render(second)
      }
      yield* sleepUntilSecond(options.seconds)
    })
  )
  yield* render(options.seconds)
  const elapsedSeconds = ((yield* Clock.currentTimeMillis) - start) / 1000

  const stats = yield* limiter.stats
  const summary = table([
    ["key", "policy", "admitted", "denied", "bound", "within bound"],
    ...tiers.map((tier, i) => {
      const bound = Math.floor(tier.capacity + tier.refillPerSecond * elapsedSeconds)
      return [
        tier.key,
        describePolicy(tier),
        String(totals[i]!.admitted),
        String(totals[i]!.denied),
        String(bound),
        totals[i]!.admitted <= bound ? "yes" : "NO"
      ]
    })
  ])
  yield* Console.log(
    [
      ...(tty ? [""] : []),
      `summary after ${elapsedSeconds.toFixed(1)} s (bound = capacity + refill/s × elapsed):`,
      ...summary,
      "",
      `limiter stats: ${stats.buckets} buckets, ${stats.allowed} allowed, ${stats.denied} denied, ` +
      `${stats.overloaded} overloaded`
    ].join("\n")
  )
})

/**
 * The limiter the demo uses: the per-key {@link policyFor}.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<RateLimiter, InvalidPolicy> = RateLimiter.layer({ policy: policyFor })

/**
 * The whole demo: reads {@link options}, runs it on {@link layer}. Needs only
 * `Stdio` (to know whether stdout is a terminal). A bad `DEMO_SECONDS` fails
 * with a `ConfigError`; any limiter error ends the demo with that error.
 *
 * @since 0.1.0
 */
export const main: Effect.Effect<void, Config.ConfigError | CallError, Stdio.Stdio> = Effect.gen(function*() {
  yield* run(yield* options)
}).pipe(Effect.provide(layer))
