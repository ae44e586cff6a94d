/**
 * The conformance suite of the Redis scripts (see Conformance.test.ts), run
 * once per way of calling them: as a Redis Functions library (`FCALL`) and as
 * `EVAL` scripts (`EVALSHA`), in two files so the two run side by side.
 */
import { assert, expect } from "@effect/vitest"
import { Clock, Duration, Effect } from "effect"
import * as fc from "fast-check"
import * as Adaptive from "../../src/internal/algorithm/Adaptive.ts"
import { type Algorithm, bind } from "../../src/internal/algorithm/Algorithm.ts"
import * as Block from "../../src/internal/algorithm/Block.ts"
import * as Composite from "../../src/internal/algorithm/Composite.ts"
import * as Concurrency from "../../src/internal/algorithm/Concurrency.ts"
import * as FixedWindow from "../../src/internal/algorithm/FixedWindow.ts"
import * as Gcra from "../../src/internal/algorithm/Gcra.ts"
import * as SlidingLog from "../../src/internal/algorithm/SlidingLog.ts"
import * as SlidingWindow from "../../src/internal/algorithm/SlidingWindow.ts"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"
import * as WarmUp from "../../src/internal/algorithm/WarmUp.ts"
import { apply as applyOps, settledAt } from "../../src/internal/operation/Interpreter.ts"
import { Kind as OpKind, type Op, type Reply } from "../../src/internal/operation/Op.ts"
import * as Policy from "../../src/Policy.ts"
import * as Entries from "../../src/redis/internal/entries.ts"
import { leakyConfig } from "../algorithm/support.ts"
import { Admin, type Deployment, describeOn, engineOn, server, settableClock, uniquePrefix } from "./redis.ts"

interface Case {
  readonly name: string
  readonly policy: Policy.Valid
  /** About a period or a window: the scale of the random time steps. */
  readonly scale: number
  /** Costs are drawn from 1 to this (above the limit on purpose). */
  readonly costs: number
}

// `applyOps` and the store read `algorithm`, `config`, their `rule` and the
// common options.
const policy = <C>(algorithm: Algorithm<C, any>, config: C, blockMillis = 0): Policy.Valid =>
  ({
    _tag: "TokenBucket",
    algorithm,
    config,
    rule: bind(algorithm, config),
    dryRun: false,
    blockMillis
  }) as unknown as Policy.Valid
const tb = TokenBucket.config
const part = Composite.part

