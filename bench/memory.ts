/**
 * Heap per live bucket, and reaping. Both need `--expose-gc`: heap figures
 * are `process.memoryUsage().heapUsed` after two full collections.
 */
import { Effect } from "effect"
import * as Policy from "../src/Policy.ts"
import {
  allowSpec,
  closeRlf,
  effectDecide,
  makeEffectPersistence,
  makeRlf,
  makeTollgate,
  PlainLimiter,
  tollgatePolicy,
  type TollgateVariant
} from "./contenders.ts"
import { median } from "./stats.ts"
import type { ContenderId, MemoryRow, ReapResult } from "./types.ts"

const fullGc = (): void => {
  globalThis.gc?.()
  globalThis.gc?.()
}

/** Lets pending fibers and microtasks finish (a few macrotask turns). */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve))
}

const heap = (): number => process.memoryUsage().heapUsed

const describe = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/** One limiter to fill with `keys` live buckets. */
interface Subject {
  /** Starts one bucket per key (one allowed decision each). */
  readonly create: (keys: ReadonlyArray<string>) => Promise<void>
  /** How many buckets are live, when the limiter can tell. */
  readonly live: () => Promise<number | undefined>
  readonly close: () => Promise<void>
}

export interface MemoryContender {
  readonly id: ContenderId
  readonly label: string
  readonly make: () => Promise<Subject>
}

const plainSubject: MemoryContender = {
  id: "plain",
  label: "plain JS Map<string, bucket>",
  make: () => {
    const limiter = new PlainLimiter(allowSpec)
    return Promise.resolve({
      create: (keys) => {
        for (const key of keys) limiter.tryAcquire(key)
        return Promise.resolve()
      },
      live: () => Promise.resolve(limiter.buckets.size),
      close: () => {
        limiter.buckets.clear()
        return Promise.resolve()
      }
    })
  }
}

const rlfSubject: MemoryContender = {
  id: "rlf",
  label: "rate-limiter-flexible Memory (record + timer per key)",
  make: () => {
    const limiter = makeRlf(allowSpec)
    let created: ReadonlyArray<string> = []
    return Promise.resolve({
      create: async (keys) => {
        created = keys
        for (const key of keys) await limiter.consume(key)
      },
      live: () => {
        // Not public API; only a sanity check of the count.
        const storage = (limiter as unknown as { _memoryStorage?: { _storage?: Map<string, unknown> } })
          ._memoryStorage?._storage
        return Promise.resolve(storage?.size)
      },
      close: () => closeRlf(limiter, created)
    })
  }
}

const effectSubject: MemoryContender = {
  id: "effect",
  label: "effect/persistence memory store",
  make: async () => {
    const limiter = await makeEffectPersistence()
    const { check, decide } = effectDecide(limiter, allowSpec)
    return {
      create: async (keys) => {
        await Effect.runPromise(Effect.forEach(keys, decide, { discard: true }))
        check()
      },
      live: () => Promise.resolve(undefined),
      close: () => Promise.resolve()
    }
  }
}

const tollgateCreate = (
  acquire: (key: string) => Effect.Effect<boolean, unknown>,
  keys: ReadonlyArray<string>
): Promise<void> =>
  Effect.runPromise(Effect.gen(function*() {
    for (const key of keys) yield* acquire(key)
  }))

const tollgateSubject = (variant: TollgateVariant): MemoryContender => ({
  id: variant.id,
  label: `${variant.label.replace("acquire", "bucket")}, idle`,
  make: async () => {
    const handle = await makeTollgate(variant, tollgatePolicy(allowSpec), { idleTimeout: "1 hour" })
    return {
      create: (keys) => tollgateCreate((key) => handle.limiter.acquire(key), keys),
      live: () => Effect.runPromise(Effect.map(handle.limiter.stats, (s) => s.buckets)),
      close: handle.close
    }
  }
})

export const memoryContenders = (variants: ReadonlyArray<TollgateVariant>): ReadonlyArray<MemoryContender> => [
  plainSubject,
  rlfSubject,
  effectSubject,
  ...variants.map(tollgateSubject)
]

