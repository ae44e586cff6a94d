/**
 * JSON that keeps every double: keys' states are plain data of numbers,
 * arrays and objects, but may hold `Infinity` (a window that never ends),
 * `-0` or `NaN`, which JSON cannot write. Those become `{"$n": "..."}`.
 *
 * @since 0.3.0
 */

const special = (n: number): string | undefined =>
  Number.isNaN(n)
    ? "NaN"
    : n === Infinity
    ? "Infinity"
    : n === -Infinity
    ? "-Infinity"
    : Object.is(n, -0)
    ? "-0"
    : undefined

/**
 * Writes `value` as JSON, doubles kept.
 *
 * @since 0.3.0
 */
export const encode = (value: unknown): string =>
  JSON.stringify(value, (_, v: unknown) => {
    if (typeof v !== "number") return v
    const s = special(v)
    return s === undefined ? v : { $n: s }
  })

const numbers: Record<string, number> = { NaN, Infinity, "-Infinity": -Infinity, "-0": -0 }

/**
 * Reads what {@link encode} wrote.
 *
 * @since 0.3.0
 */
export const decode = (text: string): unknown =>
  JSON.parse(text, (_, v: unknown) => {
    if (typeof v === "object" && v !== null && !Array.isArray(v)) {
      const n = (v as { readonly $n?: unknown }).$n
      if (typeof n === "string" && n in numbers && Object.keys(v).length === 1) return numbers[n]
    }
    return v
  })