const cases: ReadonlyArray<Case> = [
  {
    name: "adaptive (Policy.adaptive)",
    policy: Policy.adaptive({
      capacity: 5,
      rate: { tokens: 20, per: "1 second" },
      floor: 2,
      ceiling: 80,
      increase: 3,
      decrease: 0.7,
      latency: "40 millis"
    }) as Policy.Valid,
    scale: 300,
    costs: 6
  },
  {
    name: "adaptive, fractional",
    policy: policy(
      Adaptive.algorithm,
      Adaptive.config({
        capacity: 2.5,
        periodMillis: 70,
        initial: 1.5,
        floor: 0.25,
        ceiling: 4,
        increase: 0.3,
        decrease: 0.45
      })
    ),
    scale: 200,
    costs: 3
  },
  {
    name: "token bucket (Policy.tokenBucket)",
    policy: Policy.tokenBucket({ capacity: 5, refill: { tokens: 2, per: "100 millis" } }) as Policy.Valid,
    scale: 200,
    costs: 6
  },
  {
    name: "token bucket starting empty",
    policy: Policy.tokenBucket({
      capacity: 8,
      refill: { tokens: 3, per: "2 seconds" },
      initialTokens: 0
    }) as Policy.Valid,
    scale: 3000,
    costs: 9
  },
  {
    name: "token bucket starting with -0 tokens (replies carry -0)",
    policy: policy(TokenBucket.algorithm, tb({ capacity: 3, tokens: 1, periodMillis: 40, initialTokens: -0 })),
    scale: 60,
    costs: 4
  },
  {
    name: "token bucket, 1000 per ms",
    policy: policy(TokenBucket.algorithm, tb({ capacity: 3000, tokens: 1000, periodMillis: 1 })),
    scale: 5,
    costs: 3500
  },
  {
    name: "token bucket, fractional",
    policy: policy(TokenBucket.algorithm, tb({ capacity: 2.5, tokens: 0.5, periodMillis: 100, initialTokens: 1.5 })),
    scale: 500,
    costs: 3
  },
  {
    name: "token bucket, 1/3 per second",
    policy: Policy.tokenBucket({ capacity: 4, refill: { tokens: 1, per: "3 seconds" } }) as Policy.Valid,
    scale: 4000,
    costs: 5
  },
  {
    name: "token bucket, interval refill",
    policy: Policy.tokenBucket({
      capacity: 6,
      refill: { tokens: 2, per: "70 millis" },
      mode: "interval",
      initialTokens: 1
    }) as Policy.Valid,
    scale: 150,
    costs: 7
  },
  {
    name: "token bucket, interval refill aligned to the clock",
    policy: Policy.tokenBucket({
      capacity: 5,
      refill: { tokens: 3, per: "90 millis" },
      mode: "interval",
      aligned: true
    }) as Policy.Valid,
    scale: 150,
    costs: 6
  },
  {
    name: "token bucket, fractional interval refill",
    policy: policy(
      TokenBucket.algorithm,
      tb({ capacity: 3.5, tokens: 0.75, periodMillis: 33, initialTokens: 0.5, interval: true })
    ),
    scale: 100,
    costs: 4
  },
  {
    name: "token bucket, a first refill 200 ms after the start, adaptive initial tokens",
    policy: policy(
      TokenBucket.algorithm,
      tb({ capacity: 5, tokens: 2, periodMillis: 90, interval: true, firstRefill: 1_760_000_000_200, adaptive: true })
    ),
    scale: 120,
    costs: 6
  },
  {
    name: "token bucket, a first refill 150 ms after the start",
    policy: policy(
      TokenBucket.algorithm,
      tb({ capacity: 4, tokens: 1.5, periodMillis: 70, interval: true, firstRefill: 1_760_000_000_150 })
    ),
    scale: 100,
    costs: 5
  },
  {
    name: "token bucket, a rate of 0",
    policy: Policy.tokenBucket({ capacity: 4, refill: { tokens: 0, per: "1 second" } }) as Policy.Valid,
    scale: 100,
    costs: 5
  },
  {
    name: "token bucket, refused requests block it for 250 ms",
    policy: policy(TokenBucket.algorithm, tb({ capacity: 3, tokens: 1, periodMillis: 50 }), 250),
    scale: 150,
    costs: 4
  },
  {
    name: "gcra (Policy.gcra)",
    policy: Policy.gcra({ rate: { count: 30, per: "1 second" }, maxBurst: 5 }) as Policy.Valid,
    scale: 300,
    costs: 7
  },
  {
    name: "gcra",
    policy: policy(Gcra.algorithm, Gcra.config({ maxBurst: 4, count: 2, periodMillis: 100 })),
    scale: 200,
    costs: 6
  },
  {
    name: "gcra, T = 0.2 ms",
    policy: policy(Gcra.algorithm, Gcra.config({ maxBurst: 2, count: 5000, periodMillis: 1000 })),
    scale: 3,
    costs: 4
  },
  {
    name: "gcra, T = 1000/3 ms",
    policy: policy(Gcra.algorithm, Gcra.config({ maxBurst: 0, count: 3, periodMillis: 1000 })),
    scale: 1000,
    costs: 2
  },
  {
    name: "leaky bucket",
    policy: policy(Gcra.algorithm, leakyConfig({ tokens: 1, periodMillis: 50, burst: 3 })),
    scale: 150,
    costs: 5
  },
  {
    name: "leaky bucket, nodelay",
    policy: policy(
      Gcra.algorithm,
      leakyConfig({ tokens: 2, periodMillis: 100, burst: 4, nodelay: true })
    ),
    scale: 150,
    costs: 6
  },
  {
    name: "fixed window, first hit",
    policy: policy(FixedWindow.algorithm, FixedWindow.config({ limit: 5, windowMillis: 100 })),
    scale: 150,
    costs: 6
  },
  {
    name: "fixed window, aligned",
    policy: policy(FixedWindow.algorithm, FixedWindow.config({ limit: 5, windowMillis: 100, align: true })),
    scale: 150,
    costs: 6
  },
  {
    name: "fixed window, first hit, countBlocked, refused requests block it for 120 ms",
    policy: policy(FixedWindow.algorithm, FixedWindow.config({ limit: 4, windowMillis: 90, countBlocked: true }), 120),
    scale: 120,
    costs: 5
  },
  {
    name: "fixed window, first hit, execEvenly",
    policy: policy(FixedWindow.algorithm, FixedWindow.config({ limit: 5, windowMillis: 100, execEvenly: true })),
    scale: 120,
    costs: 6
  },
  {
    name: "fixed window, aligned, execEvenly with a minimum delay of 15 ms",
    policy: policy(
      FixedWindow.algorithm,
      FixedWindow.config({ limit: 4, windowMillis: 100, align: true, execEvenly: true, minDelay: 15 })
    ),
    scale: 120,
    costs: 5
  },
  {
    name: "leaky bucket, 2 released without delay",
    policy: policy(Gcra.algorithm, leakyConfig({ tokens: 1, periodMillis: 40, burst: 5, delay: 2 })),
    scale: 150,
    costs: 7
  },
  {
    name: "fixed window, aligned, countBlocked",
    policy: policy(
      FixedWindow.algorithm,
      FixedWindow.config({ limit: 3, windowMillis: 70, align: true, countBlocked: true })
    ),
    scale: 100,
    costs: 4
  },
  {
    name: "fixed window, fractional limit",
    policy: policy(FixedWindow.algorithm, FixedWindow.config({ limit: 2.5, windowMillis: 30, align: true })),
    scale: 50,
    costs: 3
  },
  {
    name: "sliding window",
    policy: policy(SlidingWindow.algorithm, SlidingWindow.config({ limit: 5, windowMillis: 100 })),
    scale: 150,
    costs: 6
  },
  {
    name: "sliding window, odd sizes",
    policy: policy(SlidingWindow.algorithm, SlidingWindow.config({ limit: 3, windowMillis: 7 })),
    scale: 12,
    costs: 4
  },
  {
    name: "sliding log",
    policy: policy(SlidingLog.algorithm, SlidingLog.config({ limit: 4, windowMillis: 100 })),
    scale: 150,
    costs: 5
  },
  {
    name: "sliding log, minGap and countBlocked",
    policy: policy(
      SlidingLog.algorithm,
      SlidingLog.config({ limit: 3, windowMillis: 50, minGap: 5, countBlocked: true })
    ),
    scale: 60,
    costs: 4
  },
  {
    name: "concurrency",
    policy: policy(Concurrency.algorithm, Concurrency.config({ capacity: 4 })),
    scale: 100,
    costs: 5
  },
  {
    name: "concurrency, replenished",
    policy: policy(
      Concurrency.algorithm,
      Concurrency.config({ capacity: 5, replenish: { tokens: 2, periodMillis: 100 } })
    ),
    scale: 150,
    costs: 6
  },
  {
    name: "bursty",
    policy: policy(WarmUp.algorithm, WarmUp.config({ permits: 2, periodMillis: 100, maxBurstMillis: 200 })),
    scale: 150,
    costs: 5
  },
  {
    name: "warming up",
    policy: policy(WarmUp.algorithm, WarmUp.config({ permits: 1, periodMillis: 10, warmupMillis: 100 })),
    scale: 60,
    costs: 4
  },
  {
    name: "warming up, cold factor 5, 3 per 7 ms",
    policy: policy(WarmUp.algorithm, WarmUp.config({ permits: 3, periodMillis: 7, warmupMillis: 50, coldFactor: 5 })),
    scale: 40,
    costs: 4
  },
  {
    name: "Policy.all: sliding window, leaky bucket and smooth",
    policy: Policy.all(
      Policy.slidingWindow({ limit: 4, window: "80 millis" }),
      Policy.leakyBucket({ rate: { tokens: 1, per: "20 millis" }, burst: 2 }),
      Policy.smooth({ permits: 3, per: "60 millis" })
    ) as Policy.Valid,
    scale: 100,
    costs: 5
  },
  {
    name: "burst: a fixed window, and a token bucket beside it",
    policy: Policy.burst(
      Policy.fixedWindow({ limit: 2, window: "100 millis" }),
      Policy.tokenBucket({ capacity: 3, refill: { tokens: 1, per: "150 millis" } })
    ) as Policy.Valid,
    scale: 150,
    costs: 4
  },
  {
    name: "burst of composites",
    policy: Policy.burst(
      Policy.all(
        Policy.gcra({ rate: { count: 2, per: "100 millis" }, maxBurst: 1 }),
        Policy.slidingLog({ limit: 3, window: "200 millis" })
      ),
      Policy.smooth({ permits: 1, per: "50 millis" })
    ) as Policy.Valid,
    scale: 150,
    costs: 4
  },
  {
    name: "unlimited",
    policy: Policy.unlimited() as Policy.Valid,
    scale: 100,
    costs: 1000
  },
  {
    name: "composite: token bucket and fixed window",
    policy: policy(
      Composite.algorithm,
      Composite.config([
        part(TokenBucket.algorithm, tb({ capacity: 4, tokens: 1, periodMillis: 50 })),
        part(FixedWindow.algorithm, FixedWindow.config({ limit: 6, windowMillis: 300, align: true }))
      ])
    ),
    scale: 150,
    costs: 5
  },
  {
    name: "composite: gcra, sliding log (countBlocked) and a nested composite",
    policy: policy(
      Composite.algorithm,
      Composite.config([
        part(Gcra.algorithm, Gcra.config({ maxBurst: 3, count: 1, periodMillis: 40 })),
        part(SlidingLog.algorithm, SlidingLog.config({ limit: 5, windowMillis: 200, countBlocked: true })),
        part(
          Composite.algorithm,
          Composite.config([
            part(SlidingWindow.algorithm, SlidingWindow.config({ limit: 3, windowMillis: 90 })),
            part(WarmUp.algorithm, WarmUp.config({ permits: 2, periodMillis: 30 }))
          ])
        )
      ])
    ),
    scale: 120,
    costs: 4
  }
]

