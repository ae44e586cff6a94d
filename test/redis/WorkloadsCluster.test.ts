/**
 * The workloads of workloads.ts (random workloads against the in-process
 * limiter, a hot key, many keys at once) on a Redis Cluster of three primaries
 * (`REDIS_CLUSTER_NODES`).
 */
import { cluster } from "./redis.ts"
import { workloads } from "./workloads.ts"

workloads(cluster)
