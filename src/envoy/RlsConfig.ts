/**
 * Rate limit configuration in envoyproxy/ratelimit's YAML format: one file
 * per domain, each with a tree of descriptors.
 *
 * ```yaml
 * domain: messaging
 * descriptors:
 *   - key: message_type
 *     value: marketing
 *     descriptors:
 *       - key: to_number
 *         rate_limit:
 *           unit: day
 *           requests_per_unit: 5
 *   - key: to_number
 *     rate_limit:
 *       unit: day
 *       requests_per_unit: 100
 * ```
 *
 * Every key of envoyproxy/ratelimit's format is read with its meaning there:
 * `key`, `value` (with `*` wildcards), `rate_limit` (`unit` from `second` to
 * `year`, `requests_per_unit`, `unlimited`, `name`, `replaces`),
 * `shadow_mode`, `quota_mode`, `share_threshold` and nested `descriptors`;
 * `detailed_metric`, `value_to_metric` and `metadata` are accepted (the
 * metrics here are counted by domain and outcome, not per descriptor, and no
 * dynamic metadata is sent). A limit is a fixed window aligned to the clock, as
 * there. tollgate adds two keys to `rate_limit`: `algorithm` (the same rate
 * with another algorithm: `slidingWindow`, `tokenBucket`, ...) and `policy`
 * (any tollgate policy, as an object or by the name of a policy of the
 * service).
 *
 * @since 0.2.0
 */
import { Duration, Predicate, Result, Schema } from "effect"
import { createHash } from "node:crypto"
import type * as Yaml from "yaml"
import { MissingPackage } from "../Errors.ts"
import * as OptionalPackage from "../internal/OptionalPackage.ts"
import * as Policy from "../Policy.ts"

/**
 * A configuration problem: where (`file: path`), the value, and what is wrong.
 *
 * @example
 * ```ts
 * import type { RlsConfig } from "tollgate/envoy"
 *
 * const issue: RlsConfig.Issue = { field: "example.yaml: descriptors[0].rate_limit.unit", value: "\"fortnight\"", reason: "is not a unit" }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface Issue {
  readonly field: string
  readonly value?: string
  readonly reason: string
}

/**
 * The units of envoyproxy/ratelimit, with their length in seconds (a month is
 * 30 days and a year 365, as there).
 *
 * @example
 * ```ts
 * import { RlsConfig } from "tollgate/envoy"
 *
 * RlsConfig.unitSeconds.minute // 60
 * ```
 *
 * @category configuration
 * @since 0.2.0
 */
export const unitSeconds = {
  second: 1,
  minute: 60,
  hour: 3600,
  day: 86_400,
  week: 604_800,
  month: 2_592_000,
  year: 31_536_000
} as const

/**
 * A unit's name.
 *
 * @example
 * ```ts
 * import type { RlsConfig } from "tollgate/envoy"
 *
 * const unit: RlsConfig.Unit = "minute"
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export type Unit = keyof typeof unitSeconds

/**
 * The algorithms a `rate_limit` can name with `algorithm`, each given the
 * rate `requests_per_unit` per `unit`.
 *
 * @example
 * ```ts
 * import { RlsConfig } from "tollgate/envoy"
 *
 * RlsConfig.algorithms.includes("slidingWindow") // true
 * ```
 *
 * @category configuration
 * @since 0.2.0
 */
export const algorithms = [
  "fixedWindow",
  "slidingWindow",
  "slidingLog",
  "tokenBucket",
  "gcra",
  "leakyBucket",
  "smooth"
] as const

const RateLimitYaml = Schema.Struct({
  unit: Schema.optionalKey(Schema.String),
  requests_per_unit: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 4_294_967_295 }))),
  unlimited: Schema.optionalKey(Schema.Boolean),
  name: Schema.optionalKey(Schema.String),
  replaces: Schema.optionalKey(Schema.Array(Schema.Struct({ name: Schema.optionalKey(Schema.String) }))),
  algorithm: Schema.optionalKey(Schema.Literals(algorithms)),
  policy: Schema.optionalKey(Schema.Unknown)
})

