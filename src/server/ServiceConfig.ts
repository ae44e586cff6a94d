/**
 * The service's configuration: where it listens, its named policies, which
 * policy a key gets, size limits, the admin token, and where keys' state
 * lives (in-process, in Redis with a fallback, or with each key's owner on
 * a cluster of tollgate instances over Postgres). Read at start, and again
 * on SIGHUP (what may change then: docs/service.md), from a JSON file
 * (`TOLLGATE_CONFIG`) and the environment (which wins), and validated with
 * Schema: a bad value stops the service with a message that
 * names the field and the value.
 *
 * ```json
 * {
 *   "policies": {
 *     "default": { "kind": "tokenBucket", "capacity": 100, "refill": { "tokens": 10, "per": "1 second" } },
 *     "per-ip": { "kind": "tokenBucket", "capacity": 20, "refill": { "tokens": 1, "per": "1 second" } }
 *   },
 *   "defaultPolicy": "default",
 *   "rules": [{ "prefix": "ip:", "policy": "per-ip" }],
 *   "limits": { "maxBodyBytes": 4096, "maxKeyLength": 256, "maxWait": 30000 },
 *   "redis": { "prefix": "api:", "fallback": { "mode": "local", "share": 0.5, "timeout": "250 millis" } }
 * }
 * ```
 *
 * @since 0.1.0
 */
import {
  Cause,
  Config,
  Context,
  Duration,
  Effect,
  FileSystem,
  Layer,
  Option,
  Predicate,
  Redacted,
  Result,
  Schema,
  SchemaGetter
} from "effect"
import { dirname, isAbsolute, join } from "node:path"
import * as RlsConfig from "../envoy/RlsConfig.ts"
import * as Policy from "../Policy.ts"
import * as ForwardAuth from "./ForwardAuth.ts"
import * as FieldErrors from "./internal/FieldErrors.ts"
import * as PolicySpec from "./PolicySpec.ts"

/**
 * The configuration is invalid; lists every invalid field with its value.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * const program = ServiceConfig.resolve({ file: { policies: { a: { kind: "tokenBucket", capacity: -1 } } } }).pipe(
 *   Effect.catchTag("InvalidConfig", (e) => Effect.logError(e.message))
 * )
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export class InvalidConfig extends Schema.TaggedError<InvalidConfig>()("InvalidConfig", {
  errors: Schema.Array(FieldErrors.FieldError)
}) {
  override get message(): string {
    return `invalid configuration: ${this.errors.map(FieldErrors.format).join("; ")}`
  }
}

const policyNamePattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/

/**
 * A policy's name: letters, digits, `.`, `_`, `-`; 1 to 64 characters.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ServiceConfig.PolicyName)("per-ip")
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const PolicyName = Schema.String.check(
  Schema.isPattern(policyNamePattern, {
    expected: "a policy name (letters, digits, \".\", \"_\", \"-\"; at most 64 characters)"
  })
)

const Int = (minimum: number, maximum: number) => Schema.Int.check(Schema.isBetween({ minimum, maximum }))

const KeyPrefix = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(256))

/**
 * A rule: keys that start with `prefix` use `policy` (the longest matching
 * prefix wins).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ServiceConfig.Rule)({ prefix: "ip:", policy: "per-ip" })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const Rule = Schema.Struct({ prefix: KeyPrefix, policy: PolicyName })

/**
 * Size and time limits on requests.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ServiceConfig.Limits)({
 *   maxBodyBytes: 4096,
 *   maxKeyLength: 256,
 *   maxWait: 30000,
 *   requestTimeout: "10 seconds",
 *   headersTimeout: "5 seconds"
 * })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const Limits = Schema.Struct({
  /** Largest request body, in bytes (413 above it). Default 4096. */
  maxBodyBytes: Schema.optionalKey(Int(64, 1_048_576)),
  /** Longest key, in characters. Default 256. */
  maxKeyLength: Schema.optionalKey(Int(1, 4096)),
  /** Longest `maxWait` a `/v1/wait` may ask for, and its default, in milliseconds. Default 30000. */
  maxWait: Schema.optionalKey(Int(0, 600_000)),
  /** Most decisions in one `/v1/batch` request. Default 100. */
  maxBatch: Schema.optionalKey(Int(1, 10_000)),
  /** Largest `/v1/batch` body, in bytes. Default 65536. */
  maxBatchBodyBytes: Schema.optionalKey(Int(64, 16_777_216)),
  /** Longest time to receive a whole request, headers and body (408 after it). Default 10 seconds. */
  requestTimeout: Schema.optionalKey(PolicySpec.DurationInput),
  /** Longest time to receive a request's headers (408 after it); at most `requestTimeout`. Default 5 seconds. */
  headersTimeout: Schema.optionalKey(PolicySpec.DurationInput)
})

/**
 * Options of the in-process limiter behind the service.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ServiceConfig.LimiterOptions)({ idleTimeout: "1 minute", mailboxCapacity: 1024 })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const LimiterOptions = Schema.Struct({
  idleTimeout: Schema.optionalKey(PolicySpec.DurationInput),
  mailboxCapacity: Schema.optionalKey(Int(1, 1_000_000)),
  maxWaiters: Schema.optionalKey(Int(1, 1_000_000))
})

const isRedisUrl = (s: string): string | undefined => {
  let url: URL
  try {
    url = new URL(s)
  } catch {
    return "is not a URL (expected redis://host:port or rediss://host:port)"
  }
  if (url.protocol !== "redis:" && url.protocol !== "rediss:") return "must start with redis:// or rediss://"
  if (url.hostname === "") return "has no host"
  if (!/^\/?\d*$/.test(url.pathname)) return "may name only a database number after the host (redis://host:port/0)"
  return undefined
}

/**
 * Where Redis is: `redis://[[user]:password@]host[:port][/db]`, or
 * `rediss://` for TLS. A secret (it may hold a password): shown only
 * through {@link redactUrl}.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ServiceConfig.RedisUrl)("redis://127.0.0.1:6379/0")
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const RedisUrl = Schema.String.check(
  Schema.makeFilter(isRedisUrl, { expected: "a redis:// or rediss:// URL" })
)

/**
 * A Redis URL fit for logs and error messages: its user name and password
 * replaced by `***`. A value that is not a URL loses everything up to its
 * last `@`.
 *
 * @example
 * ```ts
 * import { ServiceConfig } from "tollgate/server"
 *
 * ServiceConfig.redactUrl("redis://app:s3cret@cache:6379/0") // "redis://***:***@cache:6379/0"
 * ```
 *
 * @category formatting
 * @since 0.1.0
 */
export const redactUrl = (value: unknown): string => {
  const s = String(value)
  try {
    const url = new URL(s)
    if (url.username !== "") url.username = "***"
    if (url.password !== "") url.password = "***"
    return url.href
  } catch {
    const at = s.lastIndexOf("@")
    return at < 0 ? s : "***" + s.slice(at)
  }
}

const RedisPrefix = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(256))

