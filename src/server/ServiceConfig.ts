/**
 * The service's configuration: where it listens, its named policies, which
 * policy a key gets, size limits, and the admin token. Read once at start
 * from a JSON file (`TOLLGATE_CONFIG`) and the environment (which wins), and
 * validated with Schema: a bad value stops the service with a message that
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
 *   "limits": { "maxBodyBytes": 4096, "maxKeyLength": 256, "maxWait": 30000 }
 * }
 * ```
 *
 * @since 0.1.0
 */
import { Config, Context, Duration, Effect, FileSystem, Layer, Option, Redacted, Schema, SchemaGetter } from "effect"
import * as Policy from "../Policy.ts"
import * as FieldErrors from "./FieldErrors.ts"
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
 * Schema.decodeUnknownSync(ServiceConfig.Limits)({ maxBodyBytes: 4096, maxKeyLength: 256, maxWait: 30000 })
 * ```
 *
 * @since 0.1.0
 */
export const Limits = Schema.Struct({
  /** Largest request body, in bytes (413 above it). Default 4096. */
  maxBodyBytes: Schema.optionalKey(Int(64, 1_048_576)),
  /** Longest key, in characters. Default 256. */
  maxKeyLength: Schema.optionalKey(Int(1, 4096)),
  /** Longest `maxWait` a `/v1/wait` may ask for, and its default, in milliseconds. Default 30000. */
  maxWait: Schema.optionalKey(Int(0, 600_000))
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
 * @since 0.1.0
 */
export const LimiterOptions = Schema.Struct({
  idleTimeout: Schema.optionalKey(PolicySpec.DurationInput),
  mailboxCapacity: Schema.optionalKey(Int(1, 1_000_000)),
  maxWaiters: Schema.optionalKey(Int(1, 1_000_000))
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
 * @since 0.1.0
 */
export const ConfigFile = Schema.Struct({
  policies: Schema.optionalKey(Schema.Record(Schema.String, PolicySpec.PolicySpec)),
  defaultPolicy: Schema.optionalKey(PolicyName),
  rules: Schema.optionalKey(Schema.Array(Rule)),
  limits: Schema.optionalKey(Limits),
  limiter: Schema.optionalKey(LimiterOptions)
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
 * The environment variables the service reads (besides `TOLLGATE_ADMIN_TOKEN`,
 * read as `Config.Redacted`). They override the file.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { ServiceConfig } from "tollgate/server"
 *
 * Schema.decodeUnknownSync(ServiceConfig.Env)({ PORT: "8080", TOLLGATE_RULES: "ip:=per-ip" })
 * ```
 *
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
  TOLLGATE_SHUTDOWN_TIMEOUT: Schema.optionalKey(Schema.NonEmptyString)
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
  }
  readonly limiter: {
    readonly idleTimeout: Duration.Duration
    readonly mailboxCapacity: number
    readonly maxWaiters: number
  }
  /** How long shutdown waits for accepted requests before cutting them off. */
  readonly shutdownTimeout: Duration.Duration
  /** Where each setting came from, for the start-up log. */
  readonly sources: ReadonlyArray<string>
}

/**
 * The built-in policy when none is configured: bursts of 100, then 10 per second.
 *
 * @example
 * ```ts
 * import { ServiceConfig } from "tollgate/server"
 *
 * ServiceConfig.builtinDefault.capacity // 100
 * ```
 *
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
 * @since 0.1.0
 */
export interface Input {
  readonly file?: unknown
  readonly fileName?: string | undefined
  readonly env?: RawEnv | undefined
  readonly adminToken?: Option.Option<Redacted.Redacted<string>> | undefined
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
 * @since 0.1.0
 */
export const resolve = (input: Input): Effect.Effect<Settings, InvalidConfig> =>
  Effect.gen(function*() {
    const file = input.file === undefined
      ? {}
      : yield* Schema.decodeUnknownEffect(ConfigFile)(input.file, { onExcessProperty: "error", errors: "all" }).pipe(
        Effect.catchTag("SchemaError", (error) => fail(FieldErrors.fromIssue(error.issue, input.file)))
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

    const limits = {
      maxBodyBytes: env.TOLLGATE_MAX_BODY_BYTES ?? file.limits?.maxBodyBytes ?? 4096,
      maxKeyLength: env.TOLLGATE_MAX_KEY_LENGTH ?? file.limits?.maxKeyLength ?? 256,
      maxWaitMillis: env.TOLLGATE_MAX_WAIT ?? file.limits?.maxWait ?? 30_000
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

    if (errors.length > 0) return yield* fail(errors)
    for (const name of envNames) if (rawEnv[name] !== undefined && name.startsWith("TOLLGATE_")) sources.push(name)
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
      sources: [...new Set(sources)]
    }
  })

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
  const adminToken = yield* Config.option(Config.Redacted("TOLLGATE_ADMIN_TOKEN")).pipe(
    Effect.mapError(() =>
      new InvalidConfig({ errors: [{ field: "TOLLGATE_ADMIN_TOKEN", reason: "cannot be read (value not shown)" }] })
    )
  )
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
  return yield* resolve({ file, fileName, env, adminToken })
}).pipe(Effect.withSpan("ServiceConfig.load"))

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
 * @since 0.1.0
 */
export class ServiceConfig extends Context.Service<ServiceConfig, Settings>()("tollgate/server/ServiceConfig") {
  /**
   * The configuration read from the environment and the file.
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
 * @since 0.1.0
 */
export const policyName = (settings: Settings, key: string, requested: string | undefined): string | undefined => {
  if (requested !== undefined) return settings.policies.has(requested) ? requested : undefined
  for (const rule of settings.rules) if (key.startsWith(rule.prefix)) return rule.policy
  return settings.defaultPolicy
}
