/**
 * Small statistics helpers for the benchmark.
 */

/** The q-quantile (0..1) of the values, by linear interpolation; NaN when empty. */
export const quantile = (values: ReadonlyArray<number>, q: number): number => {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  const pos = (sorted.length - 1) * q
  const lo = Math.floor(pos)
  const hi = Math.ceil(pos)
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo)
}

export const median = (values: ReadonlyArray<number>): number => quantile(values, 0.5)

/** Interquartile range as a fraction of the median: a rough noise figure. */
export const relativeSpread = (values: ReadonlyArray<number>): number => {
  const m = median(values)
  return m === 0 ? NaN : (quantile(values, 0.75) - quantile(values, 0.25)) / m
}

export const mean = (values: ReadonlyArray<number>): number =>
  values.length === 0 ? NaN : values.reduce((a, b) => a + b, 0) / values.length

/** A deterministic PRNG (mulberry32), so every run shuffles keys the same way. */
export const prng = (seed: number): () => number => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** A Fisher-Yates shuffle of a copy, with a fixed seed. */
export const shuffled = <A>(values: ReadonlyArray<A>, seed: number): Array<A> => {
  const out = [...values]
  const random = prng(seed)
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    const t = out[i]
    out[i] = out[j]
    out[j] = t
  }
  return out
}
