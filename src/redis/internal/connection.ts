/**
 * How the Redis store reaches the server: one `send` of a command, on the
 * store's own ioredis client (one server, a Redis Cluster, or the primary
 * Sentinel names), on the application's node-redis client, or through any
 * `Redis` service; the making of the ioredis client for
 * `RedisStore.layer`; and the running of an entry point (a `Scripts.Route`)
 * as a Redis function or as an `EVAL` script, loading what the server lacks.
 *
 * A call of the store is plain JavaScript from the caller's fiber to the
 * client: on ioredis a command is written to its node's socket at once and
 * its reply answers the store's callback; over node-redis (`NodeRedis`) the
 * store writes with the client's own `sendCommand` (written at the next
 * `setImmediate`). Over any other `Redis` service, each command runs that
 * service's `send` on a fiber. Routing a command on a cluster, following
 * `MOVED` and `ASK`, refreshing the table of slots, asking Sentinel for the
 * primary and connecting again are the client's.
 *
 * @since 0.2.0
 */
import { Cause, Context, Duration, Effect, Exit, FiberHandle, Predicate } from "effect"
import { Redis } from "effect/persistence"
import type { Cluster, Command, Redis as IORedis, RedisOptions } from "ioredis"
import { InvalidPolicy } from "../../Errors.ts"
import type * as Scripts from "./scripts.ts"

/**
 * A command's answer: its reply, or the failure (an error reply, or the
 * connection's) whose reason {@link reasonOf} reads. Called once.
 *
 * @since 0.3.0
 */
export type Done = (reply: unknown, failure: unknown) => void

/**
 * Sends one command (its name first) and calls `done` with its answer.
 * A callback, not a promise: the store answers its callers in it, with no
 * promise of its own per command.
 *
 * @since 0.2.0
 */
export type Send = (args: Array<string>, done: Done, binary?: boolean) => void

/**
 * What the store sends on: one server (or the primary Sentinel names), or
 * a Redis Cluster, whose client routes each command by its first key and
 * follows `MOVED` and `ASK` itself.
 *
 * @since 0.3.0
 */
export interface Connection {
  /** Sends a command; on a cluster, to the node that owns its first key's slot. */
  readonly send: Send
  /**
   * `send` gives a command sent with `binary` its bulk strings as bytes (a
   * `Uint8Array`), not text: the lean entry point may then answer in
   * binary. Without it no command is sent so.
   */
  readonly binary?: boolean | undefined
  /** On a cluster: the primary that owns `slot` now, as the client's table of slots says (undefined: unknown). */
  readonly nodeOf?: ((slot: number) => string | undefined) | undefined
  /**
   * On a cluster: sends a command without keys to every primary (loading
   * the library or a script); `done` gets the first reply, or the first
   * failure when every node failed.
   */
  readonly everywhere?: Send | undefined
  /** Sends a command without keys to the server, or on a cluster to the primary of `slot` (`WAIT`). */
  readonly toSlot?: ((slot: number, args: Array<string>, done: Done) => void) | undefined
  /**
   * On a cluster: runs `send`, whose commands go to the primary `node`
   * (as `nodeOf` names it), with that connection's writes held until it
   * returns, so that they leave in one write.
   */
  readonly together?: ((node: string, send: () => void) => void) | undefined
  /**
   * A connection of the store's own, closed when it has answered nothing
   * for `after` ms while commands were out (see `RedisStore.LayerOptions.silenceTimeout`):
   * `reset(node)` closes it (`node` as `nodeOf` names it, `""` on one
   * server), and the client opens another.
   */
  readonly silent?: { readonly after: number; readonly reset: (node: string) => void } | undefined
}

// A promise's outcome as a `Done`.
const settle = (promise: PromiseLike<unknown>, done: Done): void => {
  promise.then((reply) => done(reply, undefined), (error) => done(undefined, error ?? new Error("failed")))
}

/**
 * The text of a failed command's error.
 *
 * @example
 * ```ts
 * import { reasonOf } from "./connection.ts"
 *
 * reasonOf(new Error("NOSCRIPT No matching script")) // "NOSCRIPT No matching script"
 * ```
 *
 * @since 0.2.0
 */
export const reasonOf = (error: unknown): string => {
  if (Predicate.isError(error)) return error.message
  return String(error)
}

/**
 * What the store calls of node-redis's client (`NodeRedis`'s `client`),
 * named by its shape: the declarations of `tollgate/redis` then name no
 * optional package but ioredis, so a program that type-checks them needs
 * `@effect/platform-node` only if it uses it.
 *
 * @since 0.3.0
 */
