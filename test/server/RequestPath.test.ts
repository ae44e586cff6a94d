// The service's request path takes shortcuts for the common case (a valid
// body, a path already in normal form); each must answer exactly as the full
// way does. These tests compare the two over random inputs.
import { assert, describe, it } from "@effect/vitest"
import { Exit, Schema } from "effect"
import * as fc from "fast-check"
import * as ForwardAuth from "../../src/server/ForwardAuth.ts"
import * as Body from "../../src/server/internal/Body.ts"
import * as ServiceConfig from "../../src/server/ServiceConfig.ts"

// The shape of POST /v1/consume's body (`Routes`), with a short key limit.
const Request = Schema.Struct({
  key: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(8)),
  cost: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000_000 }))),
  policy: Schema.optionalKey(ServiceConfig.PolicyName)
})

// The full decoding: every error, unknown fields refused.
const full = (input: unknown) => {
  const exit = Schema.decodeUnknownExit(Request)(input, { errors: "all", onExcessProperty: "error" })
  return Exit.isSuccess(exit) ? { ok: exit.value } : { failed: true }
}

const value = fc.oneof(
  fc.string({ maxLength: 10 }),
  fc.integer({ min: -2, max: 2_000_000_000 }),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom("default", "per-ip", "bad name!", "")
)
const body = fc.oneof(
  fc.record(
    {
      key: value,
      cost: value,
      policy: value,
      extra: value,
      ["__proto__"]: value
    },
    { requiredKeys: [] }
  ),
  fc.array(value, { maxLength: 3 }),
  value
)

describe("Body.validateExit", () => {
  it("answers as the full decoding does, over random bodies", () => {
    const validate = Body.validateExit(Request)
    fc.assert(
      fc.property(body, (input) => {
        // through JSON, as a request's body arrives
        const parsed: unknown = JSON.parse(JSON.stringify(input) ?? "null")
        const exit = validate(parsed)
        const expected = full(parsed)
        if ("ok" in expected) {
          assert.isTrue(Exit.isSuccess(exit))
          if (Exit.isSuccess(exit)) assert.deepStrictEqual(exit.value, expected.ok)
        } else {
          assert.isTrue(Exit.isFailure(exit))
        }
      }),
      { numRuns: 5_000 }
    )
  })

  it("names every invalid and unknown field, as before", () => {
    const exit = Body.validateExit(Request)({ key: "", cost: 0, color: "red" })
    assert.isTrue(Exit.isFailure(exit))
    if (Exit.isFailure(exit)) {
      const message = String(exit.cause)
      assert.include(message, "key")
      assert.include(message, "cost")
      assert.include(message, "color")
    }
    // a symbol key is unknown to a JSON schema
    assert.isTrue(Exit.isFailure(Body.validateExit(Request)({ key: "a", [Symbol.for("x")]: 1 })))
  })
})

// normalizePath before its shortcut for paths already in normal form.
const reference = (path: string): string => {
  const decoded = path.replace(/%([0-9A-Fa-f]{2})/g, (encoded, hex: string) => {
    const c = String.fromCharCode(parseInt(hex, 16))
    return /[A-Za-z0-9\-._~]/.test(c) ? c : encoded.toUpperCase()
  }).replace(/\/{2,}/g, "/")
  const out: Array<string> = []
  const segments = decoded.split("/")
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i]
    if (segment === ".") {
      if (i === segments.length - 1) out.push("")
    } else if (segment === "..") {
      out.pop()
      if (i === segments.length - 1) out.push("")
    } else {
      out.push(segment)
    }
  }
  return "/" + out.join("/")
}

describe("ForwardAuth.normalizePath", () => {
  it("answers as the full normalization does, over random paths", () => {
    const path = fc.array(fc.constantFrom("/", ".", "%", "2", "e", "F", "a", "~", "-"), { maxLength: 16 }).map((
      chars
    ) => "/" + chars.join(""))
    fc.assert(
      fc.property(path, (p) => {
        assert.strictEqual(ForwardAuth.normalizePath(p), reference(p))
      }),
      { numRuns: 20_000 }
    )
    assert.strictEqual(ForwardAuth.normalizePath("/api//v1/../%75sers"), "/api/users")
    assert.strictEqual(ForwardAuth.normalizePath("/api/items/"), "/api/items/")
  })
})
