/**
 * How the Redis store reaches the server: one `send` of a command (on the
 * store's own connection, on a node-redis client, or through any `Redis`
 * service), the making of those connections for `RedisStore.layer`, and the
 * running of an entry point (a `Scripts.Route`) as a Redis function or as an
 * `EVAL` script, loading what the server lacks.
 *
 * A call of the store is plain JavaScript from the caller's fiber to the
 * socket: on the store's own connection ({@link own}) a command is written
 * at once and its reply answers on the socket's stack, so a lone call costs
 * the caller's one suspension and nothing else; over node-redis
 * (`NodeRedis`) the store writes with the client's own `sendCommand` (one
 * promise per command, written at the next `setImmediate`). Over any other
 * `Redis` service, each command runs that service's `send` on a fiber.
 *
 * @since 0.2.0
 */
import type { NodeRedis } from "@effect/platform-node"
import { Cause, Clock, Context, Duration, Effect, Exit, Fiber, Layer, Predicate, Result, Scope } from "effect"
import { Redis } from "effect/persistence"
import * as OptionalPackage from "../../internal/OptionalPackage.ts"
import type * as Scripts from "./scripts.ts"
import * as Wire from "./wire.ts"

/**
 * A command's answer: its reply, or the failure (an error reply, or the
 * connection's) whose reason {@link reasonOf} reads. Called once.
 *
 * @since 0.3.0
 */
export type Done = (reply: unknown, failure: unknown) => void

/**
 * Sends one command (its name first) and calls `done` with its answer.
 * A callback, not a promise: on the store's own connection the reply
 * answers its callers on the socket's own stack, with no promise and no
 * microtask per command.
 *
 * @since 0.2.0
 */
export type Send = (args: Array<string>, done: Done) => void

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
export const viaClient = (client: NodeRedis.NodeRedis["Service"]["client"]): Send => (args, done) => {
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
  readonly run: (route: Scripts.Route, args: Array<string>, done: Done) => void
}

/**
 * A runner over `send`. With `functions` false it never tries Functions.
 *
 * @example
 * ```ts
 * import { makeRunner, type Send } from "./connection.ts"
 *
 * declare const send: Send
 * const runner = makeRunner(send, { lua: "#!lua name=x\n", name: "x" }, true)
 * ```
 *
 * @since 0.2.0
 */
export const makeRunner = (
  send: Send,
  library: { readonly name: string; readonly lua: string },
  functions: boolean
): Runner => {
  let useFunctions = functions

  const evalSha = (route: Scripts.Route, args: Array<string>, done: Done): void => {
    args[0] = "EVALSHA"
    args[1] = route.script.sha
    send(args, (reply, error) => {
      if (error === undefined) return done(reply, undefined)
      if (!reasonOf(error).includes("NOSCRIPT")) return done(undefined, error)
      send(["SCRIPT", "LOAD", route.script.lua], (_, failure) => {
        if (failure !== undefined) return done(undefined, failure)
        send(args.slice(), done)
      })
    })
  }

  // true once loaded (or found loaded); false when the server has no Functions for us
  const load = (done: (loaded: boolean, failure: unknown) => void): void =>
    send(["FUNCTION", "LOAD", library.lua], (_, error) => {
      if (error === undefined) return done(true, undefined)
      const reason = reasonOf(error)
      if (reason.includes("already exists")) return done(true, undefined)
      if (noFunctions(reason)) {
        useFunctions = false
        return done(false, undefined)
      }
      done(false, error)
    })

  const fcall = (route: Scripts.Route, args: Array<string>, done: Done): void => {
    args[0] = "FCALL"
    args[1] = route.fn
    send(args, (reply, error) => {
      if (error === undefined) return done(reply, undefined)
      const reason = reasonOf(error)
      if (reason.includes("Function not found")) {
        return load((loaded, failure) => {
          if (failure !== undefined) return done(undefined, failure)
          if (loaded) send(args.slice(), done)
          else evalSha(route, args.slice(), done)
        })
      }
      if (noFunctions(reason)) {
        useFunctions = false
        return evalSha(route, args.slice(), done)
      }
      done(undefined, error)
    })
  }

  return { run: (route, args, done) => useFunctions ? fcall(route, args, done) : evalSha(route, args, done) }
}

/**
 * node-redis's options for {@link viaNodeRedis} (`NodeRedis.layer`'s).
 *
 * @since 0.3.0
 */
export type NodeRedisOptions = NonNullable<Parameters<typeof NodeRedis.layer>[0]>

// After the first connection: reconnect for ever, backing off to about a
// second, so a restarted server is used again soon after it is back. (The
// default of `NodeRedis` stops reconnecting after a socket timeout.)
const reconnect = (connected: { value: boolean }) => (retries: number, cause: Error): number | Error =>
  connected.value ? Wire.backoff(retries) : cause

/**
 * The store's own connection (`Wire`) to a `redis://` or `rediss://` URL,
 * in the scope: commands written the moment they are sent (see wire.ts).
 * Fails with `RedisError` when the server cannot be reached or does not
 * answer within `connectTimeout`; connecting again waits on Effect's
 * `Clock`, and the connection's log goes to Effect's loggers. Closing the
 * scope waits up to `closeTimeout` for the replies still due, then fails
 * them.
 *
 * @example
 * ```ts
 * import { Duration, Effect } from "effect"
 * import { own } from "./connection.ts"
 *
 * const send = own("redis://localhost:6379", Duration.seconds(5), Duration.seconds(2))
 * ```
 *
 * @since 0.3.0
 */
