/**
 * Throughput scenarios: every contender built once, primed, calibrated and
 * warmed up, then timed in interleaved rounds (the order rotates each round),
 * with a minor GC before every timed batch so one contender's garbage is not
 * collected on another's clock.
 */
import type { Contender, Instance, Spec } from "./contenders.ts"
import { median, relativeSpread } from "./stats.ts"
import type { ContenderId, ContenderResult, ThroughputResult } from "./types.ts"

export interface Scenario {
  readonly id: string
  readonly title: string
  readonly description: string
  readonly expect: "allow" | "deny"
  readonly spec: Spec
  /** Keys in the timed order (round-robin). */
  readonly keys: ReadonlyArray<string>
  /** Keys in the order the untimed priming pass starts their buckets. */
  readonly prime: ReadonlyArray<string>
  readonly callers: number
}

export interface RunSettings {
  readonly rounds: number
  readonly warmupBatches: number
  readonly batchMillis: number
  readonly log: (line: string) => void
}

const minorGc = (): void => {
  globalThis.gc?.({ type: "minor" })
}

interface Entry {
  readonly contender: Contender
  instance: Instance | undefined
  opsPerBatch: number
  readonly samples: Array<number>
  allowed: number
  decided: number
  error: string | undefined
}

const describe = (e: unknown): string => (e instanceof Error ? e.message : String(e))

const timeBatch = async (instance: Instance, n: number): Promise<{ millis: number; allowed: number }> => {
  minorGc()
  const start = performance.now()
  const allowed = await instance.run(n)
  return { millis: performance.now() - start, allowed }
}

/** Finds the op count that takes about `batchMillis`, multiple of `callers`. */
const calibrate = async (instance: Instance, callers: number, batchMillis: number): Promise<number> => {
  let n = Math.max(callers, 64)
  for (let attempt = 0; attempt < 12; attempt++) {
    const { millis } = await timeBatch(instance, n)
    if (millis >= batchMillis * 0.5) {
      n = Math.round(n * batchMillis / millis)
      break
    }
    n = Math.ceil(n * Math.min(16, batchMillis / Math.max(millis, 0.05)))
  }
  return Math.max(callers, Math.round(n / callers) * callers)
}

/**
 * Runs scenarios together: every (scenario, contender) pair is a lane, and
 * each round runs every lane once, in an order that rotates from round to
 * round. Scenarios run as one group (the 1-key allow and deny paths) can be
 * compared with each other round by round (`versus`).
 */
