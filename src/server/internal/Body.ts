/**
 * Reading a request's JSON body, bounded and validated: a body larger than
 * the limit is refused before it is read (by `Content-Length`) or as soon as
 * it passes the limit (chunked); a body that is not UTF-8, malformed JSON,
 * wrong types, missing and unknown fields are refused with every invalid
 * field named. Nothing that fails here reaches a bucket.
 *
 * @since 0.1.0
 */
import { ByteSize, Cause, Context, Effect, Exit, Option, Predicate, Schema, SchemaAST } from "effect"
import { HttpIncomingMessage, type HttpServerError, HttpServerRequest } from "effect/http"
import { isUtf8 } from "node:buffer"
import { IncomingMessage } from "node:http"
import * as FieldErrors from "./FieldErrors.ts"

/**
 * The body (or the query) has invalid fields.
 *
 * @example
 * ```ts
 * import * as Body from "./Body.ts"
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
 * import * as Body from "./Body.ts"
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
 * import * as Body from "./Body.ts"
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
 * import type * as Body from "./Body.ts"
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
 * import * as Body from "./Body.ts"
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
 * import * as Body from "./Body.ts"
 *
 * const decode = Body.validateExit(Schema.Struct({ key: Schema.String }))
 * Exit.isSuccess(decode({ key: "user:42" })) // true
 * ```
 *
 * @since 0.2.0
 */
export const validateExit = <S extends Schema.Decoder<unknown>>(schema: S) => {
  const decode = Schema.decodeUnknownExit(schema)
  const full = (input: unknown): Exit.Exit<S["Type"], InvalidBody> => {
    const exit = decode(input, parseOptions)
    if (Exit.isSuccess(exit)) return Exit.succeed(exit.value)
    const error = Cause.findErrorOption(exit.cause)
    return Option.isSome(error)
      ? Exit.fail(new InvalidBody({ errors: FieldErrors.fromIssue(error.value.issue, input) }))
      : exit as Exit.Exit<never>
  }
  const fields = fieldsOf(schema.ast)
  if (fields === undefined) return full
  // The common case, a valid object, is decoded under the default options
  // (Schema's own fast path for a struct: about 1 µs less than with
  // `onExcessProperty` and `errors: "all"`), with unknown fields checked here.
  // Anything else is decoded again under the full options, so the answer and
  // its errors are exactly the full decoding's.
  return (input: unknown): Exit.Exit<S["Type"], InvalidBody> => {
    if (typeof input === "object" && input !== null && !Array.isArray(input)) {
      const exit = decode(input)
      if (Exit.isSuccess(exit) && onlyKnown(input, fields)) return Exit.succeed(exit.value)
    }
    return full(input)
  }
}

// The field names of a plain struct (no index signatures, no renamed keys),
// or undefined.
const fieldsOf = (ast: SchemaAST.AST): ReadonlySet<PropertyKey> | undefined =>
  SchemaAST.isObjects(ast) && ast.indexSignatures.length === 0 && ast.encoding === undefined
    ? new Set(ast.propertySignatures.map((p) => p.name))
    : undefined

// Whether every own enumerable string key is a field and there are no symbol
// keys (false only sends the input to the full decoding, which decides).
// Object.keys costs a tenth of Reflect.ownKeys with an enumerability check.
const onlyKnown = (input: object, fields: ReadonlySet<PropertyKey>): boolean => {
  for (const key of Object.keys(input)) if (!fields.has(key)) return false
  return Object.getOwnPropertySymbols(input).length === 0
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

// Node's body as bytes, read straight from the request stream when its length
// is declared and within the limit (the common case): about 7 µs per request
// less than effect's `request.text`, which caches the read through a fiber of
// its own, waits on `stream.finished` and copies the bytes twice. A chunked
// body, one already being read, or one the client sends only after a
// `100 Continue` takes effect's way.
const readNode = (source: IncomingMessage): Effect.Effect<Buffer, MalformedJson> =>
  Effect.callback((resume) => {
    const chunks: Array<Buffer> = []
    const onData = (chunk: Buffer) => {
      chunks.push(chunk)
    }
    const cleanup = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onFailure)
      source.off("close", onFailure)
    }
    const onEnd = () => {
      cleanup()
      resume(Exit.succeed(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)))
    }
    // an error, or the connection closed before the body's end
    const onFailure = () => {
      cleanup()
      resume(unreadableBody)
    }
    source.on("data", onData)
    source.on("end", onEnd)
    source.on("error", onFailure)
    source.on("close", onFailure)
    return Effect.sync(cleanup)
  })

