/**
 * What runners say to each other: the partition entity (one per shard) and
 * its three messages.
 *
 * - `Batch`: decide-now operations for one destination runner, any of its
 *   shards, answered in one reply (each operation's answer in order). Sent
 *   to the entity of one of those shards; the runner that gets it serves
 *   every operation whose shard it owns and answers `NotHere` for the rest.
 * - `Wait`: one place in a key's line (`wait`, `reserve`), answered when it is
 *   admitted, refused, or handed over to the shard's next owner (`Moved`).
 * - `Open`: starts the entity of a shard on its owner (how a batch that came
 *   through another shard's entity opens this one).
 *
 * Durations travel as milliseconds (`Infinity` included: the binary codec
 * keeps every double), decisions and errors as plain structures.
 *
 * @effect-diagnostics schemaNumber:off
 * @since 0.3.0
 */
import { Duration, Option, Schema } from "effect"
import { Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import type { Decision, KeyDecision, Taken } from "../../Decision.ts"
import {
  BucketFailed,
  InvalidPolicy,
  InvalidRequest,
  LimiterShutdown,
  Overloaded,
  RateLimitExceeded
} from "../../Errors.ts"
import * as Request from "../../internal/actor/Request.ts"
import { StoreUnavailable } from "../../Store.ts"

const {
  Acquire,
  Add,
  Block,
  Consume,
  Delete,
  Feedback,
  Fill,
  Force,
  ForceAdd,
  Get,
  Peek,
  Reconfigure,
  Release,
  Reset,
  Set,
  TakeUpTo
} = Request.Kind

/**
 * The decide-now operations, one number each on the wire: the in-process
 * request's kind where the limiter has one (a runner's owner decides it
 * through the same limiter), and numbers past them for what only crosses
 * between runners (a call over several keys of one shard, a rate set by
 * hand, a waiter's cancellation).
 *
 * @since 0.3.0
 */
export const Kind = {
  Acquire,
  Consume,
  Peek,
  Reset,
  Release,
  Force,
  Add,
  ForceAdd,
  Fill,
  TakeUpTo,
  Get,
  Set,
  Delete,
  Block,
  Reconfigure,
  Feedback,
  SetRate: 100,
  AcquireAll: 101,
  ConsumeAll: 102,
  Cancel: 103
} as const

/** @since 0.3.0 */
export type Kind = typeof Kind[keyof typeof Kind]

// What every call names: the key's shard, the key (or a call's keys, all on
// that shard) and its cost or amount.
const addressed = {
  s: Schema.Number,
  key: Schema.String,
  keys: Schema.optional(Schema.Array(Schema.String)),
  n: Schema.optional(Schema.Number)
}

/**
 * One decide-now operation: its kind, the key's shard and key (or keys),
 * and the numbers and names it takes (`n` a cost or amount, `d` a duration
 * in ms, `p` a policy's name, a feedback signal or a reservation's id, `c`
 * a carry, `f` a feedback's duration). Durations go as the caller gave them
 * (milliseconds, or a string such as "1 minute"), so that the owner's
 * checks name what the caller wrote.
 *
 * @since 0.3.0
 */
export const Op = Schema.Struct({
  k: Schema.Number,
  ...addressed,
  d: Schema.optional(Schema.Union([Schema.Number, Schema.String])),
  p: Schema.optional(Schema.String),
  c: Schema.optional(Schema.String),
  f: Schema.optional(Schema.Union([Schema.Number, Schema.String]))
})

/** @since 0.3.0 */
export type Op = typeof Op.Type

/**
 * Every error an operation can end with on the owner.
 *
 * @since 0.3.0
 */
export const Failure = Schema.Union([
  InvalidRequest,
  InvalidPolicy,
  Overloaded,
  LimiterShutdown,
  BucketFailed,
  RateLimitExceeded,
  StoreUnavailable
])

/** @since 0.3.0 */
export type Failure = typeof Failure.Type

const DecisionFields = {
  a: Schema.Boolean,
  r: Schema.Number,
  ra: Schema.Number,
  rs: Schema.Number,
  l: Schema.Number,
  dl: Schema.optional(Schema.Number),
  dr: Schema.optional(Schema.Boolean)
}

/**
 * A decision on the wire (durations in ms).
 *
 * @since 0.3.0
 */
export const WireDecision = Schema.Struct({
  ...DecisionFields,
  ks: Schema.optional(Schema.Array(Schema.Struct({ key: Schema.String, d: Schema.Struct(DecisionFields) })))
})

/** @since 0.3.0 */
export type WireDecision = typeof WireDecision.Type

/**
 * What one operation got: `t` is 0 (answered: `b` a boolean, `d` a
 * decision, `none` an empty `get`, `n` units taken), 1 (failed: `e`), 2
 * (`Moved`: the shard is being handed to its next owner) or 3 (`NotHere`:
 * this runner does not own the shard).
 *
 * @since 0.3.0
 */
export const Result = Schema.Struct({
  t: Schema.Number,
  b: Schema.optional(Schema.Boolean),
  d: Schema.optional(WireDecision),
  n: Schema.optional(Schema.Number),
  e: Schema.optional(Failure)
})

/** @since 0.3.0 */
export type Result = typeof Result.Type

/**
 * `Result.t`.
 *
 * @since 0.3.0
 */
export const Tag = { Ok: 0, Failed: 1, Moved: 2, NotHere: 3 } as const

/**
 * A place in a key's line: `wait` (or several keys', all at once) or
 * `reserve`. `id` names it across a move: a caller told `Moved` sends it
 * again with `resume`, and the next owner gives it the place it was handed.
 * `n` is the cost, `mw` the `maxWait` as the caller gave it (absent: none).
 *
 * @since 0.3.0
 */
export const WaitRequest = Schema.Struct({
  id: Schema.String,
  ...addressed,
  mw: Schema.optional(Schema.Union([Schema.Number, Schema.String])),
  pr: Schema.optional(Schema.Number),
  tn: Schema.optional(Schema.String),
  wt: Schema.optional(Schema.Number),
  reserve: Schema.Boolean,
  resume: Schema.Boolean
})

/** @since 0.3.0 */
export type WaitRequest = typeof WaitRequest.Type

/**
 * How a place in line ended: admitted (`t` 0; `dl`, a reservation's delay
 * in ms), failed (1, `e`) or handed to the next owner (2).
 *
 * @since 0.3.0
 */
export const WaitResult = Schema.Struct({
  t: Schema.Number,
  dl: Schema.optional(Schema.Number),
  e: Schema.optional(Failure)
})

/** @since 0.3.0 */
export type WaitResult = typeof WaitResult.Type

/**
 * A batch of operations, by columns: kind, shard, key and number of each
 * (what most operations are, an acquire or a consume of a cost), and, for
 * the few with more (several keys, a duration, a name), the whole operation
 * in `x` with its position (its kind in `k` is then -1). Columns of numbers
 * and strings cost the binary codec a sixth of what an array of structures
 * with optional fields does (bench/cluster, 25 operations a batch).
 *
 * @since 0.3.0
 */
export const BatchRequest = Schema.Struct({
  k: Schema.Array(Schema.Number),
  s: Schema.Array(Schema.Number),
  key: Schema.Array(Schema.String),
  n: Schema.Array(Schema.Number),
  x: Schema.Array(Schema.Struct({ i: Schema.Number, op: Op })),
  v: Schema.Number
})

/** @since 0.3.0 */
export type BatchRequest = typeof BatchRequest.Type

/**
 * An operation's result in a batch's reply, when it says it all: answered
 * with nothing, `true` or `false`, `Moved` or `NotHere`; `Full` when the
 * result is in `x` (a decision, an error).
 *
 * @since 0.3.0
 */
export const Code = { Void: 0, True: 1, False: 2, Moved: 3, NotHere: 4, Full: 5 } as const

/**
 * A batch's reply: each operation's result code in order (the full result,
 * when there is more to it, in `x`), the runner that served it and its
 * ownership version, with the shards it serves when the caller's version
 * was not the current one.
 *
 * @since 0.3.0
 */
export const BatchReply = Schema.Struct({
  c: Schema.Array(Schema.Number),
  x: Schema.Array(Schema.Struct({ i: Schema.Number, r: Result })),
  owner: Schema.String,
  v: Schema.Number,
  open: Schema.optional(Schema.Array(Schema.Number))
})

/** @since 0.3.0 */
export type BatchReply = typeof BatchReply.Type

const simple = (op: Op): boolean =>
  op.n !== undefined && op.keys === undefined && op.d === undefined && op.p === undefined && op.c === undefined &&
  op.f === undefined

/**
 * Operations as a batch's columns.
 *
 * @since 0.3.0
 */
export const pack = (ops: ReadonlyArray<Op>, v: number): BatchRequest => {
  const k: Array<number> = []
  const s: Array<number> = []
  const key: Array<string> = []
  const n: Array<number> = []
  const x: Array<{ readonly i: number; readonly op: Op }> = []
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i]
    if (simple(op)) {
      k.push(op.k)
      n.push(op.n!)
    } else {
      k.push(-1)
      n.push(0)
      x.push({ i, op })
    }
    s.push(op.s)
    key.push(op.key)
  }
  return { k, s, key, n, x, v }
}

