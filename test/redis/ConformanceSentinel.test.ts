/**
 * The conformance suite of Conformance.test.ts on the primary that Sentinel
 * names (`REDIS_SENTINELS`, `REDIS_SENTINEL_NAME`). Every case, with a
 * quarter of the runs (`routeRuns`): the same scripts, on another route.
 */
import { conformance, routeRuns } from "./conformance.ts"
import { sentinel } from "./redis.ts"

conformance(true, sentinel, routeRuns)
