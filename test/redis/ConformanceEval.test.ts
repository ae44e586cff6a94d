/**
 * The conformance suite of Conformance.test.ts, with the scripts run as
 * `EVAL` scripts (`EVALSHA`, as on a Redis without Functions).
 */
import { conformance } from "./conformance.ts"

conformance(false)
