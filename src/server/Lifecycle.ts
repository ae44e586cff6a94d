/**
 * The service's lifecycle as requests see it: once shutdown starts, the
 * service is draining: `/readyz` says so, requests waiting in `/v1/wait`
 * are answered at once (503, retry elsewhere) instead of holding the
 * shutdown up, and the HTTP server stops listening and closes each
 * connection after its next answer. Every request it has read gets an
 * answer.
 *
 * @since 0.1.0
 */
import { Context, Deferred, Effect, Layer, Schema } from "effect"

/**
 * The service is shutting down: the request was accepted, and is answered
 * with 503 so that the client retries on another instance.
 *
 * @example
 * ```ts
 * import { Lifecycle } from "tollgate/server"
 *
 * new Lifecycle.ShuttingDown().message // "the service is shutting down"
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export class ShuttingDown extends Schema.TaggedError<ShuttingDown>()("ShuttingDown", {}) {
  override get message(): string {
    return "the service is shutting down"
  }
}

/**
 * Draining state.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Lifecycle } from "tollgate/server"
 *
 * const program = Effect.gen(function*() {
 *   const lifecycle = yield* Lifecycle.Lifecycle
 *   return yield* lifecycle.isDraining
 * })
 * ```
 *
 * @category services
 * @since 0.1.0
 */
export class Lifecycle extends Context.Service<Lifecycle, {
  /**
   * Completes when the drain starts.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { Lifecycle } from "tollgate/server"
   *
   * const onDrain = Lifecycle.Lifecycle.use((l) => Effect.andThen(l.draining, Effect.logInfo("draining")))
   * ```
   */
  readonly draining: Effect.Effect<void>
  /**
   * Whether the drain has started.
   *
   * @example
   * ```ts
   * import { Lifecycle } from "tollgate/server"
   *
   * const draining = Lifecycle.Lifecycle.use((l) => l.isDraining)
   * ```
   */
  readonly isDraining: Effect.Effect<boolean>
  /**
   * Whether the drain has started, read now (for the request path).
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { Lifecycle } from "tollgate/server"
   *
   * const status = Lifecycle.Lifecycle.use((l) => Effect.sync(() => (l.isDrainingUnsafe() ? 503 : 200)))
   * ```
   */
  readonly isDrainingUnsafe: () => boolean
  /**
   * Starts the drain (idempotent).
   *
   * @example
   * ```ts
   * import { Lifecycle } from "tollgate/server"
   *
   * const stop = Lifecycle.Lifecycle.use((l) => l.drain)
   * ```
   */
  readonly drain: Effect.Effect<void>
}>()("tollgate/server/Lifecycle") {
  /**
   * A lifecycle that drains only when told.
   *
   * @example
   * ```ts
   * import { Effect } from "effect"
   * import { Lifecycle } from "tollgate/server"
   *
   * const program = Effect.gen(function*() {
   *   const lifecycle = yield* Lifecycle.Lifecycle.make
   *   yield* lifecycle.drain
   *   return yield* lifecycle.isDraining // true
   * })
   * ```
   *
   * @since 0.1.0
   */
  static readonly make: Effect.Effect<Lifecycle["Service"]> = Effect.map(
    Deferred.make<void>(),
    (deferred) =>
      Lifecycle.of({
        draining: Deferred.await(deferred),
        isDraining: Deferred.isDone(deferred),
        isDrainingUnsafe: () => Deferred.isDoneUnsafe(deferred),
        drain: Effect.asVoid(Deferred.succeed(deferred, undefined))
      })
  )

  /**
   * The lifecycle as a layer.
   *
   * @example
   * ```ts
   * import { Layer } from "effect"
   * import { Lifecycle, Tollgate } from "tollgate/server"
   *
   * const both = Layer.mergeAll(Lifecycle.Lifecycle.layer, Tollgate.Tollgate.layer)
   * ```
   *
   * @since 0.1.0
   */
  static readonly layer: Layer.Layer<Lifecycle> = Layer.effect(Lifecycle, Lifecycle.make)

  /**
   * Starts the drain when this layer is released. Build it after the HTTP
   * server's layers (it depends on them), so that it is released first.
   *
   * @example
   * ```ts
   * import { Layer } from "effect"
   * import { Lifecycle, Server } from "tollgate/server"
   *
   * // built after the HTTP server, released before it: the drain starts first
   * const service = Lifecycle.Lifecycle.drainOnRelease.pipe(
   *   Layer.provide(Server.layerHttp),
   *   Layer.provideMerge(Lifecycle.Lifecycle.layer)
   * )
   * ```
   *
   * @since 0.1.0
   */
  static readonly drainOnRelease: Layer.Layer<never, never, Lifecycle> = Layer.effectDiscard(
    Lifecycle.use((lifecycle) =>
      Effect.addFinalizer(() =>
        Effect.andThen(Effect.logInfo("tollgate shutting down: draining accepted requests"), lifecycle.drain)
      )
    )
  )
}
