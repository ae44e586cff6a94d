/**
 * The store's own connection to Redis: one socket, commands written the
 * moment they are sent, replies matched to them in order.
 *
 * Why not node-redis's client, which the store used before: node-redis
 * writes what was sent at the next `setImmediate`, so the commands of
 * replies that arrive together go out together, after all of them are
 * answered, and Redis waits while the client works, then the client while
 * Redis does. Written at once, a command made from one reply is at Redis
 * while the client answers the next: with two commands out, both processes
 * work at the same time (docs/distributed.md, "The store's connection").
 * A command also costs less here: no queue of options, no promise per
 * command on the hot path, no tracing channel.
 *
 * What it does: connects (TCP, or TLS for `rediss://`), says who it is
 * (`AUTH`, `SELECT`) and checks the server answers (`PING`) before it is
 * ready; when the connection drops, every command out fails at once, and it
 * connects again for ever, backing off to about a second. While it is not
 * ready a command fails at once (nothing is queued for later: the limiter's
 * fallback decides meanwhile).
 *
 * @since 0.3.0
 */
import * as net from "node:net"
import * as tls from "node:tls"
import * as Resp from "./resp.ts"

/**
 * Where and how to connect.
 *
 * @since 0.3.0
 */
export interface Config {
  readonly host: string
  readonly port: number
  /** TLS options (`rediss://`), or undefined for plain TCP. */
  readonly tls?: tls.ConnectionOptions | undefined
  readonly username?: string | undefined
  readonly password?: string | undefined
  readonly database?: number | undefined
}

/**
 * Runs `f` after `millis` unless cancelled: how the connection waits before
 * connecting again (the store gives one over Effect's `Clock`).
 *
 * @since 0.3.0
 */
export type Sleep = (millis: number, f: () => void) => () => void

/**
 * What the connection tells its owner: it was lost (a warning), an attempt
 * to connect again failed (debug), it is back (info), a reply's callback
 * threw (an error).
 *
 * @since 0.3.0
 */
export type Log = (level: "Error" | "Warn" | "Info" | "Debug", message: string) => void

/**
 * Reads a `redis://` or `rediss://` URL: host, port, credentials and
 * database. A URL of any other scheme gives a sentence saying so.
 *
 * @example
 * ```ts
 * import { fromUrl } from "./wire.ts"
 *
 * fromUrl("redis://:secret@127.0.0.1:6380/2") // { host: "127.0.0.1", port: 6380, password: "secret", database: 2, ... }
 * ```
 *
 * @since 0.3.0
 */
export const fromUrl = (url: string): Config | string => {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    return `not a URL: ${url}`
  }
  if (u.protocol !== "redis:" && u.protocol !== "rediss:") return `not a redis:// or rediss:// URL: ${u.protocol}`
  const db = u.pathname.length > 1 ? Number(u.pathname.slice(1)) : undefined
  if (db !== undefined && !(Number.isSafeInteger(db) && db >= 0)) return `not a database number: ${u.pathname.slice(1)}`
  const host = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname
  return {
    host: host === "" ? "localhost" : host,
    port: u.port === "" ? 6379 : Number(u.port),
    tls: u.protocol === "rediss:" ? { servername: host } : undefined,
    username: u.username === "" ? undefined : decodeURIComponent(u.username),
    password: u.password === "" ? undefined : decodeURIComponent(u.password),
    database: db
  }
}

/**
 * How long to wait before the attempt after `retries` failed ones to
 * connect again: 50 ms doubling up to about a second, with up to 100 ms of
 * jitter so that many clients do not come back at once. The store's
 * node-redis client backs off the same way.
 *
 * @example
 * ```ts
 * import { backoff } from "./wire.ts"
 *
 * backoff(0) // 50 to 149
 * backoff(10) // 1000 to 1099
 * ```
 *
 * @since 0.3.0
 */
export const backoff = (retries: number): number => Math.min(50 * 2 ** retries, 1000) + Math.floor(Math.random() * 100)

/**
 * A command's answer: its reply, or the error that kept it from one.
 *
 * @since 0.3.0
 */
export type Callback = (reply: Resp.Reply, failure: Error | undefined) => void

// Replies expected, in the order their commands were written: a queue of
// callbacks kept in an array with a moving head (no shift, no list node).
class Pending {
  private items: Array<Callback | undefined> = []
  private head = 0
  get size(): number {
    return this.items.length - this.head
  }
  push(cb: Callback): void {
    this.items.push(cb)
  }
  shift(): Callback | undefined {
    if (this.head >= this.items.length) return undefined
    const cb = this.items[this.head]
    this.items[this.head++] = undefined
    if (this.head === this.items.length) {
      this.items.length = 0
      this.head = 0
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return cb
  }
}

/**
 * One connection: `open` connects it (and it connects again by itself once
 * it has been ready), `send` writes a command, `drain` and `destroy` end it.
 *
 * @since 0.3.0
 */
export class Wire {
  private readonly config: Config
  private socket: net.Socket | undefined = undefined
  private ready = false
  private closing = false
  private retries = 0
  private readonly sleep: Sleep
  private readonly log: Log
  /** Cancels the wait before connecting again, while there is one. */
  private timer: (() => void) | undefined = undefined
  private pending = new Pending()
  private readonly reader: Resp.Reader
  private drained: (() => void) | undefined = undefined
  /** Why the connection is not ready, for the commands refused meanwhile. */
  private down = "not connected yet"