/**
 * What the limiter does while Redis does not answer: `"local"` decides
 * in-process with `share` of each key's limit, `"allow"` fails open,
 * `"deny"` fails closed, `"error"` answers 503.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ServiceConfig.FallbackMode)("deny")
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const FallbackMode = Schema.Literals(["local", "allow", "deny", "error"])

// What answers while the store (Redis, or a key's owner on the cluster) does
// not: the same settings for both.
const Fallback = Schema.Struct({
  mode: Schema.optionalKey(FallbackMode),
  /** For `"local"`: the fraction of each key's limit an instance grants on its own. Default 1. */
  share: Schema.optionalKey(
    Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1, exclusiveMinimum: true }))
  ),
  /** Longest wait for the store per call before the fallback decides. Default 250 ms. */
  timeout: Schema.optionalKey(PolicySpec.DurationInput),
  /** After a failure, how long the store (a shard, on the cluster) is left alone before it is tried again. Default 1 second. */
  retryAfter: Schema.optionalKey(PolicySpec.DurationInput)
})

/**
 * The `redis` section of the file: where keys' state lives when several
 * instances share their limits (see docs/distributed.md).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ServiceConfig.RedisOptions)({
 *   url: "redis://127.0.0.1:6379",
 *   prefix: "api:",
 *   fallback: { mode: "local", share: 0.5, timeout: "250 millis", retryAfter: "1 second" }
 * })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const RedisOptions = Schema.Struct({
  /**
   * One server. Give one of `url`, `cluster` and `sentinel`; any of
   * `REDIS_URL`, `REDIS_CLUSTER_NODES` and `REDIS_SENTINELS` wins over
   * them. Without any, state is kept in-process.
   */
  url: Schema.optionalKey(RedisUrl),
  /** A Redis Cluster: the nodes to start from (URLs with one scheme and one set of credentials; no database). */
  cluster: Schema.optionalKey(Schema.Struct({ nodes: Schema.NonEmptyArray(RedisUrl) })),
  /** A primary behind Sentinel: the name of its group and the sentinels (URLs, as for the cluster). */
  sentinel: Schema.optionalKey(Schema.Struct({
    name: Schema.NonEmptyString,
    sentinels: Schema.NonEmptyArray(RedisUrl)
  })),
  /** Prepended to every key in Redis; instances that share limits use the same one. Default `"tollgate:"`. */
  prefix: Schema.optionalKey(RedisPrefix),
  /** Whose time decides: Redis's (`"server"`, the default) or each instance's (`"client"`). */
  clock: Schema.optionalKey(Schema.Literals(["server", "client"])),
  fallback: Schema.optionalKey(Fallback)
})

const isPostgresUrl = (s: string): string | undefined => {
  let url: URL
  try {
    url = new URL(s)
  } catch {
    return "is not a URL (expected postgres://user@host:port/database)"
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
    return "must start with postgres:// or postgresql://"
  }
  if (url.hostname === "") return "has no host"
  return undefined
}

/**
 * Where the cluster's Postgres is: `postgres://[user[:password]@]host[:port]/database`.
 * A secret (it may hold a password): shown only through {@link redactUrl}.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ServiceConfig.PostgresUrl)("postgres://tollgate@db:5432/tollgate")
 * ```
 *
 * @category schemas
 * @since 0.3.0
 */
export const PostgresUrl = Schema.String.check(
  Schema.makeFilter(isPostgresUrl, { expected: "a postgres:// URL" })
)

/**
 * The `cluster` section of the file: instances that share one Postgres form
 * one cluster, in which every key has one owner that decides all its calls
 * (see docs/distributed.md, "On Effect Cluster").
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ServiceConfig.ClusterOptions)({
 *   url: "postgres://tollgate@db:5432/tollgate",
 *   host: "10.0.0.7",
 *   port: 34431,
 *   fallback: { mode: "deny", timeout: "250 millis" }
 * })
 * ```
 *
 * @category schemas
 * @since 0.3.0
 */
export const ClusterOptions = Schema.Struct({
  /** `TOLLGATE_CLUSTER` wins over it. Without either, no cluster. */
  url: Schema.optionalKey(PostgresUrl),
  /** This instance's address as the others reach it (`TOLLGATE_CLUSTER_HOST`). Default `127.0.0.1`. */
  host: Schema.optionalKey(Schema.NonEmptyString),
  /** The port the cluster's messages come in on (`TOLLGATE_CLUSTER_PORT`). Default 34431. */
  port: Schema.optionalKey(Int(1, 65535)),
  /** Where to listen, when not at `host` (`TOLLGATE_CLUSTER_LISTEN_HOST`, e.g. `0.0.0.0` in a container). */
  listenHost: Schema.optionalKey(Schema.NonEmptyString),
  /** How long a call waits for a shard being handed over before the fallback answers. Default 10 seconds. */
  handoffTimeout: Schema.optionalKey(PolicySpec.DurationInput),
  fallback: Schema.optionalKey(Fallback)
})

/**
 * The `rls` section: Envoy's rate limit service (gRPC) beside the HTTP API.
 * `config` names envoyproxy/ratelimit YAML files, or folders whose `*.yaml`
 * and `*.yml` files are read (relative to the configuration file's folder).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ServiceConfig.RlsOptions)({ port: 8081, config: ["ratelimit/config.yaml"] })
 * ```
 *
 * @category schemas
 * @since 0.2.0
 */
export const RlsOptions = Schema.Struct({
  /** Address the gRPC server listens on. Default `127.0.0.1`. */
  host: Schema.optionalKey(Schema.NonEmptyString),
  /** Port of the gRPC server (0: any free port). Without one (here or `TOLLGATE_RLS_PORT`), no gRPC server. */
  port: Schema.optionalKey(Int(0, 65535)),
  /** YAML files or folders of them. */
  config: Schema.optionalKey(Schema.Union([Schema.NonEmptyString, Schema.Array(Schema.NonEmptyString)])),
  /** Send `RateLimit`, `RateLimit-Policy` (and `Retry-After` when over the limit) for Envoy to add. Default true. */
  responseHeaders: Schema.optionalKey(Schema.Boolean)
})

