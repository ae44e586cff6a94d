/**
 * The lean entry point's binary reply (a lean call of several keys over a
 * client that hands bulk strings back as bytes): little-endian doubles,
 * five a key (six with a shaper's delay), read once for the whole call.
 * No server needed; the conformance suite holds the scripts' side.
 */
import { assert, describe, it } from "@effect/vitest"
import { decodeLean, deferred, leanValues } from "../../src/redis/internal/codec.ts"

// The bytes of `values` as little-endian doubles, at `offset` in a larger buffer (as a client's slice is).
const bytesOf = (values: ReadonlyArray<number>, offset: number): Uint8Array => {
  const buffer = new ArrayBuffer(offset + 8 * values.length + 5)
  const view = new DataView(buffer, offset)
  values.forEach((v, i) => view.setFloat64(8 * i, v, true))
  return new Uint8Array(buffer, offset, 8 * values.length)
}

describe("the lean entry point's binary reply", () => {
  it("reads every double exactly, wherever the bytes sit in their buffer", () => {
    const values = [1, -0, Infinity, -Infinity, 0.1, 2 ** 53 + 2, -1, 1e300]
    for (const offset of [0, 3, 8]) {
      const read = leanValues(bytesOf(values, offset))
      assert.instanceOf(read, Float64Array)
      const got = Array.from(read as Float64Array)
      assert.strictEqual(got.length, values.length)
      got.forEach((v, i) => assert.isTrue(Object.is(v, values[i]), `value ${i}: ${v}, not ${values[i]}`))
    }
  })

  it("a reply whose length is not whole doubles is not one; any other reply passes as it is", () => {
    assert.isUndefined(leanValues(new Uint8Array(7)))
    const array = [1, 4, 0, 100, 5]
    assert.strictEqual(leanValues(array), array)
  })

  it("each key's reply is read from its place in the call's values", () => {
    const values = leanValues(bytesOf([1, 4, 0, 100, 5, 0, 0, 250, 1000, 5, -1, 0, 0, 0, 0], 0))
    assert.deepStrictEqual(decodeLean(values, 0, 3), [{
      allowed: true,
      remaining: 4,
      retryAfter: 0,
      resetAfter: 100,
      limit: 5
    }])
    assert.deepStrictEqual(decodeLean(values, 1, 3), [{
      allowed: false,
      remaining: 0,
      retryAfter: 250,
      resetAfter: 1000,
      limit: 5
    }])
    assert.strictEqual(decodeLean(values, 2, 3), deferred)
    // the wrong number of keys for it: not a reply
    assert.isUndefined(decodeLean(values, 0, 2))
  })
})
