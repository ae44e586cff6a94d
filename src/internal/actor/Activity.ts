/**
 * When each live bucket of a limiter last decided a request: what the sweep
 * reads to find idle buckets. One slot per bucket in a `Float64Array`,
 * handed out when a bucket starts and taken back when it is forgotten; the
 * slot's owner (the bucket) beside it, so the sweep and eviction at the cap
 * go round the slots, not round the limiter's `Map` of keys.
 *
 * Why not round the `Map`: an iterator of a `Map` that is kept between two
 * steps (a cursor that goes round it a slice at a time) pins every older
 * table the `Map` has grown or shrunk out of since, with every key and
 * bucket in it, until the iterator ends (V8 keeps the old table so the
 * iterator can follow it): a flood of 1M keys at the cap kept 33 MB after
 * every bucket was reaped, against 11 MB without the cap. An index into an
 * array pins nothing, and the slots are dense (at most as many as there were
 * live buckets at once).
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

const initialSlots = 1024

/**
 * The slots of one limiter.
 *
 * @example
 * ```ts
 * import * as Activity from "./Activity.ts"
 *
 * const activity = new Activity.Activity<string>()
 * const slot = activity.take(1_000) // a bucket starts at t = 1000
 * activity.own(slot, "a bucket")
 * activity.times[slot] = 2_500 // it decides at t = 2500
 * activity.free(slot) // it is forgotten: the slot goes to the next bucket
 * ```
 *
 * @since 0.2.0
 */
export class Activity<A = unknown> {
  /** The last decision of the bucket in each slot (a free slot's is stale). */
  times = new Float64Array(initialSlots)
  /** The bucket in each slot (`undefined`: a free slot). */
  readonly owners: Array<A | undefined> = []
  private readonly freed: Array<number> = []
  /** One past the highest slot handed out: the slots are `0 .. end - 1`. */
  end = 0
  /** Slots held now. */
  private held = 0
  /** A slot for a bucket starting at `now`. */
  take(now: number): number {
    let slot = this.freed.pop()
    if (slot === undefined) {
      slot = this.end++
      this.owners.push(undefined)
      if (slot === this.times.length) {
        const grown = new Float64Array(this.times.length * 2)
        grown.set(this.times)
        this.times = grown
      }
    }
    this.times[slot] = now
    this.held++
    return slot
  }
  /** `owner` holds `slot` (just taken). */
  own(slot: number, owner: A): void {
    this.owners[slot] = owner
  }
  /** The bucket in `slot` is forgotten. */
  free(slot: number): void {
    if (slot < 0) return
    this.owners[slot] = undefined
    this.freed.push(slot)
    // Every bucket forgotten after a flood: the arrays go back to their first
    // size, so a flood's slots are not kept for ever.
    if (--this.held === 0 && this.end > initialSlots) {
      this.times = new Float64Array(initialSlots)
      this.owners.length = 0
      this.freed.length = 0
      this.end = 0
    }
  }
}
