/**
 * Forward authentication: a gateway (nginx `auth_request`, Traefik
 * ForwardAuth, Envoy `ext_authz` over HTTP) asks the service about each
 * request before it proxies it, and the service answers 200 (go ahead) or 429
 * (over the limit). This module turns the gateway's sub-request into a
 * decision's inputs: which rule applies, which key, which policy and cost.
 *
 * What the gateway tells about the original request:
 *
 * - its URI: the `uriHeader` (default `X-Forwarded-Uri`, which Traefik sets
 *   and the nginx configuration sets), else the path after `/v1/check` (Envoy
 *   `ext_authz` appends the original path to its `path_prefix`);
 * - its method: the `methodHeader` (default `X-Forwarded-Method`), else the
 *   sub-request's own method (Envoy keeps the original method);
 * - its host: the `hostHeader` (default `X-Forwarded-Host`), else `Host`;
 * - its client: the address the gateway connects from, or, when that address
 *   is a trusted proxy, the forwarding header walked from the right
 *   (`ClientAddress`).
 *
 * Rules are tried in order; the first whose `methods`, `hosts`, `path` and
 * `pathPrefix` all match, and whose key parts are all present, decides. A
 * request no rule matches is let through without a limit. With `match:
 * "all"`, every rule that matches applies, as every `limit_req` zone of an
 * nginx location does: the request takes its cost from every matching rule's
 * key or from none (one call over several keys), so a refusal by one zone
 * leaves the others untouched, where nginx has already counted the request
 * in the zones it checked first.
 *
 * @since 0.2.0
 */
import { Predicate, Result, Schema } from "effect"
import type { HttpServerRequest } from "effect/http"
import { createHash } from "node:crypto"
import * as ClientAddress from "../http/ClientAddress.ts"
import type * as Policy from "../Policy.ts"
import type * as FieldErrors from "./internal/FieldErrors.ts"

const HeaderName = Schema.String.check(
  Schema.isPattern(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/, { expected: "an HTTP header name" })
)

const RuleName = Schema.String.check(
  Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, {
    expected: "a rule name (letters, digits, \".\", \"_\", \"-\"; at most 64 characters)"
  })
)

const PathPattern = Schema.String.check(
  Schema.isPattern(/^\/[\x21-\x7e]{0,1023}$/, { expected: "a path starting with \"/\"" })
)

/**
 * One part of a rule's key: the client's address, the original request's
 * method, host, path or URI (path and query), or the value of a request
 * header (an API key the gateway has authenticated).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ForwardAuth } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ForwardAuth.KeyPart)({ header: "x-api-key" })
 * ```
 *
 * @category schemas
 * @since 0.2.0
 */
export const KeyPart = Schema.Union([
  Schema.Literals(["address", "method", "host", "path", "uri"]),
  Schema.Struct({ header: HeaderName })
]).annotate({ expected: "\"address\", \"method\", \"host\", \"path\", \"uri\" or { \"header\": name }" })

/**
 * A key part.
 *
 * @example
 * ```ts
 * import type { ForwardAuth } from "tollgate/server"
 *
 * const part: ForwardAuth.KeyPart = "address"
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export type KeyPart = typeof KeyPart.Type

/**
 * A rule: requests that match it are limited by `policy`, per `key`.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ForwardAuth } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ForwardAuth.Rule)({
 *   name: "login", methods: ["POST"], path: "/login", policy: "login", key: ["address"]
 * })
 * ```
 *
 * @category schemas
 * @since 0.2.0
 */
export const Rule = Schema.Struct({
  /** Names the rule in keys and in `RateLimit-Policy`. Unique. */
  name: RuleName,
  /** A configured policy's name. */
  policy: Schema.String,
  /** What the key is made of; a request that lacks a part (a header) does not match the rule. */
  key: Schema.Array(KeyPart).check(Schema.isMinLength(1), Schema.isMaxLength(8)),
  /** Methods the rule applies to (any when absent). */
  methods: Schema.optionalKey(Schema.Array(Schema.String.check(Schema.isPattern(/^[A-Za-z]{1,16}$/)))),
  /** Hosts the rule applies to, without port (any when absent). */
  hosts: Schema.optionalKey(Schema.Array(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(253)))),
  /** The path must be exactly this one. */
  path: Schema.optionalKey(PathPattern),
  /** The path must start with this one. */
  pathPrefix: Schema.optionalKey(PathPattern),
  /** Units a request takes. Default 1. */
  cost: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000_000 })))
})

