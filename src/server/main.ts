/**
 * Entry point of the stand-alone service (`npm start`).
 *
 * Exit codes: 0 after a SIGTERM/SIGINT shutdown (every accepted request
 * answered), 1 when the service cannot start (bad configuration, port in
 * use, Redis unreachable) or fails.
 *
 * @since 0.1.0
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Console, Effect, Exit, Layer } from "effect"
import * as Server from "./Server.ts"

const program = Layer.launch(Server.layer).pipe(
  Effect.tapCause((cause) => {
    if (Cause.hasInterruptsOnly(cause)) return Effect.void
    const error = Cause.squash(cause)
    return Console.error(`tollgate: ${error instanceof Error ? error.message : String(error)}`)
  })
)

NodeRuntime.runMain(program, {
  // Errors are reported above, as one line that names the field and the value.
  disableErrorReporting: true,
  // A signal interrupts the service; after a clean drain that is success (Effect's default is 130).
  teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause) ? 0 : 1)
})
