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

// The size of a varint of a non-negative integer below 2^53.
const varintSize = (n: number): number => {
  if (n < 0x80) return 1
  if (n < 0x4000) return 2
  if (n < 0x200000) return 3
  if (n < 0x10000000) return 4
  let size = 5
  for (let rest = Math.floor(n / 0x800000000); rest > 0; rest = Math.floor(rest / 128)) size++
  return size
}

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

interface Sized {
  readonly status: DescriptorStatus
  readonly limitSize: number
  readonly durationSize: number
  readonly size: number
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
    while (n >= 0x80) {
      buffer[this.pos++] = (n % 128) | 0x80
      n = Math.floor(n / 128)
    }
    buffer[this.pos++] = n
  }
  string(s: string, size: number): void {
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
  let size = overall === 0 ? 0 : 1 + varintSize(overall)
  const statuses: Array<Sized> = []
  for (const status of response.statuses) {
    let limitSize = 0
    const limit = status.current_limit
    if (limit !== null) {
      const requests = unsigned(limit.requests_per_unit)
      const unit = responseUnits[limit.unit] ?? 0
      const name = utf8Length(limit.name)
      limitSize = (requests === 0 ? 0 : 1 + varintSize(requests)) + (unit === 0 ? 0 : 1 + varintSize(unit)) +
        (name === 0 ? 0 : 1 + varintSize(name) + name)
    }
    let durationSize = 0
    const duration = status.duration_until_reset
    if (duration !== null) {
      const seconds = unsigned(duration.seconds)
      const nanos = unsigned(duration.nanos)
      durationSize = (seconds === 0 ? 0 : 1 + varintSize(seconds)) + (nanos === 0 ? 0 : 1 + varintSize(nanos))
    }
    const code = codes[status.code] ?? 0
    const remaining = unsigned(status.limit_remaining)
    const statusSize = (code === 0 ? 0 : 1 + varintSize(code)) +
      (limit === null ? 0 : 1 + varintSize(limitSize) + limitSize) +
      (remaining === 0 ? 0 : 1 + varintSize(remaining)) +
      (duration === null ? 0 : 1 + varintSize(durationSize) + durationSize)
    statuses.push({ status, limitSize, durationSize, size: statusSize })
    size += 1 + varintSize(statusSize) + statusSize
  }
  const headers = response.response_headers_to_add
  const headerSizes: Array<number> = []
  for (const header of headers) {
    const k = utf8Length(header.key)
    const v = utf8Length(header.value)
    headerSizes.push(k, v)
    const headerSize = (k === 0 ? 0 : 1 + varintSize(k) + k) + (v === 0 ? 0 : 1 + varintSize(v) + v)
    size += 1 + varintSize(headerSize) + headerSize
  }

  const w = new Writer(size)
  if (overall !== 0) {
    w.byte(key(1, VARINT))
    w.varint(overall)
  }
  for (const { durationSize, limitSize, size, status } of statuses) {
    w.byte(key(2, BYTES))
    w.varint(size)
    const code = codes[status.code] ?? 0
    if (code !== 0) {
      w.byte(key(1, VARINT))
      w.varint(code)
    }
    const limit = status.current_limit
    if (limit !== null) {
      w.byte(key(2, BYTES))
      w.varint(limitSize)
      const requests = unsigned(limit.requests_per_unit)
      if (requests !== 0) {
        w.byte(key(1, VARINT))
        w.varint(requests)
      }
      const unit = responseUnits[limit.unit] ?? 0
      if (unit !== 0) {
        w.byte(key(2, VARINT))
        w.varint(unit)
      }
      const name = utf8Length(limit.name)
      if (name !== 0) {
        w.byte(key(3, BYTES))
        w.string(limit.name, name)
      }
    }
    const remaining = unsigned(status.limit_remaining)
    if (remaining !== 0) {
      w.byte(key(3, VARINT))
      w.varint(remaining)
    }
    const duration = status.duration_until_reset
    if (duration !== null) {
      w.byte(key(4, BYTES))
      w.varint(durationSize)
      const seconds = unsigned(duration.seconds)
      if (seconds !== 0) {
        w.byte(key(1, VARINT))
        w.varint(seconds)
      }
      const nanos = unsigned(duration.nanos)
      if (nanos !== 0) {
        w.byte(key(2, VARINT))
        w.varint(nanos)
      }
    }
  }
  for (let i = 0; i < headers.length; i++) {
    const { key: name, value } = headers[i]
    const k = headerSizes[2 * i]
    const v = headerSizes[2 * i + 1]
    w.byte(key(3, BYTES))
    w.varint((k === 0 ? 0 : 1 + varintSize(k) + k) + (v === 0 ? 0 : 1 + varintSize(v) + v))
    if (k !== 0) {
      w.byte(key(1, BYTES))
      w.string(name, k)
    }
    if (v !== 0) {
      w.byte(key(2, BYTES))
      w.string(value, v)
    }
  }
  if (w.pos !== size) throw new Error(`RateLimitResponse: wrote ${w.pos} bytes of ${size}`)
  return w.buffer
}
