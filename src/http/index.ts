/**
 * tollgate for effect/http apps: rate-limit middleware, the IETF RateLimit
 * headers, client address resolution, and problem+json errors.
 *
 * @since 0.1.0
 */
import * as AdaptiveClient from "./AdaptiveClient.ts"
import * as ClientAddress from "./ClientAddress.ts"
import * as Problem from "./Problem.ts"
import * as RateLimitHeaders from "./RateLimitHeaders.ts"
import * as RateLimitMiddleware from "./RateLimitMiddleware.ts"

export {
  /**
   * A client-side helper for effect's HttpClient: waits for a tollgate key
   * before each request, and feeds 429s (with Retry-After) and successes
   * into the key's adaptive rate.
   *
   * @example
   * ```ts
   * import { AdaptiveClient } from "tollgate/http"
   *
   * const options: AdaptiveClient.Options = { key: "upstream", maxWait: "10 seconds" }
   * ```
   *
   * @category modules
   * @since 0.2.0
   */
  AdaptiveClient,
  /**
   * Who the client is: socket peer, or trusted proxies' forwarding header.
   *
   * @example
   * ```ts
   * import { ClientAddress } from "tollgate/http"
   *
   * const resolver = ClientAddress.make({ trustedProxies: ["10.0.0.0/8"] })
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  ClientAddress,
  /**
   * RFC 9457 problem details responses.
   *
   * @example
   * ```ts
   * import { Problem } from "tollgate/http"
   *
   * const response = Problem.response("not-found", "no route for GET /nothing")
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  Problem,
  /**
   * The `RateLimit`, `RateLimit-Policy` and `Retry-After` headers.
   *
   * @example
   * ```ts
   * import { RateLimitHeaders } from "tollgate/http"
   *
   * const items = RateLimitHeaders.parse("\"api\";r=42;t=30")
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  RateLimitHeaders,
  /**
   * The middleware: `429` with `Retry-After` and the RateLimit headers.
   *
   * @example
   * ```ts
   * import { Policy } from "tollgate"
   * import { RateLimitMiddleware } from "tollgate/http"
   *
   * const Limited = RateLimitMiddleware.layer({
   *   policy: Policy.tokenBucket({ capacity: 100, refill: { tokens: 10, per: "1 second" } })
   * })
   * ```
   *
   * @category modules
   * @since 0.1.0
   */
  RateLimitMiddleware
}
