/**
 * A key blocked until a time (rate-limiter-flexible's `block` and its
 * `blockDuration` option): every request is denied until then, whatever the
 * policy would say, with `retryAfter` running to the end of the block (or
 * later, if the policy itself would still refuse the request then). A
 * blocked request never reaches the algorithm: it takes nothing and is not
 * counted (not even by a policy that counts denials). Time still passes for
 * the key's own state underneath: a token bucket refills during a block.
 *
 * These are the rules of a block, once, over a policy's bound rule: the
 * in-process bucket wraps its rule with {@link rule} while the key is
 * blocked (keys never blocked pay nothing), and the stores keep the time
 * beside the key's state and answer with {@link outcome}.
 *
 * @since 0.2.0
 */
import type { Carry, Outcome, Partial, Rule } from "./Algorithm.ts"

/**
 * What a request of `cost` is told while the key is blocked until `until`.
 *
 * @example
 * ```ts
 * import { bind } from "./Algorithm.ts"
 * import * as Block from "./Block.ts"
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const rule = bind(TokenBucket.algorithm, TokenBucket.config({ capacity: 5, tokens: 1, periodMillis: 1000 }))
 * Block.outcome(rule, rule.initial(0), 0, 60_000, 1).retryAfter // 60000
 * ```
 *
 * @since 0.2.0
 */
export const outcome = (rule: Rule, state: unknown, now: number, until: number, cost: number): Outcome<unknown> => {
  // what the policy says of the key as it stands (a peek logs nothing)
  const o = rule.peek(state, now, cost)
  const left = until - now
  return {
    allowed: false,
    state,
    remaining: 0,
    retryAfter: Math.max(left, rule.waitTime(state, now, 0, cost)),
    resetAfter: Math.max(left, o.resetAfter),
    limit: o.limit
  }
}

/**
 * Milliseconds until a request of `cost` behind `queued` waiting units is
 * admitted: not before the block ends.
 *
 * @since 0.2.0
 */
export const waitTime = (
  rule: Rule,
  state: unknown,
  now: number,
  until: number,
  queued: number,
  cost: number
): number => Math.max(until - now, rule.waitTime(state, now, queued, cost))

/**
 * When a blocked key may be forgotten: not before the block ends.
 *
 * @since 0.2.0
 */
export const settledAt = (rule: Rule, state: unknown, until: number): number => Math.max(until, rule.settledAt(state))

/**
 * A rule blocked until `until`: it denies everything before then and is
 * `base` from then on. Units given back, forced or added go to the state
 * underneath, which keeps its time.
 *
 * @since 0.2.0
 */
export class Blocked implements Rule {
  readonly name: string
  readonly maxCost: number
  readonly base: Rule
  readonly until: number
  readonly takeInPlace: Rule["takeInPlace"]
  readonly release: Rule["release"]
  readonly forceAdd: Rule["forceAdd"]
  readonly rate: Rule["rate"]
  readonly adapt: Rule["adapt"]
  constructor(base: Rule, until: number) {
    this.name = base.name
    this.maxCost = base.maxCost
    this.base = base
    this.until = until
    const take = base.takeInPlace
    this.takeInPlace = take === undefined
      ? undefined
      : (state, now, cost) => now >= until && take(state, now, cost)
    this.release = base.release
    this.forceAdd = base.forceAdd
    this.rate = base.rate
    // an adaptive rate keeps moving underneath a block
    this.adapt = base.adapt
  }
  initial(now: number): unknown {
    return this.base.initial(now)
  }
  step(state: unknown, now: number, cost: number): Outcome<unknown> {
    return now < this.until ? outcome(this.base, state, now, this.until, cost) : this.base.step(state, now, cost)
  }
  waitTime(state: unknown, now: number, queued: number, cost: number): number {
    return now < this.until
      ? waitTime(this.base, state, now, this.until, queued, cost)
      : this.base.waitTime(state, now, queued, cost)
  }
  settledAt(state: unknown): number {
    return settledAt(this.base, state, this.until)
  }
  peek(state: unknown, now: number, cost: number): Outcome<unknown> {
    return now < this.until ? outcome(this.base, state, now, this.until, cost) : this.base.peek(state, now, cost)
  }
  reconfigure(state: unknown, next: Rule, now: number, carry: Carry): unknown {
    return this.base.reconfigure(state, next, now, carry)
  }
  force(state: unknown, now: number, cost: number): unknown {
    return this.base.force(state, now, cost)
  }
  full(now: number): unknown {
    return this.base.full(now)
  }
  takeUpTo(state: unknown, now: number, most: number): Partial {
    return now < this.until
      ? { taken: 0, outcome: outcome(this.base, state, now, this.until, 1) }
      : this.base.takeUpTo(state, now, most)
  }
  withWindow(millis: number): Rule | undefined {
    const rule = this.base.withWindow(millis)
    return rule === undefined ? undefined : new Blocked(rule, this.until)
  }
}

/**
 * `base` blocked until `until` (a block already on it is replaced).
 *
 * @example
 * ```ts
 * import { bind } from "./Algorithm.ts"
 * import * as Block from "./Block.ts"
 * import * as TokenBucket from "./TokenBucket.ts"
 *
 * const base = bind(TokenBucket.algorithm, TokenBucket.config({ capacity: 5, tokens: 1, periodMillis: 1000 }))
 * Block.rule(base, 60_000).step(base.initial(0), 0, 1).allowed // false
 * ```
 *
 * @since 0.2.0
 */
export const rule = (base: Rule, until: number): Blocked =>
  new Blocked(base instanceof Blocked ? base.base : base, until)

/**
 * The rule underneath a block, if any.
 *
 * @since 0.2.0
 */
export const unblocked = (rule: Rule): Rule => rule instanceof Blocked ? rule.base : rule

/**
 * Until when a rule is blocked (`-Infinity`: it is not).
 *
 * @since 0.2.0
 */
export const until = (rule: Rule): number => rule instanceof Blocked ? rule.until : -Infinity

/**
 * A key's state with a block on it, as a store keeps it: the block's end
 * beside the state underneath (`MemoryStore`; the Redis scripts keep the
 * same two things, packed).
 *
 * @since 0.2.0
 */
export class Stored {
  readonly until: number
  readonly state: unknown
  constructor(until: number, state: unknown) {
    this.until = until
    this.state = state
  }
}
