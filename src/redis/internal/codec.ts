/**
 * The text of calls and replies: how numbers and operations are sent to the
 * entry points and how their replies are read back (see `batch.ts` and
 * `lean.ts` for the layouts).
 *
 * @since 0.2.0
 */
import * as Op from "../../internal/operation/Op.ts"

type AllReply = Op.AllReply
type Reply = Op.Reply

/**
 * A number as text that Lua's `tonumber` reads back exactly.
 *
 * @example
 * ```ts
 * import { show } from "./codec.ts"
 *
 * show(-0) // "-0"
 * show(Infinity) // "inf"
 * ```
 *
 * @since 0.2.0
 */
export const show = (n: number): string =>
  n === Infinity ? "inf" : n === -Infinity ? "-inf" : Object.is(n, -0) ? "-0" : String(n)

/**
 * A batch's operations: `kind cost queued window times` for each run of
 * equal operations (a hot key's batch is mostly the same Take, over and
 * over); `window` is 0 for an operation that opens no window of its own.
 *
 * @example
 * ```ts
 * import { encodeOps } from "./codec.ts"
 *
 * encodeOps([{ kind: 0, cost: 1, queued: 0 }, { kind: 0, cost: 1, queued: 0 }]) // "0 1 0 0 2"
 * ```
 *
 * @since 0.2.0
 */
export const encodeOps = (ops: ReadonlyArray<Op.Op>): string => {
  // the most common call by far: one Take of 1
  if (ops.length === 1 && ops[0].kind === Op.Kind.Take && ops[0].cost === 1 && ops[0].queued === 0 && !ops[0].window) {
    return "0 1 0 0 1"
  }
  let out = ""
  for (let i = 0; i < ops.length;) {
    const op = ops[i]
    const window = op.window ?? 0
    let j = i + 1
    while (
      j < ops.length && ops[j].kind === op.kind && ops[j].cost === op.cost && ops[j].queued === op.queued &&
      (ops[j].window ?? 0) === window
    ) j++
    out += (i === 0 ? "" : " ") + op.kind + " " + show(op.cost) + " " + show(op.queued) + " " + show(window) + " " +
      (j - i)
    i = j
  }
  return out
}

const number = (s: string): number => s === "inf" ? Infinity : s === "-inf" ? -Infinity : Number(s)

/**
 * One key's reply from the batch entry point: `allowed remaining retryAfter
 * resetAfter limit` per op, then `=value` for an op that answers one (a
 * partial take, get, delete), `~delay` for an admission a shaper delays,
 * `*n` after one that answers n ops in a row, and `^n a b c` after one that
 * starts n ops in a row whose k-th (from 0) has remaining, retryAfter and
 * resetAfter plus k times a, b and c; `undefined` if it is not one for
 * `count` ops.
 *
 * @example
 * ```ts
 * import { decodeBatch } from "./codec.ts"
 *
 * decodeBatch("1 4 0 100 5 *2", 2) // two replies: allowed, remaining 4, ...
 * decodeBatch("1 4 0 100 5 ^3 -1 0 100", 3) // remaining 4, 3, 2; resetAfter 100, 200, 300
 * ```
 *
 * @since 0.2.0
 */
export const decodeBatch = (raw: unknown, count: number): ReadonlyArray<Reply> | undefined => {
  if (typeof raw !== "string") return undefined
  const fields = raw.split(" ")
  const replies: Array<Reply> = []
  for (let i = 0; i < fields.length;) {
    if (i + 5 > fields.length) return undefined
    let reply: Reply = {
      allowed: fields[i] === "1",
      remaining: number(fields[i + 1]),
      retryAfter: number(fields[i + 2]),
      resetAfter: number(fields[i + 3]),
      limit: number(fields[i + 4])
    }
    i += 5
    if (i < fields.length && fields[i].startsWith("=")) {
      reply = { ...reply, value: number(fields[i].slice(1)) }
      i++
    }
    if (i < fields.length && fields[i].startsWith("~")) {
      reply = { ...reply, delay: number(fields[i].slice(1)) }
      i++
    }
    let times = 1
    if (i < fields.length && fields[i].startsWith("*")) {
      times = Number(fields[i].slice(1))
      i++
    } else if (i < fields.length && fields[i].startsWith("^")) {
      // a run that steps: the k-th has k steps added (the sums the script checked)
      times = Number(fields[i].slice(1))
      if (i + 4 > fields.length) return undefined
      const a = number(fields[i + 1])
      const b = number(fields[i + 2])
      const c = number(fields[i + 3])
      i += 4
      if (!(Number.isSafeInteger(times) && times >= 2 && replies.length + times <= count)) return undefined
      replies.push(reply)
      for (let k = 1; k < times; k++) {
        replies.push({
          ...reply,
          remaining: reply.remaining + k * a,
          retryAfter: reply.retryAfter + k * b,
          resetAfter: reply.resetAfter + k * c
        })
      }
      continue
    }
    if (!(Number.isSafeInteger(times) && times >= 1 && replies.length + times <= count)) return undefined
    for (let k = 0; k < times; k++) replies.push(reply)
  }
  return replies.length === count ? replies : undefined
}