// As TextDecoder does: a leading byte order mark is not part of the text.
const toText = (bytes: Buffer): string => {
  const text = bytes.toString("utf8")
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text
}

const notUtf8 = "is not valid UTF-8 (the value shows each invalid byte sequence as U+FFFD)"

// Where the invalid bytes of a body that is not UTF-8 are: the fields whose
// value (or name) holds a U+FFFD once the body is decoded leniently. A
// U+FFFD sent as valid UTF-8 is named too, beside the invalid one: rare, and
// the request is refused either way.
const invalidFields = (value: unknown, path: Array<PropertyKey>, out: Array<FieldErrors.FieldError>): void => {
  if (out.length >= 16) return
  if (Predicate.isString(value)) {
    if (value.includes("\uFFFD")) {
      out.push({ field: FieldErrors.formatPath(path), value: FieldErrors.show(value), reason: notUtf8 })
    }
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => invalidFields(item, [...path, i], out))
  } else if (Predicate.isObject(value)) {
    for (const [name, item] of Object.entries(value)) {
      if (name.includes("\uFFFD")) {
        out.push({ field: FieldErrors.formatPath([...path, name]), reason: `(the field's name) ${notUtf8}` })
      }
      invalidFields(item, [...path, name], out)
    }
  }
}

// A body that is not UTF-8 is refused, naming the fields that hold the
// invalid bytes: decoded leniently, different byte strings would be one key.
const invalidUtf8 = (bytes: Buffer): Exit.Exit<never, InvalidBody> => {
  const parsed = parseJson(toText(bytes))
  const errors: Array<FieldErrors.FieldError> = []
  if (!(parsed instanceof MalformedJson)) invalidFields(parsed, [], errors)
  return Exit.fail(new InvalidBody({ errors: errors.length > 0 ? errors : [{ field: "(body)", reason: notUtf8 }] }))
}

const unreadableBody = Exit.fail(new MalformedJson({ detail: "the body could not be read" }))

/**
 * Reads the current request's body as JSON of at most `maxBytes` bytes and
 * decodes it with the schema (unknown fields are errors).
 *
 * A body whose `Content-Length` is over the limit is refused before it is
 * read; one within it is read straight from Node's request stream. A chunked
 * one (or one the client sends after `100 Continue`) is read by effect's
 * reader, bounded by its `MaxBodySize` reference: the service sets it once for
 * every request, and it is set around this read when it holds another limit.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import * as Body from "./Body.ts"
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
    error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge" ? tooLarge : unreadableBody
  const onBytes = (bytes: Buffer): Effect.Effect<S["Type"], BodyError> => {
    if (!isUtf8(bytes)) return invalidUtf8(bytes)
    const text = toText(bytes)
    const parsed = parseJson(text)
    if (parsed instanceof MalformedJson) return text.trim() === "" ? emptyBody : Exit.fail(parsed)
    return decode(parsed)
  }
  // Written without a generator: this is every API call's path, and each
  // generator step shows in the profile.
  return Effect.withFiber((fiber) => {
    const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
    const source = request.source
    const node = source instanceof IncomingMessage
    // Node's own record: effect's `request.headers` copies it on first use.
    const declared = node ? source.headers["content-length"] : request.headers["content-length"]
    if (declared !== undefined && Number(declared) > maxBytes) return tooLarge
    // `Expect: 100-continue` is answered by effect's reader, which sends the 100 first.
    if (
      node && declared !== undefined && source.headers.expect === undefined && !source.readableDidRead &&
      !source.destroyed
    ) return Effect.flatMap(readNode(source), onBytes)
    const ambient = fiber.getRef(HttpIncomingMessage.MaxBodySize)
    // The bytes, not effect's `request.text`, whose decoding turns invalid UTF-8 into U+FFFD.
    const bytes = ambient === maxBodySize
      ? request.arrayBuffer
      : Effect.provideService(request.arrayBuffer, HttpIncomingMessage.MaxBodySize, maxBodySize)
    return Effect.flatMap(
      Effect.catchTag(bytes, "HttpServerError", unreadable),
      (buffer) => onBytes(Buffer.from(buffer))
    )
  })
}
