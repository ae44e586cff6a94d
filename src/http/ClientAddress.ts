/**
 * Who is the client? The address a rate limit is keyed on.
 *
 * By default it is the socket's peer (`request.peerAddress`), which a client
 * cannot forge. Behind a reverse proxy every request comes from the proxy, so
 * the proxy's forwarding header has to be read instead, but only when the
 * request really comes from a proxy the operator trusts: otherwise any client
 * could send `X-Forwarded-For: <someone else>` and spend another client's
 * quota, or a fresh random address on each request and never be limited.
 *
 * With `trustedProxies`, the configured header (only that one) is walked from
 * the right, skipping the addresses of trusted proxies; the first address that
 * is not a trusted proxy is the client. Entries further left were written by
 * the client itself and are never looked at.
 *
 * IPv6 clients are grouped by network prefix (a /64 by default), because a
 * single host usually owns a whole /64 and could otherwise rotate addresses.
 *
 * @since 0.1.0
 */
import { Option, Predicate, Result } from "effect"
import type { HttpServerRequest } from "effect/http"
import { IpNetwork, NetAddress } from "effect/net"
import { InvalidPolicy } from "../Errors.ts"

/**
 * Options of {@link make}.
 *
 * @example
 * ```ts
 * import type { ClientAddress } from "tollgate/http"
 *
 * const options: ClientAddress.Options = { trustedProxies: ["10.0.0.0/8"], forwardedHeader: "x-forwarded-for" }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Options {
  /**
   * Addresses or CIDR networks of the reverse proxies whose forwarding header
   * is believed (`"127.0.0.1"`, `"10.0.0.0/8"`, `"::1"`). Empty by default: the
   * socket's peer is the client and forwarding headers are ignored.
   */
  readonly trustedProxies?: ReadonlyArray<string> | undefined
  /**
   * The header the trusted proxies set: `"x-forwarded-for"` (default) or
   * `"forwarded"` (RFC 7239). Only this one is read: a proxy that sets one
   * of them passes the other through from the client untouched.
   */
  readonly forwardedHeader?: "x-forwarded-for" | "forwarded" | undefined
  /**
   * IPv6 clients share a bucket per network of this prefix length. Default 64;
   * 128 keys each address on its own.
   */
  readonly ipv6PrefixLength?: number | undefined
}