interface DescriptorYaml {
  readonly key: string
  readonly value?: string
  readonly rate_limit?: typeof RateLimitYaml.Type
  readonly descriptors?: ReadonlyArray<DescriptorYaml>
  readonly shadow_mode?: boolean
  readonly quota_mode?: boolean
  readonly detailed_metric?: boolean
  readonly value_to_metric?: boolean
  readonly share_threshold?: boolean
  readonly metadata?: { readonly [x: string]: unknown }
}

const DescriptorYaml: Schema.Codec<DescriptorYaml> = Schema.Struct({
  key: Schema.String,
  value: Schema.optionalKey(Schema.String),
  rate_limit: Schema.optionalKey(RateLimitYaml),
  descriptors: Schema.optionalKey(Schema.Array(Schema.suspend((): Schema.Codec<DescriptorYaml> => DescriptorYaml))),
  shadow_mode: Schema.optionalKey(Schema.Boolean),
  quota_mode: Schema.optionalKey(Schema.Boolean),
  detailed_metric: Schema.optionalKey(Schema.Boolean),
  value_to_metric: Schema.optionalKey(Schema.Boolean),
  share_threshold: Schema.optionalKey(Schema.Boolean),
  metadata: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
})

/**
 * One file of the configuration: a domain and its descriptors. Decoded with
 * `onExcessProperty: "error"` (as the service does), unknown keys are
 * errors, as in envoyproxy/ratelimit; Schema's default drops them.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { RlsConfig } from "tollgate/envoy"
 *
 * Schema.decodeUnknownSync(RlsConfig.Document)({
 *   domain: "mongo_cps",
 *   descriptors: [{ key: "database", value: "users", rate_limit: { unit: "second", requests_per_unit: 500 } }]
 * })
 * ```
 *
 * @category schemas
 * @since 0.2.0
 */
export const Document = Schema.Struct({
  domain: Schema.String,
  descriptors: Schema.optionalKey(Schema.Array(DescriptorYaml))
})

/**
 * One file of the configuration.
 *
 * @example
 * ```ts
 * import type { RlsConfig } from "tollgate/envoy"
 *
 * const document: RlsConfig.Document = { domain: "edge", descriptors: [] }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export type Document = typeof Document.Type

/**
 * Parses a YAML file's text (one document) into a plain value for
 * {@link Document}. Reads it with the `yaml` package, an optional peer
 * dependency: without it, the result is an issue whose reason names the
 * package and the command that installs it.
 *
 * @example
 * ```ts
 * import { RlsConfig } from "tollgate/envoy"
 *
 * RlsConfig.parseYaml("domain: test\n", "test.yaml") // Result.succeed({ domain: "test" })
 * ```
 *
 * @category parsing
 * @since 0.2.0
 */
export const parseYaml = (text: string, file: string): Result.Result<unknown, Issue> => {
  // `yaml` is an optional peer dependency, required when a file is first read (CommonJS: synchronously).
  const loaded = OptionalPackage.requireAll("reading envoyproxy/ratelimit's YAML", ["yaml"])
  if (loaded instanceof MissingPackage) return Result.fail({ field: file, reason: loaded.message })
  const documents = (loaded[0] as typeof Yaml).parseAllDocuments(text)
  if (!Array.isArray(documents)) return Result.succeed(undefined)
  if (documents.length !== 1) {
    return Result.fail({ field: file, reason: `holds ${documents.length} YAML documents; expected one per file` })
  }
  const [document] = documents
  if (document.errors.length > 0) {
    return Result.fail({ field: file, reason: `is not valid YAML: ${document.errors[0].message}` })
  }
  return Result.succeed(document.toJS() as unknown)
}

