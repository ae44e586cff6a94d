/**
 * The two messages the rate limit service's server reads and writes, in
 * protobuf's wire format, written out for them: `RateLimitRequest` decoded
 * into the shape `@grpc/proto-loader` gives (field names as in the proto,
 * enums as their names, 64-bit integers as numbers, absent messages `null`,
 * absent scalars their defaults), and `RateLimitResponse` encoded from the
 * service's answer. A generic codec (protobuf.js, behind proto-loader) reads
 * the `.proto` files and walks a reflected description of every message on
 * each call; here each field is one branch of a loop, which is most of what
 * a call costs beyond grpc-js itself. The test suite checks both against
 * protobuf.js on random messages (test/envoy/Codec.test.ts).
 *
 * Decoding follows protobuf's rules: fields in any order, a scalar field seen
 * twice keeps its last value, a message field seen twice is merged, unknown fields
 * skipped by their wire type, varints of up to ten bytes (a `uint32` keeps
 * the low 32 bits). Truncated or malformed input throws, and grpc-js answers
 * the call with `INTERNAL`, as it does when protobuf.js throws.
 *
 * @since 0.3.0
 */
import type { DescriptorStatus, RateLimitRequest, RateLimitResponse } from "../RlsService.ts"

// -- decoding ---------------------------------------------------------------

const VARINT = 0
const FIXED64 = 1
const BYTES = 2
const FIXED32 = 5

// envoy.type.v3.RateLimitUnit, by number (a RateLimitOverride's unit).
const overrideUnits = ["UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR"]

class Reader {
  pos: number
  readonly end: number
  readonly bytes: Uint8Array
  constructor(bytes: Uint8Array, pos: number, end: number) {
    this.bytes = bytes
    this.pos = pos
    this.end = end
  }
  // A varint as a number: exact up to 2^53, the low bits beyond that lost as protobuf.js loses them
  // with `longs: Number`.
  varint(): number {
    const bytes = this.bytes
    let result = 0
    let scale = 1
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new Error("truncated varint")
      const b = bytes[this.pos++]
      result += (b & 0x7f) * scale
      if (b < 0x80) return result
      scale *= 128
    }
    throw new Error("varint longer than ten bytes")
  }
  // A uint32 field: the varint's low 32 bits (a negative int32 is written in ten bytes).
  uint32(): number {
    const bytes = this.bytes
    let result = 0
    let shift = 0
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new Error("truncated varint")
      const b = bytes[this.pos++]
      if (shift < 32) result |= (b & 0x7f) << shift
      shift += 7
      if (b < 0x80) return result >>> 0
    }
    throw new Error("varint longer than ten bytes")
  }
  // The end of a length-delimited field that starts here.
  delimited(): number {
    const length = this.varint()
    const end = this.pos + length
    if (end > this.end) throw new Error("truncated length-delimited field")
    return end
  }
  string(): string {
    const end = this.delimited()
    const s = utf8(this.bytes, this.pos, end)
    this.pos = end
    return s
  }
  skip(wireType: number): void {
    switch (wireType) {
      case VARINT:
        this.varint()
        return
      case FIXED64:
        this.pos += 8
        break
      case BYTES:
        this.pos = this.delimited()
        return
      case FIXED32:
        this.pos += 4
        break
      default:
        throw new Error(`unsupported wire type ${wireType}`)
    }
    if (this.pos > this.end) throw new Error("truncated fixed-width field")
  }
}

const decoder = new TextDecoder("utf-8")
const utf8 = (bytes: Uint8Array, start: number, end: number): string => {
  // Short ASCII (keys, domains, addresses) is read directly; anything else by the decoder,
  // which replaces invalid sequences as protobuf.js does.
  if (end - start <= 32) {
    let s = ""
    for (let i = start; i < end; i++) {
      const c = bytes[i]
      if (c >= 0x80) return decoder.decode(bytes.subarray(start, end))
      s += String.fromCharCode(c)
    }
    return s
  }
  return decoder.decode(bytes.subarray(start, end))
}

interface Entry {
  key: string
  value: string
}

interface Descriptor {
  entries: Array<Entry>
  limit: { requests_per_unit: number; unit: string } | null
  hits_addend: { value: number } | null
}

const readEntry = (r: Reader, end: number): Entry => {
  const entry: Entry = { key: "", value: "" }
  while (r.pos < end) {
    const tag = r.uint32()
    const field = tag >>> 3
    if (field === 1 && (tag & 7) === BYTES) entry.key = r.string()
    else if (field === 2 && (tag & 7) === BYTES) entry.value = r.string()
    else r.skip(tag & 7)
  }
  return entry
}