/**
 * A rule.
 *
 * @example
 * ```ts
 * import type { ForwardAuth } from "tollgate/server"
 *
 * declare const rule: ForwardAuth.Rule
 * const policy: string = rule.policy
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export type Rule = typeof Rule.Type

/**
 * The `forwardAuth` section of the configuration file.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ForwardAuth } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ForwardAuth.Options)({
 *   trustedProxies: ["127.0.0.1"],
 *   rules: [{ name: "api", pathPrefix: "/api/", policy: "default", key: ["address"] }]
 * })
 * ```
 *
 * @category schemas
 * @since 0.2.0
 */
export const Options = Schema.Struct({
  /** Gateways whose forwarding header is believed (addresses or CIDR networks). */
  trustedProxies: Schema.optionalKey(Schema.Array(Schema.String)),
  /** `"x-forwarded-for"` (default) or `"forwarded"`. */
  forwardedHeader: Schema.optionalKey(Schema.Literals(["x-forwarded-for", "forwarded"])),
  /** IPv6 clients share a key per network of this prefix length. Default 64. */
  ipv6PrefixLength: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 128 }))),
  /** Carries the original URI. Default `x-forwarded-uri`. */
  uriHeader: Schema.optionalKey(HeaderName),
  /** Carries the original method. Default `x-forwarded-method`. */
  methodHeader: Schema.optionalKey(HeaderName),
  /** Carries the original host. Default `x-forwarded-host`. */
  hostHeader: Schema.optionalKey(HeaderName),
  /**
   * `"first"` (default): the first matching rule decides. `"all"`: every
   * matching rule applies, all or nothing (nginx's several zones).
   */
  match: Schema.optionalKey(Schema.Literals(["first", "all"])),
  rules: Schema.optionalKey(Schema.Array(Rule))
})

/**
 * The `forwardAuth` section.
 *
 * @example
 * ```ts
 * import type { ForwardAuth } from "tollgate/server"
 *
 * declare const options: ForwardAuth.Options
 * const rules = options.rules
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export type Options = typeof Options.Type

/**
 * What a request resolved to: the rule, its policy, the key (prefixed by the
 * rule's name) and the cost.
 *
 * @example
 * ```ts
 * import type { ForwardAuth } from "tollgate/server"
 *
 * const match: ForwardAuth.Match = { rule: "api", policy: "default", key: "api:203.0.113.7", cost: 1 }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface Match {
  readonly rule: string
  readonly policy: string
  readonly key: string
  readonly cost: number
}

/**
 * The original request, as the gateway described it.
 *
 * @example
 * ```ts
 * import type { ForwardAuth } from "tollgate/server"
 *
 * const original: ForwardAuth.Original = { method: "GET", host: "api.example.com", path: "/items", uri: "/items?page=2" }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface Original {
  readonly method: string
  readonly host: string
  readonly path: string
  readonly uri: string
}

/**
 * Resolves gateway sub-requests to matches.
 *
 * @example
 * ```ts
 * import type { ForwardAuth } from "tollgate/server"
 *
 * declare const matcher: ForwardAuth.Matcher
 * declare const request: Parameters<ForwardAuth.Matcher["match"]>[0]
 * const match = matcher.match(request, "/v1/check")
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface Matcher {
  /** The rules, in order (for the start-up log). */
  readonly rules: ReadonlyArray<Rule>
  /** The original request the sub-request describes; `prefix` is the check route's path. */
  readonly original: (request: HttpServerRequest.HttpServerRequest, prefix: string) => Original
  /** `"first"` or `"all"` (see {@link Options}). */
  readonly mode: "first" | "all"
  /** The first rule that matches, with its key; `undefined` lets the request through. */
  readonly match: (request: HttpServerRequest.HttpServerRequest, prefix: string) => Match | undefined
  /**
   * Every rule that matches, in order, with its key: one at most in `"first"`
   * mode; none lets the request through.
   */
  readonly matchAll: (request: HttpServerRequest.HttpServerRequest, prefix: string) => ReadonlyArray<Match>
}

