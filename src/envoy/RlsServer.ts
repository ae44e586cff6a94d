/**
 * The gRPC server of Envoy's rate limit service: RateLimitService v3 on
 * `@grpc/grpc-js`, each call answered by `RlsService`. The server reads and
 * writes its two messages with a codec of its own, written for them and
 * checked against protobuf.js; the vendored `.proto` files serve
 * {@link loadDefinition}, for clients (with `@grpc/proto-loader`).
 *
 * `@grpc/grpc-js` (and, for {@link loadDefinition}, `@grpc/proto-loader`)
 * are optional peer dependencies, loaded when first used: without them this
 * module still loads, and what needs them fails with a `MissingPackage` that
 * names them.
 *
 * @since 0.2.0
 */
import type * as grpc from "@grpc/grpc-js"
import type * as protoLoader from "@grpc/proto-loader"
import { Cause, Deferred, Effect, Exit, Layer, Schema, type Scope } from "effect"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { MissingPackage } from "../Errors.ts"
import * as OptionalPackage from "../internal/OptionalPackage.ts"
import * as Codec from "./internal/codec.ts"
import type { InvalidArgument, RateLimitRequest, RateLimitResponse, Unavailable } from "./RlsService.ts"
import { RlsService } from "./RlsService.ts"

// The server needs grpc-js alone; a client's definition, read from the .proto files, proto-loader too.
// Both are CommonJS, required when first needed.
const serverPackage = (): typeof grpc | MissingPackage => {
  const loaded = OptionalPackage.requireAll("the Envoy rate limit service (gRPC)", ["@grpc/grpc-js"])
  return loaded instanceof MissingPackage ? loaded : loaded[0] as typeof grpc
}

const clientPackages = ():
  | { readonly grpc: typeof grpc; readonly protoLoader: typeof protoLoader }
  | MissingPackage =>
{
  const loaded = OptionalPackage.requireAll(
    "the rate limit service's definition (RlsServer.loadDefinition)",
    ["@grpc/grpc-js", "@grpc/proto-loader"]
  )
  if (loaded instanceof MissingPackage) return loaded
  return { grpc: loaded[0] as typeof grpc, protoLoader: loaded[1] as typeof protoLoader }
}

const SHOULD_RATE_LIMIT = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

/**
 * Fails with a `MissingPackage` when `@grpc/grpc-js`, which the server
 * needs, is not installed: a program that serves the rate limit service checks it
 * before it starts anything else, so that it stops with that one line.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RlsServer } from "tollgate/envoy"
 *
 * const ready = RlsServer.checkPackages.pipe(Effect.as("the gRPC packages are installed"))
 * ```
 *
 * @category protocol
 * @since 0.3.0
 */
export const checkPackages: Effect.Effect<void, MissingPackage> = Effect.suspend(() => {
  const loaded = serverPackage()
  return loaded instanceof MissingPackage ? Effect.fail(loaded) : Effect.void
})

/**
 * A method of a gRPC service as `@grpc/grpc-js` takes it (its
 * `MethodDefinition`), spelled out here so that tollgate's declarations do
 * not need `@grpc/grpc-js` installed.
 *
 * @example
 * ```ts
 * import type { RlsServer } from "tollgate/envoy"
 *
 * const path = (method: RlsServer.MethodDefinition): string => method.path
 * ```
 *
 * @category protocol
 * @since 0.3.0
 */
export interface MethodDefinition {
  readonly path: string
  readonly requestStream: boolean
  readonly responseStream: boolean
  readonly requestSerialize: (value: any) => Buffer
  readonly requestDeserialize: (bytes: Buffer) => any
  readonly responseSerialize: (value: any) => Buffer
  readonly responseDeserialize: (bytes: Buffer) => any
  readonly originalName?: string
}

/**
 * A gRPC service's methods by name, as `@grpc/grpc-js` takes them (its
 * `ServiceDefinition`): `grpc.makeGenericClientConstructor(definition, ...)`
 * makes a client of it.
 *
 * @example
 * ```ts
 * import type { RlsServer } from "tollgate/envoy"
 *
 * const methods = (definition: RlsServer.ServiceDefinition): Array<string> => Object.keys(definition)
 * ```
 *
 * @category protocol
 * @since 0.3.0
 */
export type ServiceDefinition = { readonly [method: string]: MethodDefinition }

/**
 * The gRPC server could not start (the address is in use or not available),
 * or {@link loadDefinition} did not find the `.proto` files.
 *
 * @example
 * ```ts
 * import { RlsServer } from "tollgate/envoy"
 *
 * new RlsServer.RlsServerError({ reason: "127.0.0.1:8081: address already in use" }).message
 * ```
 *
 * @category errors
 * @since 0.2.0
 */
export class RlsServerError extends Schema.TaggedError<RlsServerError>()("RlsServerError", {
  reason: Schema.String
}) {
  override get message(): string {
    return `cannot serve the Envoy rate limit service: ${this.reason}`
  }
}

const RLS_PROTO = "envoy/service/ratelimit/v3/rls.proto"

/**
 * Where the vendored `.proto` files are: beside this module (`proto/`), in the
 * sources and in a built copy alike; a build that left them out is served
 * from the package's `src/envoy/proto`.
 *
 * @example
 * ```ts
 * import { RlsServer } from "tollgate/envoy"
 *
 * const dir = RlsServer.protoDirectory() // ".../envoy/proto", or undefined when missing
 * ```
 *
 * @category protocol
 * @since 0.2.0
 */
export const protoDirectory = (): string | undefined => {
  const candidates = [new URL("./proto/", import.meta.url), new URL("../../src/envoy/proto/", import.meta.url)]
  for (const candidate of candidates) {
    const dir = fileURLToPath(candidate)
    if (existsSync(dir + RLS_PROTO)) return dir
  }
  return undefined
}

