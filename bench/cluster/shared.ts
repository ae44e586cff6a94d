/**
 * What bench:cluster's processes share: the limiter's options, the sharding
 * settings, the entity-per-key contender's entity, and the transport floor's.
 */
import { Schema } from "effect"
import { Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import type { ClusterLimiter } from "../../src/cluster/index.ts"
import { BatchReply, BatchRequest } from "../../src/cluster/internal/protocol.ts"
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

/**
 * The transport floor: the partition's own `Batch` message (the same
 * columns and reply codes, through the same Effect Cluster path), answered
 * by an entity that decides nothing (every operation admitted). What a round
 * costs with no limiter in it.
 */
export const Floor = Entity.make("bench/Floor", [
  Rpc.make("Batch", { payload: BatchRequest, success: BatchReply })
])

export const sharding = {
  // an entity per key needs more than the default 10 000 resident entities
  maxResidentEntities: "unbounded",
  entityMaxIdleTime: "1 hour"
} as const