/**
 * The configuration file (`TOLLGATE_CONFIG`). Every field is optional.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ServiceConfig.ConfigFile)({
 *   policies: { "per-ip": { kind: "tokenBucket", capacity: 20, refill: { tokens: 1, per: "1 second" } } },
 *   defaultPolicy: "per-ip"
 * })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const ConfigFile = Schema.Struct({
  policies: Schema.optionalKey(Schema.Record(Schema.String, PolicySpec.PolicySpec)),
  defaultPolicy: Schema.optionalKey(PolicyName),
  rules: Schema.optionalKey(Schema.Array(Rule)),
  limits: Schema.optionalKey(Limits),
  limiter: Schema.optionalKey(LimiterOptions),
  redis: Schema.optionalKey(RedisOptions),
  cluster: Schema.optionalKey(ClusterOptions),
  forwardAuth: Schema.optionalKey(ForwardAuth.Options),
  rls: Schema.optionalKey(RlsOptions)
})

/**
 * The configuration file's contents.
 *
 * @example
 * ```ts
 * import type { ServiceConfig } from "tollgate/server"
 *
 * const file: ServiceConfig.ConfigFile = { defaultPolicy: "default", rules: [{ prefix: "ip:", policy: "default" }] }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type ConfigFile = typeof ConfigFile.Type

// `TOLLGATE_RULES=ip:=per-ip,user:=per-user`: comma-separated prefix=policy pairs (split at the last "=").
const RulesFromString = Schema.String.pipe(
  Schema.decodeTo(
    Schema.Array(Rule),
    {
      decode: SchemaGetter.transform((s: string) =>
        s.split(",").map((pair) => pair.trim()).filter((pair) => pair !== "").map((pair) => {
          const eq = pair.lastIndexOf("=")
          return eq < 0 ? { prefix: pair, policy: "" } : { prefix: pair.slice(0, eq), policy: pair.slice(eq + 1) }
        })
      ),
      encode: SchemaGetter.transform((rules: ReadonlyArray<{ readonly prefix: string; readonly policy: string }>) =>
        rules.map((r) => `${r.prefix}=${r.policy}`).join(",")
      )
    }
  )
)

const IntFromString = (minimum: number, maximum: number) =>
  Schema.FiniteFromString.pipe(Schema.decodeTo(Int(minimum, maximum)))

/**
 * The environment variables the service reads (besides the secrets
 * `TOLLGATE_ADMIN_TOKEN`, `REDIS_URL`, `REDIS_CLUSTER_NODES`,
 * `REDIS_SENTINELS` and `TOLLGATE_CLUSTER`, read as `Config.Redacted`).
 * They override the file.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ServiceConfig.Env)({ PORT: "8080", TOLLGATE_RULES: "ip:=per-ip" })
 * ```
 *
 * @category schemas
 * @since 0.1.0
 */
export const Env = Schema.Struct({
  PORT: Schema.optionalKey(IntFromString(0, 65535)),
  HOST: Schema.optionalKey(Schema.NonEmptyString),
  TOLLGATE_CONFIG: Schema.optionalKey(Schema.NonEmptyString),
  TOLLGATE_POLICIES: Schema.optionalKey(Schema.fromJsonString(Schema.Record(Schema.String, PolicySpec.PolicySpec))),
  TOLLGATE_DEFAULT_POLICY: Schema.optionalKey(PolicyName),
  TOLLGATE_RULES: Schema.optionalKey(RulesFromString),
  TOLLGATE_MAX_BODY_BYTES: Schema.optionalKey(IntFromString(64, 1_048_576)),
  TOLLGATE_MAX_KEY_LENGTH: Schema.optionalKey(IntFromString(1, 4096)),
  TOLLGATE_MAX_WAIT: Schema.optionalKey(IntFromString(0, 600_000)),
  TOLLGATE_SHUTDOWN_TIMEOUT: Schema.optionalKey(Schema.NonEmptyString),
  TOLLGATE_REQUEST_TIMEOUT: Schema.optionalKey(Schema.NonEmptyString),
  TOLLGATE_HEADERS_TIMEOUT: Schema.optionalKey(Schema.NonEmptyString),
  REDIS_SENTINEL_NAME: Schema.optionalKey(Schema.NonEmptyString),
  REDIS_PREFIX: Schema.optionalKey(RedisPrefix),
  REDIS_FALLBACK: Schema.optionalKey(FallbackMode),
  TOLLGATE_RLS_HOST: Schema.optionalKey(Schema.NonEmptyString),
  TOLLGATE_RLS_PORT: Schema.optionalKey(IntFromString(0, 65535)),
  TOLLGATE_RLS_CONFIG: Schema.optionalKey(Schema.NonEmptyString),
  TOLLGATE_CLUSTER_HOST: Schema.optionalKey(Schema.NonEmptyString),
  TOLLGATE_CLUSTER_PORT: Schema.optionalKey(IntFromString(1, 65535)),
  TOLLGATE_CLUSTER_LISTEN_HOST: Schema.optionalKey(Schema.NonEmptyString),
  TOLLGATE_CLUSTER_FALLBACK: Schema.optionalKey(FallbackMode)
})

const envNames = Object.keys(Env.fields) as ReadonlyArray<keyof typeof Env.fields>

/**
 * The environment, as read (strings).
 *
 * @example
 * ```ts
 * import type { ServiceConfig } from "tollgate/server"
 *
 * const env: ServiceConfig.RawEnv = { PORT: "0", HOST: "127.0.0.1" }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export type RawEnv = { readonly [K in keyof typeof Env.fields]?: string | undefined }

/**
 * The resolved configuration.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * const program = ServiceConfig.ServiceConfig.use((settings: ServiceConfig.Settings) => Effect.succeed(settings.port))
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Settings {
  readonly host: string
  readonly port: number
  /** Bearer token for admin routes; admin routes are disabled without one. */
  readonly adminToken: Option.Option<Redacted.Redacted<string>>
  /** Named policies, validated. */
  readonly policies: ReadonlyMap<string, Policy.Valid>
  readonly defaultPolicy: string
  /** Prefix rules, longest prefix first. */
  readonly rules: ReadonlyArray<{ readonly prefix: string; readonly policy: string }>
  readonly limits: {
    readonly maxBodyBytes: number
    readonly maxKeyLength: number
    readonly maxWaitMillis: number
    readonly maxBatch: number
    readonly maxBatchBodyBytes: number
    /** Longest time to receive a whole request (Node's `requestTimeout`), in milliseconds. */
    readonly requestTimeoutMillis: number
    /** Longest time to receive a request's headers (Node's `headersTimeout`), in milliseconds. */
    readonly headersTimeoutMillis: number
  }
  readonly limiter: {
    readonly idleTimeout: Duration.Duration
    readonly mailboxCapacity: number
    readonly maxWaiters: number
  }
  /** How long shutdown waits for accepted requests before cutting them off. */
  readonly shutdownTimeout: Duration.Duration
  /** Keys' state in Redis, shared by every instance that uses the same one; none: in-process. */
  readonly redis: Option.Option<RedisSettings>
  /** Each key's owner among the instances on one Postgres (Effect Cluster); none: no cluster. */
  readonly cluster: Option.Option<ClusterSettings>
  /** Forward authentication (`/v1/check`): the rules, compiled. */
  readonly forwardAuth: ForwardAuth.Matcher
  /** Envoy's rate limit service (gRPC); none: not served. */
  readonly rls: Option.Option<RlsSettings>
  /** Where each setting came from, for the start-up log. */
  readonly sources: ReadonlyArray<string>
}