const readOverride = (
  r: Reader,
  end: number,
  into: { requests_per_unit: number; unit: string } | null
): { requests_per_unit: number; unit: string } => {
  const limit = into ?? { requests_per_unit: 0, unit: "UNKNOWN" }
  while (r.pos < end) {
    const tag = r.uint32()
    const field = tag >>> 3
    if (field === 1 && (tag & 7) === VARINT) limit.requests_per_unit = r.uint32()
    else if (field === 2 && (tag & 7) === VARINT) {
      // an enum is an int32: a number the proto does not name is kept as its digits
      const n = r.uint32() | 0
      limit.unit = overrideUnits[n] ?? String(n)
    } else r.skip(tag & 7)
  }
  return limit
}

const readUInt64Value = (r: Reader, end: number, into: { value: number } | null): { value: number } => {
  const wrapper = into ?? { value: 0 }
  while (r.pos < end) {
    const tag = r.uint32()
    if (tag >>> 3 === 1 && (tag & 7) === VARINT) wrapper.value = r.varint()
    else r.skip(tag & 7)
  }
  return wrapper
}

const readDescriptor = (r: Reader, end: number): Descriptor => {
  const descriptor: Descriptor = { entries: [], limit: null, hits_addend: null }
  while (r.pos < end) {
    const tag = r.uint32()
    const field = tag >>> 3
    if ((tag & 7) === BYTES && field >= 1 && field <= 3) {
      const inner = r.delimited()
      if (field === 1) descriptor.entries.push(readEntry(r, inner))
      else if (field === 2) descriptor.limit = readOverride(r, inner, descriptor.limit)
      else descriptor.hits_addend = readUInt64Value(r, inner, descriptor.hits_addend)
      r.pos = inner
    } else r.skip(tag & 7)
  }
  return descriptor
}

/**
 * Decodes a `RateLimitRequest` (grpc-js's `requestDeserialize`).
 *
 * @since 0.3.0
 */
export const decodeRequest = (bytes: Uint8Array): RateLimitRequest => {
  const r = new Reader(bytes, 0, bytes.length)
  let domain = ""
  const descriptors: Array<Descriptor> = []
  let hits = 0
  while (r.pos < r.end) {
    const tag = r.uint32()
    const field = tag >>> 3
    const wireType = tag & 7
    if (field === 1 && wireType === BYTES) domain = r.string()
    else if (field === 2 && wireType === BYTES) {
      const end = r.delimited()
      descriptors.push(readDescriptor(r, end))
      r.pos = end
    } else if (field === 3 && wireType === VARINT) hits = r.uint32()
    else r.skip(wireType)
  }
  return { domain, descriptors, hits_addend: hits }
}

// -- encoding ---------------------------------------------------------------

// RateLimitResponse.Code and RateLimitResponse.RateLimit.Unit, by name.
const codes: Record<string, number> = { UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 }
const responseUnits: Record<string, number> = {
  UNKNOWN: 0,
  SECOND: 1,
  MINUTE: 2,
  HOUR: 3,
  DAY: 4,
  MONTH: 5,
  YEAR: 6,
  WEEK: 7
}

// The size of a varint of a non-negative integer below 2^53: comparisons only (the counts the service
// sends are near 2^32, past the small integers V8 keeps unboxed).
const varintSize = (n: number): number =>
  n < 0x80
    ? 1
    : n < 0x4000
    ? 2
    : n < 0x200000
    ? 3
    : n < 0x10000000
    ? 4
    : n < 0x800000000
    ? 5
    : n < 0x40000000000
    ? 6
    : n < 0x2000000000000
    ? 7
    : 8

// The UTF-8 length of a string: counted here for ASCII (the headers, made fresh on every call,
// cost more to hand to the native byteLength than to count), by Buffer.byteLength otherwise.
const utf8Length = (s: string): number => {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) >= 0x80) return Buffer.byteLength(s, "utf8")
  return s.length
}

// A field's number and wire type, as the one byte it is for fields 1 to 15.
const key = (field: number, wireType: number): number => (field << 3) | wireType

// Non-negative integers below 2^53 only: what the service sends (counts, units, durations).
const unsigned = (n: number): number => (n > 0 && n <= Number.MAX_SAFE_INTEGER ? Math.floor(n) : 0)

// A varint field's size (none at its default, 0), and a length-delimited one's.
const varintField = (n: number): number => (n === 0 ? 0 : 1 + varintSize(n))
const bytesField = (length: number): number => (length === 0 ? 0 : 1 + varintSize(length) + length)

// A status's fields, worked out once for its size and again for its bytes.
interface Sized {
  readonly code: number
  readonly limit: boolean
  readonly requests: number
  readonly unit: number
  readonly name: string
  readonly nameLength: number
  readonly limitSize: number
  readonly remaining: number
  readonly duration: boolean
  readonly seconds: number
  readonly nanos: number
  readonly durationSize: number
  readonly size: number
}