/** Heap per live bucket: for each repeat, every contender in rotated order, N fresh keys each time. */
export const runMemory = async (
  contenders: ReadonlyArray<MemoryContender>,
  options: { readonly keys: number; readonly repeats: number; readonly log: (line: string) => void }
): Promise<ReadonlyArray<MemoryRow>> => {
  const samples = new Map<ContenderId, Array<number>>(contenders.map((c) => [c.id, []]))
  const errors = new Map<ContenderId, string>()
  for (let rep = 0; rep < options.repeats; rep++) {
    for (let i = 0; i < contenders.length; i++) {
      const contender = contenders[(i + rep) % contenders.length]
      if (errors.has(contender.id)) continue
      // Keys are built before the baseline, so the strings themselves are not counted.
      const keys = Array.from({ length: options.keys }, (_, k) => `mem:${rep}:${contender.id}:${k}`)
      try {
        const subject = await contender.make()
        await settle()
        fullGc()
        const before = heap()
        await subject.create(keys)
        await settle()
        fullGc()
        const after = heap()
        const live = await subject.live()
        if (live !== undefined && live !== keys.length) {
          throw new Error(`expected ${keys.length} live buckets, found ${live}`)
        }
        const perKey = (after - before) / keys.length
        samples.get(contender.id)!.push(perKey)
        options.log(`  ${contender.id}: ${perKey.toFixed(0)} B per live bucket (${keys.length} keys)`)
        await subject.close()
      } catch (e) {
        errors.set(contender.id, describe(e))
        options.log(`  ${contender.id}: ${describe(e)}`)
      }
      await settle()
      fullGc()
    }
  }
  return contenders.map((c) => {
    const s = samples.get(c.id)!
    const error = errors.get(c.id)
    return {
      id: c.id,
      label: c.label,
      keys: options.keys,
      samples: s,
      bytesPerKey: median(s),
      ...(error === undefined ? {} : { error })
    }
  })
}

/**
 * Reaping: a short idle timeout and a policy that refills within a
 * millisecond (a bucket may only be reaped once full again). N buckets are
 * started by a sequential caller, in chunks, with `stats` read between
 * chunks; then `stats` is polled until no bucket is left and every started
 * bucket has been reaped. The heap after (two full GCs) is compared with the
 * heap before the first bucket, the limiter already built.
 */
export const runReap = async (
  variant: TollgateVariant,
  options: { readonly keys: number; readonly idleMillis: number; readonly tag: string }
): Promise<ReapResult> => {
  const policy = Policy.tokenBucket({ capacity: 10, refill: { tokens: 10_000, per: "1 second" } })
  const handle = await makeTollgate(variant, policy, { idleTimeout: options.idleMillis })
  const stats = () => Effect.runPromise(handle.limiter.stats)
  const keys = Array.from({ length: options.keys }, (_, k) => `reap:${options.tag}:${k}`)
  const base = { id: variant.id, label: variant.label, keys: options.keys, idleMillis: options.idleMillis }
  try {
    await settle()
    fullGc()
    const heapBefore = heap()
    const start = await stats()
    let peakBuckets = start.buckets
    const t0 = performance.now()
    const chunk = 1000
    for (let i = 0; i < keys.length; i += chunk) {
      await tollgateCreate((key) => handle.limiter.acquire(key), keys.slice(i, i + chunk))
      peakBuckets = Math.max(peakBuckets, (await stats()).buckets)
    }
    const tCreated = performance.now()
    const heapPeak = heap()
    let tEmpty = NaN
    let tReaped = NaN
    const giveUp = tCreated + 60_000
    while (performance.now() < giveUp) {
      const s = await stats()
      const now = performance.now()
      if (s.buckets === 0 && Number.isNaN(tEmpty)) tEmpty = now
      if (s.buckets === 0 && s.reaped - start.reaped >= s.started - start.started) {
        tReaped = now
        break
      }
      await Effect.runPromise(Effect.sleep(2))
    }
    if (Number.isNaN(tReaped)) throw new Error("buckets were still alive 60 s after the last use")
    await settle()
    fullGc()
    const heapAfter = heap()
    return {
      ...base,
      createPerSec: keys.length / (tCreated - t0) * 1000,
      peakBuckets,
      emptyAfterMillis: tEmpty - tCreated,
      reapedAfterMillis: tReaped - tCreated,
      churnPerSec: keys.length / (tReaped - t0) * 1000,
      heapBeforeBytes: heapBefore,
      heapPeakBytes: heapPeak,
      heapAfterBytes: heapAfter,
      heapChange: (heapAfter - heapBefore) / heapBefore
    }
  } catch (e) {
    return {
      ...base,
      createPerSec: NaN,
      peakBuckets: NaN,
      emptyAfterMillis: NaN,
      reapedAfterMillis: NaN,
      churnPerSec: NaN,
      heapBeforeBytes: NaN,
      heapPeakBytes: NaN,
      heapAfterBytes: NaN,
      heapChange: NaN,
      error: describe(e)
    }
  } finally {
    await handle.close()
  }
}