/**
 * The resolved Redis settings.
 *
 * @example
 * ```ts
 * import { Duration, Redacted } from "effect"
 * import type { ServiceConfig } from "tollgate/server"
 *
 * const redis: ServiceConfig.RedisSettings = {
 *   url: Redacted.make("redis://127.0.0.1:6379"),
 *   urlField: "REDIS_URL",
 *   prefix: "tollgate:",
 *   clock: "server",
 *   fallback: { mode: "local", share: 1, timeout: Duration.millis(250), retryAfter: Duration.seconds(1) }
 * }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface RedisSettings {
  /**
   * Where Redis is: one server's URL; a cluster's nodes or the sentinels,
   * their URLs separated by commas.
   */
  readonly url: Redacted.Redacted<string>
  /**
   * Where the URL came from (`REDIS_URL`, `redis.url`, `REDIS_CLUSTER_NODES`,
   * `redis.cluster.nodes`, `REDIS_SENTINELS` or `redis.sentinel.sentinels`),
   * for error messages.
   */
  readonly urlField: string
  /** One server (the default), a Redis Cluster, or a primary behind Sentinel. */
  readonly topology?: "server" | "cluster" | "sentinel" | undefined
  /** Behind Sentinel: the primary's group. */
  readonly sentinelName?: string | undefined
  readonly prefix: string
  readonly clock: "server" | "client"
  readonly fallback: {
    readonly mode: "local" | "allow" | "deny" | "error"
    readonly share: number
    readonly timeout: Duration.Duration
    readonly retryAfter: Duration.Duration
  }
}

/**
 * The resolved cluster settings.
 *
 * @example
 * ```ts
 * import { Duration, Redacted } from "effect"
 * import type { ServiceConfig } from "tollgate/server"
 *
 * const cluster: ServiceConfig.ClusterSettings = {
 *   url: Redacted.make("postgres://tollgate@db:5432/tollgate"),
 *   urlField: "TOLLGATE_CLUSTER",
 *   host: "10.0.0.7",
 *   port: 34431,
 *   listenHost: undefined,
 *   handoffTimeout: Duration.seconds(10),
 *   fallback: { mode: "deny", share: 1, timeout: Duration.millis(250), retryAfter: Duration.seconds(1) }
 * }
 * ```
 *
 * @category models
 * @since 0.3.0
 */
export interface ClusterSettings {
  readonly url: Redacted.Redacted<string>
  /** Where the URL came from (`TOLLGATE_CLUSTER` or `cluster.url`), for error messages. */
  readonly urlField: string
  readonly host: string
  readonly port: number
  readonly listenHost: string | undefined
  readonly handoffTimeout: Duration.Duration
  readonly fallback: {
    readonly mode: "local" | "allow" | "deny" | "error"
    readonly share: number
    readonly timeout: Duration.Duration
    readonly retryAfter: Duration.Duration
  }
}

/**
 * The resolved settings of Envoy's rate limit service.
 *
 * @example
 * ```ts
 * import { Option } from "effect"
 * import type { ServiceConfig } from "tollgate/server"
 *
 * const port = (settings: ServiceConfig.Settings): number | undefined =>
 *   Option.getOrUndefined(Option.map(settings.rls, (rls: ServiceConfig.RlsSettings) => rls.port))
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface RlsSettings {
  readonly host: string
  readonly port: number
  /** The YAML files read, in order. */
  readonly files: ReadonlyArray<string>
  readonly config: RlsConfig.Config
  readonly responseHeaders: boolean
}

/**
 * The built-in policy when none is configured: bursts of 100, then 10 per second.
 *
 * @example
 * ```ts
 * import { ServiceConfig } from "tollgate/server"
 *
 * ServiceConfig.builtinDefault.kind // "tokenBucket"
 * ```
 *
 * @category constants
 * @since 0.1.0
 */
export const builtinDefault: PolicySpec.PolicySpec = {
  kind: "tokenBucket",
  capacity: 100,
  refill: { tokens: 10, per: "1 second" }
}

const MIN_ADMIN_TOKEN_LENGTH = 16

/**
 * What {@link resolve} takes: the parsed file (if any), the raw environment
 * and the admin token.
 *
 * @example
 * ```ts
 * import type { ServiceConfig } from "tollgate/server"
 *
 * const input: ServiceConfig.Input = { env: { PORT: "0" }, file: { defaultPolicy: "default" } }
 * ```
 *
 * @category models
 * @since 0.1.0
 */
export interface Input {
  readonly file?: unknown
  readonly fileName?: string | undefined
  readonly env?: RawEnv | undefined
  readonly adminToken?: Option.Option<Redacted.Redacted<string>> | undefined
  /** `REDIS_URL`; an empty value counts as unset. */
  readonly redisUrl?: Option.Option<Redacted.Redacted<string>> | undefined
  /** `REDIS_CLUSTER_NODES` (URLs separated by commas); an empty value counts as unset. */
  readonly redisClusterNodes?: Option.Option<Redacted.Redacted<string>> | undefined
  /** `REDIS_SENTINELS` (URLs separated by commas); an empty value counts as unset. */
  readonly redisSentinels?: Option.Option<Redacted.Redacted<string>> | undefined
  /** `TOLLGATE_CLUSTER`; an empty value counts as unset. */
  readonly clusterUrl?: Option.Option<Redacted.Redacted<string>> | undefined
  /** The YAML files of the rate limit service, as read (by {@link load}). */
  readonly rlsFiles?: ReadonlyArray<{ readonly file: string; readonly text: string }> | undefined
}

const fail = (errors: ReadonlyArray<FieldErrors.FieldError>) => Effect.fail(new InvalidConfig({ errors }))