  constructor(config: Config, sleep: Sleep, log: Log = () => {}) {
    this.config = config
    this.sleep = sleep
    this.log = log
    this.reader = new Resp.Reader((reply) => this.reply(reply))
  }

  /**
   * Writes one command at once; `callback` gets its reply (an error reply is
   * a failure), or the failure of the connection. Called at most once.
   */
  send(args: ReadonlyArray<string>, callback: Callback): void {
    const socket = this.socket
    if (!this.ready || socket === undefined) {
      callback(null, new Error(`the connection to Redis is down: ${this.down}`))
      return
    }
    this.pending.push(callback)
    socket.write(Resp.encode(args))
  }

  /** {@link send} as a promise. */
  call(args: ReadonlyArray<string>): Promise<Resp.Reply> {
    return new Promise((resolve, reject) => {
      this.send(args, (reply, failure) => failure === undefined ? resolve(reply) : reject(failure))
    })
  }

  private reply(reply: Resp.Reply): void {
    const cb = this.pending.shift()
    if (cb === undefined) {
      // a reply to no command: the connection is out of step, nothing on it can be trusted
      this.down = "a reply to no command"
      this.socket?.destroy()
      return
    }
    if (reply instanceof Resp.ReplyError) this.answer(cb, null, reply)
    else this.answer(cb, reply, undefined)
    if (this.drained !== undefined && this.pending.size === 0) this.drained()
  }

  private answer(cb: Callback, reply: Resp.Reply, failure: Error | undefined): void {
    try {
      cb(reply, failure)
    } catch (defect) {
      // the owner's callback failed: said, and the connection goes on (the
      // replies after this one still belong to their commands)
      this.log("Error", `a reply's callback failed: ${defect instanceof Error ? defect.message : String(defect)}`)
    }
  }

  private failAll(reason: string): void {
    let cb: Callback | undefined
    while ((cb = this.pending.shift()) !== undefined) this.answer(cb, null, new Error(reason))
    if (this.drained !== undefined) this.drained()
  }

  /**
   * Opens the socket and, once the server has answered the handshake, calls
   * `done` (with the failure when it did not).
   */
  open(done: (failure: Error | undefined) => void): void {
    const { config } = this
    const socket = config.tls !== undefined
      ? tls.connect({ ...config.tls, host: config.host, port: config.port })
      : net.connect({ host: config.host, port: config.port })
    socket.setNoDelay(true)
    socket.setKeepAlive(true, 5000)
    this.socket = socket
    this.reader.reset()
    // whether this socket got ready: then losing it means connecting again
    let wasReady = false
    let settled = false
    const finish = (failure: Error | undefined): void => {
      if (settled) return
      settled = true
      done(failure)
    }
    socket.on("data", (chunk: Buffer) => {
      try {
        this.reader.feed(chunk)
      } catch (error) {
        // not RESP: nothing more on this connection can be matched to its command
        socket.destroy(error instanceof Error ? error : new Error(String(error)))
      }
    })
    socket.on("error", (error) => {
      this.down = error.message
    })
    socket.on("close", () => {
      if (this.socket === socket) {
        this.socket = undefined
        this.ready = false
      }
      this.failAll(`the connection to Redis was lost: ${this.down}`)
      finish(new Error(this.down))
      if (wasReady && !this.closing && this.timer === undefined) {
        this.log("Warn", `the connection was lost (${this.down}); connecting again`)
        this.reconnect()
      }
    })
    socket.once(config.tls !== undefined ? "secureConnect" : "connect", () => {
      // the handshake, written before anything else and answered in order
      const steps: Array<ReadonlyArray<string>> = []
      if (config.password !== undefined) {
        steps.push(
          config.username !== undefined ? ["AUTH", config.username, config.password] : ["AUTH", config.password]
        )
      }
      if (config.database !== undefined && config.database !== 0) steps.push(["SELECT", String(config.database)])
      steps.push(["PING"])
      let left = steps.length
      let failed: Error | undefined
      const step: Callback = (_, failure) => {
        if (failure !== undefined && failed === undefined) failed = failure
        if (--left > 0) return
        if (failed !== undefined) {
          this.down = failed.message
          finish(failed)
          socket.destroy()
          return
        }
        this.ready = true
        this.retries = 0
        wasReady = true
        finish(undefined)
      }
      for (const args of steps) {
        this.pending.push(step)
        socket.write(Resp.encode(args))
      }
    })
  }

  private reconnect(): void {
    this.timer = this.sleep(backoff(this.retries++), () => {
      this.timer = undefined
      if (this.closing) return
      this.open((failure) => {
        if (failure === undefined) this.log("Info", "connected again")
        else if (!this.closing && this.timer === undefined) {
          this.log("Debug", `connecting again failed (${failure.message})`)
          this.reconnect()
        }
      })
    })
  }

  /** Resolves once no reply is due (at once when none is). */
  drain(): Promise<void> {
    if (this.pending.size === 0) return Promise.resolve()
    return new Promise<void>((resolve) => {
      const previous = this.drained
      this.drained = () => {
        this.drained = undefined
        previous?.()
        resolve()
      }
    })
  }

  /** Closes for good: no more connecting, the socket shut, the replies still due failed. */
  destroy(): void {
    this.closing = true
    this.timer?.()
    this.timer = undefined
    this.ready = false
    this.down = "closed"
    this.socket?.destroy()
    this.failAll("the connection to Redis was closed")
  }
}
