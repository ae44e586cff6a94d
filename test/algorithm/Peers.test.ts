/**
 * The peers' own test cases for the operations beyond a plain decision,
 * transcribed onto tollgate's pure algorithms: Bucket4j's specifications of
 * consumeIgnoringRateLimits, forceAddTokens, tryConsumeAsMuchAsPossible,
 * estimateAbilityToConsume, reset and intervally aligned refill;
 * rate-limiter-flexible's fixed window (penalty, reward, execEvenly, a
 * duration per call, counting denials, BurstyRateLimiter); x/time/rate's
 * tables (burst 1 and 3, a zero limit, a tiny limit, SetLimit after a zero
 * limit, Every, Inf); Guava's setRate on a running limiter. Time is scaled
 * where the peer's is not milliseconds (Bucket4j's nanoseconds become
 * milliseconds, so "100 tokens per 100 ns" is 100 per 100 ms); where
 * tollgate decides otherwise, the test says so and checks tollgate's choice.
 */
import { assert, describe, it } from "@effect/vitest"
import { bind, peekOutcome, takeUpTo } from "../../src/internal/algorithm/Algorithm.ts"
import * as Burst from "../../src/internal/algorithm/Burst.ts"
import * as Composite from "../../src/internal/algorithm/Composite.ts"
import * as FixedWindow from "../../src/internal/algorithm/FixedWindow.ts"
import * as TokenBucket from "../../src/internal/algorithm/TokenBucket.ts"
import * as Unlimited from "../../src/internal/algorithm/Unlimited.ts"
import * as WarmUp from "../../src/internal/algorithm/WarmUp.ts"

const tb = TokenBucket.config
const tokens = (c: TokenBucket.Config, s: TokenBucket.State, now: number) => TokenBucket.tokensAt(c, s, now)
// Bucket4j's getAvailableTokens: whole tokens, negative in debt.
const available = (c: TokenBucket.Config, s: TokenBucket.State, now: number) => Math.floor(tokens(c, s, now))
// The wait a force reports: until a request of no units is admitted again.
const debt = (c: TokenBucket.Config, s: TokenBucket.State, now: number) => TokenBucket.step(c, s, now, 0).retryAfter