/**
 * A limit, as compiled: its policy (none for `unlimited`, or for a limit of 0,
 * which always answers over limit), how it is reported, and its flags.
 *
 * @example
 * ```ts
 * import type { RlsConfig } from "tollgate/envoy"
 *
 * const describe = (limit: RlsConfig.Limit): string =>
 *   limit.unlimited ? `${limit.path}: unlimited` : `${limit.path}: ${limit.requestsPerUnit} per ${limit.unit}`
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface Limit {
  /** `domain.key_value.key` path: the name of its headers' quota, and in descriptions and logs. */
  readonly path: string
  readonly name: string | undefined
  readonly replaces: ReadonlyArray<string>
  readonly unlimited: boolean
  readonly shadowMode: boolean
  readonly quotaMode: boolean
  /** The policy deciding; `undefined` with `unlimited`, or with `requests_per_unit: 0` (always over). */
  readonly policy: Policy.Valid | undefined
  /** Identifies the policy in keys: a policy that changes starts its keys afresh. */
  readonly id: string
  /** What `current_limit` reports. */
  readonly unit: Unit | undefined
  readonly requestsPerUnit: number
}

/**
 * A node of the descriptor tree.
 *
 * @example
 * ```ts
 * import type { RlsConfig } from "tollgate/envoy"
 *
 * const keys = (node: RlsConfig.Node): ReadonlyArray<string> => [...node.children.keys()]
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface Node {
  /** Children by `key`, then by exact `value` ("" for a key without value). */
  readonly children: ReadonlyMap<string, ReadonlyMap<string, Node>>
  /** Children whose value has `*`, in configuration order. */
  readonly wildcards: ReadonlyArray<
    { readonly key: string; readonly parts: ReadonlyArray<string>; readonly node: Node }
  >
  readonly limit: Limit | undefined
  /** `share_threshold`: every value matching this node's wildcard shares one counter. */
  readonly sharedValue: string | undefined
}

/**
 * The compiled configuration: domains by name.
 *
 * @example
 * ```ts
 * import type { RlsConfig } from "tollgate/envoy"
 *
 * const domains = (config: RlsConfig.Config): ReadonlyArray<string> => [...config.domains.keys()]
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface Config {
  readonly domains: ReadonlyMap<string, Node>
  /** Every limit, for the start-up log. */
  readonly limits: ReadonlyArray<Limit>
}

/**
 * What {@link compile} needs from its host: the policies a `policy: name` can
 * refer to, and how a `policy: {...}` object is read.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import type { RlsConfig } from "tollgate/envoy"
 *
 * const options: RlsConfig.CompileOptions = {
 *   policies: new Map([["login", Policy.slidingLog({ limit: 5, window: "15 minutes" }) as Policy.Valid]])
 * }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface CompileOptions {
  readonly policies?: ReadonlyMap<string, Policy.Valid> | undefined
  readonly decodePolicy?: ((input: unknown, field: string) => Policy.Valid | ReadonlyArray<Issue>) | undefined
}

/**
 * Fingerprint of a policy's validated configuration: equal policies (however
 * they were written) have equal fingerprints.
 *
 * @example
 * ```ts
 * import { Policy } from "tollgate"
 * import { RlsConfig } from "tollgate/envoy"
 *
 * const a = Policy.fixedWindow({ limit: 5, window: "1 minute" })
 * const b = Policy.fixedWindow({ limit: 5, window: 60_000 })
 * if (a._tag !== "Invalid" && b._tag !== "Invalid") RlsConfig.fingerprint(a) === RlsConfig.fingerprint(b) // true
 * ```
 *
 * @category configuration
 * @since 0.2.0
 */
export const fingerprint = (policy: Policy.Valid): string =>
  createHash("sha256").update(policy._tag).update(canonicalJson(policy.config)).digest("hex").slice(0, 10)