/**
 * A path as rules see it: dot segments resolved, runs of `/` collapsed, the
 * percent-encodings of unreserved characters decoded, so that `/api/../admin`,
 * `//admin` and `/%61dmin` are all `/admin` and a client cannot step around a
 * path rule by spelling the path another way.
 *
 * @example
 * ```ts
 * import { ForwardAuth } from "tollgate/server"
 *
 * ForwardAuth.normalizePath("/api//v1/../%75sers") // "/api/users"
 * ```
 *
 * @category matching
 * @since 0.2.0
 */
export const normalizePath = (path: string): string => {
  // Nothing to decode, collapse or resolve (the common case): the path is its own normal form.
  if (path.startsWith("/") && !path.includes("%") && !path.includes("//") && !path.includes("/.")) return path
  const decoded = path.replace(/%([0-9A-Fa-f]{2})/g, (encoded, hex: string) => {
    const c = String.fromCharCode(parseInt(hex, 16))
    return /[A-Za-z0-9\-._~]/.test(c) ? c : encoded.toUpperCase()
  }).replace(/\/{2,}/g, "/")
  const out: Array<string> = []
  const segments = decoded.split("/")
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i]
    if (segment === ".") {
      if (i === segments.length - 1) out.push("")
    } else if (segment === "..") {
      out.pop()
      if (i === segments.length - 1) out.push("")
    } else {
      out.push(segment)
    }
  }
  return "/" + out.join("/")
}

// Key parts are joined with ":", so ":" and "%" inside a value are escaped: two different
// lists of values never make the same key.
const escapePart = (value: string): string =>
  value.includes(":") || value.includes("%") ? value.replace(/[%:]/g, (c) => (c === "%" ? "%25" : "%3A")) : value

const header = (request: HttpServerRequest.HttpServerRequest, name: string): string | undefined => {
  const value = request.headers[name]
  return value === undefined || value === "" ? undefined : value
}

/**
 * Validates the section against the configured policies and builds the
 * matcher. Keys longer than `maxKeyLength` are replaced by the rule's name and
 * a SHA-256 of the key, so every key has a bounded length.
 *
 * @example
 * ```ts
 * import { Result } from "effect"
 * import { Policy } from "tollgate"
 * import { ForwardAuth } from "tollgate/server"
 *
 * const policy = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } })
 * if (policy._tag !== "Invalid") {
 *   const matcher = ForwardAuth.make(
 *     { rules: [{ name: "all", policy: "default", key: ["address"] }] },
 *     new Map([["default", policy]]),
 *     256
 *   )
 *   Result.isSuccess(matcher) // true
 * }
 * ```
 *
 * @category constructors
 * @since 0.2.0
 */