export const runScenarios = async (
  scenarios: ReadonlyArray<Scenario>,
  contenders: ReadonlyArray<Contender>,
  settings: RunSettings
): Promise<Array<ThroughputResult>> => {
  const { log } = settings
  const lanes: Array<Entry & { readonly scenario: Scenario }> = scenarios.flatMap((scenario) =>
    contenders.map((contender) => ({
      scenario,
      contender,
      instance: undefined,
      opsPerBatch: 0,
      samples: [],
      allowed: 0,
      decided: 0,
      error: undefined
    }))
  )
  const live = () => lanes.filter((e) => e.error === undefined && e.instance !== undefined)
  const name = (e: Entry & { readonly scenario: Scenario }) =>
    scenarios.length > 1 ? `${e.contender.id} (${e.scenario.id})` : e.contender.id
  const guard = async (
    entry: Entry & { readonly scenario: Scenario },
    what: string,
    f: (instance: Instance) => Promise<void>
  ) => {
    if (entry.error !== undefined || entry.instance === undefined) return
    try {
      await f(entry.instance)
    } catch (e) {
      entry.error = `${what}: ${describe(e)}`
      log(`  ${name(entry)}: ${entry.error}`)
    }
  }

  // Build and prime (untimed): every key's bucket exists before the clock starts.
  for (const entry of lanes) {
    const { scenario } = entry
    try {
      entry.instance = await entry.contender.make(scenario.spec, { keys: scenario.keys }, scenario.callers)
    } catch (e) {
      entry.error = `make: ${describe(e)}`
      log(`  ${name(entry)}: ${entry.error}`)
    }
    const primeStart = performance.now()
    await guard(entry, "prime", async (instance) => {
      await instance.prime(scenario.prime)
    })
    if (scenario.prime.length > 1000) {
      log(`  primed ${name(entry)}: ${scenario.prime.length} keys in ${(performance.now() - primeStart).toFixed(0)} ms`)
    }
  }

  // Calibrate and warm up, interleaved too.
  for (const entry of live()) {
    await guard(entry, "calibrate", async (instance) => {
      entry.opsPerBatch = await calibrate(instance, entry.scenario.callers, settings.batchMillis)
    })
  }
  for (let w = 0; w < settings.warmupBatches; w++) {
    for (const entry of live()) {
      await guard(entry, "warm-up", async (instance) => {
        await timeBatch(instance, entry.opsPerBatch)
      })
    }
  }

  // Timed rounds.
  for (let round = 0; round < settings.rounds; round++) {
    const order = live()
    const rotated = order.map((_, i) => order[(i + round) % order.length])
    for (const entry of rotated) {
      await guard(entry, `round ${round}`, async (instance) => {
        const { allowed, millis } = await timeBatch(instance, entry.opsPerBatch)
        entry.samples[round] = entry.opsPerBatch / millis * 1000
        entry.allowed += allowed
        entry.decided += entry.opsPerBatch
      })
    }
  }

  for (const entry of lanes) {
    await guard(entry, "close", (instance) => instance.close())
    entry.instance = undefined
  }

  const perRoundRatio = (a: Entry, b: Entry): number | undefined => {
    const ratios: Array<number> = []
    for (let r = 0; r < settings.rounds; r++) {
      if (a.samples[r] !== undefined && b.samples[r] !== undefined) ratios.push(a.samples[r] / b.samples[r])
    }
    return ratios.length === 0 ? undefined : median(ratios)
  }

  return scenarios.map((scenario, index) => {
    const own = lanes.filter((e) => e.scenario === scenario)
    const first = lanes.filter((e) => e.scenario === scenarios[0])
    const results: Array<ContenderResult> = own.map((entry) => {
      const samples = entry.samples.filter((s) => s !== undefined)
      const opsPerSec = median(samples)
      const ratios: Partial<Record<ContenderId, number>> = {}
      for (const other of own) {
        const r = perRoundRatio(entry, other)
        if (r !== undefined) ratios[other.contender.id] = r
      }
      return {
        id: entry.contender.id,
        label: entry.contender.label,
        opsPerBatch: entry.opsPerBatch,
        samples,
        opsPerSec,
        nsPerOp: 1e9 / opsPerSec,
        spread: relativeSpread(samples),
        ratios,
        allowedFraction: entry.decided === 0 ? NaN : entry.allowed / entry.decided,
        ...(entry.error === undefined ? {} : { error: entry.error })
      }
    })
    for (const r of results) {
      const expected = scenario.expect === "allow" ? 1 : 0
      if (r.error === undefined && r.allowedFraction !== expected) {
        log(
          `  WARNING ${r.id} (${scenario.id}): allowed ${(r.allowedFraction * 100).toFixed(2)} % of decisions,`
            + ` expected ${expected * 100} %`
        )
      }
    }
    let versus: ThroughputResult["versus"] = undefined
    if (index > 0) {
      const ratios: Partial<Record<ContenderId, number>> = {}
      for (const entry of own) {
        const base = first.find((e) => e.contender.id === entry.contender.id)
        const r = base === undefined ? undefined : perRoundRatio(entry, base)
        if (r !== undefined) ratios[entry.contender.id] = r
      }
      versus = { scenario: scenarios[0].id, title: scenarios[0].title, ratios }
    }
    return {
      id: scenario.id,
      title: scenario.title,
      description: scenario.description,
      expect: scenario.expect,
      contenders: results,
      ...(versus === undefined ? {} : { versus })
    }
  })
}