const canonicalJson = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  if (Predicate.isObject(value) && !Predicate.isFunction(value)) {
    const record = value as Record<string, unknown>
    return `{${
      Object.keys(record).sort().filter((k) => record[k] !== undefined && !Predicate.isFunction(record[k])).map((k) =>
        `${JSON.stringify(k)}:${canonicalJson(record[k])}`
      ).join(",")
    }}`
  }
  return JSON.stringify(value) ?? "null"
}

const unitOf = (seconds: number): Unit | undefined =>
  (Object.keys(unitSeconds) as Array<Unit>).find((u) => unitSeconds[u] === seconds)

/**
 * The policy of `requests_per_unit` per `unit` with an algorithm (default: a
 * fixed window aligned to the clock, as envoyproxy/ratelimit counts).
 *
 * @example
 * ```ts
 * import { RlsConfig } from "tollgate/envoy"
 *
 * const policy = RlsConfig.policyOf("fixedWindow", 500, "second")
 * ```
 *
 * @category configuration
 * @since 0.2.0
 */
export const policyOf = (algorithm: typeof algorithms[number], count: number, unit: Unit): Policy.Policy => {
  const per = Duration.seconds(unitSeconds[unit])
  switch (algorithm) {
    case "fixedWindow":
      return Policy.fixedWindow({ limit: count, window: per, aligned: true })
    case "slidingWindow":
      return Policy.slidingWindow({ limit: count, window: per })
    case "slidingLog":
      return Policy.slidingLog({ limit: count, window: per })
    case "tokenBucket":
      return Policy.tokenBucket({ capacity: count, refill: { tokens: count, per } })
    case "gcra":
      return Policy.gcra({ rate: { count, per }, maxBurst: count - 1 })
    case "leakyBucket":
      // A gateway cannot hold a request back: over the burst is over the limit.
      return Policy.leakyBucket({ rate: { tokens: count, per }, burst: count, nodelay: true })
    case "smooth":
      return Policy.smooth({ permits: count, per })
  }
}

/**
 * Splits a value with `*` wildcards into its literal parts.
 *
 * @since 0.2.0
 */
const wildcardParts = (value: string): ReadonlyArray<string> => value.split("*")

/**
 * Whether a value matches a wildcard pattern split by {@link wildcardParts}:
 * each `*` stands for any run of characters, possibly empty.
 *
 * @example
 * ```ts
 * import { RlsConfig } from "tollgate/envoy"
 *
 * RlsConfig.wildcardMatch(["/api/", "/action"], "/api/123/action") // true
 * ```
 *
 * @category matching
 * @since 0.2.0
 */
export const wildcardMatch = (parts: ReadonlyArray<string>, value: string): boolean => {
  if (parts.length === 1) return parts[0] === value
  const first = parts[0]
  const last = parts[parts.length - 1]
  if (value.length < parts.reduce((n, p) => n + p.length, 0)) return false
  if (!value.startsWith(first) || !value.endsWith(last)) return false
  let rest = value.slice(first.length, value.length - last.length)
  for (let i = 1; i < parts.length - 1; i++) {
    const at = rest.indexOf(parts[i])
    if (at < 0) return false
    rest = rest.slice(at + parts[i].length)
  }
  return true
}

/**
 * Checks the documents (one per file) and builds the descriptor trees.
 * Reports every problem, each with its file and path.
 *
 * @example
 * ```ts
 * import { Result } from "effect"
 * import { RlsConfig } from "tollgate/envoy"
 *
 * const config = RlsConfig.compile([{
 *   file: "example.yaml",
 *   document: { domain: "edge", descriptors: [{ key: "remote_address", rate_limit: { unit: "second", requests_per_unit: 10 } }] }
 * }])
 * Result.isSuccess(config) // true
 * ```
 *
 * @category configuration
 * @since 0.2.0
 */
