// The gRPC server's own codec of RateLimitRequest and RateLimitResponse,
// against protobuf.js (through @grpc/proto-loader, on the vendored .proto
// files) on random messages: a request written with unknown fields, fields
// out of order and fields repeated decodes as protobuf.js decodes it, and a
// response encoded here decodes (by protobuf.js) to what protobuf.js's own
// encoding of it decodes to.
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { decodeRequest, encodeResponse } from "../../src/envoy/internal/codec.ts"
import { loadDefinition, type MethodDefinition } from "../../src/envoy/RlsServer.ts"
import type { RateLimitResponse } from "../../src/envoy/RlsService.ts"

const method = (() => {
  const definition = loadDefinition()
  if (!("ShouldRateLimit" in definition)) throw new Error("no RateLimitService definition")
  return definition.ShouldRateLimit as MethodDefinition
})()

// -- a raw protobuf writer, to write what protobuf.js's encoder never does ----

type Field =
  | { readonly field: number; readonly varint: bigint }
  | { readonly field: number; readonly bytes: Uint8Array }
  | { readonly field: number; readonly fixed32: number }
  | { readonly field: number; readonly fixed64: bigint }

const varint = (n: bigint): Array<number> => {
  const out: Array<number> = []
  let v = BigInt.asUintN(64, n)
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80)
    v >>= 7n
  }
  out.push(Number(v))
  return out
}

const write = (fields: ReadonlyArray<Field>): Uint8Array => {
  const out: Array<number> = []
  for (const f of fields) {
    if ("varint" in f) out.push(...varint(BigInt(f.field << 3)), ...varint(f.varint))
    else if ("bytes" in f) {
      out.push(...varint(BigInt((f.field << 3) | 2)), ...varint(BigInt(f.bytes.length)), ...f.bytes)
    } else if ("fixed32" in f) {
      out.push(...varint(BigInt((f.field << 3) | 5)))
      for (let i = 0; i < 4; i++) out.push((f.fixed32 >>> (8 * i)) & 0xff)
    } else {
      out.push(...varint(BigInt((f.field << 3) | 1)))
      for (let i = 0n; i < 8n; i++) out.push(Number((f.fixed64 >> (8n * i)) & 0xffn))
    }
  }
  return Uint8Array.from(out)
}

const text = (s: string) => new TextEncoder().encode(s)

// Unknown fields (numbers the message does not use), of every wire type.
const unknown = (used: number): fc.Arbitrary<Field> =>
  fc.integer({ min: used + 1, max: 2000 }).chain((field) =>
    fc.oneof(
      fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }).map((v): Field => ({ field, varint: v })),
      fc.uint8Array({ maxLength: 12 }).map((bytes): Field => ({ field, bytes })),
      fc.integer({ min: 0, max: 0xffffffff }).map((v): Field => ({ field, fixed32: v })),
      fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }).map((v): Field => ({ field, fixed64: v }))
    )
  )

// Fields, some unknown ones among them, in any order.
const message = (known: fc.Arbitrary<ReadonlyArray<Field>>, used: number) =>
  fc.tuple(known, fc.array(unknown(used), { maxLength: 3 })).chain(([fields, extra]) =>
    fc.shuffledSubarray([...fields, ...extra], { minLength: fields.length + extra.length })
  )

const str = fc.string({ unit: "grapheme", maxLength: 40 })
// uint32 fields, sometimes written as a negative int32 is (ten bytes; the low 32 bits are kept).
// (protobuf.js misreads a varint of six to nine bytes in a 32-bit field, which no encoder writes.)
const uint32 = fc.oneof(
  fc.integer({ min: 0, max: 0xffffffff }).map(BigInt),
  fc.integer({ min: -(2 ** 31), max: -1 }).map((n) => BigInt.asUintN(64, BigInt(n)))
)

const entry = message(
  fc.tuple(str, str).map(([key, value]): ReadonlyArray<Field> => [
    { field: 1, bytes: text(key) },
    { field: 2, bytes: text(value) }
  ]),
  2
)
const override = message(
  fc.tuple(uint32, fc.integer({ min: 0, max: 9 })).map(([requests, unit]): ReadonlyArray<Field> => [
    { field: 1, varint: requests },
    { field: 2, varint: BigInt(unit) }
  ]),
  2
)
const uint64Value = message(
  fc.bigInt({ min: 0n, max: 1n << 52n }).map((value): ReadonlyArray<Field> => [{ field: 1, varint: value }]),
  1
)
const descriptor = message(
  fc.tuple(
    fc.array(entry, { maxLength: 4 }),
    fc.option(override),
    fc.option(uint64Value),
    fc.option(override) // a message field seen twice is merged
  ).map(([entries, limit, hits, again]): ReadonlyArray<Field> => [
    ...entries.map((e): Field => ({ field: 1, bytes: write(e) })),
    ...(limit === null ? [] : [{ field: 2, bytes: write(limit) }]),
    ...(hits === null ? [] : [{ field: 3, bytes: write(hits) }]),
    ...(again === null ? [] : [{ field: 2, bytes: write(again) }])
  ]),
  3
)
const request = message(
  fc.tuple(str, fc.array(descriptor, { maxLength: 4 }), fc.option(uint32), fc.option(str)).map((
    [domain, descriptors, hits, domainAgain]
  ): ReadonlyArray<Field> => [
    { field: 1, bytes: text(domain) },
    ...descriptors.map((d): Field => ({ field: 2, bytes: write(d) })),
    ...(hits === null ? [] : [{ field: 3, varint: hits }]),
    ...(domainAgain === null ? [] : [{ field: 1, bytes: text(domainAgain) }]) // the last value wins
  ]),
  3
)