export const make = (
  options: Options,
  policies: ReadonlyMap<string, Policy.Valid>,
  maxKeyLength: number,
  field = "forwardAuth"
): Result.Result<Matcher, ReadonlyArray<FieldErrors.FieldError>> => {
  const errors: Array<FieldErrors.FieldError> = []
  const address = ClientAddress.make({
    trustedProxies: options.trustedProxies,
    forwardedHeader: options.forwardedHeader,
    ipv6PrefixLength: options.ipv6PrefixLength
  })
  if (Result.isFailure(address)) {
    const e = address.failure
    errors.push({ field: `${field}.${e.field}`, value: e.value, reason: e.reason })
  }
  const rules = options.rules ?? []
  const names = new Set<string>()
  rules.forEach((rule, i) => {
    if (names.has(rule.name)) {
      errors.push({ field: `${field}.rules[${i}].name`, value: JSON.stringify(rule.name), reason: "is already used" })
    }
    names.add(rule.name)
    const policy = policies.get(rule.policy)
    if (policy === undefined) {
      errors.push({
        field: `${field}.rules[${i}].policy`,
        value: JSON.stringify(rule.policy),
        reason: `no such policy (known policies: ${[...policies.keys()].join(", ")})`
      })
    } else if (rule.cost !== undefined && rule.cost > policy.rule.maxCost) {
      errors.push({
        field: `${field}.rules[${i}].cost`,
        value: String(rule.cost),
        reason: `is more than policy ${JSON.stringify(rule.policy)} can ever admit at once`
      })
    }
  })
  const mode = options.match ?? "first"
  if (mode === "all") {
    // One call over several keys takes one cost from each: the zones of a
    // request must agree on it (nginx's zones count requests, a cost of 1).
    const first = rules[0]?.cost ?? 1
    rules.forEach((rule, i) => {
      if ((rule.cost ?? 1) !== first) {
        errors.push({
          field: `${field}.rules[${i}].cost`,
          value: String(rule.cost ?? 1),
          reason: `must be the same for every rule under match "all" (rules[0] takes ${first})`
        })
      }
    })
  }
  if (errors.length > 0 || Result.isFailure(address)) return Result.fail(errors)
  const clientAddress = address.success

  const uriHeader = (options.uriHeader ?? "x-forwarded-uri").toLowerCase()
  const methodHeader = (options.methodHeader ?? "x-forwarded-method").toLowerCase()
  const hostHeader = (options.hostHeader ?? "x-forwarded-host").toLowerCase()

  const original = (request: HttpServerRequest.HttpServerRequest, prefix: string): Original => {
    let uri = header(request, uriHeader)
    if (uri === undefined) {
      const rest = request.url.slice(prefix.length)
      uri = rest === "" || rest[0] === "?" ? "/" + rest : rest
    }
    const query = uri.indexOf("?")
    const rawPath = query < 0 ? uri : uri.slice(0, query)
    const rawHost = header(request, hostHeader) ?? header(request, "host") ?? ""
    return {
      method: (header(request, methodHeader) ?? request.method).toUpperCase(),
      host: rawHost.replace(/:\d+$/, "").toLowerCase(),
      path: normalizePath(rawPath.startsWith("/") ? rawPath : "/" + rawPath),
      uri
    }
  }

  interface Compiled {
    readonly rule: Rule
    readonly methods: ReadonlySet<string> | undefined
    readonly hosts: ReadonlySet<string> | undefined
    readonly cost: number
  }
  const compiled: ReadonlyArray<Compiled> = rules.map((rule) => ({
    rule,
    methods: rule.methods === undefined ? undefined : new Set(rule.methods.map((m) => m.toUpperCase())),
    hosts: rule.hosts === undefined ? undefined : new Set(rule.hosts.map((h) => h.toLowerCase())),
    cost: rule.cost ?? 1
  }))

  const keyOf = (
    { rule }: Compiled,
    request: HttpServerRequest.HttpServerRequest,
    o: Original
  ): string | undefined => {
    let key = rule.name
    for (const part of rule.key) {
      let value: string | undefined
      if (Predicate.isString(part)) {
        value = part === "address"
          ? clientAddress(request) ?? "unknown"
          : part === "method"
          ? o.method
          : part === "host"
          ? o.host
          : part === "path"
          ? o.path
          : o.uri
      } else {
        value = header(request, part.header.toLowerCase())
        if (value === undefined) return undefined
      }
      key += ":" + escapePart(value)
    }
    return key.length <= maxKeyLength ? key : `${rule.name}#${createHash("sha256").update(key).digest("hex")}`
  }

  // The rule's key if it applies to the request.
  const applies = (c: Compiled, request: HttpServerRequest.HttpServerRequest, o: Original): Match | undefined => {
    if (c.methods !== undefined && !c.methods.has(o.method)) return undefined
    if (c.hosts !== undefined && !c.hosts.has(o.host)) return undefined
    if (c.rule.path !== undefined && o.path !== c.rule.path) return undefined
    if (c.rule.pathPrefix !== undefined && !o.path.startsWith(c.rule.pathPrefix)) return undefined
    const key = keyOf(c, request, o)
    return key === undefined ? undefined : { rule: c.rule.name, policy: c.rule.policy, key, cost: c.cost }
  }
  const match = (request: HttpServerRequest.HttpServerRequest, prefix: string): Match | undefined => {
    if (compiled.length === 0) return undefined
    const o = original(request, prefix)
    for (const c of compiled) {
      const found = applies(c, request, o)
      if (found !== undefined) return found
    }
    return undefined
  }

  return Result.succeed({
    rules,
    original,
    mode,
    match,
    matchAll: (request, prefix) => {
      if (mode === "first") {
        const found = match(request, prefix)
        return found === undefined ? [] : [found]
      }
      if (compiled.length === 0) return []
      const o = original(request, prefix)
      const all: Array<Match> = []
      for (const c of compiled) {
        const found = applies(c, request, o)
        if (found !== undefined) all.push(found)
      }
      return all
    }
  })
}
