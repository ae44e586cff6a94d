/**
 * The Redis scripts against `MemoryStore.applyOps`, the reference: the same
 * random operations (fast-check), at the same fixed timestamps (the store's
 * client clock), must get identical replies, to the last bit
 * (`deepStrictEqual`, so even -0 against 0 would fail), for every algorithm
 * the store runs. Timestamps are epoch-sized and step back now and then.
 *
 * Three ways of sending them, each through the store as a Redis Functions
 * library (`FCALL`) and as `EVAL` scripts (`EVALSHA`):
 *
 * - batches of operations on a key, one call each (the batch script; a batch
 *   of one Take or Admit takes the lean script);
 * - one operation per call (every Take and Admit by the lean script, the
 *   others by the batch script, on the same key: both read what the other
 *   wrote);
 * - one operation on each of several keys, all at once (a lean call of many
 *   keys, beside a batch call for the other operations).
 *
 * And two regimes: keys kept for ever (`keepSettled: infinity`), compared
 * with `applyOps` alone; and keys forgotten 10 minutes after they settle,
 * compared with `applyOps` plus that rule, with the TTL Redis holds checked
 * too.
 */
import { conformance } from "./conformance.ts"

conformance(true)
