/**
 * tollgate on Redis: one limit shared by every process that points at the
 * same Redis. Needs the optional peer dependencies `redis` and
 * `@effect/platform-node` (Node 22.19 or later).
 *
 * @since 0.2.0
 */

/**
 * The Redis store.
 *
 * @since 0.2.0
 */
export * as RedisStore from "./RedisStore.ts"
