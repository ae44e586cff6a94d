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
  /** Completes when the drain starts. */
  readonly draining: Effect.Effect<void>
  readonly isDraining: Effect.Effect<boolean>
  /** Whether the drain has started, read now (for the request path). */
  readonly isDrainingUnsafe: () => boolean
  /** Starts the drain (idempotent). */
  readonly drain: Effect.Effect<void>
}>()("tollgate/server/Lifecycle") {
  /**
   * A lifecycle that drains only when told.
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
   * @since 0.1.0
   */
  static readonly layer: Layer.Layer<Lifecycle> = Layer.effect(Lifecycle, Lifecycle.make)

  /**
   * Starts the drain when this layer is released. Build it after the HTTP
   * server's layers (it depends on them), so that it is released first.
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
