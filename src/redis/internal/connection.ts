/**
 * How the Redis store reaches the server: one `send` of a command, and the
 * running of an entry point (a `Scripts.Route`) as a Redis function or as an
 * `EVAL` script, loading what the server lacks.
 *
 * A call of the store is plain JavaScript from the caller's fiber to the
 * socket: over node-redis (`NodeRedis`) the store writes the command with
 * the client's own `sendCommand`, so a lone call costs one promise and the
 * caller's one suspension, with no fiber of its own. Over any other `Redis`
 * service, each command runs that service's `send` on a fiber.
 *
 * @since 0.2.0
 */
import type { NodeRedis } from "@effect/platform-node"
import { Cause, type Context, Effect, Exit, Predicate } from "effect"
import type { Redis } from "effect/persistence"
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