describe("Bucket4j", () => {
  // Bandwidth.simple(100, Duration.ofNanos(100)).withInitialTokens(0)
  const hundred = tb({ capacity: 100, tokens: 100, periodMillis: 100, initialTokens: 0 })

  it("consumeIgnoringRateLimits within the limits (ConsumeIgnoringLimitsSpecification)", () => {
    for (const [n, cost, elapsed, remained] of [[1, 49, 50, 1], [2, 50, 50, 0], [3, 51, 120, 49], [4, 100, 101, 0]]) {
      const s = TokenBucket.force(hundred, TokenBucket.initial(hundred, 0), elapsed, cost)
      assert.strictEqual(debt(hundred, s, elapsed), 0, `case ${n}: no violation`)
      assert.strictEqual(available(hundred, s, elapsed), remained, `case ${n}`)
    }
  })

  it("consumeIgnoringRateLimits over the limits: the debt and the wait it implies", () => {
    for (
      const [n, cost, elapsed, remained, overflow] of [
        [1, 52, 50, -2, 2],
        [2, 50, 0, -50, 50],
        [3, 151, 120, -51, 51],
        [4, 400, 201, -300, 300]
      ]
    ) {
      const s = TokenBucket.force(hundred, TokenBucket.initial(hundred, 0), elapsed, cost)
      assert.strictEqual(available(hundred, s, elapsed), remained, `case ${n}`)
      assert.strictEqual(debt(hundred, s, elapsed), overflow, `case ${n}: the violation`)
    }
  })

  it("after a debt nothing is admitted and nothing can be taken (bucket4j #417)", () => {
    const c = tb({ capacity: 10, tokens: 5, periodMillis: 1000 })
    const s = TokenBucket.force(c, TokenBucket.initial(c, 0), 0, 15)
    assert.isFalse(TokenBucket.step(c, s, 0, 1).allowed)
    assert.strictEqual(takeUpTo(TokenBucket.algorithm, c, s, 0, Number.MAX_SAFE_INTEGER).taken, 0)
    assert.strictEqual(takeUpTo(TokenBucket.algorithm, c, s, 0, 2).taken, 0)
    assert.isFalse(peekOutcome(TokenBucket.algorithm, c, s, 0, 2).allowed)
    assert.strictEqual(TokenBucket.step(c, s, 0, 2).remaining, 0)
  })

  it("forceAddTokens (ForceAddTokensSpecification)", () => {
    for (
      const [n, add, elapsed, result] of [[1, 49, 50, 99], [2, 50, 50, 100], [3, 50, 0, 50], [4, 120, 0, 120], [
        5,
        120,
        110,
        220
      ]]
    ) {
      const s = TokenBucket.forceAdd(hundred, TokenBucket.initial(hundred, 0), elapsed, add)
      assert.strictEqual(available(hundred, s, elapsed), result, `case ${n}`)
    }
  })

  it("tokens added over capacity are not lost", () => {
    const c = tb({ capacity: 100, tokens: 100, periodMillis: 100 })
    let s = TokenBucket.forceAdd(c, TokenBucket.initial(c, 0), 0, 10)
    assert.strictEqual(available(c, s, 0), 110)
    s = TokenBucket.force(c, s, 10, 2)
    assert.strictEqual(available(c, s, 10), 108)
    const o = TokenBucket.step(c, s, 20, 3)
    assert.isTrue(o.allowed)
    assert.strictEqual(available(c, o.state, 20), 105)
    // and a bucket holding more than its capacity is never forgotten
    assert.strictEqual(TokenBucket.settledAt(c, o.state), Infinity)
    // tollgate is stricter on one point: a cost above capacity is refused even from a surplus
    assert.isFalse(TokenBucket.step(c, o.state, 20, 101).allowed)
  })

  it("tryConsumeAsMuchAsPossible (ConsumeAsMuchAsPossibleSpecification)", () => {
    const none = tb({ capacity: 10, tokens: 10, periodMillis: 6_000_000, initialTokens: 0 })
    const two = tb({ capacity: 10, tokens: 10, periodMillis: 6_000_000, initialTokens: 2 })
    assert.strictEqual(takeUpTo(TokenBucket.algorithm, none, TokenBucket.initial(none, 0), 0, Infinity).taken, 0)
    assert.strictEqual(takeUpTo(TokenBucket.algorithm, two, TokenBucket.initial(two, 0), 0, Infinity).taken, 2)
    for (const [initial, limit, taken] of [[4, 5, 4], [5, 5, 5], [5, 5, 5]]) {
      const c = tb({ capacity: 10, tokens: 10, periodMillis: 6_000_000, initialTokens: initial })
      assert.strictEqual(takeUpTo(TokenBucket.algorithm, c, TokenBucket.initial(c, 0), 0, limit).taken, taken)
    }
    // the listener cases: 8 of 10, then the 2 left, then none
    const ten = tb({ capacity: 10, tokens: 10, periodMillis: 1000 })
    let s = TokenBucket.initial(ten, 0)
    const taken: Array<number> = []
    for (const limit of [8, 8, 3]) {
      const p = takeUpTo(TokenBucket.algorithm, ten, s, 0, limit)
      taken.push(p.taken)
      s = p.outcome.state as TokenBucket.State
    }
    assert.deepStrictEqual(taken, [8, 2, 0])
  })

  it("estimateAbilityToConsume, a cost above capacity included: never, not an error", () => {
    const greedy = (initialTokens: number) => tb({ capacity: 100, tokens: 100, periodMillis: 100, initialTokens })
    const interval = (initialTokens: number) =>
      tb({ capacity: 100, tokens: 100, periodMillis: 100, initialTokens, interval: true })
    const table: ReadonlyArray<readonly [TokenBucket.Config, number, boolean, number]> = [
      [greedy(100), 49, true, 0],
      [greedy(1), 1, true, 0],
      [greedy(70), 80, false, 10],
      [greedy(0), 10, false, 10],
      [greedy(10), 120, false, Infinity],
      [interval(70), 80, false, 100],
      [interval(0), 10, false, 100],
      [interval(10), 120, false, Infinity]
    ]
    table.forEach(([c, cost, can, wait], i) => {
      const s = TokenBucket.initial(c, 0)
      const probe = peekOutcome(TokenBucket.algorithm, c, s, 0, cost)
      assert.strictEqual(probe.allowed, can, `case ${i + 1}`)
      assert.strictEqual(probe.retryAfter, wait, `case ${i + 1}`)
      assert.strictEqual(probe.remaining, available(c, s, 0), `case ${i + 1}: the tokens before`)
    })
  })

  it("reset fills the bucket to capacity, whatever it started with (ResetTokensSpecification)", () => {
    const c = tb({ capacity: 100, tokens: 100, periodMillis: 100, initialTokens: 10 })
    assert.strictEqual(available(c, TokenBucket.initial(c, 0), 0), 10)
    assert.strictEqual(available(c, TokenBucket.full(c, 0), 0), 100)
  })

  it("intervally aligned refill: adaptive initial tokens (IntervallyAlignedRefillSpecification)", () => {
    const table = [
      [60_000, 60_000, 400, 400, 60_000, 400],
      [20_000, 60_000, 400, 400, 60_000, 266],
      [20_000, 60_000, 400, 300, 60_000, 300],
      [20_000, 60_000, 400, 200, 60_000, 333],
      [20_000, 60_000, 400, 100, 60_000, 366],
      [60_000, 60_000, 400, 100, 60_000, 400],
      [60_001, 60_000, 400, 100, 60_000, 400],
      [20_000, 180_000, 400, 100, 60_000, 400],
      [20_000, 60_000, 100, 400, 60_000, 100],
      [59_000, 60_000, 100, 400, 60_000, 6]
    ] as const
    table.forEach(([now, first, capacity, refill, period, initial], i) => {
      const c = tb({
        capacity,
        tokens: refill,
        periodMillis: period,
        interval: true,
        firstRefill: first,
        adaptive: true
      })
      assert.strictEqual(available(c, TokenBucket.initial(c, now), now), initial, `case ${i}`)
    })
  })

  const alignedRun = (adaptive: boolean, initial: number) => {
    // 200 tokens a minute, capacity 400, first refill at 120 s, first seen at 80 s
    const c = tb({ capacity: 400, tokens: 200, periodMillis: 60_000, interval: true, firstRefill: 120_000, adaptive })
    let now = 80_000
    let s = TokenBucket.initial(c, now)
    assert.strictEqual(available(c, s, now), initial)
    s = takeUpTo(TokenBucket.algorithm, c, s, now, Infinity).outcome.state as TokenBucket.State
    now += 10_000
    assert.strictEqual(available(c, s, now), 0, "nothing until a whole period ends")
    assert.strictEqual(TokenBucket.step(c, s, now, 1).retryAfter, 30_000)
    now += 30_000
    assert.strictEqual(available(c, s, now), 200)
    now += 45_000
    assert.strictEqual(available(c, s, now), 200)
    now += 15_000
    assert.strictEqual(available(c, s, now), 400)
    now += 60_000
    assert.strictEqual(available(c, s, now), 400, "capped at capacity")
    s = takeUpTo(TokenBucket.algorithm, c, s, now, Infinity).outcome.state as TokenBucket.State
    // consumeIgnoringRateLimits(401) reports 3 minutes
    assert.strictEqual(debt(c, TokenBucket.force(c, s, now, 401), now), 180_000)
  }

  it("intervally aligned refill from a first refill, not adaptive", () => alignedRun(false, 400))
  it("intervally aligned refill from a first refill, adaptive", () => alignedRun(true, 333))

  it("the boundary of an interval is not missed after a long inactivity", () => {
    const c = tb({ capacity: 400, tokens: 400, periodMillis: 100, interval: true, firstRefill: 200 })
    let s = TokenBucket.initial(c, 103)
    s = takeUpTo(TokenBucket.algorithm, c, s, 103, Infinity).outcome.state as TokenBucket.State
    assert.strictEqual(available(c, s, 32_849), 400)
    const p = takeUpTo(TokenBucket.algorithm, c, s, 32_849, Infinity)
    assert.strictEqual(p.taken, 400)
    s = p.outcome.state as TokenBucket.State
    assert.strictEqual(available(c, s, 32_849), 0)
    assert.strictEqual(available(c, s, 32_900), 400, "the next boundary is the original one")
  })
})

