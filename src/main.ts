/**
 * Entry point of `npm start`: the main job of tollgate. For now that is the
 * live demo (see `src/demo/`).
 *
 * @since 0.1.0
 */
import { NodeRuntime, NodeStdio } from "@effect/platform-node"
import { Effect } from "effect"
import * as Demo from "./demo/Demo.ts"

Demo.main.pipe(Effect.provide(NodeStdio.layer), NodeRuntime.runMain)
