/**
 * The conformance suite (see Conformance.test.ts) against Valkey, over
 * `FCALL` and over `EVALSHA`: the scripts compiled for Redis's Lua 5.1 run
 * unchanged on Valkey's. Needs `VALKEY_URL` (`.ci/run` starts a
 * valkey-server when Debian's package can be installed); without it every
 * case is registered and skipped.
 */
import { conformance } from "./conformance.ts"

const url = process.env.VALKEY_URL === "" ? undefined : process.env.VALKEY_URL
const on = {
  url,
  why: "VALKEY_URL is not set: Valkey tests skipped (.ci/run starts a valkey-server when one can be installed)",
  server: "Valkey"
}
if (url === undefined) console.warn(on.why)

conformance(true, on)
conformance(false, on)