const sizeStatus = (status: DescriptorStatus): Sized => {
  const code = codes[status.code] ?? 0
  const limit = status.current_limit
  const requests = limit === null ? 0 : unsigned(limit.requests_per_unit)
  const unit = limit === null ? 0 : responseUnits[limit.unit] ?? 0
  const name = limit === null ? "" : limit.name
  const nameLength = utf8Length(name)
  const limitSize = varintField(requests) + varintField(unit) + bytesField(nameLength)
  const remaining = unsigned(status.limit_remaining)
  const duration = status.duration_until_reset
  const seconds = duration === null ? 0 : unsigned(duration.seconds)
  const nanos = duration === null ? 0 : unsigned(duration.nanos)
  const durationSize = varintField(seconds) + varintField(nanos)
  const size = varintField(code) + (limit === null ? 0 : 1 + varintSize(limitSize) + limitSize) +
    varintField(remaining) + (duration === null ? 0 : 1 + varintSize(durationSize) + durationSize)
  return {
    code,
    limit: limit !== null,
    requests,
    unit,
    name,
    nameLength,
    limitSize,
    remaining,
    duration: duration !== null,
    seconds,
    nanos,
    durationSize,
    size
  }
}

class Writer {
  pos = 0
  readonly buffer: Buffer
  constructor(size: number) {
    this.buffer = Buffer.allocUnsafe(size)
  }
  byte(b: number): void {
    this.buffer[this.pos++] = b
  }
  varint(n: number): void {
    const buffer = this.buffer
    // above 2^31, bit operations would wrap: divide until it is small
    while (n > 0x7fffffff) {
      buffer[this.pos++] = (n % 128) | 0x80
      n = Math.floor(n / 128)
    }
    while (n >= 0x80) {
      buffer[this.pos++] = (n & 0x7f) | 0x80
      n >>>= 7
    }
    buffer[this.pos++] = n
  }
  varintField(field: number, n: number): void {
    if (n === 0) return
    this.byte(key(field, VARINT))
    this.varint(n)
  }
  string(field: number, s: string, size: number): void {
    if (size === 0) return
    this.byte(key(field, BYTES))
    this.varint(size)
    if (size === s.length) {
      // ASCII (what the service sends, but for a configured name): a byte per character
      const buffer = this.buffer
      for (let i = 0; i < size; i++) buffer[this.pos++] = s.charCodeAt(i)
    } else this.pos += this.buffer.write(s, this.pos, size, "utf8")
  }
}

/**
 * Encodes a `RateLimitResponse` (grpc-js's `responseSerialize`): the overall
 * code, the descriptors' statuses and the headers to add, which is all the
 * service answers. Fields at their default value are left out, as proto3
 * writes them.
 *
 * @since 0.3.0
 */
export const encodeResponse = (response: RateLimitResponse): Buffer => {
  const overall = codes[response.overall_code] ?? 0
  let size = varintField(overall)
  const statuses: Array<Sized> = []
  for (let i = 0; i < response.statuses.length; i++) {
    const sized = sizeStatus(response.statuses[i])
    statuses.push(sized)
    size += 1 + varintSize(sized.size) + sized.size
  }
  const headers = response.response_headers_to_add
  const lengths: Array<number> = []
  for (let i = 0; i < headers.length; i++) {
    const k = utf8Length(headers[i].key)
    const v = utf8Length(headers[i].value)
    const headerSize = bytesField(k) + bytesField(v)
    lengths.push(k, v, headerSize)
    size += 1 + varintSize(headerSize) + headerSize
  }

  const w = new Writer(size)
  w.varintField(1, overall)
  for (let i = 0; i < statuses.length; i++) {
    const s = statuses[i]
    w.byte(key(2, BYTES))
    w.varint(s.size)
    w.varintField(1, s.code)
    if (s.limit) {
      w.byte(key(2, BYTES))
      w.varint(s.limitSize)
      w.varintField(1, s.requests)
      w.varintField(2, s.unit)
      w.string(3, s.name, s.nameLength)
    }
    w.varintField(3, s.remaining)
    if (s.duration) {
      w.byte(key(4, BYTES))
      w.varint(s.durationSize)
      w.varintField(1, s.seconds)
      w.varintField(2, s.nanos)
    }
  }
  for (let i = 0; i < headers.length; i++) {
    w.byte(key(3, BYTES))
    w.varint(lengths[3 * i + 2])
    w.string(1, headers[i].key, lengths[3 * i])
    w.string(2, headers[i].value, lengths[3 * i + 1])
  }
  if (w.pos !== size) throw new Error(`RateLimitResponse: wrote ${w.pos} bytes of ${size}`)
  return w.buffer
}
