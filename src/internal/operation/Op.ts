/**
 * The operations a key's stored state undergoes: what every request becomes
 * once its checks have passed, whoever runs it (a bucket in process, the
 * in-memory store, Redis, a cluster's owner). Each operation's transition is
 * defined once, in `Interpreter.ts`; this module names them and gives the
 * shapes of an operation and of its reply.
 *
 * The codes are derived from the order of {@link names}, never numbered by
 * hand: the Lua the store runs is generated with the same codes.
 *
 * @since 0.3.0
 */

/**
 * Every operation, in the order that gives each its code.
 *
 * - `Take`: decide a request of `cost`, taking it if admitted (acquire,
 *   consume). `queued`: units already spoken for (holds of calls over several
 *   keys): admitted only if they and `cost` both fit; only `cost` is taken.
 * - `Peek`: decide a request of `cost` without taking anything (`queued` as
 *   for `Take`).
 * - `Reset`: back to the initial state, unblocked.
 * - `Release`: give `cost` units back, capped.
 * - `WaitTime`: how long until `cost` could be admitted behind `queued`
 *   units, answered in `retryAfter` (a request behind a line is denied).
 * - `Admit`: as `Take`, but a denial leaves the state as it was (a waiter's
 *   try); a key with no state gets its initial one either way.
 * - `Force`: take `cost` whatever the limit (into debt); `retryAfter` answers
 *   how long the debt lasts.
 * - `ForceAdd`: add `cost` units with no cap.
 * - `Fill`: the key full (nothing used), unblocked.
 * - `TakeUpTo`: take as much as admitted now, at most `cost`; `value`
 *   answers how many (`queued`: units held, which come first, as for
 *   `Take`).
 * - `Get`: the key as it stands; `value` answers 1 if it has state not yet
 *   settled (or `queued` > 0: others wait on it), else 0; nothing is created.
 * - `Set`: the key as if `cost` units had been used from full, unblocked.
 * - `Delete`: forget the key; `value` answers as for `Get`.
 * - `Block`: refuse everything for `cost` milliseconds from now
 *   (`Infinity`: for ever).
 * - `SetRate`: the policy's rate changed (`setRate`): `cost` and `queued`
 *   are the old rate's numbers (the algorithm's `rateOf`), and the state is
 *   carried over by the algorithm's own rate rule (a key with no state stays
 *   so).
 * - `Adapt`: a signal for an adaptive rate: `cost` is the signal (0 ok, 1
 *   throttled, 2 a latency) and `queued` its milliseconds; a policy without
 *   an adaptive rate is left as it is.
 *
 * @since 0.3.0
 */
export const names = [
  "Take",
  "Peek",
  "Reset",
  "Release",
  "WaitTime",
  "Admit",
  "Force",
  "ForceAdd",
  "Fill",
  "TakeUpTo",
  "Get",
  "Set",
  "Delete",
  "Block",
  "SetRate",
  "Adapt"
] as const

/**
 * An operation's name.
 *
 * @since 0.3.0
 */
export type Name = typeof names[number]

type Codes<T extends ReadonlyArray<string>> = {
  readonly [I in keyof T as T[I] & string]: I extends `${infer N extends number}` ? N : never
}

const codesOf = <const T extends ReadonlyArray<string>>(list: T): Codes<T> => {
  const codes: Record<string, number> = {}
  list.forEach((name, i) => {
    codes[name] = i
  })
  return codes as Codes<T>
}

/**
 * Each operation's code: its place in {@link names}.
 *
 * @example
 * ```ts
 * import * as Op from "./Op.ts"
 *
 * Op.Kind.Take // 0
 * Op.names[Op.Kind.Fill] // "Fill"
 * ```
 *
 * @since 0.3.0
 */
export const Kind: Codes<typeof names> = codesOf(names)

/**
 * An operation's code.
 *
 * @since 0.3.0
 */
export type Kind = typeof Kind[Name]

/**
 * One operation on a key's state.
 *
 * @since 0.3.0
 */
export interface Op {
  readonly kind: Kind
  readonly cost: number
  readonly queued: number
  /**
   * Take, Force and Set: the length of the window the operation opens, for
   * a policy with windows of a length per call (a fixed window that opens at
   * its first hit); 0 or absent: the policy's own.
   */
  readonly window?: number | undefined
}

/**
 * What an operation answers: the key's figures after it (as a unit request
 * sees them for the operations that decide nothing).
 *
 * @since 0.3.0
 */
export interface Reply {
  readonly allowed: boolean
  readonly remaining: number
  readonly retryAfter: number
  readonly resetAfter: number
  readonly limit: number
  /** TakeUpTo: the units taken; Get and Delete: 1 if the key had state, else 0. */
  readonly value?: number | undefined
  /**
   * Take, Admit and TakeUpTo that admit: a shaper's delay (ms) before the
   * request proceeds; absent when 0.
   */
  readonly delay?: number | undefined
}

/**
 * The answer to a take over several keys, all or nothing: whether every key
 * admitted, and each key's reply in the order given.
 *
 * @since 0.3.0
 */
export interface AllReply {
  readonly allowed: boolean
  readonly replies: ReadonlyArray<Reply>
}

/**
 * Makes an operation.
 *
 * @example
 * ```ts
 * import * as Op from "./Op.ts"
 *
 * const take = Op.make(Op.Kind.Take, 1)
 * ```
 *
 * @since 0.3.0
 */
export const make = (kind: Kind, cost: number, queued = 0, window?: number): Op =>
  window === undefined || window === 0 ? { kind, cost, queued } : { kind, cost, queued, window }