/**
 * Validates and merges the file and the environment into {@link Settings}.
 *
 * @example
 * ```ts
 * import { ServiceConfig } from "tollgate/server"
 *
 * const settings = ServiceConfig.resolve({
 *   env: { PORT: "8080", TOLLGATE_POLICIES: "{\"default\":{\"kind\":\"tokenBucket\",\"capacity\":5,\"refill\":{\"tokens\":1,\"per\":\"1 second\"}}}" }
 * })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const resolve = (input: Input): Effect.Effect<Settings, InvalidConfig> =>
  Effect.gen(function*() {
    const file = input.file === undefined
      ? {}
      : yield* Schema.decodeUnknownEffect(ConfigFile)(input.file, { onExcessProperty: "error", errors: "all" }).pipe(
        Effect.catchTag(
          "SchemaError",
          (error) =>
            fail(FieldErrors.fromIssue(error.issue, input.file, {
              redact: {
                "redis.url": redactUrl,
                "redis.cluster.nodes": redactUrl,
                "redis.sentinel.sentinels": redactUrl,
                "cluster.url": redactUrl
              }
            }))
        )
      )
    const rawEnv = input.env ?? {}
    const env = yield* Schema.decodeUnknownEffect(Env)(rawEnv, { errors: "all" }).pipe(
      Effect.catchTag("SchemaError", (error) => fail(FieldErrors.fromIssue(error.issue, rawEnv)))
    )
    const errors: Array<FieldErrors.FieldError> = []
    const sources: Array<string> = []
    if (input.fileName !== undefined) sources.push(`file ${input.fileName}`)

    // Policies: the file's, then the environment's (by name, the environment wins).
    const specs = new Map<string, { readonly spec: PolicySpec.PolicySpec; readonly field: string }>()
    for (const [name, spec] of Object.entries(file.policies ?? {})) specs.set(name, { spec, field: `policies.${name}` })
    for (const [name, spec] of Object.entries(env.TOLLGATE_POLICIES ?? {})) {
      specs.set(name, { spec, field: `TOLLGATE_POLICIES.${name}` })
    }
    if (env.TOLLGATE_POLICIES !== undefined) sources.push("TOLLGATE_POLICIES")
    if (specs.size === 0) {
      specs.set("default", { spec: builtinDefault, field: "default" })
      sources.push("built-in default policy")
    }
    const policies = new Map<string, Policy.Valid>()
    for (const [name, { field, spec }] of specs) {
      if (!policyNamePattern.test(name)) {
        errors.push({
          field,
          value: JSON.stringify(name),
          reason: "is not a valid policy name (letters, digits, \".\", \"_\", \"-\"; at most 64 characters)"
        })
        continue
      }
      const policy = PolicySpec.toPolicy(spec)
      if (policy._tag === "Invalid") {
        errors.push({ field: `${field}.${policy.error.field}`, value: policy.error.value, reason: policy.error.reason })
      } else {
        policies.set(name, policy)
      }
    }
    const known = `known policies: ${[...specs.keys()].join(", ")}`

    const defaultPolicy = env.TOLLGATE_DEFAULT_POLICY ?? file.defaultPolicy ?? "default"
    if (!specs.has(defaultPolicy)) {
      errors.push({
        field: env.TOLLGATE_DEFAULT_POLICY !== undefined ? "TOLLGATE_DEFAULT_POLICY" : "defaultPolicy",
        value: JSON.stringify(defaultPolicy),
        reason: `no such policy (${known})`
      })
    }

    const rulesField = env.TOLLGATE_RULES !== undefined ? "TOLLGATE_RULES" : "rules"
    const rules = env.TOLLGATE_RULES ?? file.rules ?? []
    const prefixes = new Set<string>()
    rules.forEach((rule, i) => {
      if (!specs.has(rule.policy)) {
        errors.push({
          field: `${rulesField}[${i}].policy`,
          value: JSON.stringify(rule.policy),
          reason: `no such policy (${known})`
        })
      }
      if (prefixes.has(rule.prefix)) {
        errors.push({
          field: `${rulesField}[${i}].prefix`,
          value: JSON.stringify(rule.prefix),
          reason: "is already used by an earlier rule"
        })
      }
      prefixes.add(rule.prefix)
    })

    const timeouts = resolveTimeouts(file.limits, env, errors)
    const limits = {
      maxBodyBytes: env.TOLLGATE_MAX_BODY_BYTES ?? file.limits?.maxBodyBytes ?? 4096,
      maxKeyLength: env.TOLLGATE_MAX_KEY_LENGTH ?? file.limits?.maxKeyLength ?? 256,
      maxWaitMillis: env.TOLLGATE_MAX_WAIT ?? file.limits?.maxWait ?? 30_000,
      maxBatch: file.limits?.maxBatch ?? 100,
      maxBatchBodyBytes: file.limits?.maxBatchBodyBytes ?? 65_536,
      requestTimeoutMillis: timeouts.request,
      headersTimeoutMillis: timeouts.headers
    }

    const idleTimeoutMillis = Policy.positiveMillis(file.limiter?.idleTimeout ?? 60_000)
    if (idleTimeoutMillis === undefined) {
      errors.push({
        field: "limiter.idleTimeout",
        value: FieldErrors.show(file.limiter?.idleTimeout),
        reason: "must be a positive duration such as \"1 minute\""
      })
    }
    const shutdownMillis = env.TOLLGATE_SHUTDOWN_TIMEOUT === undefined
      ? 20_000
      : Policy.positiveMillis(env.TOLLGATE_SHUTDOWN_TIMEOUT)
    if (shutdownMillis === undefined) {
      errors.push({
        field: "TOLLGATE_SHUTDOWN_TIMEOUT",
        value: FieldErrors.show(env.TOLLGATE_SHUTDOWN_TIMEOUT),
        reason: "must be a positive duration such as \"20 seconds\""
      })
    }

    const adminToken = input.adminToken ?? Option.none()
    if (Option.isSome(adminToken) && Redacted.value(adminToken.value).length < MIN_ADMIN_TOKEN_LENGTH) {
      // The value is a secret: never shown.
      errors.push({
        field: "TOLLGATE_ADMIN_TOKEN",
        reason: `must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters (value not shown)`
      })
    }

    const redis = resolveRedis(file.redis, env, input, errors)
    const cluster = resolveCluster(file.cluster, env, input.clusterUrl, errors)
    if (Option.isSome(redis) && Option.isSome(cluster)) {
      errors.push({
        field: cluster.value.urlField,
        reason:
          `cannot be used with ${redis.value.urlField}: keys' state is either in Redis or with their owners on the cluster`
      })
    }

    const forwardAuth = ForwardAuth.make(file.forwardAuth ?? {}, policies, limits.maxKeyLength)
    if (Result.isFailure(forwardAuth)) errors.push(...forwardAuth.failure)

    const rls = resolveRls(file.rls, env, input.rlsFiles ?? [], policies, errors)

    if (errors.length > 0 || Result.isFailure(forwardAuth)) return yield* fail(errors)
    for (const name of envNames) {
      if (rawEnv[name] !== undefined && (name.startsWith("TOLLGATE_") || name.startsWith("REDIS_"))) {
        sources.push(name)
      }
    }
    if (Option.isSome(redis) && redis.value.urlField.startsWith("REDIS_")) sources.push(redis.value.urlField)
    if (Option.isSome(cluster) && cluster.value.urlField === "TOLLGATE_CLUSTER") sources.push("TOLLGATE_CLUSTER")
    return {
      host: env.HOST ?? "127.0.0.1",
      port: env.PORT ?? 8080,
      adminToken,
      policies,
      defaultPolicy,
      rules: [...rules].sort((a, b) => b.prefix.length - a.prefix.length),
      limits,
      limiter: {
        idleTimeout: Duration.millis(idleTimeoutMillis ?? 60_000),
        mailboxCapacity: file.limiter?.mailboxCapacity ?? 1024,
        maxWaiters: file.limiter?.maxWaiters ?? 1024
      },
      shutdownTimeout: Duration.millis(shutdownMillis ?? 20_000),
      redis,
      cluster,
      forwardAuth: forwardAuth.success,
      rls,
      sources: [...new Set(sources)]
    }
  })

/**
 * The default of `limits.requestTimeout`: the longest a client may take to
 * send a whole request (see docs/service.md, "Timeouts").
 *
 * @example
 * ```ts
 * import { ServiceConfig } from "tollgate/server"
 *
 * ServiceConfig.defaultRequestTimeoutMillis // 10000
 * ```
 *
 * @category constants
 * @since 0.3.0
 */
