/**
 * When each live bucket of a limiter last decided a request: what the sweep
 * reads to find idle buckets. One slot per bucket in a `Float64Array`,
 * handed out when a bucket starts and taken back when it is forgotten.
 *
 * Why not a field of the bucket: a number that is not a small integer (a
 * time in milliseconds is not) lives in a box of its own, so writing it on
 * every decision touched one more object per decision; on a table of keys
 * larger than the CPU's cache that was one more cache miss, about 15 % of a
 * decision (docs/performance.md). Slots of one array sit side by side, and
 * the array holds at most as many slots as there were live buckets at once
 * (at most `maxBuckets`).
 *
 * @since 0.2.0
 */

/**
 * The slots of one limiter.
 *
 * @example
 * ```ts
 * import * as Activity from "./Activity.ts"
 *
 * const activity = new Activity.Activity()
 * const slot = activity.take(1_000) // a bucket starts at t = 1000
 * activity.times[slot] = 2_500 // it decides at t = 2500
 * activity.free(slot) // it is forgotten: the slot goes to the next bucket
 * ```
 *
 * @since 0.2.0
 */
export class Activity {
  /** The last decision of the bucket in each slot (a free slot's is stale). */
  times = new Float64Array(1024)
  private readonly freed: Array<number> = []
  private next = 0
  /** A slot for a bucket starting at `now`. */
  take(now: number): number {
    let slot = this.freed.pop()
    if (slot === undefined) {
      slot = this.next++
      if (slot === this.times.length) {
        const grown = new Float64Array(this.times.length * 2)
        grown.set(this.times)
        this.times = grown
      }
    }
    this.times[slot] = now
    return slot
  }
  /** The bucket in `slot` is forgotten. */
  free(slot: number): void {
    if (slot >= 0) this.freed.push(slot)
  }
}
