/**
 * Reading a request's JSON body, bounded and validated: a body larger than
 * the limit is refused before it is read (by `Content-Length`) or as soon as
 * it passes the limit (chunked); malformed JSON, wrong types, missing and
 * unknown fields are refused with every invalid field named. Nothing that
 * fails here reaches a bucket.
 *
 * @since 0.1.0
 */
import { ByteSize, Cause, Context, Effect, Exit, Option, Predicate, Schema, SchemaAST } from "effect"
import { HttpIncomingMessage, type HttpServerError, HttpServerRequest } from "effect/http"
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

// Node's body as text, read straight from the request stream when its length
// is declared and within the limit (the common case): about 7 µs per request
// less than effect's `request.text`, which caches the read through a fiber of
// its own, waits on `stream.finished` and copies the bytes twice. A chunked
// body, one already being read, or one the client sends only after a
// `100 Continue` takes effect's way.
const readNode = (source: IncomingMessage): Effect.Effect<string, MalformedJson> =>
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
      const text = chunks.length === 1 ? chunks[0].toString("utf8") : Buffer.concat(chunks).toString("utf8")
      // as TextDecoder does: a leading byte order mark is not part of the text
      resume(Exit.succeed(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text))
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
  const onText = (text: string): Effect.Effect<S["Type"], BodyError> => {
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
    ) return Effect.flatMap(readNode(source), onText)
    const ambient = fiber.getRef(HttpIncomingMessage.MaxBodySize)
    const text = ambient === maxBodySize
      ? request.text
      : Effect.provideService(request.text, HttpIncomingMessage.MaxBodySize, maxBodySize)
    return Effect.flatMap(Effect.catchTag(text, "HttpServerError", unreadable), onText)
  })
}