describe("rate-limiter-flexible", () => {
  it("penalty and reward on the fixed window", () => {
    const c = FixedWindow.config({ limit: 3, windowMillis: 5000 })
    let s = FixedWindow.step(c, FixedWindow.initial(c, 0), 0, 1).state
    s = FixedWindow.force(c, s, 1, 1)
    assert.strictEqual(s.count, 2)
    const one = FixedWindow.config({ limit: 1, windowMillis: 5000 })
    let r = FixedWindow.step(one, FixedWindow.initial(one, 0), 0, 1).state
    r = FixedWindow.release(one, r, 1, 1)
    assert.strictEqual(r.count, 0)
    // a reward below zero is a credit, with forceAdd, until the window ends
    const credit = FixedWindow.forceAdd(one, FixedWindow.step(one, FixedWindow.initial(one, 0), 0, 1).state, 1, 2)
    assert.strictEqual(credit.count, -1)
    const a = FixedWindow.step(one, credit, 2, 1)
    assert.isTrue(a.allowed)
    assert.isTrue(FixedWindow.step(one, a.state, 3, 1).allowed)
    // tollgate is stricter on one point: a cost above the limit is refused even from a credit
    assert.isFalse(FixedWindow.step(one, credit, 2, 2).allowed)
  })

  it("counts denied hits with countBlocked, and starts a new window when the last one is over", () => {
    const c = FixedWindow.config({ limit: 2, windowMillis: 5000, countBlocked: true })
    let s = FixedWindow.initial(c, 0)
    for (let i = 0; i < 5; i++) s = FixedWindow.step(c, s, i, 1).state
    assert.strictEqual(s.count, 5, "the counter keeps growing")
    assert.strictEqual(FixedWindow.step(c, s, 10, 1).remaining, 0)
    const next = FixedWindow.step(c, s, 5000, 1)
    assert.isTrue(next.allowed)
    assert.deepStrictEqual(next.state, { start: 5000, count: 1, end: 10_000 })
    assert.strictEqual(next.resetAfter, 5000)
  })

  it("execEvenly over the duration (the first consume at once, the next one halfway)", () => {
    const c = FixedWindow.config({ limit: 2, windowMillis: 5000, execEvenly: true, minDelay: 1 })
    const first = FixedWindow.step(c, FixedWindow.initial(c, 0), 0, 1)
    assert.strictEqual(first.delay, 0)
    const second = FixedWindow.step(c, first.state, 1, 1)
    assert.strictEqual(second.delay, Math.ceil(4999 / 2))
  })

  it("execEvenly with a minimum delay of 20 ms", () => {
    const c = FixedWindow.config({ limit: 100, windowMillis: 1000, execEvenly: true, minDelay: 20 })
    const first = FixedWindow.step(c, FixedWindow.initial(c, 0), 0, 1)
    const second = FixedWindow.step(c, first.state, 0, 1)
    assert.isTrue((second.delay ?? 0) >= 20)
    assert.strictEqual(second.delay, 40) // ⌈1000 / 100⌉ = 10 is below 20: consumed × 20
  })

  it("execEvenly's default minimum delay is window / limit", () => {
    const c = FixedWindow.config({ limit: 2, windowMillis: 5000, execEvenly: true })
    assert.strictEqual(c.minDelay, 2500)
  })

  it("a duration given per call sets the window that call opens", () => {
    const c = FixedWindow.config({ limit: 1, windowMillis: 5000 })
    const short = FixedWindow.withWindow(c, 1000)!
    const o = FixedWindow.step(short, FixedWindow.initial(c, 0), 0, 1)
    assert.isTrue(o.resetAfter <= 1000)
    // later calls with the policy's own duration see the window's own end
    assert.strictEqual(FixedWindow.step(c, o.state, 500, 1).retryAfter, 500)
    assert.isTrue(FixedWindow.step(c, o.state, 1000, 1).allowed)
    // and a window that never ends (rate-limiter-flexible's duration 0)
    const forever = FixedWindow.step(FixedWindow.withWindow(c, Infinity)!, FixedWindow.initial(c, 0), 0, 1)
    assert.strictEqual(forever.resetAfter, Infinity)
    assert.strictEqual(FixedWindow.settledAt(c, forever.state), Infinity)
    assert.strictEqual(
      FixedWindow.withWindow(FixedWindow.config({ limit: 1, windowMillis: 10, align: true }), 5),
      undefined
    )
  })

  it("BurstyRateLimiter: the burst allowance once the base limit is spent", () => {
    // 2 per second, plus 3 per minute
    const c = Burst.config(
      Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 2, windowMillis: 1000 })),
      Composite.part(FixedWindow.algorithm, FixedWindow.config({ limit: 3, windowMillis: 60_000 }))
    )
    let s = Burst.initial(c, 0)
    const by: Array<string | undefined> = []
    for (let i = 0; i < 6; i++) {
      const o = Burst.step(c, s, 0, 1)
      by.push(o.by)
      s = o.state
    }
    assert.deepStrictEqual(by, ["base", "base", "burst", "burst", "burst", undefined])
    const denied = Burst.step(c, s, 0, 1)
    assert.strictEqual(denied.retryAfter, 1000, "the sooner of the two: the base's next window")
    assert.strictEqual(Burst.step(c, s, 1000, 1).by, "base")
  })
})

