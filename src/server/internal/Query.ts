/**
 * A request's query string, decoded strictly: a parameter whose
 * percent-encoding is malformed or is not UTF-8 is refused, naming it. A
 * lenient decoding (the router's keeps a malformed value as written, and
 * others replace invalid bytes with U+FFFD) would let different byte
 * strings name the same key: `key=a%FF` and `key=a%25FF` would both be the
 * key `a%FF`.
 *
 * @since 0.3.0
 */
import { Exit } from "effect"
import { InvalidBody } from "./Body.ts"
import * as FieldErrors from "./FieldErrors.ts"

const decode = (text: string): string | undefined => {
  const spaced = text.includes("+") ? text.replaceAll("+", " ") : text
  if (!spaced.includes("%")) return spaced
  try {
    // decodeURIComponent refuses what is not UTF-8 (and encoded surrogates), as it must here.
    return decodeURIComponent(spaced)
  } catch {
    return undefined
  }
}

const reason = "is not valid percent-encoded UTF-8"

/**
 * The parameters of a URL's query (a repeated one as an array, in order), or
 * the parameters that could not be decoded. `parsed`, the router's lenient
 * parameters of the same URL, is returned as it is when nothing in the query
 * is percent-encoded (the two decodings agree then).
 *
 * @example
 * ```ts
 * import * as Query from "./Query.ts"
 *
 * Query.parse("/v1/peek?key=user%3A42&cost=2") // Exit.succeed({ key: "user:42", cost: "2" })
 * Query.parse("/v1/peek?key=a%FF") // Exit.fail(InvalidBody: key = "a%FF": is not valid percent-encoded UTF-8)
 * ```
 *
 * @since 0.3.0
 */
export const parse = (
  url: string,
  parsed?: Readonly<Record<string, string | Array<string>>>
): Exit.Exit<Readonly<Record<string, string | Array<string>>>, InvalidBody> => {
  const out: Record<string, string | Array<string>> = Object.create(null)
  const start = url.indexOf("?")
  if (start < 0) return Exit.succeed(out)
  // Nothing percent-encoded (the common case): the router's parameters are exact.
  if (parsed !== undefined && url.indexOf("%", start) < 0) return Exit.succeed(parsed)
  const errors: Array<FieldErrors.FieldError> = []
  for (const pair of url.slice(start + 1).split("&")) {
    if (pair === "") continue
    const eq = pair.indexOf("=")
    const rawName = eq < 0 ? pair : pair.slice(0, eq)
    const rawValue = eq < 0 ? "" : pair.slice(eq + 1)
    const name = decode(rawName)
    if (name === undefined) {
      const field = rawName.length > 64 ? rawName.slice(0, 48) + "…" : rawName
      errors.push({ field, reason: `(the parameter's name) ${reason}` })
      continue
    }
    const value = decode(rawValue)
    if (value === undefined) {
      errors.push({ field: name, value: FieldErrors.show(rawValue), reason })
      continue
    }
    const previous = out[name]
    if (previous === undefined) out[name] = value
    else if (Array.isArray(previous)) previous.push(value)
    else out[name] = [previous, value]
  }
  return errors.length === 0 ? Exit.succeed(out) : Exit.fail(new InvalidBody({ errors }))
}