interface Batch {
  readonly advance: number
  readonly ops: ReadonlyArray<Op>
}

const oneOp = (c: Case): fc.Arbitrary<Op> => {
  const cost = fc.integer({ min: 1, max: c.costs })
  const rule = c.policy.rule
  // a window of a call's own, where the policy has such windows (0: the policy's)
  const window = rule.withWindow(1) === undefined
    ? fc.constant(0)
    : fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3 * c.scale }), fc.constant(Infinity))
  const rate = rule.rate?.of
  const beyond: Array<fc.WeightedArbitrary<Op>> = [
    {
      weight: 2,
      arbitrary: fc.record({ kind: fc.constant(OpKind.Take), cost, queued: fc.constant(0), window })
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant(OpKind.Force),
        cost: fc.integer({ min: 0, max: 2 * c.costs }),
        queued: fc.constant(0),
        window
      })
    },
    { weight: 1, arbitrary: cost.map((cost) => ({ kind: OpKind.ForceAdd, cost, queued: 0 })) },
    { weight: 1, arbitrary: fc.constant({ kind: OpKind.Fill, cost: 0, queued: 0 }) },
    {
      weight: 2,
      arbitrary: fc.integer({ min: 1, max: 2 * c.costs }).map((cost) => ({ kind: OpKind.TakeUpTo, cost, queued: 0 }))
    },
    { weight: 1, arbitrary: fc.constant({ kind: OpKind.Get, cost: 0, queued: 0 }) },
    {
      // units held beside the request (the holds of a call over several
      // keys): they count as taken, only the request's own are taken
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constantFrom(OpKind.Take, OpKind.Peek),
        cost,
        queued: fc.integer({ min: 1, max: c.costs })
      })
    },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 3 }).map((queued) => ({ kind: OpKind.Get, cost: 0, queued })) },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant(OpKind.Set),
        cost: fc.integer({ min: 0, max: 2 * c.costs }),
        queued: fc.constant(0),
        window
      })
    },
    { weight: 1, arbitrary: fc.constant({ kind: OpKind.Delete, cost: 0, queued: 0 }) },
    {
      weight: 1,
      arbitrary: fc.oneof(
        { weight: 4, arbitrary: fc.integer({ min: 1, max: 2 * c.scale }) },
        { weight: 1, arbitrary: fc.constant(Infinity) }
      ).map((millis) => ({ kind: OpKind.Block, cost: millis, queued: 0 }))
    }
  ]
  if (rate !== undefined) {
    // the key's rate was another one (the numbers of the algorithm's rateOf)
    beyond.push({
      weight: 1,
      arbitrary: fc.constantFrom(0.5, 2, 3).map((f) => ({ kind: OpKind.SetRate, cost: rate[0] * f, queued: rate[1] }))
    })
  }
  return fc.oneof(
    ...beyond,
    { weight: 8, arbitrary: cost.map((cost) => ({ kind: OpKind.Take, cost, queued: 0 })) },
    { weight: 2, arbitrary: cost.map((cost) => ({ kind: OpKind.Admit, cost, queued: 0 })) },
    {
      weight: 2,
      arbitrary: fc.integer({ min: 0, max: c.costs }).map((cost) => ({ kind: OpKind.Peek, cost, queued: 0 }))
    },
    { weight: 1, arbitrary: fc.constant({ kind: OpKind.Reset, cost: 0, queued: 0 }) },
    { weight: 2, arbitrary: cost.map((cost) => ({ kind: OpKind.Release, cost, queued: 0 })) },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant(OpKind.WaitTime),
        cost,
        queued: fc.integer({ min: 0, max: 3 * c.costs })
      })
    },
    {
      // a signal (ok, throttled, latency) and its ms; other algorithms ignore it
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant(OpKind.Adapt),
        cost: fc.integer({ min: 0, max: 2 }),
        queued: fc.integer({ min: 0, max: 3 * c.scale })
      })
    }
  )
}