export const defaultRequestTimeoutMillis = 10_000

/**
 * The default of `limits.headersTimeout` (or `requestTimeout` when that is
 * shorter).
 *
 * @example
 * ```ts
 * import { ServiceConfig } from "tollgate/server"
 *
 * ServiceConfig.defaultHeadersTimeoutMillis // 5000
 * ```
 *
 * @category constants
 * @since 0.3.0
 */
export const defaultHeadersTimeoutMillis = 5_000

// Longer than this is no bound at all for a request of a few kilobytes.
const maxTimeoutMillis = 3_600_000

// Node's request and headers timeouts: the environment's, else the file's;
// the headers' may not be longer than the request's (Node refuses it).
const resolveTimeouts = (
  file: typeof Limits.Type | undefined,
  env: typeof Env.Type,
  errors: Array<FieldErrors.FieldError>
): { readonly request: number; readonly headers: number } => {
  const read = (envName: "TOLLGATE_REQUEST_TIMEOUT" | "TOLLGATE_HEADERS_TIMEOUT", fileName: string) => {
    const fromEnv = env[envName]
    const input = fromEnv ?? (fileName === "requestTimeout" ? file?.requestTimeout : file?.headersTimeout)
    const field = fromEnv !== undefined ? envName : `limits.${fileName}`
    if (input === undefined) return { field, millis: undefined }
    const millis = Policy.positiveMillis(input)
    if (millis === undefined || millis > maxTimeoutMillis) {
      errors.push({
        field,
        value: FieldErrors.show(input),
        reason: "must be a positive duration of at most 1 hour, such as \"10 seconds\" or \"500 millis\""
      })
      return { field, millis: undefined }
    }
    return { field, millis: Math.ceil(millis) }
  }
  const request = read("TOLLGATE_REQUEST_TIMEOUT", "requestTimeout")
  const headers = read("TOLLGATE_HEADERS_TIMEOUT", "headersTimeout")
  const requestMillis = request.millis ?? defaultRequestTimeoutMillis
  const headersMillis = headers.millis ?? Math.min(defaultHeadersTimeoutMillis, requestMillis)
  if (headers.millis !== undefined && headersMillis > requestMillis) {
    errors.push({
      field: headers.field,
      value: FieldErrors.show(env.TOLLGATE_HEADERS_TIMEOUT ?? file?.headersTimeout),
      reason: `must not be longer than the request timeout (${request.field}: ${requestMillis} ms)`
    })
  }
  return { request: requestMillis, headers: headersMillis }
}

// The Redis settings: where Redis is from the environment (one of REDIS_URL,
// REDIS_CLUSTER_NODES and REDIS_SENTINELS), else from the file (one of url,
// cluster and sentinel); none: in-process. The rest from the file,
// REDIS_PREFIX and REDIS_FALLBACK winning. Checked even without a place, so
// that a mistake shows before one is added.
const resolveRedis = (
  file: typeof RedisOptions.Type | undefined,
  env: typeof Env.Type,
  input: Input,
  errors: Array<FieldErrors.FieldError>
): Option.Option<RedisSettings> => {
  type Place = {
    readonly value: Redacted.Redacted<string>
    readonly field: string
    readonly topology: "server" | "cluster" | "sentinel"
  }
  const given = (value: Option.Option<Redacted.Redacted<string>> | undefined) =>
    Option.filter(value ?? Option.none(), (v) => Redacted.value(v) !== "")
  const fromEnv: Array<Place> = []
  const envUrl = given(input.redisUrl)
  if (Option.isSome(envUrl)) fromEnv.push({ value: envUrl.value, field: "REDIS_URL", topology: "server" })
  const envNodes = given(input.redisClusterNodes)
  if (Option.isSome(envNodes)) {
    fromEnv.push({ value: envNodes.value, field: "REDIS_CLUSTER_NODES", topology: "cluster" })
  }
  const envSentinels = given(input.redisSentinels)
  if (Option.isSome(envSentinels)) {
    fromEnv.push({ value: envSentinels.value, field: "REDIS_SENTINELS", topology: "sentinel" })
  }
  const fromFile: Array<Place> = []
  if (file?.url !== undefined) {
    fromFile.push({ value: Redacted.make(file.url, { label: "redis.url" }), field: "redis.url", topology: "server" })
  }
  if (file?.cluster !== undefined) {
    fromFile.push({
      value: Redacted.make(file.cluster.nodes.join(","), { label: "redis.cluster.nodes" }),
      field: "redis.cluster.nodes",
      topology: "cluster"
    })
  }
  if (file?.sentinel !== undefined) {
    fromFile.push({
      value: Redacted.make(file.sentinel.sentinels.join(","), { label: "redis.sentinel.sentinels" }),
      field: "redis.sentinel.sentinels",
      topology: "sentinel"
    })
  }
  for (const places of [fromEnv, fromFile]) {
    if (places.length > 1) {
      errors.push({
        field: places[1].field,
        reason: `give one of ${
          places.map((p) => p.field).join(", ")
        } (Redis is one server, a cluster or behind Sentinel)`
      })
    }
  }
  let place: Place | undefined = fromEnv[0] ?? fromFile[0]
  // every URL of the place valid; a cluster's or a group's sharing one
  // scheme and one set of credentials; no database on a cluster
  if (place !== undefined) {
    const urls = Redacted.value(place.value).split(",").map((u) => u.trim()).filter((u) => u !== "")
    const listed = place.topology !== "server"
    urls.forEach((raw, i) => {
      const field = listed ? `${place!.field}[${i}]` : place!.field
      const decoded = Schema.decodeResult(RedisUrl)(raw)
      if (Result.isFailure(decoded)) {
        errors.push(
          ...FieldErrors.fromIssue(decoded.failure.issue, raw, { root: field, redact: { [field]: redactUrl } })
        )
        place = undefined
        return
      }
      if (!listed) return
      const url = new URL(raw)
      const first = new URL(urls[0])
      if (url.protocol !== first.protocol || url.username !== first.username || url.password !== first.password) {
        errors.push({
          field,
          value: JSON.stringify(redactUrl(raw)),
          reason: `must have the scheme and credentials of ${place!.field}[0] (the ${
            place!.topology === "cluster" ? "nodes of a cluster" : "sentinels"
          } share them)`
        })
        place = undefined
      } else if (place!.topology === "cluster" && /^\/?[1-9]\d*$/.test(url.pathname)) {
        errors.push({
          field,
          value: JSON.stringify(redactUrl(raw)),
          reason: "a Redis Cluster has only database 0"
        })
        place = undefined
      }
    })
  }
  const sentinelName = env.REDIS_SENTINEL_NAME ?? file?.sentinel?.name
  if (place?.topology === "sentinel" && sentinelName === undefined) {
    errors.push({
      field: "REDIS_SENTINEL_NAME",
      reason: "is required with REDIS_SENTINELS: the name the sentinels monitor the primary by"
    })
  }
  if (env.REDIS_SENTINEL_NAME !== undefined && place?.topology !== "sentinel" && fromEnv.length + fromFile.length > 0) {
    errors.push({
      field: "REDIS_SENTINEL_NAME",
      value: JSON.stringify(env.REDIS_SENTINEL_NAME),
      reason: "names a group of sentinels, but Redis is not behind Sentinel (set REDIS_SENTINELS)"
    })
  }
  const url = Option.fromUndefinedOr(place)

  const duration = (field: "timeout" | "retryAfter", fallback: number, example: string): number => {
    const input = file?.fallback?.[field]
    if (input === undefined) return fallback
    const millis = Policy.positiveMillis(input)
    if (millis !== undefined) return millis
    errors.push({
      field: `redis.fallback.${field}`,
      value: FieldErrors.show(input),
      reason: `must be a positive duration such as "${example}"`
    })
    return fallback
  }
  const timeoutMillis = duration("timeout", 250, "250 millis")
  const retryMillis = duration("retryAfter", 1000, "1 second")

  return Option.map(url, (url) => ({
    url: url.value,
    urlField: url.field,
    topology: url.topology,
    ...(url.topology === "sentinel" ? { sentinelName } : {}),
    prefix: env.REDIS_PREFIX ?? file?.prefix ?? "tollgate:",
    clock: file?.clock ?? "server",
    fallback: {
      mode: env.REDIS_FALLBACK ?? file?.fallback?.mode ?? "local",
      share: file?.fallback?.share ?? 1,
      timeout: Duration.millis(timeoutMillis),
      retryAfter: Duration.millis(retryMillis)
    }
  }))
}