export interface CommandClient {
  readonly sendCommand: (args: Array<string>) => Promise<unknown>
}

/**
 * Sends on node-redis's client itself.
 *
 * @example
 * ```ts
 * import type { NodeRedis } from "@effect/platform-node"
 * import { viaClient } from "./connection.ts"
 *
 * declare const nodeRedis: NodeRedis.NodeRedis["Service"]
 * const send = viaClient(nodeRedis.client)
 * ```
 *
 * @since 0.2.0
 */
export const viaClient = (client: CommandClient): Send => (args, done) => {
  let sent: Promise<unknown>
  try {
    sent = client.sendCommand(args)
  } catch (error) {
    done(undefined, error)
    return
  }
  settle(sent, done)
}

/**
 * Sends through a `Redis` service's `send`, one fiber per command.
 *
 * @example
 * ```ts
 * import { Context } from "effect"
 * import type { Redis } from "effect/persistence"
 * import { viaService } from "./connection.ts"
 *
 * declare const redis: Redis.Redis["Service"]
 * const send = viaService(redis, Context.empty())
 * ```
 *
 * @since 0.2.0
 */
export const viaService = (redis: Redis.Redis["Service"], context: Context.Context<never>): Send => {
  const run = Effect.runPromiseExitWith(context)
  return (args, done) =>
    settle(
      run(redis.send<unknown>(args[0], ...args.slice(1))).then((exit) =>
        Exit.isSuccess(exit) ? exit.value : Promise.reject(new Error(describe(exit.cause)))
      ),
      done
    )
}

// A RedisError's own cause says what happened (its message is generic).
const describe = (cause: Cause.Cause<Redis.RedisError>): string => {
  const found = Cause.findError(cause)
  if (found._tag === "Success") return reasonOf(found.success.cause)
  return Cause.pretty(cause)
}

// The server has no Functions, or may not use them: FCALL or FUNCTION is
// unknown (before Redis 7, or renamed away) or refused (an ACL).
const noFunctions = (reason: string): boolean => /unknown command|NOPERM/i.test(reason)

/**
 * Runs entry points on the server: as functions of the tollgate library
 * (`FCALL`) while the server has them, else as `EVAL` scripts (`EVALSHA`).
 * A library or script the server does not hold (a restarted or flushed
 * server) is loaded and the command sent again.
 *
 * @since 0.2.0
 */
export interface Runner {
  /**
   * Runs `route` with `args`, whose first two elements are left for the
   * command and the function or script (`args` is handed to the client: it
   * must not change afterwards); `done` gets the reply.
   */
  readonly run: (route: Scripts.Route, args: Array<string>, done: Done, binary?: boolean) => void
}

/**
 * A runner over a connection. With `functions` false it never tries
 * Functions. On a cluster, what a node lacks is loaded on every primary
 * (each holds its own library and scripts; a replica promoted later has
 * the library its primary had, but not its `EVAL` scripts).
 *
 * @example
 * ```ts
 * import { makeRunner, type Send } from "./connection.ts"
 *
 * declare const send: Send
 * const runner = makeRunner({ send }, { lua: "#!lua name=x\n", name: "x" }, true)
 * ```
 *
 * @since 0.2.0
 */
export const makeRunner = (
  connection: Connection,
  library: { readonly name: string; readonly lua: string },
  functions: boolean
): Runner => {
  let useFunctions = functions
  const send = connection.send
  const everywhere = connection.everywhere
  // on a cluster every primary loads it (REPLACE: some have it already)
  const loadLibrary: Array<string> = everywhere === undefined
    ? ["FUNCTION", "LOAD", library.lua]
    : ["FUNCTION", "LOAD", "REPLACE", library.lua]
  const loadOn = everywhere ?? send

  const evalSha = (route: Scripts.Route, args: Array<string>, done: Done, binary: boolean): void => {
    args[0] = "EVALSHA"
    args[1] = route.script.sha
    send(args, (reply, error) => {
      if (error === undefined) return done(reply, undefined)
      if (!reasonOf(error).includes("NOSCRIPT")) return done(undefined, error)
      loadOn(["SCRIPT", "LOAD", route.script.lua], (_, failure) => {
        if (failure !== undefined) return done(undefined, failure)
        send(args.slice(), done, binary)
      })
    }, binary)
  }

  // true once loaded (or found loaded); false when the server has no Functions for us
  const load = (done: (loaded: boolean, failure: unknown) => void): void =>
    loadOn(loadLibrary.slice(), (_, error) => {
      if (error === undefined) return done(true, undefined)
      const reason = reasonOf(error)
      if (reason.includes("already exists")) return done(true, undefined)
      if (noFunctions(reason)) {
        useFunctions = false
        return done(false, undefined)
      }
      done(false, error)
    })

  const fcall = (route: Scripts.Route, args: Array<string>, done: Done, binary: boolean): void => {
    args[0] = "FCALL"
    args[1] = route.fn
    send(args, (reply, error) => {
      if (error === undefined) return done(reply, undefined)
      const reason = reasonOf(error)
      if (reason.includes("Function not found")) {
        return load((loaded, failure) => {
          if (failure !== undefined) return done(undefined, failure)
          if (loaded) send(args.slice(), done, binary)
          else evalSha(route, args.slice(), done, binary)
        })
      }
      if (noFunctions(reason)) {
        useFunctions = false
        return evalSha(route, args.slice(), done, binary)
      }
      done(undefined, error)
    }, binary)
  }

  return {
    run: (route, args, done, binary = false) =>
      useFunctions ? fcall(route, args, done, binary) : evalSha(route, args, done, binary)
  }
}

