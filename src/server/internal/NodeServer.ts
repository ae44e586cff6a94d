/**
 * The service's Node HTTP server, with what Node's defaults leave out for a
 * service that every request of an application depends on:
 *
 * - Timeouts: a request must arrive whole within `requestTimeout` and its
 *   headers within `headersTimeout` (Node's defaults are 300 s and 60 s,
 *   checked every 30 s); checked often enough that a stalled request is cut
 *   within a quarter of its bound more (at most a second more).
 * - Requests Node's parser refuses are answered, not reset: a request line
 *   or headers over Node's `maxHeaderSize` get 414 or 431, a request that
 *   does not arrive in time 408, malformed HTTP 400, each as
 *   `application/problem+json`. The connection is then closed the lingering
 *   way: the answer and a FIN are sent, and whatever the client still sends
 *   is read and dropped (for at most {@link LINGER_MILLIS}), because closing
 *   a socket with unread bytes makes the kernel send a reset, and a reset
 *   can destroy the answer before the client reads it.
 * - A drain that resets nothing: it stops listening first, then every
 *   answer says `Connection: close` and its connection closes after it.
 *   Idle kept-alive connections are not closed at once (a client may be
 *   writing its next request on one at that very moment, and closing it
 *   would reset that request): the next request on each is read and
 *   answered with `Connection: close`, and one that stays idle is closed by
 *   Node's keep-alive timeout, as it would be at any other time.
 *
 * @since 0.3.0
 */
import { Deferred, Duration, Effect } from "effect"
import { createServer, maxHeaderSize, type Server, ServerResponse, STATUS_CODES } from "node:http"
import { Server as NetServer, type Socket } from "node:net"
import type { Duplex } from "node:stream"
import * as Problem from "../../http/Problem.ts"

/**
 * How long a connection whose request was refused is read from (and what is
 * read, dropped) after the answer, before it is destroyed.
 *
 * @since 0.3.0
 */
export const LINGER_MILLIS = 2_000

/**
 * Timeouts of the server, in milliseconds.
 *
 * @example
 * ```ts
 * import type * as NodeServer from "./NodeServer.ts"
 *
 * const options: NodeServer.Options = { requestTimeoutMillis: 10_000, headersTimeoutMillis: 5_000 }
 * ```
 *
 * @since 0.3.0
 */
export interface Options {
  /** Longest time to receive a whole request, headers and body. */
  readonly requestTimeoutMillis: number
  /** Longest time to receive a request's headers; at most `requestTimeoutMillis`. */
  readonly headersTimeoutMillis: number
}

/**
 * The server and its drain.
 *
 * @example
 * ```ts
 * import * as NodeServer from "./NodeServer.ts"
 *
 * const node = NodeServer.make({ requestTimeoutMillis: 10_000, headersTimeoutMillis: 5_000 })
 * const stop = node.drain("20 seconds")
 * ```
 *
 * @since 0.3.0
 */
export interface NodeServer {
  readonly server: Server
  /**
   * Stops listening and closes each connection after its next answer;
   * completes once every connection has closed. Connections still open after
   * `timeout` are destroyed. Idempotent: a second call waits for the first.
   */
  readonly drain: (timeout: Duration.Input) => Effect.Effect<void>
}

/**
 * How often Node looks for requests past their timeouts: a quarter of the
 * shorter one, between 25 ms and 1 s. Each check walks the connections that
 * are receiving a request, so it is cheap, and it bounds how late a stalled
 * request is cut.
 *
 * @example
 * ```ts
 * import * as NodeServer from "./NodeServer.ts"
 *
 * NodeServer.checkingInterval({ requestTimeoutMillis: 10_000, headersTimeoutMillis: 5_000 }) // 1000
 * ```
 *
 * @since 0.3.0
 */
export const checkingInterval = (options: Options): number =>
  Math.min(1_000, Math.max(25, Math.floor(Math.min(options.requestTimeoutMillis, options.headersTimeoutMillis) / 4)))

// A parse error carries the bytes being parsed when it happened.
interface ClientError extends Error {
  readonly code?: string | undefined
  readonly rawPacket?: Buffer | undefined
}

const requestLineStart = /^[A-Za-z]+ /

// Over maxHeaderSize: the request line alone (no line end within the limit in
// a packet that starts a request), else the headers. Node reports one error
// for both; the packet tells them apart when it starts the request, as it
// does unless the client sent its request line in pieces.
const overflowKind = (error: ClientError): "uri-too-long" | "headers-too-large" => {
  const packet = error.rawPacket
  if (packet === undefined || !requestLineStart.test(packet.subarray(0, 32).toString("latin1"))) {
    return "headers-too-large"
  }
  const end = packet.indexOf("\r\n")
  return end < 0 || end >= maxHeaderSize ? "uri-too-long" : "headers-too-large"
}

