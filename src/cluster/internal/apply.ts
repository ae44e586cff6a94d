/**
 * One operation from the wire, run by an in-process limiter through its
 * public API: what a shard's owner does with each operation it is sent, and
 * what the local fallback does while the owner does not answer. The limiter
 * checks the operation's numbers itself, as in process.
 *
 * @since 0.3.0
 */
import { type Duration, Effect } from "effect"
import { InvalidPolicy } from "../../Errors.ts"
import type * as Policy from "../../Policy.ts"
import type { RateLimiter } from "../../RateLimiter.ts"
import { Kind, type Op } from "./protocol.ts"

/**
 * Named policies (what `reconfigure` can switch a key to on a cluster).
 *
 * @since 0.3.0
 */
export type Named = ReadonlyMap<string, Policy.Policy>

// A duration as the caller gave it; the limiter checks it.
const input = (d: number | string | undefined): Duration.Input => d as Duration.Input

/**
 * Runs `op` on `limiter`.
 *
 * @since 0.3.0
 */
export const apply = (
  limiter: RateLimiter["Service"],
  op: Op,
  named: Named
): Effect.Effect<unknown, RateLimiter.CallError> => {
  switch (op.k) {
    case Kind.Acquire:
      return limiter.acquire(op.key, op.d === undefined ? { cost: op.n } : { cost: op.n, duration: input(op.d) })
    case Kind.Consume:
      return limiter.consume(op.key, op.d === undefined ? { cost: op.n } : { cost: op.n, duration: input(op.d) })
    case Kind.Peek:
      return limiter.peek(op.key, { cost: op.n })
    case Kind.Reset:
      return limiter.reset(op.key)
    case Kind.Release:
      return limiter.release(op.key, op.n)
    case Kind.Force:
      return limiter.force(op.key, { cost: op.n, duration: input(op.d) })
    case Kind.Add:
      return limiter.add(op.key, op.n ?? Number.NaN)
    case Kind.ForceAdd:
      return limiter.add(op.key, op.n ?? Number.NaN, { overLimit: true })
    case Kind.Fill:
      return limiter.fill(op.key)
    case Kind.TakeUpTo:
      return limiter.consumeUpTo(op.key, { cost: op.n })
    case Kind.Get:
      return limiter.get(op.key)
    case Kind.Set:
      return limiter.set(op.key, op.n ?? Number.NaN, { duration: input(op.d) })
    case Kind.Delete:
      return limiter.delete(op.key)
    case Kind.Block:
      return limiter.block(op.key, input(op.d ?? Number.NaN))
    case Kind.SetRate:
      return limiter.setRate(op.key, op.n ?? Number.NaN)
    case Kind.Reconfigure: {
      const policy = op.p === undefined ? undefined : named.get(op.p)
      if (policy === undefined) {
        return Effect.fail(
          new InvalidPolicy({ field: "policy", value: String(op.p), reason: "is not a policy this cluster names" })
        )
      }
      return limiter.reconfigure(op.key, policy, { carry: op.c as RateLimiter.ReconfigureOptions["carry"] })
    }
    case Kind.Feedback:
      return limiter.feedback(
        op.key,
        op.p === "latency" ? { latency: input(op.f ?? Number.NaN) } : op.p === "throttled" ? "throttled" : "ok",
        op.p === "throttled" && op.f !== undefined ? { retryAfter: input(op.f) } : undefined
      )
    case Kind.AcquireAll:
      return limiter.acquire(op.keys ?? [op.key], { cost: op.n })
    case Kind.ConsumeAll:
      return limiter.consume(op.keys ?? [op.key], { cost: op.n })
    default:
      return Effect.void
  }
}
