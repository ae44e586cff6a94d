// @effect-diagnostics globalDate:off
/**
 * The supervisor's lookup, measured three ways, to choose between RcMap,
 * FiberMap and a hand-written map (docs/architecture.md). Each variant
 * finds the key's entry and applies one `Ref.modify` to its state, in one
 * Effect loop, for 1 key and for 10 000 keys; heap per idle entry with
 * --expose-gc. Run with `npm run bench:supervisor`.
 */
import { Effect, Exit, FiberMap, RcMap, Ref, Scope } from "effect"

const N = 300_000
const KEYS = [1, 10_000]

interface State {
  readonly tokens: number
}
const take = (s: State): readonly [boolean, State] => s.tokens > 0 ? [true, { tokens: s.tokens - 1 }] : [false, s]

const time = async (label: string, run: () => Promise<void>) => {
  const samples: Array<number> = []
  await run() // warm-up
  for (let round = 0; round < 5; round++) {
    const t0 = performance.now()
    await run()
    samples.push(performance.now() - t0)
  }
  samples.sort((a, b) => a - b)
  const ms = samples[2]
  console.log(`  ${label.padEnd(44)} ${Math.round(N / ms * 1000).toLocaleString("en").padStart(12)} ops/s`)
  return N / ms * 1000
}

const heapPerEntry = async (label: string, build: (n: number) => Promise<() => Promise<void>>) => {
  const g = (globalThis as { gc?: () => void }).gc
  if (g === undefined) return
  const n = 20_000
  g()
  const before = process.memoryUsage().heapUsed
  const release = await build(n)
  g()
  const after = process.memoryUsage().heapUsed
  console.log(`  ${label.padEnd(44)} ${Math.round((after - before) / n).toLocaleString("en").padStart(12)} B/entry`)
  await release()
}

const keysOf = (n: number) => Array.from({ length: n }, (_, i) => `key:${i}`)

for (const count of KEYS) {
  console.log(`== ${count} key(s), ${N.toLocaleString("en")} lookups + Ref.modify`)
  const keys = keysOf(count)

  // hand-written Map
  const map = new Map<string, Ref.Ref<State>>()
  for (const key of keys) map.set(key, Ref.makeUnsafe({ tokens: 1e12 }))
  await time("Map.get + Ref.modify", () =>
    Effect.runPromise(Effect.gen(function*() {
      for (let i = 0; i < N; i++) yield* Ref.modify(map.get(keys[i % count])!, take)
    })))

  // RcMap: each lookup borrows the entry for the call's scope
  const scope = Scope.makeUnsafe()
  const rc = await Effect.runPromise(
    RcMap.make({ lookup: (_key: string) => Ref.make<State>({ tokens: 1e12 }), idleTimeToLive: "1 minute" }).pipe(
      Scope.provide(scope)
    )
  )
  await time("Effect.scoped(RcMap.get) + Ref.modify", () =>
    Effect.runPromise(Effect.gen(function*() {
      for (let i = 0; i < N; i++) {
        yield* Effect.scoped(Effect.flatMap(RcMap.get(rc, keys[i % count]), (ref) => Ref.modify(ref, take)))
      }
    })))

  // FiberMap: one fiber per key (the actor), the state beside it in a Map
  const fibers = await Effect.runPromise(FiberMap.make<string>().pipe(Scope.provide(scope)))
  await Effect.runPromise(Effect.forEach(keys, (key) => FiberMap.run(fibers, key, Effect.never)))
  await time("FiberMap.get + Map.get + Ref.modify", () =>
    Effect.runPromise(Effect.gen(function*() {
      for (let i = 0; i < N; i++) {
        const key = keys[i % count]
        yield* FiberMap.get(fibers, key)
        yield* Ref.modify(map.get(key)!, take)
      }
    })))
  await Effect.runPromise(Scope.close(scope, Exit.void))
}

console.log("== heap per idle entry (20 000 entries)")
await heapPerEntry("Map<string, Ref>", async (n) => {
  const m = new Map<string, Ref.Ref<State>>()
  for (const key of keysOf(n)) m.set(key, Ref.makeUnsafe({ tokens: 1 }))
  return async () => m.clear()
})
await heapPerEntry("RcMap entry (idleTimeToLive 1 minute)", async (n) => {
  const scope = Scope.makeUnsafe()
  const rc = await Effect.runPromise(
    RcMap.make({ lookup: (_key: string) => Ref.make<State>({ tokens: 1 }), idleTimeToLive: "1 minute" }).pipe(
      Scope.provide(scope)
    )
  )
  await Effect.runPromise(Effect.forEach(keysOf(n), (key) => Effect.scoped(RcMap.get(rc, key)), { discard: true }))
  return () => Effect.runPromise(Scope.close(scope, Exit.void))
})
await heapPerEntry("FiberMap entry (a parked fiber)", async (n) => {
  const scope = Scope.makeUnsafe()
  const fm = await Effect.runPromise(FiberMap.make<string>().pipe(Scope.provide(scope)))
  await Effect.runPromise(Effect.forEach(keysOf(n), (key) => FiberMap.run(fm, key, Effect.never), { discard: true }))
  return () => Effect.runPromise(Scope.close(scope, Exit.void))
})