const batches = (c: Case, { jumps }: { readonly jumps: boolean }): fc.Arbitrary<ReadonlyArray<Batch>> => {
  const op = oneOp(c)
  const advance = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: c.scale }) },
    { weight: 2, arbitrary: fc.integer({ min: 0, max: 4 * c.scale }) },
    { weight: 1, arbitrary: fc.integer({ min: -c.scale, max: -1 }) }, // the clock steps back
    { weight: jumps ? 1 : 0, arbitrary: fc.integer({ min: 500_000, max: 700_000 }) } // past keepSettled
  )
  // runs of the same operation, as a hot key's batch has (sent as one run)
  const run = fc.tuple(
    op,
    fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.integer({ min: 2, max: 6 }) })
  ).map(([o, times]) => Array.from({ length: times }, () => o))
  const ops = fc.array(run, { minLength: 1, maxLength: 6 }).map((runs) => runs.flat())
  return fc.array(fc.record({ advance, ops }), {
    minLength: 1,
    maxLength: 12
  })
}

const KEYS_AT_ONCE = 6

// Steps of one operation on each of several keys, all sent at once.
const severalKeys = (c: Case) =>
  batches(c, { jumps: false }).chain((steps) =>
    fc.array(fc.array(oneOp(c), { minLength: KEYS_AT_ONCE, maxLength: KEYS_AT_ONCE }), {
      minLength: steps.length,
      maxLength: steps.length
    }).map((ops) => steps.map((step, i) => ({ advance: step.advance, ops: ops[i] })))
  )