/**
 * The operations of a batch, back from its columns.
 *
 * @since 0.3.0
 */
export const unpack = (batch: BatchRequest): Array<Op> => {
  const ops: Array<Op> = []
  for (let i = 0; i < batch.k.length; i++) {
    ops.push(batch.k[i] === -1 ? undefined! : { k: batch.k[i], s: batch.s[i], key: batch.key[i], n: batch.n[i] })
  }
  for (const { i, op } of batch.x) ops[i] = op
  return ops
}

const resultOk: Result = { t: Tag.Ok }
const resultTrue: Result = { t: Tag.Ok, b: true }
const resultFalse: Result = { t: Tag.Ok, b: false }
const resultMoved: Result = { t: Tag.Moved }
const resultNotHere: Result = { t: Tag.NotHere }

/**
 * Results as a batch's reply.
 *
 * @since 0.3.0
 */
export const packResults = (
  results: ReadonlyArray<Result>,
  owner: string,
  v: number,
  open: ReadonlyArray<number> | undefined
): BatchReply => {
  const c: Array<number> = []
  const x: Array<{ readonly i: number; readonly r: Result }> = []
  for (let i = 0; i < results.length; i++) {
    const r = results[i]
    if (r.t === Tag.Moved) c.push(Code.Moved)
    else if (r.t === Tag.NotHere) c.push(Code.NotHere)
    else if (r.t === Tag.Ok && r.d === undefined && r.n === undefined) {
      c.push(r.b === undefined ? Code.Void : r.b ? Code.True : Code.False)
    } else {
      c.push(Code.Full)
      x.push({ i, r })
    }
  }
  return open === undefined ? { c, x, owner, v } : { c, x, owner, v, open }
}