/**
 * How long to wait before the attempt after `retries` failed ones to
 * connect again: 50 ms doubling up to about a second, with up to 100 ms of
 * jitter so that many clients do not come back at once.
 *
 * @example
 * ```ts
 * import { backoff } from "./connection.ts"
 *
 * backoff(0) // 50 to 149
 * backoff(10) // 1000 to 1099
 * ```
 *
 * @since 0.3.0
 */
export const backoff = (retries: number): number => Math.min(50 * 2 ** retries, 1000) + Math.floor(Math.random() * 100)

/**
 * The ioredis package, loaded when a store of its own is built: ioredis is
 * an optional peer, so `tollgate/redis` loads without it (only the imports
 * of types name it here).
 *
 * @since 0.3.0
 */
export type Ioredis = Pick<typeof import("ioredis"), "Cluster" | "Command" | "Redis">

const isCluster = (client: IORedis | Cluster): client is Cluster => client.isCluster

// Replies as text, as `call` gives them; a binary one as it came (bulk
// strings are Buffers without an encoding).
const utf8 = { replyEncoding: "utf8" } as const
const bytes = { replyEncoding: null } as const

const command = (io: Ioredis, args: Array<string>, done: Done, binary = false): Command =>
  new io.Command(args[0], args.slice(1), binary ? bytes : utf8, (error, reply) => done(reply, error ?? undefined))

/**
 * Sends on an ioredis client: a `Redis` (one server, or the primary that
 * Sentinel names) or a `Cluster` (each command routed to the node that owns
 * its first key's slot, redirections followed by the client).
 *
 * @example
 * ```ts
 * import * as io from "ioredis"
 * import { viaIoredis } from "./connection.ts"
 *
 * const send = viaIoredis(io, new io.Redis("redis://localhost:6379", { lazyConnect: true }))
 * ```
 *
 * @since 0.3.0
 */
export const viaIoredis = (io: Ioredis, client: IORedis | Cluster): Send => (args, done, binary) => {
  client.sendCommand(command(io, args, done, binary))
}

// A cluster's primary by its name in the table of slots ("host:port").
const primaryNamed = (client: Cluster, node: string): IORedis | undefined =>
  client.nodes("master").find((redis) => `${redis.options.host}:${redis.options.port}` === node)

/**
 * The connection over an ioredis client: for a `Cluster`, with the node of
 * each slot read from the client's table, and commands without keys sent
 * to every primary or to the primary of a slot.
 *
 * @example
 * ```ts
 * import * as io from "ioredis"
 * import { fromIoredis } from "./connection.ts"
 *
 * const connection = fromIoredis(io, new io.Cluster([{ host: "127.0.0.1", port: 7000 }], { lazyConnect: true }))
 * ```
 *
 * @since 0.3.0
 */
export const fromIoredis = (io: Ioredis, client: IORedis | Cluster): Connection => {
  const send = viaIoredis(io, client)
  if (!isCluster(client)) return { send, binary: true, toSlot: (_, args, done) => send(args, done) }
  return {
    send,
    binary: true,
    nodeOf: (slot) => client.slots[slot]?.[0],
    everywhere: (args, done) => {
      const primaries = client.nodes("master")
      if (primaries.length === 0) return done(undefined, new Error("no primary known"))
      let left = primaries.length
      let first: { readonly reply: unknown } | undefined
      let failure: unknown
      for (const node of primaries) {
        node.sendCommand(command(io, args.slice(), (reply, error) => {
          if (error === undefined) first ??= { reply }
          else failure ??= error
          if (--left > 0) return
          if (first !== undefined) done(first.reply, undefined)
          else done(undefined, failure)
        }))
      }
    },
    // with a node given, ioredis sends to the primary of its slot, as for a pipeline
    toSlot: (slot, args, done) => {
      client.sendCommand(command(io, args, done), undefined, { slot })
    },
    // Each command is one write to its socket otherwise: with many on a
    // node at once, the writes were a quarter of the process's time.
    together: (node, send) => {
      const stream = primaryNamed(client, node)?.stream
      if (stream === undefined || !stream.writable) return send()
      stream.cork()
      try {
        send()
      } finally {
        stream.uncork()
      }
    }
  }
}