// protobuf.js keeps an enum number the proto does not name as a number; the codec as its digits.
const normalize = (decoded: any) => ({
  ...decoded,
  descriptors: decoded.descriptors.map((d: any) => ({
    ...d,
    limit: d.limit === null ? null : { ...d.limit, unit: String(d.limit.unit) }
  }))
})

const response: fc.Arbitrary<RateLimitResponse> = fc.record({
  overall_code: fc.constantFrom("OK" as const, "OVER_LIMIT" as const),
  statuses: fc.array(
    fc.record({
      code: fc.constantFrom("OK" as const, "OVER_LIMIT" as const),
      current_limit: fc.option(fc.record({
        name: str,
        requests_per_unit: fc.integer({ min: 0, max: 0xffffffff }),
        unit: fc.constantFrom("UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "YEAR")
      })),
      limit_remaining: fc.integer({ min: 0, max: 0xffffffff }),
      duration_until_reset: fc.option(fc.record({
        seconds: fc.integer({ min: 0, max: 2 ** 40 }),
        nanos: fc.integer({ min: 0, max: 999_999_999 })
      }))
    }),
    { maxLength: 4 }
  ),
  response_headers_to_add: fc.array(fc.record({ key: str, value: str }), { maxLength: 4 })
})

describe("the gRPC server's codec, against protobuf.js", () => {
  it("decodes a RateLimitRequest as protobuf.js does: unknown fields skipped, any order, repeats", () => {
    fc.assert(
      fc.property(request, (fields) => {
        const bytes = Buffer.from(write(fields))
        assert.deepStrictEqual(decodeRequest(bytes), normalize(method.requestDeserialize(bytes)))
      }),
      { numRuns: 2000 }
    )
  })

  it("decodes what protobuf.js encodes, Envoy's request among them", () => {
    const envoy = {
      domain: "edge",
      descriptors: [
        { entries: [{ key: "remote_address", value: "203.0.113.7" }, { key: "path", value: "/api/items" }] },
        { entries: [{ key: "tenant", value: "acme" }], limit: { requests_per_unit: 5, unit: "MINUTE" } },
        { entries: [{ key: "user", value: "ü" }], hits_addend: { value: 3 } }
      ],
      hits_addend: 2
    }
    const bytes = method.requestSerialize(envoy)
    assert.deepStrictEqual(decodeRequest(bytes), method.requestDeserialize(bytes))
    assert.deepStrictEqual(decodeRequest(bytes), {
      domain: "edge",
      descriptors: [
        { entries: envoy.descriptors[0].entries, limit: null, hits_addend: null },
        { entries: envoy.descriptors[1].entries, limit: { requests_per_unit: 5, unit: "MINUTE" }, hits_addend: null },
        { entries: envoy.descriptors[2].entries, limit: null, hits_addend: { value: 3 } }
      ],
      hits_addend: 2
    })
  })

  it("encodes a RateLimitResponse that protobuf.js reads as it reads its own encoding", () => {
    fc.assert(
      fc.property(response, (r) => {
        const ours = encodeResponse(r)
        assert.deepStrictEqual(
          method.responseDeserialize(ours),
          method.responseDeserialize(method.responseSerialize(r))
        )
      }),
      { numRuns: 2000 }
    )
  })

  it("rejects a message cut short anywhere but between two fields (grpc-js answers INTERNAL)", () => {
    // protobuf.js reads a string cut short as the bytes that are there; the codec refuses it, as
    // protobuf's C++ and Go readers do.
    const bytes = method.requestSerialize({ domain: "edge", descriptors: [{ entries: [{ key: "k", value: "v" }] }] })
    const fieldEnds = new Map([[6, { domain: "edge", descriptors: [], hits_addend: 0 }]])
    for (let cut = 1; cut < bytes.length; cut++) {
      const truncated = bytes.subarray(0, cut)
      const expected = fieldEnds.get(cut)
      if (expected !== undefined) assert.deepStrictEqual(decodeRequest(truncated), expected)
      else assert.throws(() => decodeRequest(truncated), /truncated/, `cut at ${cut}`)
    }
  })
})