const T0 = 1_760_000_000_000 // an epoch-sized start
let serial = 0

// The Take/Reset/Release rule of the script: did the batch write the state?
// (A block is kept beside the state: compared apart.)
const inner = (x: unknown): unknown => x instanceof Block.Stored ? x.state : x
// (a block over is no block: the script leaves its end where it was)
const blockOf = (x: unknown, now: number): number => x instanceof Block.Stored && now < x.until ? x.until : -Infinity
const reference = (p: Policy.Valid, stored: unknown, now: number, ops: ReadonlyArray<Op>) => {
  let state = stored
  let dirty = false
  const replies: Array<Reply> = []
  for (const op of ops) {
    const before = state
    const [[reply], after] = applyOps(p, state, now, [op])
    replies.push(reply)
    state = after
    const changed = before === undefined || inner(after) !== inner(before) ||
      blockOf(after, now) !== blockOf(before, now)
    // a block seen over is dropped: the script writes the state without it
    if (before instanceof Block.Stored && !(now < before.until)) dirty = true
    switch (op.kind) {
      case OpKind.Take:
      case OpKind.Admit:
        if (changed) dirty = true
        break
      case OpKind.Reset:
        if (before !== undefined) dirty = true
        break
      case OpKind.Release:
        if (before !== undefined && p.algorithm.release !== undefined) dirty = true
        break
      case OpKind.TakeUpTo:
        if (before === undefined || (reply.value ?? 0) > 0) dirty = true
        break
      case OpKind.ForceAdd:
        if (p.rule.forceAdd !== undefined) dirty = true
        break
      case OpKind.SetRate:
        if (before !== undefined && p.rule.rate !== undefined) dirty = true
        break
      case OpKind.Adapt:
        if (p.rule.adapt !== undefined) dirty = true
        break
      case OpKind.Force:
      case OpKind.Fill:
      case OpKind.Set:
      case OpKind.Delete:
      case OpKind.Block:
        dirty = true
    }
  }
  return { replies, state, dirty }
}