/**
 * Loads RateLimitService's definition from the `.proto` files (field names as
 * in the proto, enums as their names, 64-bit integers as numbers): what a
 * client of the service makes its stub from. Needs `@grpc/grpc-js` and
 * `@grpc/proto-loader` (a `MissingPackage` otherwise); the server itself
 * needs neither the files nor proto-loader.
 *
 * @example
 * ```ts
 * import { RlsServer } from "tollgate/envoy"
 *
 * const definition = RlsServer.loadDefinition()
 * ```
 *
 * @category protocol
 * @since 0.2.0
 */
export const loadDefinition = (): ServiceDefinition | RlsServerError | MissingPackage => {
  const packages = clientPackages()
  if (packages instanceof MissingPackage) return packages
  const { grpc, protoLoader } = packages
  const dir = protoDirectory()
  if (dir === undefined) return new RlsServerError({ reason: `${RLS_PROTO} was not found beside the module` })
  const definition = protoLoader.loadSync(RLS_PROTO, {
    includeDirs: [dir],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true
  })
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: { service: grpc.ServiceDefinition } } } } }
  }
  return loaded.envoy.service.ratelimit.v3.RateLimitService.service
}

/**
 * Options of {@link make}.
 *
 * @example
 * ```ts
 * import type { RlsServer } from "tollgate/envoy"
 *
 * const options: RlsServer.Options = { host: "127.0.0.1", port: 8081, shutdownTimeout: 5_000 }
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export interface Options {
  readonly host: string
  /** 0: any free port (the bound one is logged and returned). */
  readonly port: number
  /** How long a shutdown waits for calls in progress before cutting them off. Default 5 s. */
  readonly shutdownTimeout?: number | undefined
}

/**
 * Starts the server in the current scope and returns the port it listens on.
 * Closing the scope stops accepting calls, lets calls in progress finish (up
 * to `shutdownTimeout`), then closes every connection.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RlsServer } from "tollgate/envoy"
 *
 * const port = RlsServer.make({ host: "127.0.0.1", port: 0 }) // needs RlsService and a Scope
 * ```
 *
 * @category constructors
 * @since 0.2.0
 */
export const make = (
  options: Options
): Effect.Effect<number, RlsServerError | MissingPackage, RlsService | Scope.Scope> =>
  Effect.gen(function*() {
    const grpc = serverPackage()
    if (grpc instanceof MissingPackage) return yield* grpc
    const rls = yield* RlsService
    const context = yield* Effect.context<never>()
    const server = new grpc.Server()
    const runFork = Effect.runForkWith(context)
    const answer = (
      callback: grpc.sendUnaryData<RateLimitResponse>,
      exit: Exit.Exit<RateLimitResponse, InvalidArgument | Unavailable>
    ) => {
      if (Exit.isSuccess(exit)) return callback(null, exit.value)
      const error = Cause.findErrorOption(exit.cause)
      if (error._tag === "Some") {
        return callback({
          code: error.value._tag === "InvalidArgument" ? grpc.status.INVALID_ARGUMENT : grpc.status.UNAVAILABLE,
          details: error.value.message
        })
      }
      callback({
        code: Cause.hasInterruptsOnly(exit.cause) ? grpc.status.CANCELLED : grpc.status.INTERNAL,
        details: "internal error"
      })
    }
    const handler: grpc.handleUnaryCall<RateLimitRequest, RateLimitResponse> = (call, callback) => {
      const fiber = runFork(rls.shouldRateLimit(call.request))
      // An in-process decision is made before runFork returns: answered at once, with nothing to cancel.
      const done = fiber.pollUnsafe()
      if (done !== undefined) return answer(callback, done)
      // One that waits (a shared store's round trip) is interrupted when the caller cancels.
      const onCancel = () => fiber.interruptUnsafe()
      call.once("cancelled", onCancel)
      fiber.addObserver((exit) => {
        call.off("cancelled", onCancel)
        answer(callback, exit)
      })
    }
    // Registered with the service's own codec (what `addService` does with a definition's).
    server.register(SHOULD_RATE_LIMIT, handler, Codec.encodeResponse, Codec.decodeRequest, "unary")
    const bound = yield* Effect.callback<number, RlsServerError>((resume) => {
      server.bindAsync(`${options.host}:${options.port}`, grpc.ServerCredentials.createInsecure(), (error, port) => {
        resume(
          error === null
            ? Effect.succeed(port)
            : Effect.fail(new RlsServerError({ reason: `${options.host}:${options.port}: ${error.message}` }))
        )
      })
    })
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        const done = yield* Deferred.make<void>()
        server.tryShutdown(() => Deferred.doneUnsafe(done, Exit.void))
        yield* Deferred.await(done).pipe(
          Effect.timeoutOrElse({
            duration: options.shutdownTimeout ?? 5000,
            orElse: () => Effect.sync(() => server.forceShutdown())
          })
        )
      })
    )
    yield* Effect.logInfo(`Envoy rate limit service (gRPC) listening on ${options.host}:${bound}`)
    return bound
  })

/**
 * The server as a layer (needs `RlsService`).
 *
 * @example
 * ```ts
 * import { RlsServer } from "tollgate/envoy"
 *
 * const server = RlsServer.layer({ host: "127.0.0.1", port: 8081 })
 * ```
 *
 * @category layers
 * @since 0.2.0
 */
export const layer = (options: Options): Layer.Layer<never, RlsServerError | MissingPackage, RlsService> =>
  Layer.effectDiscard(make(options))
