/**
 * Redis Cluster's hash slot of a key: CRC16 (XMODEM) of the key's UTF-8
 * bytes, or of its hash tag (the part between the first `{` and the next
 * `}`, when that part is not empty), modulo 16384. A script may only touch
 * keys of one slot, so the store checks the keys of a call over several
 * keys before it sends it.
 *
 * @since 0.2.0
 */

const table = (() => {
  const t = new Uint16Array(256)
  for (let i = 0; i < 256; i++) {
    let crc = i << 8
    for (let j = 0; j < 8; j++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
    t[i] = crc
  }
  return t
})()

const encoder = new TextEncoder()

/**
 * The part of `key` that Redis Cluster hashes: its hash tag, or all of it.
 *
 * @example
 * ```ts
 * import { hashed } from "./slot.ts"
 *
 * hashed("tollgate:{org:a}:user:1") // "org:a"
 * hashed("tollgate:{}:x") // "tollgate:{}:x"
 * ```
 *
 * @since 0.2.0
 */
export const hashed = (key: string): string => {
  const open = key.indexOf("{")
  if (open === -1) return key
  const close = key.indexOf("}", open + 1)
  return close === -1 || close === open + 1 ? key : key.slice(open + 1, close)
}

/**
 * The hash slot of `key` (0 to 16383), as `CLUSTER KEYSLOT` gives it.
 *
 * @example
 * ```ts
 * import { slot } from "./slot.ts"
 *
 * slot("123456789") // 12739
 * ```
 *
 * @since 0.2.0
 */
export const slot = (key: string): number => {
  const part = hashed(key)
  let crc = 0
  // ASCII, the usual key, is its own UTF-8: no bytes to allocate (a slot is
  // computed for every call on a cluster)
  for (let i = 0; i < part.length; i++) {
    const code = part.charCodeAt(i)
    if (code > 0x7f) return slotOfBytes(part)
    crc = ((crc << 8) & 0xffff) ^ table[((crc >> 8) ^ code) & 0xff]
  }
  return crc & 0x3fff
}

const slotOfBytes = (part: string): number => {
  let crc = 0
  for (const byte of encoder.encode(part)) crc = ((crc << 8) & 0xffff) ^ table[((crc >> 8) ^ byte) & 0xff]
  return crc & 0x3fff
}

/**
 * Why `keys` cannot go in one script on Redis Cluster, or `undefined` when
 * they share a slot.
 *
 * @example
 * ```ts
 * import { crossSlot } from "./slot.ts"
 *
 * crossSlot(["t:{org:a}:user:1", "t:{org:a}:org"]) // undefined
 * ```
 *
 * @since 0.2.0
 */
export const crossSlot = (keys: ReadonlyArray<string>): string | undefined => {
  const first = slot(keys[0])
  for (let i = 1; i < keys.length; i++) {
    if (slot(keys[i]) !== first) {
      return `${JSON.stringify(keys[0])} and ${
        JSON.stringify(keys[i])
      } hash to different Redis Cluster slots: give the keys of one call a common {hash tag}`
    }
  }
  return undefined
}
