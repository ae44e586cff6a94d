/**
 * The conformance suite of Conformance.test.ts, with the scripts run as
 * `EVAL` scripts (`EVALSHA`, as on a Redis without Functions). Every case,
 * with a quarter of the runs (`routeRuns`): an `EVAL` script is the
 * library's text (the same runtime, prelude, compiled modules and entry
 * points' bodies) with its own first lines instead of the library's
 * `register_function` wrappers, so what differs is crossed by every case,
 * and the arithmetic gets its full runs over `FCALL`.
 */
import { conformance, routeRuns } from "./conformance.ts"

conformance(false, undefined, routeRuns)
