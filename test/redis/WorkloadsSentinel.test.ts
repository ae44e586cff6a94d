/**
 * The workloads of workloads.ts (random workloads against the in-process
 * limiter, a hot key, many keys at once) on the primary that Sentinel names
 * (`REDIS_SENTINELS`, `REDIS_SENTINEL_NAME`).
 */
import { sentinel } from "./redis.ts"
import { workloads } from "./workloads.ts"

workloads(sentinel)
