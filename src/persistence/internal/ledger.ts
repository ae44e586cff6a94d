/**
 * The arithmetic of Effect's `RateLimiterStore` (`effect/persistence`), as
 * pure transitions over one key's state, so that a tollgate bucket (the
 * key's single writer) can run them in order: `fixedWindow` (a counter
 * whose expiry grows by `refillRate` per token and which starts again once
 * it has expired), `tokenBucket` (whole refills per `refillRate`, a debt when
 * `allowOverflow`), and the adaptive state machine (`inactive`, `cooldown`,
 * `learning`, `learned`) fed by 429 replies. Each transition is Effect's
 * in-memory store step for step: the same numbers in, the same numbers out.
 *
 * The state also says when it has settled: from then on, forgetting it is
 * the same as keeping it (an expired counter, a full bucket, an expired
 * adaptive state), which is when the bucket may be reaped.
 *
 * @since 0.2.0
 */
import type { Algorithm } from "../../internal/algorithm/Algorithm.ts"

/**
 * A key's state: Effect's record for the key (`undefined`: none yet) and
 * from when forgetting it changes nothing.
 *
 * @since 0.2.0
 */
export interface State<A> {
  readonly value: A | undefined
  readonly settledAt: number
}

/**
 * A counter of `fixedWindow`.
 *
 * @since 0.2.0
 */
export interface Counter {
  readonly count: number
  readonly expiresAt: number
}

/**
 * A bucket of `tokenBucket`.
 *
 * @since 0.2.0
 */
export interface Tokens {
  readonly tokens: number
  readonly lastRefill: number
}

/**
 * The phase of an adaptive key.
 *
 * @since 0.2.0
 */
export type Phase = "inactive" | "cooldown" | "learning" | "learned"

/**
 * An adaptive key's record.
 *
 * @since 0.2.0
 */
export interface Adaptive {
  readonly phase: Phase
  readonly epoch: number
  readonly cooldownUntil: number
  readonly learningStartedAt: number
  readonly observedTokens: number
  readonly learnedLimit: number
  readonly learnedWindowMillis: number
  readonly expiresAt: number
}

/**
 * `fixedWindow`: `[count, ttl]` and the next state. With a `limit`, a take
 * that would pass it changes nothing and answers the count it would make.
 *
 * @example
 * ```ts
 * import * as Ledger from "./ledger.ts"
 *
 * const [reply] = Ledger.fixedWindow({ value: undefined, settledAt: 0 }, 0, 1, 100, 10)
 * reply // [1, 100]
 * ```
 *
 * @since 0.2.0
 */
export const fixedWindow = (
  s: State<Counter>,
  now: number,
  tokens: number,
  refillMillis: number,
  limit: number | undefined
): readonly [readonly [number, number], State<Counter>] => {
  const current = s.value === undefined || s.value.expiresAt <= now ? { count: 0, expiresAt: now } : s.value
  // Effect tests `options.limit` for truth: a limit of 0 counts as none
  if (limit && current.count + tokens > limit) {
    return [[current.count + tokens, current.expiresAt - now], { value: current, settledAt: current.expiresAt }]
  }
  const next = { count: current.count + tokens, expiresAt: current.expiresAt + refillMillis * tokens }
  return [[next.count, next.expiresAt - now], { value: next, settledAt: next.expiresAt }]
}

/**
 * `tokenBucket`: `[remaining, elapsedMillis]` and the next state. A new key
 * starts full; the bucket refills whole tokens per `refillMillis`, and its
 * refill clock restarts whenever it is full.
 *
 * @example
 * ```ts
 * import * as Ledger from "./ledger.ts"
 *
 * const [reply] = Ledger.tokenBucket({ value: undefined, settledAt: 0 }, 0, 1, 5, 100, false)
 * reply // [4, 0]
 * ```
 *
 * @since 0.2.0
 */
export const tokenBucket = (
  s: State<Tokens>,
  now: number,
  tokens: number,
  limit: number,
  refillMillis: number,
  allowOverflow: boolean
): readonly [readonly [number, number], State<Tokens>] => {
  let bucketTokens = s.value === undefined ? limit : s.value.tokens
  let lastRefill = s.value === undefined ? now : s.value.lastRefill
  const toAdd = Math.floor((now - lastRefill) / refillMillis)
  if (toAdd > 0) {
    bucketTokens = Math.min(limit, bucketTokens + toAdd)
    lastRefill += toAdd * refillMillis
  }
  if (bucketTokens >= limit) lastRefill = now
  const after = bucketTokens - tokens
  if (allowOverflow || after >= 0) bucketTokens = after
  // full again once the missing tokens have come in, whole refills each
  const settledAt = bucketTokens >= limit ? -Infinity : lastRefill + Math.ceil(limit - bucketTokens) * refillMillis
  return [[after, Math.max(0, now - lastRefill)], { value: { tokens: bucketTokens, lastRefill }, settledAt }]
}

const graceMillis = 60_000
const maxWindowMillis = 60 * 60 * 1_000
const clamp = (millis: number): number => Number.isNaN(millis) || millis <= 0 ? 1 : Math.min(millis, maxWindowMillis)

const live = (s: State<Adaptive>, now: number): Adaptive | undefined =>
  s.value === undefined || s.value.expiresAt <= now ? undefined : s.value