// The cluster settings: the environment's URL, else the file's (none: no
// cluster); the rest from the file, the TOLLGATE_CLUSTER_* variables winning.
// Checked even without a URL, so that a mistake shows before the URL is added.
const resolveCluster = (
  file: typeof ClusterOptions.Type | undefined,
  env: typeof Env.Type,
  envUrl: Option.Option<Redacted.Redacted<string>> | undefined,
  errors: Array<FieldErrors.FieldError>
): Option.Option<ClusterSettings> => {
  let url: Option.Option<{ readonly value: Redacted.Redacted<string>; readonly field: string }> = Option.none()
  const fromEnv = Option.filter(envUrl ?? Option.none(), (url) => Redacted.value(url) !== "")
  if (Option.isSome(fromEnv)) {
    const raw = Redacted.value(fromEnv.value)
    const decoded = Schema.decodeResult(PostgresUrl)(raw)
    if (Result.isFailure(decoded)) {
      errors.push(
        ...FieldErrors.fromIssue(decoded.failure.issue, raw, {
          root: "TOLLGATE_CLUSTER",
          redact: { TOLLGATE_CLUSTER: redactUrl }
        })
      )
    } else {
      url = Option.some({ value: fromEnv.value, field: "TOLLGATE_CLUSTER" })
    }
  } else if (file?.url !== undefined) {
    url = Option.some({ value: Redacted.make(file.url, { label: "cluster.url" }), field: "cluster.url" })
  }
  const duration = (
    input: string | number | undefined,
    field: string,
    fallback: number,
    example: string
  ): number => {
    if (input === undefined) return fallback
    const millis = Policy.positiveMillis(input)
    if (millis !== undefined) return millis
    errors.push({
      field: `cluster.${field}`,
      value: FieldErrors.show(input),
      reason: `must be a positive duration such as "${example}"`
    })
    return fallback
  }
  const timeoutMillis = duration(file?.fallback?.timeout, "fallback.timeout", 250, "250 millis")
  const retryMillis = duration(file?.fallback?.retryAfter, "fallback.retryAfter", 1000, "1 second")
  const handoffMillis = duration(file?.handoffTimeout, "handoffTimeout", 10_000, "10 seconds")
  return Option.map(url, (url) => ({
    url: url.value,
    urlField: url.field,
    host: env.TOLLGATE_CLUSTER_HOST ?? file?.host ?? "127.0.0.1",
    port: env.TOLLGATE_CLUSTER_PORT ?? file?.port ?? 34431,
    listenHost: env.TOLLGATE_CLUSTER_LISTEN_HOST ?? file?.listenHost,
    handoffTimeout: Duration.millis(handoffMillis),
    fallback: {
      mode: env.TOLLGATE_CLUSTER_FALLBACK ?? file?.fallback?.mode ?? "local",
      share: file?.fallback?.share ?? 1,
      timeout: Duration.millis(timeoutMillis),
      retryAfter: Duration.millis(retryMillis)
    }
  }))
}

// A `policy: {...}` in the rate limit service's YAML: a PolicySpec, read and
// validated as the service's own policies are.
const decodePolicy = (input: unknown, field: string): Policy.Valid | ReadonlyArray<FieldErrors.FieldError> => {
  const decoded = Schema.decodeUnknownExit(PolicySpec.PolicySpec)(input, { onExcessProperty: "error", errors: "all" })
  if (decoded._tag === "Failure") {
    const error = Cause.findErrorOption(decoded.cause)
    return Option.isSome(error)
      ? FieldErrors.fromIssue(error.value.issue, input, { root: field })
      : [{ field, reason: "is not a policy" }]
  }
  const policy = PolicySpec.toPolicy(decoded.value)
  return policy._tag === "Invalid"
    ? [{ field: `${field}.${policy.error.field}`, value: policy.error.value, reason: policy.error.reason }]
    : policy
}

// The rate limit service: served when a port is configured; its YAML files
// are checked whenever any are named.
const resolveRls = (
  file: typeof RlsOptions.Type | undefined,
  env: typeof Env.Type,
  texts: ReadonlyArray<{ readonly file: string; readonly text: string }>,
  policies: ReadonlyMap<string, Policy.Valid>,
  errors: Array<FieldErrors.FieldError>
): Option.Option<RlsSettings> => {
  const documents: Array<{ file: string; document: RlsConfig.Document }> = []
  for (const { file: name, text } of texts) {
    const parsed = RlsConfig.parseYaml(text, name)
    if (Result.isFailure(parsed)) {
      errors.push(parsed.failure)
      continue
    }
    const decoded = Schema.decodeUnknownExit(RlsConfig.Document)(parsed.success, {
      onExcessProperty: "error",
      errors: "all"
    })
    if (decoded._tag === "Failure") {
      const error = Cause.findErrorOption(decoded.cause)
      if (Option.isSome(error)) {
        for (const e of FieldErrors.fromIssue(error.value.issue, parsed.success, { root: `${name}:` })) {
          errors.push({ ...e, field: e.field.replace(`${name}:.`, `${name}: `) })
        }
      }
      continue
    }
    documents.push({ file: name, document: decoded.value })
  }
  const compiled = RlsConfig.compile(documents, { policies, decodePolicy })
  if (Result.isFailure(compiled)) errors.push(...compiled.failure)
  const port = env.TOLLGATE_RLS_PORT ?? file?.port
  if (port === undefined || Result.isFailure(compiled)) return Option.none()
  return Option.some({
    host: env.TOLLGATE_RLS_HOST ?? file?.host ?? "127.0.0.1",
    port,
    files: texts.map((t) => t.file),
    config: compiled.success,
    responseHeaders: file?.responseHeaders ?? true
  })
}