/**
 * Writes that must reach replicas before they count: `WAIT wait timeout`
 * after each script.
 *
 * @since 0.3.0
 */
export interface Replicas {
  /** Replicas that must acknowledge a write. */
  readonly wait: number
  /** How long (ms) `WAIT` waits for them. */
  readonly timeout: number
}

/**
 * Runs a script (`run`), then `WAIT` on the same connection (sent right
 * behind it): `done` gets the script's reply once its write has reached
 * `replicas.wait` replicas, or a failure when fewer acknowledged it within
 * `replicas.timeout` (the write stands on the primary; the caller's
 * fallback decides). A script sent again (a library loaded meanwhile, a
 * redirection) is answered after the first `WAIT`, which then covered
 * nothing: another follows it.
 *
 * @example
 * ```ts
 * import { replicated, type Send } from "./connection.ts"
 *
 * declare const send: Send
 * replicated({ send }, { wait: 1, timeout: 100 }, 0, (done) => send(["INCR", "k"], done), (reply, failure) => {})
 * ```
 *
 * @since 0.3.0
 */
export const replicated = (
  connection: Connection,
  replicas: Replicas,
  slot: number,
  run: (done: Done) => void,
  done: Done
): void => {
  const toSlot = connection.toSlot ?? ((_: number, args: Array<string>, d: Done) => connection.send(args, d))
  const args = ["WAIT", String(replicas.wait), String(replicas.timeout)]
  let sent = 0
  let answered = 0
  let script: { readonly reply: unknown } | undefined
  let finished = false
  const finish = (reply: unknown, failure: unknown): void => {
    if (finished) return
    finished = true
    done(reply, failure)
  }
  const wait = (): void => {
    sent++
    toSlot(slot, args.slice(), (acked, failure) => {
      answered++
      // a WAIT answered before the script's reply covered nothing of it
      if (script === undefined || answered < sent) return
      if (failure !== undefined) return finish(undefined, failure)
      if (Number(acked) >= replicas.wait) return finish(script.reply, undefined)
      finish(
        undefined,
        new Error(
          `written on the primary, but ${acked} of ${replicas.wait} replicas acknowledged it within ${replicas.timeout} ms`
        )
      )
    })
  }
  run((reply, failure) => {
    if (failure !== undefined) return finish(undefined, failure)
    script = { reply }
    if (answered === sent) wait()
  })
  wait()
}

/**
 * Where a server is, read from a `redis://` or `rediss://` URL.
 *
 * @since 0.3.0
 */
export interface Address {
  readonly host: string
  readonly port: number
  readonly tls: boolean
  readonly username?: string | undefined
  readonly password?: string | undefined
  readonly database?: number | undefined
}

/**
 * Reads a `redis://` or `rediss://` URL: host, port, credentials and
 * database. A URL of any other scheme gives a sentence saying so.
 *
 * @example
 * ```ts
 * import { fromUrl } from "./connection.ts"
 *
 * fromUrl("redis://:secret@127.0.0.1:6380/2") // { host: "127.0.0.1", port: 6380, password: "secret", database: 2, ... }
 * ```
 *
 * @since 0.3.0
 */
export const fromUrl = (url: string): Address | string => {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    return "not a URL"
  }
  if (u.protocol !== "redis:" && u.protocol !== "rediss:") return `not a redis:// or rediss:// URL: ${u.protocol}`
  const db = u.pathname.length > 1 ? Number(u.pathname.slice(1)) : undefined
  if (db !== undefined && !(Number.isSafeInteger(db) && db >= 0)) return `not a database number: ${u.pathname.slice(1)}`
  const host = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname
  return {
    host: host === "" ? "localhost" : host,
    port: u.port === "" ? 6379 : Number(u.port),
    tls: u.protocol === "rediss:",
    username: u.username === "" ? undefined : decodeURIComponent(u.username),
    password: u.password === "" ? undefined : decodeURIComponent(u.password),
    database: db
  }
}

