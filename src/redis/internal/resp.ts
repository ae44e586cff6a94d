/**
 * The Redis protocol (RESP2), as much of it as the store's own connection
 * needs: a command written as an array of bulk strings, and a reader of
 * replies that arrive in chunks of any size.
 *
 * A reply is a number (`:`), a string (`+` or `$`), `null` (`$-1`, `*-1`),
 * an array of replies (`*`), or a {@link ReplyError} (`-`), which is a value
 * here, not a throw: it answers its own command only.
 *
 * @since 0.3.0
 */

/**
 * An error reply (`-ERR …`, `-NOSCRIPT …`): the command it answers failed.
 *
 * @example
 * ```ts
 * import { ReplyError } from "./resp.ts"
 *
 * new ReplyError("NOSCRIPT No matching script").message // "NOSCRIPT No matching script"
 * ```
 *
 * @since 0.3.0
 */
export class ReplyError extends Error {
  override readonly name = "ReplyError"
}

/**
 * A reply.
 *
 * @since 0.3.0
 */
export type Reply = number | string | null | ReplyError | ReadonlyArray<Reply>

/**
 * A command as RESP text: an array of bulk strings. A bulk string's length
 * is its length in UTF-8 bytes, counted only for text that is not ASCII.
 *
 * @example
 * ```ts
 * import { encode } from "./resp.ts"
 *
 * encode(["GET", "k"]) // "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
 * ```
 *
 * @since 0.3.0
 */
export const encode = (args: ReadonlyArray<string>): string => {
  let out = "*" + args.length + "\r\n"
  for (let i = 0; i < args.length; i++) {
    const a = args[i]
    out += "$" + byteLength(a) + "\r\n" + a + "\r\n"
  }
  return out
}

const byteLength = (s: string): number => {
  for (let i = 0; i < s.length; i++) {
    if (s.charCodeAt(i) > 0x7f) return Buffer.byteLength(s, "utf8")
  }
  return s.length
}

// What `parse` returns when the buffer ends inside a reply.
const incomplete: unique symbol = Symbol("incomplete")

const CR = 13

/**
 * Reads replies from the chunks a socket delivers, in order, handing each
 * whole reply to `onReply`. A reply cut between chunks waits for the rest;
 * bytes that are not RESP make `feed` throw (the connection cannot be read
 * any further).
 *
 * @example
 * ```ts
 * import { Reader } from "./resp.ts"
 *
 * const replies: Array<unknown> = []
 * const reader = new Reader((reply) => replies.push(reply))
 * reader.feed(Buffer.from("*2\r\n:1\r\n$2\r\nok\r\n:4"))
 * reader.feed(Buffer.from("2\r\n"))
 * replies // [[1, "ok"], 42]
 * ```
 *
 * @since 0.3.0
 */
export class Reader {
  private readonly onReply: (reply: Reply) => void
  // bytes of a reply not yet whole, from an earlier chunk
  private rest: Buffer | undefined = undefined
  private pos = 0
  constructor(onReply: (reply: Reply) => void) {
    this.onReply = onReply
  }

  /** Forgets a reply cut short (the connection it came from is gone). */
  reset(): void {
    this.rest = undefined
  }

  feed(chunk: Buffer): void {
    let buf = chunk
    if (this.rest !== undefined) {
      buf = Buffer.concat([this.rest, chunk])
      this.rest = undefined
    }
    let start = 0
    while (start < buf.length) {
      this.pos = start
      const reply = this.parse(buf)
      if (reply === incomplete) {
        this.rest = buf.subarray(start)
        return
      }
      start = this.pos
      this.onReply(reply)
    }
  }

  // The end of the line that starts at `from` (the index of its CR), or -1.
  private lineEnd(buf: Buffer, from: number): number {
    const at = buf.indexOf(CR, from)
    return at === -1 || at + 1 >= buf.length ? -1 : at
  }

  // An integer written from `from` to `end` (exclusive), as Redis writes them.
  private integer(buf: Buffer, from: number, end: number): number {
    let negative = false
    let i = from
    if (buf[i] === 45) {
      negative = true
      i++
    }
    let n = 0
    if (i === end) throw new Error("RESP: an empty integer")
    for (; i < end; i++) {
      const d = buf[i] - 48
      if (d < 0 || d > 9) throw new Error(`RESP: not an integer: ${buf.toString("latin1", from, end)}`)
      n = n * 10 + d
    }
    return negative ? -n : n
  }

  private parse(buf: Buffer): Reply | typeof incomplete {
    const at = this.pos
    const end = this.lineEnd(buf, at + 1)
    if (end === -1) return incomplete
    const type = buf[at]
    switch (type) {
      case 58: { // ':'
        this.pos = end + 2
        return this.integer(buf, at + 1, end)
      }
      case 36: { // '$'
        const length = this.integer(buf, at + 1, end)
        if (length < 0) {
          this.pos = end + 2
          return null
        }
        const from = end + 2
        if (from + length + 2 > buf.length) return incomplete
        this.pos = from + length + 2
        return buf.toString("utf8", from, from + length)
      }
      case 42: { // '*'
        const length = this.integer(buf, at + 1, end)
        this.pos = end + 2
        if (length < 0) return null
        const out: Array<Reply> = []
        for (let i = 0; i < length; i++) {
          if (this.pos >= buf.length) return incomplete
          const item = this.parse(buf)
          if (item === incomplete) return incomplete
          out.push(item)
        }
        return out
      }
      case 43: { // '+'
        this.pos = end + 2
        return buf.toString("utf8", at + 1, end)
      }
      case 45: { // '-'
        this.pos = end + 2
        return new ReplyError(buf.toString("utf8", at + 1, end))
      }
      default:
        throw new Error(`RESP: unexpected byte ${type} at the start of a reply`)
    }
  }
}