export const compile = (
  documents: ReadonlyArray<{ readonly file: string; readonly document: Document }>,
  options: CompileOptions = {}
): Result.Result<Config, ReadonlyArray<Issue>> => {
  const issues: Array<Issue> = []
  const domains = new Map<string, Node>()
  const limits: Array<Limit> = []

  const limitOf = (
    d: DescriptorYaml,
    where: string,
    path: string
  ): Limit | undefined => {
    const r = d.rate_limit
    if (r === undefined) return undefined
    const field = `${where}.rate_limit`
    const unlimited = r.unlimited === true
    const unitName = r.unit?.toLowerCase()
    const unit = unitName !== undefined && unitName in unitSeconds ? unitName as Unit : undefined
    if (r.unit !== undefined && unit === undefined) {
      issues.push({
        field: `${field}.unit`,
        value: JSON.stringify(r.unit),
        reason: `is not a unit (${Object.keys(unitSeconds).join(", ")})`
      })
      return undefined
    }
    for (const [i, replaced] of (r.replaces ?? []).entries()) {
      if (replaced.name === undefined || replaced.name === "") {
        issues.push({ field: `${field}.replaces[${i}].name`, reason: "must not be empty" })
      } else if (replaced.name === r.name) {
        issues.push({
          field: `${field}.replaces[${i}].name`,
          value: JSON.stringify(replaced.name),
          reason: "names this descriptor's own limit"
        })
      }
    }
    const base = {
      path,
      name: r.name === "" ? undefined : r.name,
      replaces: (r.replaces ?? []).flatMap((x) => (x.name === undefined || x.name === "" ? [] : [x.name])),
      unlimited,
      shadowMode: d.shadow_mode === true,
      quotaMode: d.quota_mode === true
    }
    if (unlimited) {
      if (unit !== undefined || r.policy !== undefined || r.algorithm !== undefined) {
        issues.push({ field, reason: "an unlimited limit takes no unit, algorithm or policy" })
      }
      return { ...base, policy: undefined, id: "unlimited", unit: undefined, requestsPerUnit: 0 }
    }
    if (r.policy !== undefined) {
      if (r.algorithm !== undefined) issues.push({ field: `${field}.algorithm`, reason: "cannot be used with policy" })
      let policy: Policy.Valid | undefined
      if (Predicate.isString(r.policy)) {
        policy = options.policies?.get(r.policy)
        if (policy === undefined) {
          issues.push({
            field: `${field}.policy`,
            value: JSON.stringify(r.policy),
            reason: `no such policy (known policies: ${[...(options.policies?.keys() ?? [])].join(", ")})`
          })
          return undefined
        }
      } else if (options.decodePolicy !== undefined) {
        const decoded = options.decodePolicy(r.policy, `${field}.policy`)
        if (Array.isArray(decoded)) {
          issues.push(...decoded)
          return undefined
        }
        policy = decoded as Policy.Valid
      } else {
        issues.push({ field: `${field}.policy`, reason: "only the names of configured policies are accepted here" })
        return undefined
      }
      const windowUnit = unit ?? unitOf(policy.quota.windowMillis / 1000)
      return {
        ...base,
        policy,
        id: fingerprint(policy),
        unit: windowUnit,
        requestsPerUnit: r.requests_per_unit ?? policy.quota.limit
      }
    }
    if (unit === undefined) {
      issues.push({ field: `${field}.unit`, reason: "is required (or unlimited: true, or a policy)" })
      return undefined
    }
    const count = r.requests_per_unit ?? 0
    if (count === 0) return { ...base, policy: undefined, id: "blocked", unit, requestsPerUnit: 0 }
    const policy = policyOf(r.algorithm ?? "fixedWindow", count, unit)
    if (policy._tag === "Invalid") {
      issues.push({ field, value: JSON.stringify(r), reason: policy.error.message })
      return undefined
    }
    return { ...base, policy, id: fingerprint(policy), unit, requestsPerUnit: count }
  }

  const build = (
    descriptors: ReadonlyArray<DescriptorYaml>,
    where: string,
    parentPath: string
  ): Node => {
    const children = new Map<string, Map<string, Node>>()
    const wildcards: Array<{ key: string; parts: ReadonlyArray<string>; node: Node }> = []
    descriptors.forEach((d, i) => {
      const at = `${where}[${i}]`
      if (d.key === "") {
        issues.push({ field: `${at}.key`, reason: "must not be empty" })
        return
      }
      const value = d.value ?? ""
      const path = `${parentPath}.${value === "" ? d.key : `${d.key}_${value}`}`
      const byValue = children.get(d.key) ?? new Map<string, Node>()
      if (byValue.has(value)) {
        issues.push({ field: at, value: JSON.stringify(path), reason: "repeats a descriptor of the same level" })
        return
      }
      const wildcard = value.includes("*")
      if (d.share_threshold === true && !wildcard) {
        issues.push({ field: `${at}.share_threshold`, reason: "needs a value with a * wildcard" })
      }
      const limit = limitOf(d, at, path)
      const inner = build(d.descriptors ?? [], `${at}.descriptors`, path)
      const node: Node = { ...inner, limit, sharedValue: d.share_threshold === true && wildcard ? value : undefined }
      if (limit !== undefined) limits.push(limit)
      byValue.set(value, node)
      children.set(d.key, byValue)
      if (wildcard) wildcards.push({ key: d.key, parts: wildcardParts(value), node })
    })
    return { children, wildcards, limit: undefined, sharedValue: undefined }
  }

  for (const { document, file } of documents) {
    if (document.domain === "") {
      issues.push({ field: `${file}: domain`, reason: "must not be empty" })
      continue
    }
    if (domains.has(document.domain)) {
      issues.push({
        field: `${file}: domain`,
        value: JSON.stringify(document.domain),
        reason: "is already configured by another file"
      })
      continue
    }
    domains.set(document.domain, build(document.descriptors ?? [], `${file}: descriptors`, document.domain))
  }
  return issues.length > 0 ? Result.fail(issues) : Result.succeed({ domains, limits })
}

