/**
 * What the core needs of a validated policy: its bound rule, how a refusal
 * blocks the key, whether it lets refusals through (a dry run), its headline
 * quota, and which algorithm it runs. Every `Policy.Valid` is one; the core
 * sees policies only through this, so nothing under `internal/` imports the
 * public `Policy` module that stands above it.
 *
 * @since 0.3.0
 */
import type { Rule } from "./algorithm/Algorithm.ts"

/**
 * A policy as the core sees it.
 *
 * @since 0.3.0
 */
export interface Limit {
  /** The kind of policy (`"TokenBucket"`, `"Concurrency"`, ...). */
  readonly _tag: string
  /** The algorithm module it runs (compared by identity: a rate change keeps the algorithm). */
  readonly algorithm: object
  /** The algorithm's configuration (what a store sends with each call). */
  readonly config: unknown
  /** The algorithm bound to the policy's configuration. */
  readonly rule: Rule
  /** The headline limit and the window it refers to. */
  readonly quota: { readonly limit: number; readonly windowMillis: number }
  /** Refusals are let through, flagged (nginx's `limit_req_dry_run`). */
  readonly dryRun: boolean
  /** How long a refusal by the policy itself blocks the key (ms; 0: it does not). */
  readonly blockMillis: number
}
