/**
 * The conformance suite of Conformance.test.ts on the primary that Sentinel
 * names (`REDIS_SENTINELS`, `REDIS_SENTINEL_NAME`).
 */
import { conformance } from "./conformance.ts"
import { sentinel } from "./redis.ts"

conformance(true, sentinel)