/**
 * A descriptor as a request carries it.
 *
 * @example
 * ```ts
 * import type { RlsConfig } from "tollgate/envoy"
 *
 * const entry: RlsConfig.Entry = { key: "remote_address", value: "203.0.113.7" }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface Entry {
  readonly key: string
  readonly value: string
}

/**
 * The limit that applies to a descriptor, found as envoyproxy/ratelimit finds
 * it: level by level, the exact `key` and `value` first, then a wildcard
 * value, then the `key` alone; a limit applies only at the descriptor's last
 * entry. Also returns the values that name the counter (a `share_threshold`
 * wildcard's pattern instead of the value).
 *
 * @example
 * ```ts
 * import { RlsConfig } from "tollgate/envoy"
 *
 * declare const config: RlsConfig.Config
 * const found = RlsConfig.find(config, "edge", [{ key: "remote_address", value: "203.0.113.7" }])
 * ```
 *
 * @category matching
 * @since 0.2.0
 */
export const find = (
  config: Config,
  domain: string,
  entries: ReadonlyArray<Entry>
): { readonly limit: Limit; readonly values: ReadonlyArray<string> } | undefined => {
  const root = config.domains.get(domain)
  if (root === undefined || entries.length === 0) return undefined
  let node: Node = root
  const values: Array<string> = []
  for (let i = 0; i < entries.length; i++) {
    const { key, value } = entries[i]
    const byValue = node.children.get(key)
    let next: Node | undefined = value === "" ? undefined : byValue?.get(value)
    if (next === undefined && value !== "") {
      for (const w of node.wildcards) {
        if (w.key === key && wildcardMatch(w.parts, value)) {
          next = w.node
          break
        }
      }
    }
    if (next === undefined) next = byValue?.get("")
    if (next === undefined) return undefined
    values.push(next.sharedValue ?? value)
    if (i === entries.length - 1) return next.limit === undefined ? undefined : { limit: next.limit, values }
    node = next
  }
  return undefined
}