// A setting that may hold a secret: when it cannot be read, the error names
// it and never shows its value.
const secret = (name: string) =>
  Config.option(Config.Redacted(name)).pipe(
    Effect.mapError(() => new InvalidConfig({ errors: [{ field: name, reason: "cannot be read (value not shown)" }] }))
  )

/**
 * Reads the environment (through Effect's `ConfigProvider`) and the file it
 * names, then {@link resolve}s them.
 *
 * @example
 * ```ts
 * import { NodeFileSystem } from "@effect/platform-node"
 * import { Effect } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * const settings = ServiceConfig.load.pipe(Effect.provide(NodeFileSystem.layer))
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const load: Effect.Effect<Settings, InvalidConfig, FileSystem.FileSystem> = Effect.gen(function*() {
  const readEnv = Config.all(
    Object.fromEntries(envNames.map((name) => [name, Config.option(Config.String(name))] as const))
  )
  const read = yield* readEnv.pipe(
    Effect.mapError((error) => new InvalidConfig({ errors: [{ field: "environment", reason: error.message }] }))
  )
  const env: Record<string, string> = {}
  for (const name of envNames) {
    const value = read[name]
    if (Option.isSome(value)) env[name] = value.value
  }
  const adminToken = yield* secret("TOLLGATE_ADMIN_TOKEN")
  const redisUrl = yield* secret("REDIS_URL")
  const redisClusterNodes = yield* secret("REDIS_CLUSTER_NODES")
  const redisSentinels = yield* secret("REDIS_SENTINELS")
  const clusterUrl = yield* secret("TOLLGATE_CLUSTER")
  const fileName = env.TOLLGATE_CONFIG
  let file: unknown = undefined
  if (fileName !== undefined) {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(fileName).pipe(
      Effect.mapError((error) =>
        new InvalidConfig({
          errors: [{
            field: "TOLLGATE_CONFIG",
            value: JSON.stringify(fileName),
            reason: `cannot be read: ${error.message}`
          }]
        })
      )
    )
    file = yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: (cause) =>
        new InvalidConfig({
          errors: [{
            field: "TOLLGATE_CONFIG",
            value: JSON.stringify(fileName),
            reason: `is not valid JSON: ${cause instanceof Error ? cause.message : String(cause)}`
          }]
        })
    })
  }
  const rlsFiles = yield* readRlsFiles(file, fileName, env.TOLLGATE_RLS_CONFIG)
  return yield* resolve({
    file,
    fileName,
    env,
    adminToken,
    redisUrl,
    redisClusterNodes,
    redisSentinels,
    clusterUrl,
    rlsFiles
  })
}).pipe(Effect.withSpan("ServiceConfig.load"))

// The rate limit service's YAML: `TOLLGATE_RLS_CONFIG` (relative to the
// working directory) or the file's `rls.config` (relative to the file's
// folder); a folder stands for its *.yaml and *.yml files, by name.
const readRlsFiles = (file: unknown, fileName: string | undefined, fromEnv: string | undefined) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const fromFile = Predicate.hasProperty(file, "rls") && Predicate.hasProperty(file.rls, "config")
      ? file.rls.config
      : undefined
    const field = fromEnv !== undefined ? "TOLLGATE_RLS_CONFIG" : "rls.config"
    const base = fromEnv !== undefined || fileName === undefined ? "." : dirname(fileName)
    const entries = fromEnv !== undefined
      ? [fromEnv]
      : Predicate.isString(fromFile)
      ? [fromFile]
      : Array.isArray(fromFile)
      ? fromFile.filter(Predicate.isString)
      : []
    const out: Array<{ file: string; text: string }> = []
    const unreadable = (path: string) => (error: { readonly message: string }) =>
      new InvalidConfig({
        errors: [{ field, value: JSON.stringify(path), reason: `cannot be read: ${error.message}` }]
      })
    for (const entry of entries) {
      const path = isAbsolute(entry) ? entry : join(base, entry)
      const info = yield* fs.stat(path).pipe(Effect.mapError(unreadable(path)))
      const files = info.type === "Directory"
        ? (yield* fs.readDirectory(path).pipe(Effect.mapError(unreadable(path))))
          .filter((name) => /\.ya?ml$/.test(name) && !name.startsWith("."))
          .sort()
          .map((name) => join(path, name))
        : [path]
      for (const f of files) {
        out.push({ file: f, text: yield* fs.readFileString(f).pipe(Effect.mapError(unreadable(f))) })
      }
    }
    return out
  })

/**
 * The resolved configuration, as a service.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * const port = ServiceConfig.ServiceConfig.use((settings) => Effect.succeed(settings.port))
 * ```
 *
 * @category services
 * @since 0.1.0
 */
export class ServiceConfig extends Context.Service<ServiceConfig, Settings>()("tollgate/server/ServiceConfig") {
  /**
   * The configuration read from the environment and the file.
   *
   * @example
   * ```ts
   * import { NodeFileSystem } from "@effect/platform-node"
   * import { Layer } from "effect"
   * import { ServiceConfig } from "tollgate/server"
   *
   * const config = ServiceConfig.ServiceConfig.layer.pipe(Layer.provide(NodeFileSystem.layer))
   * ```
   *
   * @since 0.1.0
   */
  static readonly layer: Layer.Layer<ServiceConfig, InvalidConfig, FileSystem.FileSystem> = Layer.effect(
    ServiceConfig,
    load
  )

  /**
   * A configuration given as values (tests, embedding).
   *
   * @example
   * ```ts
   * import { ServiceConfig } from "tollgate/server"
   *
   * const config = ServiceConfig.ServiceConfig.layerFrom({ env: { PORT: "0", TOLLGATE_DEFAULT_POLICY: "default" } })
   * ```
   *
   * @since 0.1.0
   */
  static readonly layerFrom = (input: Input): Layer.Layer<ServiceConfig, InvalidConfig> =>
    Layer.effect(ServiceConfig, resolve(input))
}

/**
 * The policy of a request: the one it names, else the longest prefix rule that
 * matches its key, else the default. `undefined` for an unknown name.
 *
 * @example
 * ```ts
 * import { ServiceConfig } from "tollgate/server"
 *
 * declare const settings: ServiceConfig.Settings
 * ServiceConfig.policyName(settings, "ip:203.0.113.7", undefined) // "per-ip" with the rule { prefix: "ip:", policy: "per-ip" }
 * ```
 *
 * @category routing
 * @since 0.1.0
 */
export const policyName = (settings: Settings, key: string, requested: string | undefined): string | undefined => {
  if (requested !== undefined) return settings.policies.has(requested) ? requested : undefined
  for (const rule of settings.rules) if (key.startsWith(rule.prefix)) return rule.policy
  return settings.defaultPolicy
}
