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

/**
 * The speed targets the project holds (docs/performance.md, "Targets"): the default limiter (the fast
 * path, `reference`) at least as fast as rate-limiter-flexible's memory limiter in every in-process
 * scenario and at least twice Effect's own RateLimiter in every scenario, and the literal actor
 * (`fastPath: false`) at least 0.3× the fast path. Then the allocation and reaping targets.
 */
// The fast path keeps each key's state in its bucket's `Ref` (the design's own rule), so the floor of its
// shape bounds it against effect/persistence; the literal actor's is the mailbox floor.
const refFloor = { id: "ref-floor", name: "Ref floor" } as const
const mailboxFloor = { id: "mailbox-floor", name: "mailbox floor" } as const

export const computeTargets = (
  variants: ReadonlyArray<ContenderId>,
  reference: ContenderId,
  throughput: ReadonlyArray<ThroughputResult>,
  memory: ReadonlyArray<MemoryRow>,
  reaping: ReadonlyArray<ReapResult>
): Array<Target> => {
  const targets: Array<Target> = []
  // The weakest ratio of `v` to `other` over the scenarios, or why there is none.
  // `floor`: the floor that bounds `v` against `other` (named with the weakest scenario's figure).
  const weakest = (
    v: ContenderId,
    other: ContenderId,
    threshold: number,
    what: string,
    floor: { readonly id: ContenderId; readonly name: string }
  ) => {
    let worst: { value: number; title: string; id: string } | undefined = undefined
    let missing = false
    for (const s of throughput) {
      const r = ratio(throughput, s.id, v, other)
      if (r === undefined) {
        missing = true
        continue
      }
      if (worst === undefined || r < worst.value) worst = { value: r, title: s.title, id: s.id }
    }
    // the bound in that scenario: the floor ÷ `other`
    const bound = worst === undefined ? undefined : ratio(throughput, worst.id, floor.id, other)
    return {
      measured: worst === undefined
        ? "not measured"
        : `weakest ${x(worst.value)} ${what}, in “${worst.title}”${missing ? "; some scenarios not measured" : ""}${
          bound === undefined ? "" : ` (the ${floor.name} there: ${x(bound)} ${what})`
        }`,
      pass: worst === undefined || missing ? undefined : worst.value >= threshold
    }
  }
  const notThisVariant = (text: string, v: ContenderId): Target => ({
    text,
    variant: v,
    measured: "for the default limiter (fastPath: true)",
    pass: undefined
  })
  for (const v of variants) {
    for (const s of throughput) {
      const text = `acquire ≥ 1.0× rate-limiter-flexible: ${s.title}`
      if (ratio(throughput, s.id, reference, "rlf") === undefined) continue
      targets.push(
        v === reference ? atLeast(text, v, ratio(throughput, s.id, v, "rlf"), 1.0, "rlf") : notThisVariant(text, v)
      )
    }
    const effectText = "acquire ≥ 2× effect/persistence RateLimiter in every scenario"
    targets.push(
      v === reference
        ? { text: effectText, variant: v, ...weakest(v, "effect", 2, "effect", refFloor) }
        : notThisVariant(effectText, v)
    )
    if (variants.length > 1) {
      const actorText = "fastPath: false ≥ 0.3× the fast path in every scenario"
      targets.push(
        v === reference
          ? { text: actorText, variant: v, measured: "the fast path itself", pass: undefined }
          : { text: actorText, variant: v, ...weakest(v, reference, 0.3, "the fast path", mailboxFloor) }
      )
    }
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
