/**
 * Error responses as RFC 9457 problem details (`application/problem+json`):
 * `type` (a `urn:tollgate:problem:*` URI), `title`, `status`, `detail` (a
 * sentence that names the offending field), plus extension members such as
 * `field`. Never includes a secret: callers pass only what is safe to echo.
 *
 * @since 0.1.0
 */
import { ProblemDetails } from "effect/http"
import { HttpServerResponse } from "effect/http"

/**
 * The problems tollgate answers with, by slug, with their status and title.
 *
 * @example
 * ```ts
 * import { Problem } from "tollgate/http"
 *
 * Problem.kinds["rate-limited"].status // 429
 * ```
 *
 * @category constants
 * @since 0.1.0
 */
export const kinds = {
  "invalid-request": { status: 400, title: "Invalid request" },
  "malformed-json": { status: 400, title: "Malformed JSON" },
  "malformed-request": { status: 400, title: "Malformed HTTP request" },
  "unauthorized": { status: 401, title: "Unauthorized" },
  "admin-disabled": { status: 403, title: "Admin operations disabled" },
  "not-found": { status: 404, title: "Not found" },
  "method-not-allowed": { status: 405, title: "Method not allowed" },
  "request-timeout": { status: 408, title: "Request timeout" },
  "body-too-large": { status: 413, title: "Request body too large" },
  "uri-too-long": { status: 414, title: "URI too long" },
  "rate-limited": { status: 429, title: "Too many requests" },
  "headers-too-large": { status: 431, title: "Request header fields too large" },
  "internal": { status: 500, title: "Internal error" },
  "overloaded": { status: 503, title: "Overloaded" },
  "shutting-down": { status: 503, title: "Shutting down" },
  "store-unavailable": { status: 503, title: "Store unavailable" }
} as const

/**
 * A problem slug.
 *
 * @example
 * ```ts
 * import type { Problem } from "tollgate/http"
 *
 * const kind: Problem.Kind = "rate-limited"
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type Kind = keyof typeof kinds

/**
 * The `type` URI of a problem slug.
 *
 * @example
 * ```ts
 * import { Problem } from "tollgate/http"
 *
 * Problem.typeOf("rate-limited") // "urn:tollgate:problem:rate-limited"
 * ```
 *
 * @category formatting
 * @since 0.1.0
 */
export const typeOf = (kind: Kind): string => `urn:tollgate:problem:${kind}`

/**
 * A problem response: status and title from the kind, the given detail and
 * extension members, and extra headers (`Retry-After`, `WWW-Authenticate`).
 *
 * @example
 * ```ts
 * import { Problem } from "tollgate/http"
 *
 * const response = Problem.response("invalid-request", "cost = 0: must be a positive integer", {
 *   extensions: { field: "cost" }
 * })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const response = (
  kind: Kind,
  detail: string,
  options?: {
    readonly extensions?: Readonly<Record<string, unknown>> | undefined
    readonly headers?: Readonly<Record<string, string>> | undefined
  }
): HttpServerResponse.HttpServerResponse => {
  const { status, title } = kinds[kind]
  const res = ProblemDetails.toResponse({ ...options?.extensions, type: typeOf(kind), title, status, detail })
  return options?.headers === undefined ? res : HttpServerResponse.setHeaders(res, options.headers)
}