/**
 * The results of a batch's reply, in order.
 *
 * @since 0.3.0
 */
export const unpackResults = (reply: BatchReply): Array<Result> => {
  const out: Array<Result> = []
  for (const code of reply.c) {
    out.push(
      code === Code.True
        ? resultTrue
        : code === Code.False
        ? resultFalse
        : code === Code.Void
        ? resultOk
        : code === Code.Moved
        ? resultMoved
        : resultNotHere
    )
  }
  for (const { i, r } of reply.x) out[i] = r
  return out
}

/**
 * The partition entity of a limiter named `name`: one per shard.
 *
 * @since 0.3.0
 */
export const partition = (name: string) =>
  Entity.make(`tollgate/${name}`, [
    Rpc.make("Batch", { payload: BatchRequest, success: BatchReply }),
    Rpc.make("Wait", { payload: WaitRequest, success: WaitResult }),
    Rpc.make("Open", {})
  ])

/** @since 0.3.0 */
export type Partition = ReturnType<typeof partition>

const millis = (d: Duration.Duration): number => Duration.toMillis(d)
const duration = (ms: number): Duration.Duration => ms === Infinity ? Duration.infinity : Duration.millis(ms)

/**
 * A decision, for the wire.
 *
 * @since 0.3.0
 */
export const encodeDecision = (d: Decision): WireDecision => {
  const out: {
    a: boolean
    r: number
    ra: number
    rs: number
    l: number
    dl?: number
    dr?: boolean
    ks?: ReadonlyArray<{ key: string; d: WireDecision }>
  } = {
    a: d.allowed,
    r: d.remaining,
    ra: millis(d.retryAfter),
    rs: millis(d.resetAfter),
    l: d.limit
  }
  if (d.delay !== undefined) out.dl = millis(d.delay)
  if (d.dryRun === true) out.dr = true
  if (d.keys !== undefined) out.ks = d.keys.map((k) => ({ key: k.key, d: encodeDecision(k.decision) }))
  return out
}