/**
 * Resolves a request's client address, formatted (`"203.0.113.7"`,
 * `"2001:db8::/64"`), or `undefined` when the transport has none.
 *
 * @example
 * ```ts
 * import { Result } from "effect"
 * import { ClientAddress } from "tollgate/http"
 *
 * const resolve: ClientAddress.Resolver = Result.getOrThrow(ClientAddress.make())
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type Resolver = (request: HttpServerRequest.HttpServerRequest) => string | undefined

const parseAddress = (input: string | undefined): NetAddress.IpAddress | undefined => {
  if (input === undefined) return undefined
  let s = input.trim()
  if (s.startsWith("\"") && s.endsWith("\"") && s.length >= 2) s = s.slice(1, -1)
  if (s.startsWith("[")) {
    const end = s.indexOf("]")
    if (end < 0) return undefined
    s = s.slice(1, end)
  } else if (/^\d{1,3}(\.\d{1,3}){3}:\d+$/.test(s)) {
    s = s.slice(0, s.lastIndexOf(":"))
  }
  const ip = NetAddress.ipFromString(s)
  return Result.isSuccess(ip) ? NetAddress.toCanonical(ip.success) : undefined
}

// RFC 7239: `Forwarded: for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"`.
// Quoted strings may hold commas and semicolons, so split outside quotes only.
const splitOutsideQuotes = (value: string, separator: string): Array<string> => {
  const parts: Array<string> = []
  let current = ""
  let quoted = false
  for (let i = 0; i < value.length; i++) {
    const c = value[i]
    if (c === "\\" && quoted && i + 1 < value.length) {
      current += c + value[++i]
    } else if (c === "\"") {
      quoted = !quoted
      current += c
    } else if (c === separator && !quoted) {
      parts.push(current)
      current = ""
    } else {
      current += c
    }
  }
  parts.push(current)
  return parts
}

const forwardedFor = (value: string): Array<string | undefined> =>
  splitOutsideQuotes(value, ",").map((element) => {
    for (const pair of splitOutsideQuotes(element, ";")) {
      const eq = pair.indexOf("=")
      if (eq > 0 && pair.slice(0, eq).trim().toLowerCase() === "for") return pair.slice(eq + 1).trim()
    }
    return undefined
  })

const xForwardedFor = (value: string): Array<string | undefined> => value.split(",").map((s) => s.trim())

/**
 * Builds a resolver, validating the options.
 *
 * @example
 * ```ts
 * import { Result } from "effect"
 * import { ClientAddress } from "tollgate/http"
 *
 * // behind a load balancer on 10.0.0.0/8 that appends to X-Forwarded-For
 * const resolve = Result.getOrThrow(ClientAddress.make({ trustedProxies: ["10.0.0.0/8"] }))
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (options?: Options): Result.Result<Resolver, InvalidPolicy> => {
  const networks: Array<IpNetwork.IpNetwork> = []
  for (const [index, entry] of (options?.trustedProxies ?? []).entries()) {
    const parsed = Predicate.isString(entry)
      ? entry.includes("/")
        ? Result.getOrUndefined(IpNetwork.fromString(entry.trim()))
        : Option.getOrUndefined(
          Option.flatMap(
            Option.fromUndefinedOr(parseAddress(entry)),
            (ip) => Result.getSuccess(IpNetwork.fromAddress(ip, NetAddress.width(ip)))
          )
        )
      : undefined
    if (parsed === undefined) {
      return Result.fail(
        new InvalidPolicy({
          field: `trustedProxies[${index}]`,
          value: Predicate.isString(entry) ? JSON.stringify(entry.slice(0, 64)) : typeof entry,
          reason: "must be an IP address or a CIDR network such as \"10.0.0.0/8\""
        })
      )
    }
    networks.push(parsed)
  }
  const header = options?.forwardedHeader ?? "x-forwarded-for"
  if (header !== "x-forwarded-for" && header !== "forwarded") {
    return Result.fail(
      new InvalidPolicy({
        field: "forwardedHeader",
        value: JSON.stringify(String(header)),
        reason: "must be \"x-forwarded-for\" or \"forwarded\""
      })
    )
  }
  const prefix = options?.ipv6PrefixLength ?? 64
  if (!Number.isInteger(prefix) || prefix < 1 || prefix > 128) {
    return Result.fail(
      new InvalidPolicy({ field: "ipv6PrefixLength", value: String(prefix), reason: "must be an integer in 1..128" })
    )
  }
  const isTrusted = (ip: NetAddress.IpAddress) => networks.some((network) => IpNetwork.contains(network, ip))
  const format = (ip: NetAddress.IpAddress): string => {
    if (NetAddress.isIpv4Address(ip) || prefix === 128) return NetAddress.formatIp(ip)
    return Result.match(IpNetwork.fromAddress(ip, prefix), {
      onSuccess: IpNetwork.format,
      onFailure: () => NetAddress.formatIp(ip)
    })
  }
  const split = header === "forwarded" ? forwardedFor : xForwardedFor

  const resolve = (peerAddress: string | undefined, value: string | undefined): string | undefined => {
    const peer = parseAddress(peerAddress)
    if (peer === undefined) return undefined
    if (networks.length === 0 || !isTrusted(peer)) return format(peer)
    if (value === undefined || value.length === 0) return format(peer)
    const hops = split(value)
    // Walk from the nearest hop outwards; `client` is the last address a trusted party vouched for.
    let client = peer
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = parseAddress(hops[i])
      // An entry that is not an address (`unknown`, an obfuscated node name) was written by the
      // trusted proxy we just passed: nothing further left can be believed, so key on that proxy.
      if (hop === undefined) return format(client)
      client = hop
      if (!isTrusted(hop)) return format(hop)
    }
    return format(client)
  }

  // The answer depends on the peer and the header's value only, and the same
  // clients come back: parsing and formatting addresses cost about 3 us a
  // request, a lookup a tenth of that. Two generations of at most `memoSize`
  // short entries each: the older one is dropped whole when the newer one
  // fills, so memory stays bounded and every call stays O(1).
  let recent = new Map<string, string | undefined>()
  let older = new Map<string, string | undefined>()
  return Result.succeed((request) => {
    const peerAddress = Option.getOrUndefined(request.peerAddress)
    const value = networks.length === 0 ? undefined : request.headers[header]
    // an address has no space, so "<peer> <value>" names one pair
    const id = value === undefined ? peerAddress ?? "" : `${peerAddress ?? ""} ${value}`
    if (id.length > memoKeyLength) return resolve(peerAddress, value)
    let client = recent.get(id)
    if (client !== undefined || recent.has(id)) return client
    client = older.has(id) ? older.get(id) : resolve(peerAddress, value)
    if (recent.size >= memoSize) {
      older = recent
      recent = new Map()
    }
    recent.set(id, client)
    return client
  })
}

const memoSize = 4096
const memoKeyLength = 256
