/**
 * The shape of `bench/results/latest.json`.
 */

/** Contender ids. The tollgate ids depend on whether `fastPath` exists. */
export type ContenderId =
  | "plain"
  | "effect-floor"
  | "lazy-floor"
  | "ref-floor"
  | "mailbox-floor"
  | "rlf"
  | "effect"
  | "tollgate"
  | "tollgate-nofast"
  | "tollgate-fast"

export interface Meta {
  readonly date: string
  readonly mode: "full" | "quick"
  readonly node: string
  readonly v8: string
  readonly platform: string
  readonly arch: string
  readonly cores: number
  readonly cpuModel: string
  readonly memoryBytes: number
  readonly loadavgStart: ReadonlyArray<number>
  readonly loadavgEnd: ReadonlyArray<number>
  readonly versions: { readonly effect: string; readonly rateLimiterFlexible: string; readonly tollgate: string }
  /** Whether `RateLimiter.make` accepted a `fastPath` option in this run. */
  readonly fastPathOption: boolean
  /** The tollgate variant the "× tollgate" column and the targets refer to first. */
  readonly tollgateReference: ContenderId
  readonly settings: Settings
  readonly durationSeconds: number
}

export interface Settings {
  readonly rounds: number
  readonly warmupBatches: number
  readonly batchMillis: number
  readonly concurrency: number
  readonly largeKeys: number
  readonly memoryKeys: number
  readonly memoryRepeats: number
  readonly reapKeys: number
  readonly reapRepeats: number
  readonly reapIdleMillis: number
  readonly waitSeconds: number
  readonly waitRatePerSecond: number
  readonly waitCapacities: ReadonlyArray<number>
  readonly waitCallers: number
}

export interface ContenderResult {
  readonly id: ContenderId
  readonly label: string
  /** Operations per timed batch (calibrated in the warm-up). */
  readonly opsPerBatch: number
  /** Throughput of each timed round, in round order. */
  readonly samples: ReadonlyArray<number>
  readonly opsPerSec: number
  readonly nsPerOp: number
  /** Interquartile range of the samples over their median. */
  readonly spread: number
  /** Median over rounds of (this ÷ other), the other measured in the same round. */
  readonly ratios: Partial<Record<ContenderId, number>>
  /** Fraction of the timed decisions that allowed. */
  readonly allowedFraction: number
  readonly error?: string | undefined
}

export interface ThroughputResult {
  readonly id: string
  readonly title: string
  readonly description: string
  readonly expect: "allow" | "deny"
  readonly contenders: ReadonlyArray<ContenderResult>
  /** For a scenario timed in the same rounds as another: median over rounds of (this ÷ that), per contender. */
  readonly versus?: {
    readonly scenario: string
    readonly title: string
    readonly ratios: Partial<Record<ContenderId, number>>
  } | undefined
}

export interface WaitResult {
  readonly id: ContenderId
  readonly label: string
  readonly capacity: number
  readonly ratePerSecond: number
  readonly callers: number
  readonly seconds: number
  readonly admissions: number
  readonly admissionsPerSec: number
  /** Spacing between consecutive admissions, ms. */
  readonly intervalMedianMs: number
  readonly intervalP99Ms: number
  readonly intervalMaxMs: number
  /** |interval − ideal spacing| (1 / rate), ms. */
  readonly spacingErrorMedianMs: number
  readonly spacingErrorP99Ms: number
  /** How far the last admission is behind the ideal schedule started at the first one, ms. */
  readonly lagMs: number
  /** Fraction of consecutive admissions closer than half the ideal spacing (bursts). */
  readonly burstFraction: number
  readonly error?: string | undefined
}

export interface MemoryRow {
  readonly id: ContenderId
  readonly label: string
  readonly keys: number
  readonly samples: ReadonlyArray<number>
  readonly bytesPerKey: number
  readonly error?: string | undefined
}

export interface ReapResult {
  readonly id: ContenderId
  readonly label: string
  readonly keys: number
  readonly idleMillis: number
  /** Buckets started per second while creating them (sequential acquire). */
  readonly createPerSec: number
  /** Most buckets seen alive at once. */
  readonly peakBuckets: number
  /** From the end of creation until `stats.buckets` was 0. */
  readonly emptyAfterMillis: number
  /** From the end of creation until every started bucket was reaped (its fiber ended). */
  readonly reapedAfterMillis: number
  /** Buckets created and reaped per second, end to end (N ÷ (creation + drain)). */
  readonly churnPerSec: number
  readonly heapBeforeBytes: number
  readonly heapPeakBytes: number
  readonly heapAfterBytes: number
  /** (after − before) ÷ before. */
  readonly heapChange: number
  readonly error?: string | undefined
}

export interface Target {
  readonly text: string
  readonly variant: ContenderId
  readonly measured: string
  readonly pass: boolean | undefined
}

export interface Results {
  readonly meta: Meta
  readonly throughput: ReadonlyArray<ThroughputResult>
  readonly wait: ReadonlyArray<WaitResult>
  readonly memory: ReadonlyArray<MemoryRow>
  readonly reaping: ReadonlyArray<ReapResult>
  readonly targets: ReadonlyArray<Target>
}