/**
 * A URL as error messages show it: without its user name and password.
 *
 * @example
 * ```ts
 * import { redact } from "./connection.ts"
 *
 * redact("redis://app:s3cret@cache:6379") // "redis://***:***@cache:6379"
 * ```
 *
 * @since 0.3.0
 */
export const redact = (url: string): string => url.replace(/\/\/[^@/]*@/, "//***:***@")

/**
 * Where the store's Redis is: one server, a Redis Cluster (the nodes to
 * start from), or a primary behind Sentinel.
 *
 * @since 0.3.0
 */
export type Where =
  | { readonly _tag: "Server"; readonly address: Address }
  | { readonly _tag: "Cluster"; readonly nodes: ReadonlyArray<Address> }
  | { readonly _tag: "Sentinel"; readonly name: string; readonly sentinels: ReadonlyArray<Address> }

/**
 * Where `RedisStore.layer`'s options say Redis is, checked: one of `url`,
 * `cluster` (`true` with `url`, or nodes) and `sentinel`; every URL
 * `redis://` or `rediss://`; the nodes of a cluster or the sentinels of a
 * group with one scheme and one set of credentials; no database number on
 * a cluster. A mistake is an `InvalidPolicy` naming the field and the value
 * (URLs without their credentials).
 *
 * @example
 * ```ts
 * import { where } from "./connection.ts"
 *
 * const cluster = where({ cluster: { nodes: ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"] } })
 * ```
 *
 * @since 0.3.0
 */
export const where = (options: {
  readonly url?: string | undefined
  readonly cluster?: boolean | { readonly nodes: ReadonlyArray<string> } | undefined
  readonly sentinel?: { readonly name: string; readonly sentinels: ReadonlyArray<string> } | undefined
}): Effect.Effect<Where, InvalidPolicy> => {
  const invalid = (field: string, value: string, reason: string) =>
    Effect.fail(new InvalidPolicy({ field, value, reason }))
  const one = (field: string, url: unknown): Address | InvalidPolicy => {
    if (!Predicate.isString(url)) {
      return new InvalidPolicy({ field, value: String(url), reason: "must be a redis:// or rediss:// URL" })
    }
    const address = fromUrl(url)
    return Predicate.isString(address) ? new InvalidPolicy({ field, value: redact(url), reason: address }) : address
  }
  const several = (field: string, urls: unknown, what: string): ReadonlyArray<Address> | InvalidPolicy => {
    if (!Array.isArray(urls) || urls.length === 0) {
      return new InvalidPolicy({ field, value: String(urls), reason: `must list ${what} as URLs` })
    }
    const addresses: Array<Address> = []
    for (let i = 0; i < urls.length; i++) {
      const address = one(`${field}[${i}]`, urls[i])
      if (address instanceof InvalidPolicy) return address
      const first = addresses[0] ?? address
      if (address.tls !== first.tls || address.username !== first.username || address.password !== first.password) {
        return new InvalidPolicy({
          field: `${field}[${i}]`,
          value: redact(String(urls[i])),
          reason: `must have the scheme and credentials of ${field}[0] (${what} share them)`
        })
      }
      addresses.push(address)
    }
    return addresses
  }
  const { cluster, sentinel, url } = options
  if (sentinel !== undefined) {
    if (url !== undefined) return invalid("url", redact(url), "give url or sentinel, not both")
    if (cluster !== undefined && cluster !== false) {
      return invalid("cluster", String(cluster === true ? true : "{ nodes }"), "give cluster or sentinel, not both")
    }
    if (!Predicate.isString(sentinel.name) || sentinel.name === "") {
      return invalid("sentinel.name", String(sentinel.name), "must name the primary's group (sentinel monitor <name>)")
    }
    const sentinels = several("sentinel.sentinels", sentinel.sentinels, "the sentinels")
    if (sentinels instanceof InvalidPolicy) return Effect.fail(sentinels)
    return Effect.succeed({ _tag: "Sentinel", name: sentinel.name, sentinels })
  }
  if (cluster === undefined || cluster === false || cluster === true) {
    const address = one("url", url ?? "redis://localhost:6379")
    if (address instanceof InvalidPolicy) return Effect.fail(address)
    if (cluster !== true) return Effect.succeed({ _tag: "Server", address })
    if (address.database !== undefined && address.database !== 0) {
      return invalid("url", redact(url ?? ""), "a Redis Cluster has only database 0")
    }
    return Effect.succeed({ _tag: "Cluster", nodes: [address] })
  }
  if (url !== undefined) return invalid("url", redact(url), "give url with cluster: true, or cluster.nodes, not both")
  const nodes = several("cluster.nodes", cluster.nodes, "the nodes of a cluster")
  if (nodes instanceof InvalidPolicy) return Effect.fail(nodes)
  const withDatabase = nodes.findIndex((n) => n.database !== undefined && n.database !== 0)
  if (withDatabase >= 0) {
    return invalid(
      `cluster.nodes[${withDatabase}]`,
      redact(cluster.nodes[withDatabase]),
      "a Redis Cluster has only database 0"
    )
  }
  return Effect.succeed({ _tag: "Cluster", nodes })
}

