/**
 * The limiter's clock: the Effect `Clock`'s reading, held at the highest
 * reading so far. One per limiter, shared by all its buckets, so every
 * decision, new bucket, reap and waiter is timed on the same time line.
 *
 * When the clock steps back, the limiter's time stands still at its highest
 * reading until the clock passes it again: nothing refills, nothing is
 * un-refilled, and a bucket started in the meantime is anchored where a kept
 * one would be (so a reap stays invisible, invariants 2 and 6 of docs/architecture.md).
 * Durations told to callers (retryAfter, resetAfter, a wait) are counted on
 * the caller's clock: while the limiter's time stands still, they add the gap.
 *
 * @since 0.1.0
 */

/**
 * Where a bucket reads the time.
 *
 * @since 0.1.0
 */
export interface Now {
  readonly currentTimeMillisUnsafe: () => number
  /**
   * How far the last reading was held above the underlying clock's (0 unless
   * that clock stepped back). Valid right after a reading, before anything
   * yields; durations told to callers add it, so they are counted on the
   * caller's clock.
   */
  readonly behind: number
}

/**
 * The limiter's clock (see the module's description).
 *
 * @example
 * ```ts
 * import * as Monotone from "./Monotone.ts"
 *
 * let t = 5_000
 * const clock = new Monotone.Monotone({ currentTimeMillisUnsafe: () => t })
 * clock.currentTimeMillisUnsafe() // 5000
 * t = 3_000 // the clock steps back 2 s
 * clock.currentTimeMillisUnsafe() // 5000: the limiter's time stands still
 * clock.behind // 2000
 * ```
 *
 * @since 0.1.0
 */
export class Monotone implements Now {
  /**
   * The highest reading so far: the limiter's time. Starts as a number (not
   * `undefined`) so V8 keeps the field an unboxed double, written in place on
   * every reading rather than boxed anew.
   */
  private highest = -Infinity
  behind = 0
  /** The clock read (Effect's `Clock` in the limiter's context). */
  readonly clock: { readonly currentTimeMillisUnsafe: () => number }
  constructor(clock: { readonly currentTimeMillisUnsafe: () => number }) {
    this.clock = clock
    this.highest = clock.currentTimeMillisUnsafe()
  }
  currentTimeMillisUnsafe(): number {
    const t = this.clock.currentTimeMillisUnsafe()
    if (t >= this.highest) {
      this.highest = t
      this.behind = 0
      return t
    }
    // Behind (or not a number): the time stands still.
    this.behind = t < this.highest ? this.highest - t : 0
    return this.highest
  }
}

/**
 * Milliseconds to sleep, on the underlying clock, until the limiter's time
 * reaches `target` (0 when it has). While the limiter's time stands still
 * after a step back, it reaches a later `target` exactly when the clock does,
 * so the sleep runs to `target` on the clock, not `target - now` of it.
 *
 * @example
 * ```ts
 * import * as Monotone from "./Monotone.ts"
 *
 * let t = 5_000
 * const clock = new Monotone.Monotone({ currentTimeMillisUnsafe: () => t })
 * Monotone.millisUntil(clock, 6_000) // 1000
 * t = 3_000 // stepped back: the limiter's time stays at 5000
 * Monotone.millisUntil(clock, 6_000) // 3000, on the clock that reads 3000
 * ```
 *
 * @since 0.1.0
 */
export const millisUntil = (clock: Now, target: number): number => {
  const delay = target - clock.currentTimeMillisUnsafe()
  return delay > 0 ? delay + clock.behind : 0
}

/**
 * A duration told to a caller, on the caller's clock: `millis` plus how far
 * the limiter's time is held above it (see {@link Now.behind}).
 *
 * @example
 * ```ts
 * import * as Monotone from "./Monotone.ts"
 *
 * Monotone.onClock(1000, 250) // 1250
 * Monotone.onClock(0, 250) // 0: now is now on any clock
 * ```
 *
 * @since 0.2.0
 */
export const onClock = (millis: number, behind: number): number => millis > 0 ? millis + behind : millis