const kept = (value: Adaptive | undefined): State<Adaptive> => ({
  value,
  settledAt: value === undefined ? -Infinity : value.expiresAt
})

/**
 * `adaptiveConsume`: `[delayMillis, epoch, phase]` and the next state.
 *
 * @example
 * ```ts
 * import * as Ledger from "./ledger.ts"
 *
 * const [reply] = Ledger.adaptiveConsume({ value: undefined, settledAt: 0 }, 0, 1, 60_000)
 * reply // [0, 0, "inactive"]
 * ```
 *
 * @since 0.2.0
 */
export const adaptiveConsume = (
  s: State<Adaptive>,
  now: number,
  tokens: number,
  fallbackWindowMillis: number
): readonly [readonly [number, number, Phase], State<Adaptive>] => {
  const state = live(s, now)
  if (state === undefined) return [[0, 0, "inactive"], kept(undefined)]
  switch (state.phase) {
    case "cooldown": {
      if (state.cooldownUntil > now) return [[state.cooldownUntil - now, state.epoch, "cooldown"], kept(state)]
      const next: Adaptive = {
        ...state,
        phase: "learning",
        epoch: state.epoch + 1,
        learningStartedAt: now,
        observedTokens: tokens,
        expiresAt: now + fallbackWindowMillis + graceMillis
      }
      return [[0, next.epoch, "learning"], kept(next)]
    }
    case "learning": {
      const next = { ...state, observedTokens: state.observedTokens + tokens }
      return [[0, next.epoch, next.phase], kept(next)]
    }
    case "learned": {
      const refillRateMillis = state.learnedWindowMillis / state.learnedLimit
      let observedTokens = state.observedTokens
      let cooldownUntil = state.cooldownUntil
      if (cooldownUntil <= now) {
        observedTokens = 0
        cooldownUntil = now
      }
      observedTokens += tokens
      cooldownUntil += refillRateMillis * tokens
      const ttl = cooldownUntil - now
      const elapsed = observedTokens * refillRateMillis - ttl
      const windowNumber = Math.floor((observedTokens - 1) / state.learnedLimit)
      const remaining = windowNumber * state.learnedWindowMillis - elapsed
      const next = { ...state, observedTokens, cooldownUntil }
      return [[remaining <= 0 ? 0 : remaining, next.epoch, next.phase], kept(next)]
    }
    case "inactive":
      return [[0, state.epoch, state.phase], kept(state)]
  }
}

const cooldown = (epoch: number, cooldownUntil: number): Adaptive => ({
  phase: "cooldown",
  epoch,
  cooldownUntil,
  learningStartedAt: 0,
  observedTokens: 0,
  learnedLimit: 0,
  learnedWindowMillis: 0,
  expiresAt: cooldownUntil + graceMillis
})

/**
 * `adaptiveFeedback`: the next state after a reply of `status` (only a 429
 * with a Retry-After counts), for the epoch it was sent in.
 *
 * @example
 * ```ts
 * import * as Ledger from "./ledger.ts"
 *
 * Ledger.adaptiveFeedback({ value: undefined, settledAt: 0 }, 0, 0, 1, 429, 5000).value?.phase // "cooldown"
 * ```
 *
 * @since 0.2.0
 */
export const adaptiveFeedback = (
  s: State<Adaptive>,
  now: number,
  epoch: number,
  tokens: number,
  status: number,
  retryAfterMillis: number | undefined
): State<Adaptive> => {
  if (status !== 429 || retryAfterMillis === undefined) return s
  const cooldownUntil = now + clamp(retryAfterMillis)
  const state = live(s, now)
  if (state === undefined) return epoch !== 0 ? kept(undefined) : kept(cooldown(0, cooldownUntil))
  if (state.epoch !== epoch) return kept(state)
  switch (state.phase) {
    case "cooldown": {
      const until = Math.max(state.cooldownUntil, cooldownUntil)
      return kept({ ...state, cooldownUntil: until, expiresAt: until + graceMillis })
    }
    case "learning": {
      const accepted = state.observedTokens - tokens
      if (accepted <= 0) return kept(cooldown(state.epoch, cooldownUntil))
      const learnedWindowMillis = clamp(now - state.learningStartedAt + (cooldownUntil - now))
      return kept({
        phase: "learned",
        epoch: state.epoch + 1,
        cooldownUntil: state.learningStartedAt + learnedWindowMillis,
        learningStartedAt: state.learningStartedAt,
        observedTokens: accepted,
        learnedLimit: accepted,
        learnedWindowMillis,
        expiresAt: now + learnedWindowMillis + graceMillis
      })
    }
    case "learned":
      return kept(cooldown(state.epoch, cooldownUntil))
    case "inactive":
      return kept(state)
  }
}

/**
 * The ledger as an {@link Algorithm}, so a bucket can hold it: a key with
 * no record, settled from its start; the bucket only runs the transitions
 * above on it (it has no limit of its own, so `step` admits).
 *
 * @since 0.2.0
 */
export const algorithm: Algorithm<undefined, State<unknown>> = {
  name: "effect-store",
  initial: () => ({ value: undefined, settledAt: -Infinity }),
  step: (_, state) => ({ allowed: true, state, remaining: 0, retryAfter: 0, resetAfter: 0, limit: 0 }),
  waitTime: () => 0,
  settledAt: (_, state) => state.settledAt,
  maxCost: () => Infinity,
  force: (_, state) => state
}