const problemOf = (
  error: ClientError,
  options: Options
): { readonly kind: Problem.Kind; readonly detail: string; readonly extensions?: Record<string, unknown> } => {
  switch (error.code) {
    case "HPE_HEADER_OVERFLOW": {
      const kind = overflowKind(error)
      return kind === "uri-too-long"
        ? {
          kind,
          detail: `the request line (method and URL) is longer than ${maxHeaderSize} bytes; ` +
            "send long keys in a POST body",
          extensions: { limit: maxHeaderSize }
        }
        : {
          kind,
          detail: `the request line and headers are larger than ${maxHeaderSize} bytes`,
          extensions: { limit: maxHeaderSize }
        }
    }
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return {
        kind: "request-timeout",
        detail: `the request did not arrive in time (headers within ${options.headersTimeoutMillis} ms, ` +
          `the whole request within ${options.requestTimeoutMillis} ms)`,
        extensions: {
          headersTimeout: options.headersTimeoutMillis,
          requestTimeout: options.requestTimeoutMillis
        }
      }
    default: {
      const reason = "reason" in error && typeof error.reason === "string" ? error.reason : error.message
      return {
        kind: "malformed-request",
        detail: `the request is not valid HTTP/1.1: ${reason} (${error.code ?? "parse error"})`
      }
    }
  }
}

// A problem as a whole HTTP/1.1 response, written on the socket itself: a
// request the parser refused has no ServerResponse.
const rawResponse = (kind: Problem.Kind, detail: string, extensions?: Record<string, unknown>): string => {
  const { status, title } = Problem.kinds[kind]
  const body = JSON.stringify({ ...extensions, type: Problem.typeOf(kind), title, status, detail })
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? title}\r\n` +
    "content-type: application/problem+json\r\n" +
    `content-length: ${Buffer.byteLength(body)}\r\n` +
    "cache-control: no-store\r\n" +
    "connection: close\r\n\r\n" +
    body
}

/**
 * Creates the server (not listening yet: `NodeHttpServer` listens on it).
 *
 * @example
 * ```ts
 * import * as NodeServer from "./NodeServer.ts"
 *
 * const { server } = NodeServer.make({ requestTimeoutMillis: 10_000, headersTimeoutMillis: 5_000 })
 * server.requestTimeout // 10000
 * ```
 *
 * @since 0.3.0
 */
export const make = (options: Options): NodeServer => {
  // Each connection's current response, to know whether an answer of its own can still be written.
  const responses = new WeakMap<Socket, ServerResponse>()
  const refused = new WeakSet<Duplex>()

  class Response extends ServerResponse {
    // Node passes (request, options); the rest are handed on as they come.
    constructor(...args: ConstructorParameters<typeof ServerResponse>) {
      super(...args)
      responses.set(args[0].socket as Socket, this)
    }
  }
  const writeHead = ServerResponse.prototype.writeHead
  // Once the drain has begun, every answer, whichever way it is written (Node's implicit headers go through
  // writeHead too), says that the connection closes; Node then closes it after the answer. Installed only
  // then, so that it costs nothing before.
  const closeAfterAnswers = () => {
    Response.prototype.writeHead = function(this: ServerResponse, ...args: ReadonlyArray<unknown>) {
      if (!this.headersSent) this.setHeader("connection", "close")
      return Reflect.apply(writeHead, this, args)
    } as ServerResponse["writeHead"]
  }

  const server = createServer({
    ServerResponse: Response,
    requestTimeout: options.requestTimeoutMillis,
    headersTimeout: options.headersTimeoutMillis,
    connectionsCheckingInterval: checkingInterval(options)
  })

  // Replaces Node's default (a bare answer, then an immediate destroy that resets a client still sending).
  server.on("clientError", (error: ClientError, socket: Duplex) => {
    if (refused.has(socket)) return // the parser reports every later packet too: answered once
    refused.add(socket)
    const response = responses.get(socket as Socket)
    const answering = response !== undefined && response.headersSent && !response.writableEnded
    if (error.code === "ECONNRESET" || !socket.writable || answering) {
      socket.destroy()
      return
    }
    const { detail, extensions, kind } = problemOf(error, options)
    socket.end(rawResponse(kind, detail, extensions))
    const linger = Effect.runFork(Effect.andThen(Effect.sleep(LINGER_MILLIS), Effect.sync(() => socket.destroy())))
    socket.once("close", () => linger.interruptUnsafe())
  })

  let closed = false
  server.once("close", () => {
    closed = true
  })
  // Completes when the server has stopped listening and its last connection has closed.
  const allClosed = Effect.callback<void>((resume) => {
    if (closed) return resume(Effect.void)
    const done = () => resume(Effect.void)
    server.once("close", done)
    return Effect.sync(() => server.off("close", done))
  })

  const drainOnce = (timeout: Duration.Input) =>
    Effect.suspend(() => {
      closeAfterAnswers()
      // net.Server's close stops listening and leaves connections open; http.Server's would first
      // destroy idle connections, resetting a request a client may be writing on one of them.
      if (server.listening) NetServer.prototype.close.call(server)
      return allClosed.pipe(
        Effect.timeoutOrElse({
          duration: timeout,
          orElse: () =>
            Effect.andThen(
              Effect.sync(() => server.closeAllConnections()),
              Effect.timeoutOption(allClosed, Duration.seconds(1))
            )
        }),
        // Now that no connection is left: http.Server's close stops Node's timeout checks.
        Effect.ensuring(Effect.sync(() => server.close(() => {})))
      )
    })
  let started = false
  const drained = Deferred.makeUnsafe<void>()
  return {
    server,
    drain: (timeout) =>
      Effect.suspend(() => {
        if (started) return Deferred.await(drained)
        started = true
        return Effect.ensuring(drainOnce(timeout), Deferred.succeed(drained, undefined))
      })
  }
}