/**
 * A decision from the wire.
 *
 * @since 0.3.0
 */
export const decodeDecision = (w: WireDecision): Decision => {
  const out: {
    -readonly [K in keyof Decision]: Decision[K]
  } = {
    allowed: w.a,
    remaining: w.r,
    retryAfter: duration(w.ra),
    resetAfter: duration(w.rs),
    limit: w.l
  }
  if (w.dl !== undefined) out.delay = duration(w.dl)
  if (w.dr === true) out.dryRun = true
  if (w.ks !== undefined) {
    out.keys = w.ks.map((k): KeyDecision => ({ key: k.key, decision: decodeDecision(k.d) }))
  }
  return out
}

// What each operation answers, once: encoding and decoding follow it.
const answerOf = (kind: Kind): "boolean" | "option" | "taken" | "decision" | "none" => {
  switch (kind) {
    case Kind.Acquire:
    case Kind.AcquireAll:
    case Kind.Delete:
      return "boolean"
    case Kind.Get:
      return "option"
    case Kind.TakeUpTo:
      return "taken"
    case Kind.Consume:
    case Kind.ConsumeAll:
    case Kind.Peek:
    case Kind.Force:
    case Kind.Add:
    case Kind.ForceAdd:
    case Kind.Fill:
    case Kind.Set:
    case Kind.Block:
      return "decision"
    default:
      return "none"
  }
}

/**
 * What an answered operation's value becomes on the wire.
 *
 * @since 0.3.0
 */
export const encodeValue = (kind: Kind, value: unknown): Result => {
  switch (answerOf(kind)) {
    case "boolean":
      return { t: Tag.Ok, b: value as boolean }
    case "option": {
      const option = value as Option.Option<Decision>
      return Option.isSome(option) ? { t: Tag.Ok, d: encodeDecision(option.value) } : { t: Tag.Ok }
    }
    case "taken": {
      const taken = value as Taken
      return { t: Tag.Ok, d: encodeDecision(taken), n: taken.taken }
    }
    case "decision":
      return { t: Tag.Ok, d: encodeDecision(value as Decision) }
    case "none":
      return { t: Tag.Ok }
  }
}

/**
 * An answered operation's value, from the wire.
 *
 * @since 0.3.0
 */
export const decodeValue = (kind: Kind, result: Result): unknown => {
  switch (answerOf(kind)) {
    case "boolean":
      return result.b === true
    case "option":
      return result.d === undefined ? Option.none() : Option.some(decodeDecision(result.d))
    case "taken":
      return { ...decodeDecision(result.d!), taken: result.n ?? 0 }
    case "decision":
      return decodeDecision(result.d!)
    case "none":
      return undefined
  }
}
