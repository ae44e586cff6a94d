/**
 * The conformance suite of Conformance.test.ts on a Redis Cluster of three
 * primaries (`REDIS_CLUSTER_NODES`): each key's calls on the node that owns
 * its slot, several keys at once split into one command per slot.
 */
import { conformance } from "./conformance.ts"
import { cluster } from "./redis.ts"

conformance(true, cluster)
