/**
 * Entry point of `npm run demo`: runs the live demo and exits.
 *
 * @since 0.1.0
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeStdio from "@effect/platform-node/NodeStdio"
import { Effect } from "effect"
import * as Demo from "./Demo.ts"

Demo.main.pipe(Effect.provide(NodeStdio.layer), NodeRuntime.runMain)
