/**
 * The conformance suite (see Conformance.test.ts) against Valkey, over
 * `FCALL` and over `EVALSHA`: the scripts compiled for Redis's Lua 5.1 run
 * unchanged on Valkey's. Needs `VALKEY_URL` (`.ci/run` starts a
 * valkey-server when Debian's package can be installed); without it every
 * case is registered and skipped.
 */
import { conformance } from "./conformance.ts"
import { valkey } from "./redis.ts"

conformance(true, valkey)
conformance(false, valkey)
