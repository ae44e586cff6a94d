/**
 * The conformance suite of Conformance.test.ts on a Redis Cluster of three
 * primaries (`REDIS_CLUSTER_NODES`): each key's calls on the node that owns
 * its slot, several keys at once split into one command per slot. Every
 * case, with a quarter of the runs (`routeRuns`): the same scripts, on
 * another route.
 */
import { conformance, routeRuns } from "./conformance.ts"
import { cluster } from "./redis.ts"

conformance(true, cluster, routeRuns)