const KEEP = 600_000

type Sending = "batches" | "one operation per call" | "several keys at once"

// One key's expected history: the reference state, and the check of the TTL
// Redis holds after a call that wrote it.
const expectKey = (c: Case, forever: boolean, redisKey: string) => {
  let state: unknown = undefined
  // The longest TTL a write so far may have given the key: a lean write
  // moves the expiry refreshMillis past what its state needs and keeps it
  // while it covers later needs (KEEPTTL), and a kept TTL counts down in
  // real time, not in the test's clock.
  let most = -Infinity
  return {
    next: (now: number, ops: ReadonlyArray<Op>) => {
      const expected = reference(c.policy, state, now, ops)
      state = expected.state
      return expected
    },
    checkTtl: (now: number, dirty: boolean) =>
      Effect.gen(function*() {
        if (forever) return
        const settled = settledAt(c.policy, state)
        // (a call that left the state as it was may still have written it)
        if (state !== undefined && settled < Infinity) {
          most = Math.max(most, Math.ceil(settled + KEEP + Entries.refreshMillis - now))
        }
        if (!dirty) return
        const admin = yield* Admin
        const ttl = yield* admin.send<number>("PTTL", redisKey)
        if (state === undefined) {
          most = -Infinity
          assert.strictEqual(ttl, -2, "a deleted key is gone")
        } else if (settled + KEEP - now <= 0) {
          state = undefined
          most = -Infinity
          assert.strictEqual(ttl, -2, "a settled key is deleted")
        } else if (settled === Infinity) {
          assert.strictEqual(ttl, -1, "a key that never settles has no TTL")
        } else {
          // never less than the state needs: PTTL counts down in real time
          // from at least Math.ceil(settled + KEEP - now)
          expect(ttl).toBeGreaterThan(Math.ceil(settled + KEEP - now) - 5_000)
          expect(ttl).toBeLessThanOrEqual(most)
        }
      })
  }
}

/** Random runs per case (`CONFORMANCE_RUNS`, 40 by default). */
const runs = Number(process.env.CONFORMANCE_RUNS ?? 40)

/**
 * Runs per case where the same scripts take another route (`EVALSHA`, a
 * Redis Cluster, Sentinel, node-redis): a quarter. Every case still crosses
 * that route; the scripts' arithmetic is held to the interpreter at full
 * size on one server, over `FCALL`.
 */
export const routeRuns = Math.ceil(runs / 4)

/**
 * Declares the suite for the store with `functions` on or off, on a
 * deployment (one server by default), with `numRuns` random runs per case.
 */