// What the store needs of every client it opens, whatever `client` says.
const required = {
  lazyConnect: true,
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0
} as const

/**
 * The ioredis options a user may give for every connection of the store
 * (all but those the store needs as they are: no offline queue, nothing
 * sent again after a dropped connection).
 *
 * @since 0.3.0
 */
export type ClientOptions = Omit<
  RedisOptions,
  | keyof typeof required
  // where Redis is comes from the store's url, cluster or sentinel
  | "host"
  | "port"
  | "sentinels"
  | "name"
  | "role"
  // the replies the store decodes: RESP2 as ioredis maps it, keys as given
  | "protocol"
  | "replyMapping"
  | "stringNumbers"
  | "keyPrefix"
  | "readOnly"
  | "monitor"
>

/**
 * The ioredis client for `where`, not yet connected: a `Redis` for one
 * server or for a primary behind Sentinel, a `Cluster` for a cluster.
 * Nothing is queued while it is not connected (calls fail at once, and the
 * limiter's fallback decides), a command out when a connection drops fails
 * at once and is not sent again, there is no per-command timeout (the
 * store bounds every call), and a lost connection is opened again for
 * ever, backing off to about a second; on a cluster, the table of slots
 * is read again every second and whenever a command finds its node gone,
 * its slot moved (`MOVED`) or the cluster down.
 *
 * @example
 * ```ts
 * import * as io from "ioredis"
 * import { client } from "./connection.ts"
 *
 * const redis = client(io, { _tag: "Server", address: { host: "127.0.0.1", port: 6379, tls: false } }, undefined)
 * ```
 *
 * @since 0.3.0
 */
export const client = (io: Ioredis, place: Where, options: ClientOptions | undefined): IORedis | Cluster => {
  const reconnect = {
    retryStrategy: (times: number) => backoff(times - 1),
    // A primary turned replica (a failover behind one name, as a managed
    // Redis's DNS name moves to the new primary) keeps the connection and
    // refuses every write: connecting again finds the primary. (1: the
    // command fails, the fallback decides; it is not sent again.)
    reconnectOnError: (error: Error) => error.message.startsWith("READONLY") ? 1 as const : false
  }
  const auth = (a: Address) => ({
    ...(a.username === undefined ? {} : { username: a.username }),
    ...(a.password === undefined ? {} : { password: a.password })
  })
  switch (place._tag) {
    case "Server": {
      const a = place.address
      return new io.Redis({
        ...reconnect,
        host: a.host,
        port: a.port,
        ...auth(a),
        ...(a.database === undefined ? {} : { db: a.database }),
        ...(a.tls ? { tls: {} } : {}),
        ...options,
        ...required
      })
    }
    case "Sentinel": {
      const first = place.sentinels[0]
      return new io.Redis({
        ...reconnect,
        sentinels: place.sentinels.map((s) => ({ host: s.host, port: s.port })),
        name: place.name,
        // the primary and the sentinels take the same credentials and TLS
        ...auth(first),
        ...(first.username === undefined ? {} : { sentinelUsername: first.username }),
        ...(first.password === undefined ? {} : { sentinelPassword: first.password }),
        ...(first.tls ? { tls: {}, sentinelTLS: {}, enableTLSForSentinelMode: true } : {}),
        // told of a failover by the sentinels, not only by a lost connection
        failoverDetector: true,
        ...options,
        ...required
      })
    }
    case "Cluster": {
      const first = place.nodes[0]
      return new io.Cluster(place.nodes.map((n) => ({ host: n.host, port: n.port })), {
        lazyConnect: true,
        enableOfflineQueue: false,
        clusterRetryStrategy: (times: number) => backoff(times - 1),
        slotsRefreshInterval: 1000,
        redisOptions: {
          ...auth(first),
          ...(first.tls ? { tls: {} } : {}),
          ...options,
          ...required
        }
      })
    }
  }
}