describe("x/time/rate", () => {
  // NewLimiter(10, b): 10 per second, d = 100 ms
  const run = (burst: number, table: ReadonlyArray<readonly [number, number, number, boolean]>) => {
    const c = tb({ capacity: burst, tokens: 10, periodMillis: 1000 })
    let s = TokenBucket.initial(c, 0)
    table.forEach(([t, toks, n, ok], i) => {
      assert.strictEqual(tokens(c, s, t * 100), toks, `step ${i}: tokens`)
      const o = TokenBucket.step(c, s, t * 100, n)
      assert.strictEqual(o.allowed, ok, `step ${i}: AllowN`)
      s = o.state
    })
  }

  it("TestLimiterBurst1", () =>
    run(1, [
      [0, 1, 1, true],
      [0, 0, 1, false],
      [0, 0, 1, false],
      [1, 1, 1, true],
      [1, 0, 1, false],
      [1, 0, 1, false],
      [
        2,
        1,
        2,
        false
      ],
      [2, 1, 1, true],
      [2, 0, 1, false]
    ]))

  it("TestLimiterBurst3, a cost of 0 included", () =>
    run(3, [
      [0, 3, 2, true],
      [0, 1, 2, false],
      [0, 1, 1, true],
      [0, 0, 1, false],
      [1, 1, 4, false],
      [2, 2, 1, true],
      [3, 2, 1, true],
      [4, 2, 1, true],
      [4, 1, 1, true],
      [4, 0, 1, false],
      [4, 0, 1, false],
      [9, 3, 3, true],
      [9, 0, 0, true]
    ]))

  it("TestLimiterJumpBackwards: tollgate does not refill the stretch twice", () => {
    const c = tb({ capacity: 3, tokens: 10, periodMillis: 1000 })
    let s = TokenBucket.step(c, TokenBucket.initial(c, 100), 100, 1).state // start at t1
    for (const ok of [true, true, false]) {
      const o = TokenBucket.step(c, s, 0, 1) // jump back to t0
      assert.strictEqual(o.allowed, ok)
      s = o.state
    }
    // x/time/rate moved `last` back to t0 and gives a token at t1 again;
    // here the anchor stays at t1: the next token comes at t2.
    assert.isFalse(TokenBucket.step(c, s, 100, 1).allowed)
    assert.isTrue(TokenBucket.step(c, s, 200, 1).allowed)
  })

  it("TestZeroLimit and TestTinyLimit: the burst, then never again", () => {
    for (const rate of [0, 1e-10]) {
      const c = tb({ capacity: 1, tokens: rate, periodMillis: 1000 })
      const first = TokenBucket.step(c, TokenBucket.initial(c, 0), 0, 1)
      assert.isTrue(first.allowed)
      const again = TokenBucket.step(c, first.state, 2 ** 31 - 1, 1)
      assert.isFalse(again.allowed)
      if (rate === 0) {
        assert.strictEqual(again.retryAfter, Infinity)
        assert.strictEqual(TokenBucket.settledAt(c, first.state), Infinity, "never forgotten")
      }
    }
  })

  it("TestSetAfterZeroLimit: SetLimit(10) on a spent NewLimiter(0, 1)", () => {
    const zero = tb({ capacity: 1, tokens: 0, periodMillis: 1000 })
    let s = TokenBucket.step(zero, TokenBucket.initial(zero, 0), 0, 1).state
    assert.isFalse(TokenBucket.step(zero, s, 0, 1).allowed)
    const ten = TokenBucket.rate.withRate(zero, 10, 1000)
    s = TokenBucket.rate.carryRate(ten, TokenBucket.rate.rateOf(zero), s, 0)
    assert.strictEqual(TokenBucket.step(ten, s, 0, 1).retryAfter, 100)
  })

  it("TestReserveSetLimit: a new rate applies from the moment it is set", () => {
    // NewLimiter(5, 2): 2 at t0, SetLimit(10) at t2 (0.2 s in, 1 token back)
    const five = tb({ capacity: 2, tokens: 5, periodMillis: 1000 })
    let s = TokenBucket.step(five, TokenBucket.initial(five, 0), 0, 2).state
    const ten = TokenBucket.rate.withRate(five, 10, 1000)
    s = TokenBucket.rate.carryRate(ten, TokenBucket.rate.rateOf(five), s, 200)
    assert.strictEqual(tokens(ten, s, 200), 1)
    assert.strictEqual(TokenBucket.step(ten, s, 200, 2).retryAfter, 100)
  })

  it("Inf allows every event, even above any burst", () => {
    const c = Unlimited.config
    const s = Unlimited.algorithm.initial(c, 0)
    for (const cost of [0, 1, 3, 1e9]) assert.isTrue(Unlimited.algorithm.step(c, s, 0, cost).allowed)
    assert.strictEqual(Unlimited.algorithm.maxCost(c), Infinity)
  })
})

