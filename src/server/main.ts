#!/usr/bin/env node
/**
 * Entry point of the stand-alone service: what `npm start` runs from a clone
 * and `npx tollgate` (the package's `bin`) runs from an installed package.
 *
 * Exit codes: 0 after a SIGTERM/SIGINT shutdown (every accepted request
 * answered), 1 when the service cannot start (bad configuration, port in
 * use, Redis unreachable, a package it needs not installed) or fails, with
 * one line on stderr saying why.
 *
 * @since 0.1.0
 */
import { Cause, Console, Effect, Exit, Layer, Predicate, Result } from "effect"
import { readFileSync } from "node:fs"
import { MissingPackage } from "../Errors.ts"
import { notInstalled } from "../internal/OptionalPackage.ts"
import * as Server from "./Server.ts"

// The service is configured by its environment and its file, not by arguments. An argument other than these
// two stops it with one line rather than being ignored: `tollgate --port 9000` would listen on 8080.
const usage = `Usage: tollgate [--help | --version]

Runs tollgate's HTTP rate-limit service (on 127.0.0.1:8080 by default) until SIGTERM or SIGINT.
It is configured by environment variables (PORT, HOST, TOLLGATE_CONFIG, TOLLGATE_POLICIES,
REDIS_URL, ...) and by the JSON file TOLLGATE_CONFIG names, not by arguments: see "Service mode"
in the package's README.md.
`
const args = process.argv.slice(2)
if (args.length === 1 && (args[0] === "--help" || args[0] === "-h")) {
  process.stdout.write(usage)
  process.exit(0)
}
if (args.length === 1 && (args[0] === "--version" || args[0] === "-v")) {
  // (the package's manifest: two folders up, from src/server in a clone as from dist/server in the package)
  const manifest: { readonly version: string } = JSON.parse(
    readFileSync(new URL("../../package.json", import.meta.url), "utf8")
  )
  process.stdout.write(`${manifest.version}\n`)
  process.exit(0)
}
if (args.length > 0) {
  console.error(
    `tollgate: unknown ${args.length === 1 ? "argument" : "arguments"} ${JSON.stringify(args.join(" "))}: ` +
      "the service is configured by environment variables and TOLLGATE_CONFIG (tollgate --help)"
  )
  process.exit(1)
}

// `@effect/platform-node` is an optional peer dependency of the package: without it the service
// cannot run, and says so in one line (not a stack trace of the module loader).
const platform = await import("@effect/platform-node/NodeRuntime").then(Result.succeed, Result.fail)
if (Result.isFailure(platform)) {
  if (!notInstalled(platform.failure, "@effect/platform-node")) throw platform.failure
  console.error(
    `tollgate: ${new MissingPackage({ feature: "the service", packages: ["@effect/platform-node"] }).message}`
  )
  process.exit(1)
}
const NodeRuntime = platform.success

// Why listen(2) failed, in words, by Node's error code.
const listenReasons: Record<string, string> = {
  EADDRINUSE: "the port is in use",
  EACCES: "permission denied",
  EADDRNOTAVAIL: "the address is not available on this machine"
}

// One line for the error that stopped the service. The HTTP server's
// ServeError carries no message of its own: the line is made from Node's
// listen error, which names the address and port.
const describe = (error: unknown): string => {
  if (Predicate.isTagged(error, "ServeError") && Predicate.hasProperty(error, "cause")) {
    const cause = error.cause
    if (Predicate.hasProperty(cause, "address") && Predicate.hasProperty(cause, "port")) {
      const host = String(cause.address)
      const code = Predicate.hasProperty(cause, "code") ? String(cause.code) : ""
      const reason = listenReasons[code] ?? (cause instanceof Error ? cause.message : code)
      return `cannot listen on ${host.includes(":") ? `[${host}]` : host}:${String(cause.port)}: ${reason}`
    }
    return `the HTTP server failed: ${cause instanceof Error ? cause.message : String(cause)}`
  }
  const message = error instanceof Error ? error.message : String(error)
  return message !== "" ? message : Predicate.hasProperty(error, "_tag") ? String(error._tag) : "failed"
}

const program = Layer.launch(Server.layer).pipe(
  Effect.tapCause((cause) => {
    if (Cause.hasInterruptsOnly(cause)) return Effect.void
    return Console.error(`tollgate: ${describe(Cause.squash(cause))}`)
  })
)

NodeRuntime.runMain(program, {
  // Errors are reported above, as one line that names the field and the value.
  disableErrorReporting: true,
  // A signal interrupts the service; after a clean drain that is success (Effect's default is 130).
  teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause) ? 0 : 1)
})
