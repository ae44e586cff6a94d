/**
 * A key blocked until a time (rate-limiter-flexible's `block` and its
 * `blockDuration` option): every request is denied until then, whatever the
 * policy would say, with `retryAfter` running to the end of the block (or
 * later, if the policy itself would still refuse the request then). A
 * blocked request never reaches the algorithm: it takes nothing and is not
 * counted (not even by a policy that counts denials). Time still passes for
 * the key's own state underneath: a token bucket refills during a block.
 *
 * These are the rules of a block, once, over a policy's bound rule: every
 * backend keeps the block's end beside the key's state ({@link Stored}) and
 * the interpreter answers with {@link outcome} while it lasts (keys never
 * blocked pay nothing).
 *
 * @since 0.2.0
 */
import type { Outcome, Rule } from "./Algorithm.ts"

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