// A lean value: an integer reply, or text for what an integer cannot carry.
const value = (v: unknown): number => typeof v === "number" ? v : typeof v === "string" ? number(v) : NaN

/**
 * What the lean entry point answers for a key it leaves to the batch entry
 * point (a key blocked: `allowed` is -1).
 *
 * @example
 * ```ts
 * import { decodeLean, deferred } from "./codec.ts"
 *
 * decodeLean([-1, 0, 0, 0, 0], 0, 1) === deferred // true
 * ```
 *
 * @since 0.2.0
 */
export const deferred: ReadonlyArray<Reply> = []

/**
 * The i-th key's reply from the lean entry point (five values per key, six
 * with a shaper's delay: `width`), or
 * `undefined` if the reply is not one for `keys` keys; {@link deferred} for a
 * key to send to the batch entry point.
 *
 * @example
 * ```ts
 * import { decodeLean } from "./codec.ts"
 *
 * decodeLean([1, 4, 0, 100, 5], 0, 1) // [{ allowed: true, remaining: 4, retryAfter: 0, resetAfter: 100, limit: 5 }]
 * ```
 *
 * @since 0.2.0
 */
export const decodeLean = (
  raw: unknown,
  i: number,
  keys: number,
  width = 5
): ReadonlyArray<Reply> | undefined => {
  if (!(Array.isArray(raw) || raw instanceof Float64Array) || raw.length !== width * keys) return undefined
  const at = width * i
  if (raw[at] === -1) return deferred
  const reply: Reply = {
    allowed: raw[at] === 1,
    remaining: value(raw[at + 1]),
    retryAfter: value(raw[at + 2]),
    resetAfter: value(raw[at + 3]),
    limit: value(raw[at + 4])
  }
  // a shaper's sixth value: its delay
  const delay = width === 6 ? value(raw[at + 5]) : 0
  return [delay > 0 && reply.allowed ? { ...reply, delay } : reply]
}

/**
 * A lean reply's values: a binary reply (the bytes of little-endian
 * doubles) read once for all its keys; any other reply as it is.
 *
 * @example
 * ```ts
 * import { leanValues } from "./codec.ts"
 *
 * const bytes = new Uint8Array(new Float64Array([1, 4, 0, 100, 5]).buffer)
 * leanValues(bytes) // Float64Array [1, 4, 0, 100, 5] (on a little-endian machine)
 * ```
 *
 * @since 0.3.0
 */
export const leanValues = (raw: unknown): unknown => {
  if (!(raw instanceof Uint8Array)) return raw
  if (raw.byteLength % 8 !== 0) return undefined
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength)
  const values = new Float64Array(raw.byteLength / 8)
  for (let i = 0; i < values.length; i++) values[i] = view.getFloat64(8 * i, true)
  return values
}

/**
 * The reply of the multi entry point: whether every key admitted, and each
 * key's reply; `undefined` when it is not one.
 *
 * @example
 * ```ts
 * import { decodeMulti } from "./codec.ts"
 *
 * decodeMulti([1, "1 4 0 1000 5"], 1) // { allowed: true, replies: [...] }
 * ```
 *
 * @since 0.2.0
 */
export const decodeMulti = (raw: unknown, keys: number): AllReply | undefined => {
  if (!Array.isArray(raw) || raw.length !== keys + 1) return undefined
  const replies: Array<Reply> = []
  for (let i = 1; i <= keys; i++) {
    const one = decodeBatch(raw[i], 1)
    if (one === undefined || one.length !== 1) return undefined
    replies.push(one[0])
  }
  return { allowed: raw[0] === 1 || raw[0] === "1", replies }
}
