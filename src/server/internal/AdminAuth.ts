/**
 * Admin authorization: admin routes (`/v1/reset`) need
 * `Authorization: Bearer <TOLLGATE_ADMIN_TOKEN>`, and are disabled when no
 * token is configured. Tokens are compared in constant time (both sides are
 * hashed to 32 bytes, then compared with `timingSafeEqual`, so neither the
 * content nor the length of the token leaks through timing). Neither the
 * token nor what the client sent is ever echoed or logged.
 *
 * @since 0.1.0
 */
import { Effect, Option, Redacted, Schema } from "effect"
import { HttpServerRequest } from "effect/http"
import { createHash, timingSafeEqual } from "node:crypto"

/**
 * The request has no valid admin bearer token.
 *
 * @example
 * ```ts
 * import * as AdminAuth from "./AdminAuth.ts"
 *
 * new AdminAuth.Unauthorized({ reason: "missing bearer token" })
 * ```
 *
 * @since 0.1.0
 */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", { reason: Schema.String }) {
  override get message(): string {
    return this.reason
  }
}

/**
 * Admin operations are disabled: no admin token is configured.
 *
 * @example
 * ```ts
 * import * as AdminAuth from "./AdminAuth.ts"
 *
 * new AdminAuth.AdminDisabled().message
 * ```
 *
 * @since 0.1.0
 */
export class AdminDisabled extends Schema.TaggedError<AdminDisabled>()("AdminDisabled", {}) {
  override get message(): string {
    return "admin operations are disabled: set TOLLGATE_ADMIN_TOKEN to enable them"
  }
}

const digest = (s: string): Buffer => createHash("sha256").update(s, "utf8").digest()

/**
 * Builds the check for a configured token (or none).
 *
 * @example
 * ```ts
 * import { Option, Redacted } from "effect"
 * import * as AdminAuth from "./AdminAuth.ts"
 *
 * const authorize = AdminAuth.make(Option.some(Redacted.make("a-long-random-admin-token")))
 * // yield* authorize inside a handler: fails with Unauthorized or AdminDisabled
 * ```
 *
 * @since 0.1.0
 */
export const make = (
  token: Option.Option<Redacted.Redacted<string>>
): Effect.Effect<void, Unauthorized | AdminDisabled, HttpServerRequest.HttpServerRequest> => {
  if (Option.isNone(token)) return Effect.fail(new AdminDisabled())
  const expected = digest(Redacted.value(token.value))
  return HttpServerRequest.HttpServerRequest.use((request) => {
    const header = request.headers["authorization"]
    if (header === undefined) return Effect.fail(new Unauthorized({ reason: "missing bearer token" }))
    const match = /^Bearer[ ]+(\S+)[ ]*$/i.exec(header)
    if (match === null) {
      return Effect.fail(new Unauthorized({ reason: "the Authorization header is not a bearer token" }))
    }
    return timingSafeEqual(digest(match[1]), expected)
      ? Effect.void
      : Effect.fail(new Unauthorized({ reason: "invalid bearer token" }))
  })
}
