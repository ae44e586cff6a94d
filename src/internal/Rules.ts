/**
 * The rules options are checked by, each with its message, once: the
 * policies' options (`Policy.*Options`, and so the service's configuration of
 * policies) and the limiter's own (`RateLimiter.make`) are schemas built from
 * them. {@link decode} names the first field that breaks one.
 *
 * @since 0.2.0
 */
import { DateTime, Duration, Predicate, Result, Schema, SchemaGetter, SchemaIssue } from "effect"

const isPositiveFinite = (n: unknown): n is number => Predicate.isNumber(n) && Number.isFinite(n) && n > 0

/**
 * Parses a duration input (`"1 second"`, millis, a `Duration`) into
 * positive, finite milliseconds, or `undefined`.
 *
 * @since 0.2.0
 */
export const positiveMillis = (input: unknown): number | undefined => {
  if (!(Predicate.isString(input) || Predicate.isNumber(input) || Duration.isDuration(input))) return undefined
  // Any string may be tried: those that are not a duration parse to None.
  const parsed = Duration.fromInput(input as Duration.Input)
  const millis = parsed._tag === "Some" ? Duration.toMillis(parsed.value) : NaN
  return isPositiveFinite(millis) ? millis : undefined
}

/**
 * A number field with one rule: a value of the wrong type and a number that
 * breaks the rule get the same message. `Schema.Number`, not `Finite`: NaN
 * and Infinity are refused by the rule, with its message.
 *
 * @since 0.2.0
 */
export const number = (message: string, rule: (n: number) => boolean) =>
  // @effect-diagnostics-next-line schemaNumber:off
  Schema.Number.annotate({ message }).check(Schema.makeFilter(rule, { message }))

/** @since 0.2.0 */
export const PositiveNumber = number("must be a positive finite number", isPositiveFinite)
/** @since 0.2.0 */
export const PositiveInteger = number("must be a positive integer", (n) => Number.isSafeInteger(n) && n > 0)
/** @since 0.2.0 */
export const NonNegative = number("must be a finite number >= 0", (n) => Number.isFinite(n) && n >= 0)
/** @since 0.2.0 */
export const AtLeastOne = number("must be a finite number >= 1", (n) => Number.isFinite(n) && n >= 1)
/** @since 0.2.0 */
export const Flag = Schema.Boolean.annotate({ message: "must be a boolean" })

const isDuration = (u: unknown): u is Duration.Input => positiveMillis(u) !== undefined

/**
 * A duration: `"1 second"`, a number of milliseconds or a `Duration`,
 * positive and finite; decodes to milliseconds.
 *
 * @since 0.2.0
 */
export const PositiveDuration = Schema.declare(isDuration, {
  message: "must be a positive finite duration such as \"1 second\""
}).pipe(
  Schema.decodeTo(Schema.Finite, {
    decode: SchemaGetter.transform((input: Duration.Input) => positiveMillis(input) ?? NaN),
    encode: SchemaGetter.transform((millis: number): Duration.Input => millis)
  })
)

/**
 * Parses an instant (milliseconds since the epoch, an ISO 8601 string, a
 * `Date` or a `DateTime`) into finite epoch milliseconds, or `undefined`.
 *
 * @since 0.2.0
 */
export const instantMillis = (input: unknown): number | undefined => {
  if (Predicate.isNumber(input)) return Number.isFinite(input) ? input : undefined
  if (!(Predicate.isString(input) || DateTime.isDateTime(input) || Predicate.isDate(input))) return undefined
  const parsed = DateTime.make(input)
  if (parsed._tag === "None") return undefined
  const millis = DateTime.toEpochMillis(parsed.value)
  return Number.isFinite(millis) ? millis : undefined
}

const isInstant = (u: unknown): u is number | string | Date | DateTime.DateTime => instantMillis(u) !== undefined

/**
 * An instant: milliseconds since the epoch on the limiter's clock, an ISO
 * 8601 string, a `Date` or a `DateTime`; decodes to epoch milliseconds.
 *
 * @since 0.2.0
 */
export const Instant = Schema.declare(isInstant, {
  message: "must be an instant: epoch milliseconds, an ISO 8601 string, a Date or a DateTime"
}).pipe(
  Schema.decodeTo(Schema.Finite, {
    decode: SchemaGetter.transform((input: number | string | Date | DateTime.DateTime) => instantMillis(input) ?? NaN),
    encode: SchemaGetter.transform((millis: number): number | string | Date | DateTime.DateTime => millis)
  })
)

/**
 * An optional field: left out or `undefined`; anything else follows its
 * rule, with its message.
 *
 * @since 0.2.0
 */
export const optional = <S extends Schema.Top>(schema: S) => {
  const message = schema.ast.annotations?.message
  return Schema.optionalKey(
    Schema.UndefinedOr(schema).annotate({ message: Predicate.isString(message) ? message : undefined })
  )
}

/**
 * The first field that breaks a rule: where it is, its value (as `show`
 * renders it) and the rule.
 *
 * @since 0.2.0
 */
export interface Bad {
  readonly field: string
  readonly value: string
  readonly reason: string
}

const formatter = SchemaIssue.makeFormatterStandardSchemaV1({
  leafHook: (issue) => issue._tag === "MissingKey" ? "is required" : SchemaIssue.defaultLeafHook(issue)
})

const keyOf = (segment: PropertyKey | { readonly key: PropertyKey }): PropertyKey =>
  Predicate.isObject(segment) && "key" in segment ? segment.key : segment

const fieldOf = (root: string, path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (out, key) => Predicate.isNumber(key) ? `${out}[${key}]` : out === "" ? String(key) : `${out}.${String(key)}`,
    root
  )

const isContainer = (u: unknown): u is Readonly<Record<PropertyKey, unknown>> =>
  Predicate.isObject(u) || Array.isArray(u)

const valueAt = (input: unknown, path: ReadonlyArray<PropertyKey>): unknown =>
  path.reduce<unknown>((at, key) => isContainer(at) ? at[key] : undefined, input)

/**
 * Decodes `input` with `schema`, or names its first bad field (under `root`,
 * its value as `show` renders it). Anything but an object or an array reads
 * as `{}`, so a missing options object names its first required field.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import * as Rules from "./Rules.ts"
 *
 * const Options = Schema.Struct({ capacity: Rules.PositiveNumber })
 * Rules.decode(Options, { capacity: -1 }, { root: "", show: String })
 * // Failure { field: "capacity", value: "-1", reason: "must be a positive finite number" }
 * ```
 *
 * @since 0.2.0
 */
export const decode = <T, E>(
  schema: Schema.Codec<T, E>,
  input: unknown,
  options: { readonly root: string; readonly show: (value: unknown) => string }
): Result.Result<T, Bad> => {
  const given = isContainer(input) ? input : {}
  const result = Schema.decodeUnknownResult(schema)(given)
  if (Result.isSuccess(result)) return Result.succeed(result.success)
  const [first] = formatter(result.failure.issue).issues
  const path = (first.path ?? []).map(keyOf)
  return Result.fail({
    field: fieldOf(options.root, path),
    value: options.show(valueAt(given, path)),
    reason: first.message
  })
}
