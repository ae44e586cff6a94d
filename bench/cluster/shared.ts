/**
 * What bench:cluster's processes share: the limiter's options, the sharding
 * settings, and the entity-per-key contender's entity.
 */
import { Schema } from "effect"
import { Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import type { ClusterLimiter } from "../../src/cluster/index.ts"
import * as Policy from "../../src/Policy.ts"

export const benchOptions: ClusterLimiter.Options = {
  name: "bench",
  policy: Policy.tokenBucket({ capacity: 1e9, refill: { tokens: 1e9, per: "1 second" } }),
  mailboxCapacity: 1_000_000,
  // generous: this measures the cluster, not its fallback
  fallback: { mode: "error", timeout: "10 seconds" }
}

/** An entity per key: the design measured against one partition per shard. */
export const KeyBucket = Entity.make("bench/KeyBucket", [
  Rpc.make("Take", { payload: { cost: Schema.Number }, success: Schema.Boolean })
])

export const sharding = {
  // an entity per key needs more than the default 10 000 resident entities
  maxResidentEntities: "unbounded",
  entityMaxIdleTime: "1 hour"
} as const
