/**
 * The conformance suite (Conformance.test.ts) with the store on node-redis
 * (`RedisStore.make` over `NodeRedis.layer`) rather than its own ioredis:
 * there every reply is text and integers, where over ioredis a lean call of
 * several keys is answered in binary, so both ways of answering are held to
 * the interpreter, to the last bit. Every case, with a quarter of the runs
 * (`routeRuns`): the same scripts, answered another way.
 */
import { conformance, routeRuns } from "./conformance.ts"
import { server } from "./redis.ts"

conformance(true, { ...server, name: "one server, over node-redis", over: "node-redis" }, routeRuns)
