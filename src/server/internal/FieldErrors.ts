/**
 * Validation failures as a list of `field = value: reason` entries, the shape
 * every error of the service takes (bad configuration at start, bad request
 * bodies): the field as a path (`policies.per-ip.capacity`, `rules[1].policy`),
 * the offending value as short JSON (never a secret: callers say which fields
 * must not be shown), and what was expected.
 *
 * @since 0.1.0
 */
import { Predicate, Schema, SchemaIssue } from "effect"

/**
 * One invalid field.
 *
 * @example
 * ```ts
 * import type * as FieldErrors from "./FieldErrors.ts"
 *
 * const error: FieldErrors.FieldError = { field: "cost", value: "0", reason: "must be a positive integer" }
 * ```
 *
 * @since 0.1.0
 */
export const FieldError = Schema.Struct({
  field: Schema.String,
  value: Schema.optionalKey(Schema.String),
  reason: Schema.String
})

/**
 * One invalid field.
 *
 * @since 0.1.0
 */
export type FieldError = typeof FieldError.Type

/**
 * Shows a value as JSON, cut to 64 characters.
 *
 * @example
 * ```ts
 * import * as FieldErrors from "./FieldErrors.ts"
 *
 * FieldErrors.show("x".repeat(100)) // "\"xxxx…\" (100 characters)"
 * ```
 *
 * @since 0.1.0
 */
export const show = (value: unknown): string => {
  if (Predicate.isString(value)) {
    return value.length > 64
      ? `${JSON.stringify(value.slice(0, 48) + "…")} (${value.length} characters)`
      : JSON.stringify(value)
  }
  if (Predicate.isNumber(value) || value === undefined) return String(value)
  try {
    const json = JSON.stringify(value)
    if (json === undefined) return typeof value
    return json.length > 64 ? json.slice(0, 63) + "…" : json
  } catch {
    return typeof value
  }
}

/**
 * Formats a path: `policies.per-ip.capacity`, `rules[1].policy`.
 *
 * @example
 * ```ts
 * import * as FieldErrors from "./FieldErrors.ts"
 *
 * FieldErrors.formatPath(["rules", 1, "policy"]) // "rules[1].policy"
 * ```
 *
 * @since 0.1.0
 */
export const formatPath = (path: ReadonlyArray<PropertyKey>, root?: string): string => {
  let out = root ?? ""
  for (const segment of path) {
    if (Predicate.isNumber(segment)) out += `[${segment}]`
    else out += out === "" ? String(segment) : `.${String(segment)}`
  }
  return out === "" ? "(body)" : out
}

const valueAt = (
  input: unknown,
  path: ReadonlyArray<PropertyKey>
): { readonly found: boolean; readonly value: unknown } => {
  let current: unknown = input
  for (const segment of path) {
    if (Predicate.isObject(current) && Object.hasOwn(current, segment)) {
      current = (current as Record<PropertyKey, unknown>)[segment]
    } else {
      return { found: false, value: undefined }
    }
  }
  return { found: true, value: current }
}

const lowerFirst = (s: string): string => s.length === 0 ? s : s[0].toLowerCase() + s.slice(1)

const formatter = SchemaIssue.makeFormatterStandardSchemaV1({
  leafHook: (issue) => {
    switch (issue._tag) {
      case "MissingKey":
        return "is required"
      case "UnexpectedKey":
        return "is not a known field"
      default:
        return lowerFirst(SchemaIssue.defaultLeafHook(issue))
    }
  }
})

/**
 * The invalid fields of a schema failure, with each value looked up in the
 * input. `root` is prepended to every path; values of `secret` fields are
 * never shown, and values of `redact` fields are shown as their function
 * makes them (a URL without its password).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import * as FieldErrors from "./FieldErrors.ts"
 *
 * const input = { cost: 0 }
 * const exit = Schema.decodeUnknownExit(Schema.Struct({ cost: Schema.Int.check(Schema.isGreaterThan(0)) }))(input)
 * // FieldErrors.fromIssue(issue, input) -> [{ field: "cost", value: "0", reason: "expected a value greater than 0" }]
 * ```
 *
 * @since 0.1.0
 */
export const fromIssue = (
  issue: SchemaIssue.Issue,
  input: unknown,
  options?: {
    readonly root?: string | undefined
    readonly secret?: ReadonlyArray<string> | undefined
    readonly redact?: Readonly<Record<string, (value: unknown) => unknown>> | undefined
  }
): Array<FieldError> =>
  formatter(issue).issues.map(({ message, path }) => {
    const keys = (path ?? []).map((p) => (Predicate.isObject(p) && "key" in p ? p.key : p) as PropertyKey)
    const field = formatPath(keys, options?.root)
    const at = valueAt(input, keys)
    const reason = lowerFirst(message)
    if (!at.found || options?.secret?.includes(field) === true) return { field, reason }
    const redact = options?.redact !== undefined && Object.hasOwn(options.redact, field)
      ? options.redact[field]
      : undefined
    return { field, value: show(redact === undefined ? at.value : redact(at.value)), reason }
  })

/**
 * `field = value: reason`, or `field: reason` when there is no value to show.
 *
 * @example
 * ```ts
 * import * as FieldErrors from "./FieldErrors.ts"
 *
 * FieldErrors.format({ field: "cost", value: "0", reason: "must be a positive integer" }) // "cost = 0: must be a positive integer"
 * ```
 *
 * @since 0.1.0
 */
export const format = (error: FieldError): string =>
  error.value === undefined ? `${error.field}: ${error.reason}` : `${error.field} = ${error.value}: ${error.reason}`
