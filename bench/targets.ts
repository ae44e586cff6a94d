/**
 * tollgate's performance targets (docs/performance.md says why each), computed from a run.
 */
import type { ContenderId, MemoryRow, ReapResult, Target, ThroughputResult } from "./types.ts"

const ratio = (scenarios: ReadonlyArray<ThroughputResult>, scenario: string, id: ContenderId, other: ContenderId) =>
  scenarios.find((s) => s.id === scenario)?.contenders.find((c) => c.id === id && c.error === undefined)?.ratios[
    other
  ]

const x = (n: number) => `${n < 0.1 ? n.toPrecision(2) : n.toFixed(2)}×`

const atLeast = (
  text: string,
  variant: ContenderId,
  value: number | undefined,
  threshold: number,
  what: string
): Target => ({
  text,
  variant,
  measured: value === undefined || Number.isNaN(value) ? "not measured" : `${x(value)} ${what}`,
  pass: value === undefined || Number.isNaN(value) ? undefined : value >= threshold
})

export const computeTargets = (
  variants: ReadonlyArray<ContenderId>,
  throughput: ReadonlyArray<ThroughputResult>,
  memory: ReadonlyArray<MemoryRow>,
  reaping: ReadonlyArray<ReapResult>,
  largeKeysTitle: string
): Array<Target> => {
  const targets: Array<Target> = []
  for (const v of variants) {
    targets.push(
      atLeast(
        "acquire ≥ 1.0× rate-limiter-flexible (1 key, 1 sequential caller, allow)",
        v,
        ratio(throughput, "1key-allow", v, "rlf"),
        1.0,
        "rlf"
      ),
      atLeast(
        "acquire ≥ 1.5× rate-limiter-flexible (1 key, 1000 concurrent callers)",
        v,
        ratio(throughput, "1key-1000", v, "rlf"),
        1.5,
        "rlf"
      ),
      atLeast(
        "acquire ≥ 1.0× rate-limiter-flexible (1000 keys, sequential)",
        v,
        ratio(throughput, "1000keys", v, "rlf"),
        1.0,
        "rlf"
      ),
      atLeast(
        `acquire ≥ 0.8× rate-limiter-flexible (${largeKeysTitle}, sequential)`,
        v,
        ratio(throughput, "largekeys", v, "rlf"),
        0.8,
        "rlf"
      )
    )
    // ≥ 2× effect/persistence in every scenario: the weakest scenario decides.
    let worst: { value: number; title: string } | undefined = undefined
    let missing = false
    for (const s of throughput) {
      const r = ratio(throughput, s.id, v, "effect")
      if (r === undefined) {
        missing = true
        continue
      }
      if (worst === undefined || r < worst.value) worst = { value: r, title: s.title }
    }
    targets.push({
      text: "acquire ≥ 2× effect/persistence RateLimiter in every scenario",
      variant: v,
      measured: worst === undefined
        ? "not measured"
        : `weakest ${x(worst.value)} effect, in “${worst.title}”${missing ? "; some scenarios not measured" : ""}`,
      pass: worst === undefined || missing ? undefined : worst.value >= 2
    })
    // Timed in the same rounds as the allow path: the median over rounds of deny ÷ allow.
    targets.push(
      atLeast(
        "deny path ≥ allow path (1 key, sequential)",
        v,
        throughput.find((s) => s.id === "1key-deny")?.versus?.ratios[v],
        1.0,
        "the allow path"
      )
    )
    const mem = memory.find((m) => m.id === v && m.error === undefined)
    targets.push({
      text: "≤ 1.5 KB heap per live bucket",
      variant: v,
      measured: mem === undefined ? "not measured" : `${Math.round(mem.bytesPerKey)} B per bucket`,
      pass: mem === undefined ? undefined : mem.bytesPerKey <= 1536
    })
    const reaps = reaping.filter((r) => r.id === v && r.error === undefined)
    const worstReap = reaps.reduce<ReapResult | undefined>(
      (w, r) => (w === undefined || Math.abs(r.heapChange) > Math.abs(w.heapChange) ? r : w),
      undefined
    )
    targets.push({
      text: "heap back within 10% of the start once every bucket is reaped",
      variant: v,
      measured: worstReap === undefined
        ? "not measured"
        : `${worstReap.heapChange >= 0 ? "+" : ""}${
          (worstReap.heapChange * 100).toFixed(1)
        } %, worst of ${reaps.length}`,
      pass: worstReap === undefined ? undefined : Math.abs(worstReap.heapChange) <= 0.1
    })
  }
  return targets
}
