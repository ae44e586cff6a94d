/**
 * Helpers shared by the algorithm property tests.
 */

/**
 * The least r in [0, hi] with ok(r), for ok monotone in r; Infinity if none.
 * The models use it to find the exact retryAfter by search.
 */
export const least = (ok: (r: number) => boolean, hi: number): number => {
  if (!ok(hi)) return Infinity
  let lo = 0
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2)
    if (ok(mid)) hi = mid
    else lo = mid + 1
  }
  return lo
}
