/**
 * Reading a request's JSON body, bounded and validated: a body larger than
 * the limit is refused before it is read (by `Content-Length`) or as soon as
 * it passes the limit (chunked); malformed JSON, wrong types, missing and
 * unknown fields are refused with every invalid field named. Nothing that
 * fails here reaches a bucket.
 *
 * @since 0.1.0
 */
import { ByteSize, Cause, Context, Effect, Exit, Option, Predicate, Schema } from "effect"
import { HttpIncomingMessage, type HttpServerError, HttpServerRequest } from "effect/http"
import * as FieldErrors from "./FieldErrors.ts"

/**
 * The body (or the query) has invalid fields.
 *
 * @example
 * ```ts
 * import { Body } from "tollgate/server"
 *
 * new Body.InvalidBody({ errors: [{ field: "cost", value: "0", reason: "must be a positive integer" }] }).message
 * // "cost = 0: must be a positive integer"
 * ```
 *
 * @since 0.1.0
 */
export class InvalidBody extends Schema.TaggedError<InvalidBody>()("InvalidBody", {
  errors: Schema.Array(FieldErrors.FieldError)
}) {
  override get message(): string {
    return this.errors.map(FieldErrors.format).join("; ")
  }
}

/**
 * The body is not JSON.
 *
 * @example
 * ```ts
 * import { Body } from "tollgate/server"
 *
 * new Body.MalformedJson({ detail: "unexpected end of input" })
 * ```
 *
 * @since 0.1.0
 */
export class MalformedJson extends Schema.TaggedError<MalformedJson>()("MalformedJson", { detail: Schema.String }) {
  override get message(): string {
    return `request body is not valid JSON: ${this.detail}`
  }
}

/**
 * The body is larger than the limit.
 *
 * @example
 * ```ts
 * import { Body } from "tollgate/server"
 *
 * new Body.BodyTooLarge({ limit: 4096 }).message // "request body is larger than 4096 bytes"
 * ```
 *
 * @since 0.1.0
 */
export class BodyTooLarge extends Schema.TaggedError<BodyTooLarge>()("BodyTooLarge", { limit: Schema.Int }) {
  override get message(): string {
    return `request body is larger than ${this.limit} bytes`
  }
}

/**
 * The errors of reading a body.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import type { Body } from "tollgate/server"
 *
 * declare const read: Effect.Effect<unknown, Body.BodyError>
 * const status = read.pipe(Effect.as(200), Effect.catchTag("BodyTooLarge", () => Effect.succeed(413)))
 * ```
 *
 * @since 0.1.0
 */
export type BodyError = InvalidBody | MalformedJson | BodyTooLarge

const parseOptions = { onExcessProperty: "error", errors: "all" } as const

/**
 * Validates an already parsed value (a body, or the query's parameters).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Body } from "tollgate/server"
 *
 * const decode = Body.validate(Schema.Struct({ key: Schema.String }))
 * ```
 *
 * @since 0.1.0
 */
export const validate = <S extends Schema.Decoder<unknown>>(schema: S) => {
  const decode = Schema.decodeUnknownEffect(schema)
  return (input: unknown): Effect.Effect<S["Type"], InvalidBody, S["DecodingServices"]> =>
    decode(input, parseOptions).pipe(
      Effect.mapError((error) => new InvalidBody({ errors: FieldErrors.fromIssue(error.issue, input) }))
    )
}

/**
 * Validates an already parsed value at once, as an `Exit` (which is an
 * `Effect`): the request path's way, with no fiber step of its own.
 *
 * @example
 * ```ts
 * import { Exit, Schema } from "effect"
 * import { Body } from "tollgate/server"
 *
 * const decode = Body.validateExit(Schema.Struct({ key: Schema.String }))
 * Exit.isSuccess(decode({ key: "user:42" })) // true
 * ```
 *
 * @since 0.2.0
 */
export const validateExit = <S extends Schema.Decoder<unknown>>(schema: S) => {
  const decode = Schema.decodeUnknownExit(schema)
  return (input: unknown): Exit.Exit<S["Type"], InvalidBody> => {
    const exit = decode(input, parseOptions)
    if (Exit.isSuccess(exit)) return Exit.succeed(exit.value)
    const error = Cause.findErrorOption(exit.cause)
    return Option.isSome(error)
      ? Exit.fail(new InvalidBody({ errors: FieldErrors.fromIssue(error.value.issue, input) }))
      : exit as Exit.Exit<never>
  }
}

const emptyBody = Exit.fail(
  new InvalidBody({ errors: [{ field: "(body)", reason: "is empty: expected a JSON object" }] })
)

const parseJson = (text: string): unknown | MalformedJson => {
  try {
    return JSON.parse(text) as unknown
  } catch (cause) {
    const position = Predicate.isError(cause) ? /position (\d+)/.exec(cause.message)?.[1] : undefined
    return new MalformedJson({ detail: position === undefined ? "parse error" : `parse error at byte ${position}` })
  }
}

/**
 * Reads the current request's body as JSON of at most `maxBytes` bytes and
 * decodes it with the schema (unknown fields are errors).
 *
 * The limit is enforced by effect's `MaxBodySize` reference: the service sets
 * it once for every request, and it is set around this read when it holds
 * another limit.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Body } from "tollgate/server"
 *
 * const readKey = Body.json(Schema.Struct({ key: Schema.String }), 4096)
 * ```
 *
 * @since 0.1.0
 */
export const json = <S extends Schema.Decoder<unknown>>(
  schema: S,
  maxBytes: number
): Effect.Effect<S["Type"], BodyError, HttpServerRequest.HttpServerRequest> => {
  const decode = validateExit(schema)
  const maxBodySize = ByteSize.bytes(maxBytes)
  const tooLarge = Exit.fail(new BodyTooLarge({ limit: maxBytes }))
  const unreadable = (error: HttpServerError.HttpServerError): Effect.Effect<never, BodyTooLarge | MalformedJson> =>
    error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge"
      ? tooLarge
      : Exit.fail(new MalformedJson({ detail: "the body could not be read" }))
  const onText = (text: string): Effect.Effect<S["Type"], BodyError> => {
    if (text.trim() === "") return emptyBody
    const parsed = parseJson(text)
    return parsed instanceof MalformedJson ? Exit.fail(parsed) : decode(parsed)
  }
  // Written without a generator: this is every API call's path, and each
  // generator step shows in the profile.
  return Effect.withFiber((fiber) => {
    const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
    const declared = request.headers["content-length"]
    if (declared !== undefined && Number(declared) > maxBytes) return tooLarge
    const ambient = fiber.getRef(HttpIncomingMessage.MaxBodySize)
    const text = ambient === maxBodySize
      ? request.text
      : Effect.provideService(request.text, HttpIncomingMessage.MaxBodySize, maxBodySize)
    return Effect.flatMap(Effect.catchTag(text, "HttpServerError", unreadable), onText)
  })
}