export const own = Effect.fnUntraced(function*(
  url: string,
  connectTimeout: Duration.Duration,
  closeTimeout: Duration.Duration
) {
  const config = Wire.fromUrl(url)
  if (Predicate.isString(config)) return yield* new Redis.RedisError({ cause: new Error(config) })
  const clock = yield* Clock.Clock
  const runFork = Effect.runForkWith(yield* Effect.context<never>())
  const wire = new Wire.Wire(
    config,
    (millis, f) => {
      const fiber = runFork(Effect.andThen(clock.sleep(Duration.millis(millis)), Effect.sync(f)))
      return () => fiber.interruptUnsafe()
    },
    (level, message) => runFork(Effect.logWithLevel(level)(message))
  )
  const opened = yield* Effect.timeoutOption(
    Effect.callback<Error | undefined>((resume) => {
      wire.open((failure) => resume(Effect.succeed(failure)))
      return Effect.sync(() => wire.destroy())
    }),
    connectTimeout
  )
  if (opened._tag === "None" || opened.value !== undefined) {
    wire.destroy()
    return yield* new Redis.RedisError({
      cause: opened._tag === "None" ? new Error(`no answer within ${Duration.format(connectTimeout)}`) : opened.value
    })
  }
  // closing waits for the replies still due, up to closeTimeout; then they fail
  yield* Effect.addFinalizer(() =>
    Effect.promise(() => wire.drain()).pipe(
      Effect.timeoutOption(closeTimeout),
      Effect.andThen(Effect.sync(() => wire.destroy()))
    )
  )
  const send: Send = (args, done) => wire.send(args, done)
  return send
})

/**
 * A node-redis client (`NodeRedis.layer`) of the store's own, in the scope,
 * for node-redis options the store's connection does not take (a Unix
 * socket, TLS certificates, a credentials provider, …): no offline queue,
 * no per-command timeout (the store bounds every call), and once connected
 * it reconnects for ever. Building and closing it are bounded by
 * `connectTimeout` and `closeTimeout`, as for {@link own}.
 *
 * @example
 * ```ts
 * import { Duration } from "effect"
 * import { viaNodeRedis } from "./connection.ts"
 *
 * const send = viaNodeRedis({ url: "redis://localhost:6379", name: "api" }, Duration.seconds(5), Duration.seconds(2))
 * ```
 *
 * @since 0.3.0
 */
export const viaNodeRedis = Effect.fnUntraced(function*(
  options: NodeRedisOptions,
  connectTimeout: Duration.Duration,
  closeTimeout: Duration.Duration
) {
  // `@effect/platform-node` (and node-redis, its peer) are optional peers: loaded here, where they are used.
  const { NodeRedis } = yield* OptionalPackage.load(
    "the Redis store on node-redis (RedisStore.layer's client options)",
    "@effect/platform-node",
    () => import("@effect/platform-node").then(Result.succeed, Result.fail)
  )
  const connected = { value: false }
  const { url, ...client } = options
  const socket = client.socket
  const redis = NodeRedis.layer({
    disableOfflineQueue: true,
    // The store bounds every call itself (`timeout`); node-redis' own
    // per-command timeout costs an `AbortSignal.timeout` per call.
    commandOptions: { timeout: 0 },
    ...client,
    ...(url === undefined ? {} : { url }),
    socket: { ...socket, reconnectStrategy: socket?.reconnectStrategy ?? reconnect(connected) } as never
  })
  // The client lives in a scope of its own, built and closed on fibers of
  // their own: a server that accepts the connection and never answers is
  // left behind after `connectTimeout` / `closeTimeout`, not waited for.
  const inner = yield* Scope.make()
  const abandon = Effect.forkDetach(Scope.close(inner, Exit.void))
  const building = yield* Effect.forkDetach(Layer.buildWithScope(redis, inner))
  const built = yield* Effect.timeoutOption(Fiber.await(building), connectTimeout)
  if (built._tag === "None") {
    yield* Fiber.interrupt(building).pipe(Effect.andThen(abandon), Effect.forkDetach)
    return yield* new Redis.RedisError({ cause: new Error(`no answer within ${Duration.format(connectTimeout)}`) })
  }
  if (Exit.isFailure(built.value)) {
    yield* abandon
    return yield* Effect.failCause(built.value.cause)
  }
  const context = built.value.value
  connected.value = true
  yield* Effect.addFinalizer(() =>
    Effect.flatMap(
      abandon,
      (closing) =>
        Effect.flatMap(Effect.timeoutOption(Fiber.await(closing), closeTimeout), (closed) =>
          closed._tag === "Some" ? Effect.void : Effect.sync(() => {
            // replies still due: dropped, their calls fail
            const nodeRedis = Context.getOption(context, NodeRedis.NodeRedis)
            if (nodeRedis._tag === "Some") {
              nodeRedis.value.client.destroy()
            }
          }))
    )
  )
  return viaClient(Context.get(context, NodeRedis.NodeRedis).client)
})