/**
 * What a server's `INFO memory` says of evicting keys: its
 * `maxmemory-policy` when it may evict (a memory limit set, and a policy
 * other than `noeviction`), else undefined.
 *
 * @example
 * ```ts
 * import { evicting } from "./connection.ts"
 *
 * evicting("maxmemory:104857600\r\nmaxmemory_policy:allkeys-lru\r\n") // "allkeys-lru"
 * evicting("maxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n") // undefined: no limit
 * ```
 *
 * @since 0.3.0
 */
export const evicting = (info: string): string | undefined => {
  const max = /(?:^|\n)maxmemory:(\d+)/.exec(info)?.[1]
  const policy = /(?:^|\n)maxmemory_policy:([^\r\n]+)/.exec(info)?.[1]
  return max !== undefined && Number(max) > 0 && policy !== undefined && policy !== "noeviction" ? policy : undefined
}

// What the store checks of each server as it starts, said as warnings (once:
// a server reconfigured later is not noticed; one that refuses INFO, an
// ACL, is noted at debug level):
// - a server that may evict keys forgets a limiter's: every key it evicts
//   starts afresh and admits again (its TTL makes it a candidate under the
//   volatile policies too);
// - a replica refuses the limiter's writes (READONLY): every call goes to
//   the fallback, and the client connects again after each.
const startChecks = (servers: ReadonlyArray<IORedis>, within: Duration.Duration) =>
  Effect.forEach(servers, (server) =>
    Effect.gen(function*() {
      // (behind Sentinel the options name no host: the stream's peer is the primary)
      const where = `${server.stream?.remoteAddress ?? server.options.host}:${
        server.stream?.remotePort ?? server.options.port
      }`
      const ask = (section: string) =>
        Effect.promise(() => server.info(section).then((info) => ({ info }), (error: unknown) => ({ error }))).pipe(
          Effect.timeoutOption(within),
          Effect.flatMap((answer) =>
            answer._tag === "None"
              ? Effect.as(Effect.logDebug(`redis ${where}: INFO ${section} did not answer`), undefined)
              : "error" in answer.value
              ? Effect.as(
                Effect.logDebug(`redis ${where}: INFO ${section}: ${reasonOf(answer.value.error)}`),
                undefined
              )
              : Effect.succeed(answer.value.info)
          )
        )
      const memory = yield* ask("memory")
      const policy = memory === undefined ? undefined : evicting(memory)
      if (policy !== undefined) {
        yield* Effect.logWarning(
          `redis ${where} may evict the limiter's keys (maxmemory-policy ${policy}): a key it evicts starts ` +
            "afresh and admits again; with noeviction it refuses writes when full, and the limiter's fallback decides"
        )
      }
      const replication = yield* ask("replication")
      if (replication !== undefined && /(?:^|\n)role:slave\b/.test(replication)) {
        yield* Effect.logWarning(
          `redis ${where} is a replica: it refuses the limiter's writes (READONLY), so every call goes to the ` +
            "fallback; give the store the primary (or its sentinels)"
        )
      }
    }), { discard: true, concurrency: "unbounded" })

/**
 * An ioredis client of the store's own, in the scope: connected (within
 * `connectTimeout`, else `RedisError`) before the store uses it, and closed
 * with the scope (`QUIT`, waiting up to `closeTimeout` for the replies still
 * due, then dropped). Its errors go to Effect's loggers at debug level (the
 * store's calls report their own failures). A client that stops connecting
 * by itself is started again, and a connection silent for `silenceTimeout`
 * while commands are out can be closed by the store (`Connection.silent`).
 *
 * @example
 * ```ts
 * import { Duration } from "effect"
 * import * as io from "ioredis"
 * import { client, ioredis } from "./connection.ts"
 *
 * const connection = ioredis(
 *   io,
 *   () => client(io, { _tag: "Server", address: { host: "127.0.0.1", port: 6379, tls: false } }, undefined),
 *   Duration.seconds(5),
 *   Duration.seconds(2),
 *   Duration.seconds(5)
 * )
 * ```
 *
 * @since 0.3.0
 */
