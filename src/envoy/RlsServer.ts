/**
 * The gRPC server of Envoy's rate limit service: RateLimitService v3 on
 * `@grpc/grpc-js`, its messages read from the vendored `.proto` files at
 * start (`@grpc/proto-loader`), each call answered by `RlsService`.
 *
 * `@grpc/grpc-js` and `@grpc/proto-loader` are optional peer dependencies,
 * loaded when the server starts (or its definition is loaded): without them
 * this module still loads, and {@link make} fails with a `MissingPackage`
 * that names them.
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
import { type RateLimitRequest, RlsService } from "./RlsService.ts"

const FEATURE = "the Envoy rate limit service (gRPC)"

// The gRPC packages, required when first needed (CommonJS, so synchronously).
const grpcPackages = ():
  | { readonly grpc: typeof grpc; readonly protoLoader: typeof protoLoader }
  | MissingPackage =>
{
  const loaded = OptionalPackage.requireAll(FEATURE, ["@grpc/grpc-js", "@grpc/proto-loader"])
  if (loaded instanceof MissingPackage) return loaded
  return { grpc: loaded[0] as typeof grpc, protoLoader: loaded[1] as typeof protoLoader }
}

/**
 * Fails with a `MissingPackage` when `@grpc/grpc-js` or `@grpc/proto-loader`
 * is not installed: a program that serves the rate limit service checks it
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
  const packages = grpcPackages()
  return packages instanceof MissingPackage ? Effect.fail(packages) : Effect.void
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
 * The gRPC server could not start: the address is in use or not available,
 * or the `.proto` files were not found.
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
 * in the proto, enums as their names, 64-bit integers as numbers). Needs
 * `@grpc/grpc-js` and `@grpc/proto-loader` (a `MissingPackage` otherwise).
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
  const packages = grpcPackages()
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
    const packages = grpcPackages()
    if (packages instanceof MissingPackage) return yield* packages
    const { grpc } = packages
    const definition = loadDefinition()
    if (definition instanceof RlsServerError || definition instanceof MissingPackage) return yield* definition
    const rls = yield* RlsService
    const context = yield* Effect.context<never>()
    const server = new grpc.Server()
    const handler: grpc.handleUnaryCall<RateLimitRequest, unknown> = (call, callback) => {
      const fiber = Effect.runForkWith(context)(rls.shouldRateLimit(call.request))
      const onCancel = () => fiber.interruptUnsafe()
      call.once("cancelled", onCancel)
      fiber.addObserver((exit) => {
        call.off("cancelled", onCancel)
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
      })
    }
    server.addService(definition, { ShouldRateLimit: handler })
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