describe("Guava", () => {
  // Guava's acquire: reserve at `now` (our force: Guava's reserveEarliestAvailable),
  // then sleep until the moment that was free. `R` events are those sleeps, `U` the
  // test's own, in seconds with two decimals.
  const limiter = (c0: WarmUp.Config) => {
    let c = c0
    let s = WarmUp.initial(c, 0)
    let now = 0
    const events: Array<string> = []
    return {
      acquire: (permits = 1) => {
        const wait = Math.max(0, WarmUp.nextFree(s) - now)
        s = WarmUp.force(c, s, now, permits)
        now += wait
        events.push(`R${(wait / 1000).toFixed(2)}`)
      },
      sleep: (millis: number) => {
        now += millis
        events.push(`U${(millis / 1000).toFixed(2)}`)
      },
      setRate: (permitsPerSecond: number) => {
        const next = WarmUp.rate.withRate(c, permitsPerSecond, 1000)
        s = WarmUp.rate.carryRate(next, WarmUp.rate.rateOf(c), s, now)
        c = next
      },
      events: () => events.splice(0)
    }
  }

  it("testBurstyAndUpdate: the next request pays the previous one's cost at the old rate", () => {
    const g = limiter(WarmUp.config({ permits: 1, periodMillis: 1000 }))
    g.acquire(1)
    g.acquire(1)
    g.setRate(2)
    g.acquire(1)
    g.acquire(2)
    g.acquire(4)
    g.acquire(1)
    assert.deepStrictEqual(g.events(), ["R0.00", "R1.00", "R1.00", "R0.50", "R1.00", "R2.00"])
  })

  it("testWarmUpAndUpdate: the stored permits are rescaled, the warm-up keeps its length", () => {
    const g = limiter(WarmUp.config({ permits: 2, periodMillis: 1000, warmupMillis: 4000, coldFactor: 3 }))
    for (let i = 0; i < 8; i++) g.acquire()
    g.sleep(4500)
    for (let i = 0; i < 3; i++) g.acquire()
    g.setRate(4)
    g.acquire()
    for (let i = 0; i < 4; i++) g.acquire()
    g.sleep(4250)
    for (let i = 0; i < 11; i++) g.acquire()
    assert.deepStrictEqual(g.events(), [
      ..."R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50".split(", "),
      "U4.50",
      ..."R0.00, R1.38, R1.13".split(", "),
      "R0.88", // the debt of the last acquire, at the old rate
      ..."R0.34, R0.28, R0.25, R0.25".split(", "),
      "U4.25",
      ..."R0.00, R0.72, R0.66, R0.59, R0.53, R0.47, R0.41".split(", "),
      ..."R0.34, R0.28, R0.25, R0.25".split(", ")
    ])
  })

  it("testWarmUpAndUpdateWithColdFactor", () => {
    const g = limiter(WarmUp.config({ permits: 5, periodMillis: 1000, warmupMillis: 4000, coldFactor: 10 }))
    for (let i = 0; i < 8; i++) g.acquire()
    g.sleep(4200)
    for (let i = 0; i < 3; i++) g.acquire()
    g.setRate(10)
    g.acquire()
    for (let i = 0; i < 4; i++) g.acquire()
    g.sleep(4100)
    for (let i = 0; i < 11; i++) g.acquire()
    assert.deepStrictEqual(g.events(), [
      ..."R0.00, R1.75, R1.26, R0.76, R0.30, R0.20, R0.20, R0.20".split(", "),
      "U4.20",
      ..."R0.00, R1.75, R1.26".split(", "),
      "R0.76",
      ..."R0.20, R0.10, R0.10, R0.10".split(", "),
      "U4.10",
      ..."R0.00, R0.94, R0.81, R0.69, R0.57, R0.44, R0.32".split(", "),
      ..."R0.20, R0.10, R0.10, R0.10".split(", ")
    ])
  })

  it("reconfigure with carry proportional is setRate; as-is keeps the stored permits", () => {
    const one = WarmUp.config({ permits: 1, periodMillis: 1000, maxBurstMillis: 4000 })
    const two = WarmUp.config({ permits: 2, periodMillis: 1000, maxBurstMillis: 4000 })
    const s = { stored: 3, ahead: 250, at: 0 }
    const viaRule = bind(WarmUp.algorithm, one).reconfigure(s, bind(WarmUp.algorithm, two), 0, "proportional")
    assert.deepStrictEqual(viaRule, WarmUp.rate.carryRate(two, WarmUp.rate.rateOf(one), s, 0))
    assert.deepStrictEqual(viaRule, { stored: 6, ahead: 250, at: 0 })
    assert.deepStrictEqual(WarmUp.reconfigure(two, { stored: 7, ahead: 0, at: 0 }, one, 0, "as-is"), {
      stored: 4,
      ahead: 0,
      at: 0
    })
  })
})