export const ioredis = Effect.fnUntraced(function*(
  io: Ioredis,
  make: () => IORedis | Cluster,
  connectTimeout: Duration.Duration,
  closeTimeout: Duration.Duration,
  silenceTimeout: Duration.Duration
) {
  const runFork = Effect.runForkWith(yield* Effect.context<never>())
  const client = yield* Effect.try({
    try: make,
    catch: (cause) => new Redis.RedisError({ cause })
  })
  let last: unknown = undefined
  let started = false
  // Each failed attempt to connect is at debug level (a server down says
  // so once a second), but a server that refuses the store's credentials
  // (a password rotated, a user disabled) will not change its mind: that is
  // a warning, once per reason until the client is connected again.
  let refused: string | undefined
  const onError = (error: unknown) => {
    last = error
    const reason = reasonOf(error)
    if (/^(WRONGPASS|NOAUTH|NOPERM)\b/.test(reason) && reason !== refused) {
      refused = reason
      runFork(Effect.logWarning(`redis refuses the store's credentials: ${reason}`))
    } else runFork(Effect.logDebug(`redis: ${reason}`))
  }
  client.on("error", onError)
  // One warning when the connection is lost, one line when it is back
  // (each failed attempt in between is at debug level, above).
  let lost = false
  let closing = false
  client.on("close", () => {
    if (!started || lost || closing) return
    lost = true
    runFork(Effect.logWarning("the connection was lost; connecting again"))
  })
  // A client that stops connecting by itself ("end") is started again,
  // backing off as a lost connection does: ioredis gives up for good when a
  // sentinel announces a failover while the client is asking a sentinel
  // where the primary is (its connector is closed under the question), and
  // the store would answer from its fallback for ever.
  // (in a handle of the scope's: closing it drops a start still to come)
  const restart = yield* FiberHandle.makeRuntime<never>()
  let ended = 0
  client.on("end", () => {
    if (!started || closing) return
    restart(
      Effect.logWarning("the client stopped connecting; starting it again").pipe(
        Effect.andThen(Effect.sleep(Duration.millis(backoff(ended++)))),
        Effect.andThen(Effect.sync(() => {
          if (!closing && client.status === "end") client.connect().catch(() => {})
        }))
      ),
      { onlyIfMissing: true }
    )
  })
  client.on("ready", () => {
    ended = 0
    refused = undefined
    if (!lost) return
    lost = false
    runFork(Effect.logInfo("connected again"))
  })
  if (isCluster(client)) {
    // a cluster's nodes report their own errors
    client.on("node error", onError)
    // A node's connection is opened as soon as the cluster names it, not on
    // its first command: while it connects the cluster refuses commands for
    // it (no offline queue) and sends them again 100 ms later, behind the
    // commands that came after them.
    // (After the start: before, the cluster's own check of its state would
    // find the node connecting.)
    client.on("+node", (node: IORedis) => {
      if (started && node.status === "wait") node.connect().catch(() => {})
    })
  }
  const opened = yield* Effect.timeoutOption(
    Effect.callback<unknown>((resume) => {
      client.connect().then(
        () => resume(Effect.succeed(null)),
        // the event's error says why ("Connection is closed." does not)
        (error) =>
          resume(Effect.succeed<unknown>(
            (reasonOf(error) === "Connection is closed." ? last : undefined) ?? error ?? last ??
              new Error("failed to connect")
          ))
      )
    }),
    connectTimeout
  )
  if (opened._tag === "None" || opened.value !== null) {
    client.disconnect()
    return yield* new Redis.RedisError({
      cause: opened._tag === "None"
        ? new Error(
          `no answer within ${Duration.format(connectTimeout)}${last === undefined ? "" : `: ${reasonOf(last)}`}`
        )
        : opened.value
    })
  }
  started = true
  if (isCluster(client)) {
    // every primary connected before the first call
    const ready = yield* Effect.timeoutOption(
      Effect.promise(() =>
        Promise.all(client.nodes("master").map((node) => node.status === "wait" ? node.connect() : undefined))
          .then(() => null, (error) => error ?? new Error("failed to connect"))
      ),
      connectTimeout
    )
    if (ready._tag === "None" || ready.value !== null) {
      client.disconnect()
      return yield* new Redis.RedisError({
        cause: ready._tag === "None"
          ? new Error(`the cluster's primaries did not answer within ${Duration.format(connectTimeout)}`)
          : ready.value
      })
    }
  }
  yield* startChecks(isCluster(client) ? client.nodes("master") : [client], connectTimeout)
  yield* Effect.addFinalizer(() =>
    Effect.callback<void>((resume) => {
      closing = true
      client.quit().then(() => resume(Effect.void), () => resume(Effect.void))
    }).pipe(
      Effect.timeoutOption(closeTimeout),
      Effect.andThen(Effect.sync(() => client.disconnect()))
    )
  )
  // A connection that answers nothing and is not closed (a route lost, a
  // middlebox that forgot it) is dropped here, so the client opens another:
  // its socket is destroyed, which a lost connection's handling follows (a
  // cluster's node is found again on its next table of slots).
  const reset = (node: string): void => {
    if (!isCluster(client)) return void client.stream?.destroy()
    primaryNamed(client, node)?.stream?.destroy()
  }
  return { ...fromIoredis(io, client), silent: { after: Duration.toMillis(silenceTimeout), reset } }
})