export const conformance = (functions: boolean, deployment: Deployment = server, numRuns = runs): void => {
  const command = functions ? "FCALL" : "EVALSHA"
  describeOn(deployment, `Redis scripts conform to the interpreter, ${command}`, (it) => {
    for (
      const sending of ["batches", "one operation per call", "several keys at once"] as const satisfies ReadonlyArray<
        Sending
      >
    ) {
      for (const regime of ["kept for ever", "forgotten 10 minutes after settling"] as const) {
        const forever = regime === "kept for ever"
        // several keys at once: the replies (the TTLs are the same code as a key's own)
        if (sending === "several keys at once" && !forever) continue
        for (const c of cases) {
          it.effect(`${c.name}, ${sending}, ${regime}, ${command}`, () =>
            Effect.gen(function*() {
              const prefix = uniquePrefix("conformance")
              const { clock, time } = settableClock(T0)
              const store = yield* engineOn(deployment, {
                prefix,
                clock: "client",
                functions,
                keepSettled: forever ? Duration.infinity : Duration.millis(KEEP)
              }).pipe(Effect.provideService(Clock.Clock, clock))
              const context = yield* Effect.context<Admin>()
              const run = Effect.runPromiseWith(context)
              const property = sending === "several keys at once"
                ? fc.asyncProperty(severalKeys(c), (steps) =>
                  run(Effect.gen(function*() {
                    const keys = Array.from({ length: KEYS_AT_ONCE }, () => `k${serial++}`)
                    const expected = keys.map((key) => expectKey(c, forever, prefix + key))
                    let now = T0
                    for (const step of steps) {
                      now += step.advance
                      time.now = now
                      const replies = yield* Effect.forEach(
                        keys,
                        (key, i) => store.apply(key, c.policy, [step.ops[i]]),
                        { concurrency: "unbounded" }
                      )
                      for (let i = 0; i < keys.length; i++) {
                        assert.deepStrictEqual(
                          replies[i],
                          expected[i].next(now, [step.ops[i]]).replies,
                          `key ${i} at ${now - T0} ms, op ${JSON.stringify(step.ops[i])}`
                        )
                      }
                    }
                  })))
                : fc.asyncProperty(batches(c, { jumps: !forever }), (batches) =>
                  run(Effect.gen(function*() {
                    const key = `k${serial++}`
                    const expected = expectKey(c, forever, prefix + key)
                    let now = T0
                    for (const batch of batches) {
                      now += batch.advance
                      time.now = now
                      const calls = sending === "batches" ? [batch.ops] : batch.ops.map((op) => [op])
                      for (const ops of calls) {
                        const want = expected.next(now, ops)
                        const replies = yield* store.apply(key, c.policy, ops)
                        assert.deepStrictEqual(replies, want.replies, `at ${now - T0} ms, ops ${JSON.stringify(ops)}`)
                        yield* expected.checkTtl(now, want.dirty)
                      }
                    }
                  })))
              yield* Effect.promise(() => fc.assert(property, { numRuns }))
              yield* (yield* Admin).cleanup(prefix)
            }))
        }
      }
    }
  })

  describeOn(deployment, `Redis scripts: large states, ${command}`, (it) => {
    it.effect(
      "a sliding log of 10 000 entries is stored and read back exactly, by both scripts",
      () =>
        Effect.gen(function*() {
          const prefix = uniquePrefix("large")
          const { clock, time } = settableClock(T0)
          const store = yield* engineOn(deployment, {
            prefix,
            clock: "client",
            functions,
            keepSettled: Duration.infinity
          }).pipe(Effect.provideService(Clock.Clock, clock))
          const p = Policy.slidingLog({ limit: 10_000, window: "1 hour" }) as Policy.Valid
          const take = { kind: OpKind.Take, cost: 1, queued: 0 }
          let state: unknown = undefined
          // one entry per millisecond, in batches: every read and write carries the whole log
          for (let i = 0; i < 10; i++) {
            time.now = T0 + i
            const ops = Array.from({ length: i === 9 ? 995 : 1_000 }, () => take)
            const expected = reference(p, state, time.now, ops)
            state = expected.state
            assert.deepStrictEqual(yield* store.apply("log", p, ops), expected.replies)
          }
          // then one Take at a time (the lean script on the long log), past the
          // limit (the oldest entries drop out of the window one by one)
          for (let i = 0; i < 20; i++) {
            time.now = T0 + 20 + i * 400_000
            const expected = reference(p, state, time.now, [take])
            state = expected.state
            assert.deepStrictEqual(yield* store.apply("log", p, [take]), expected.replies, `take ${i}`)
          }
          // and the batch script reads what the lean one wrote
          const peek = [{ kind: OpKind.Peek, cost: 3, queued: 0 }, { kind: OpKind.WaitTime, cost: 2, queued: 5 }]
          assert.deepStrictEqual(yield* store.apply("log", p, peek), reference(p, state, time.now, peek).replies)
          yield* (yield* Admin).cleanup(prefix)
        })
    )
  })
}
