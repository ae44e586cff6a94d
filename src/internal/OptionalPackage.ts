/**
 * Loading an optional peer dependency where it is used, so that an entry
 * point loads without it and only the part that needs it fails, with a
 * `MissingPackage` whose message is one line naming the package and the
 * command that installs it.
 *
 * Two ways, by what the caller is: an effect loads an ES module with
 * `import()` ({@link load}); a synchronous function (a parser, a definition
 * loader) loads a CommonJS package with `require` ({@link requireAll}).
 *
 * @since 0.3.0
 */
import { Effect, Predicate, Result } from "effect"
import { createRequire } from "node:module"
import { MissingPackage } from "../Errors.ts"

/**
 * Whether a failed `import()` or `require` failed because `name` itself is
 * not installed (and not a module it loads in turn, which is a real fault).
 *
 * @since 0.3.0
 */
export const notInstalled = (error: unknown, name: string): boolean =>
  Predicate.hasProperty(error, "code") &&
  (error.code === "ERR_MODULE_NOT_FOUND" || error.code === "MODULE_NOT_FOUND") &&
  error instanceof Error && (error.message.includes(`'${name}'`) || error.message.includes(`"${name}"`))

/**
 * Loads an ES module with `import()` when the effect runs. `imported` is
 * written at the call site as `() => import("name").then(Result.succeed,
 * Result.fail)`: a literal specifier a bundler can follow, with the failure
 * handled (a bundler leaves a missing optional package to run time).
 *
 * @since 0.3.0
 */
export const load = <A>(
  feature: string,
  name: string,
  imported: () => Promise<Result.Result<A, unknown>>
): Effect.Effect<A, MissingPackage> =>
  Effect.flatMap(Effect.promise(imported), (result) =>
    Result.isSuccess(result)
      ? Effect.succeed(result.success)
      : notInstalled(result.failure, name)
      ? Effect.fail(new MissingPackage({ feature, packages: [name] }))
      : Effect.die(result.failure))

const require = createRequire(import.meta.url)

/**
 * Requires CommonJS packages at once, for a synchronous caller: their
 * exports in order, or a `MissingPackage` naming every one not installed.
 * Any other failure to load one is thrown (a fault, not a missing package).
 *
 * @since 0.3.0
 */
export const requireAll = (feature: string, names: ReadonlyArray<string>): ReadonlyArray<unknown> | MissingPackage => {
  const modules: Array<unknown> = []
  const missing: Array<string> = []
  for (const name of names) {
    try {
      modules.push(require(name))
    } catch (error) {
      if (!notInstalled(error, name)) throw error
      missing.push(name)
    }
  }
  return missing.length === 0 ? modules : new MissingPackage({ feature, packages: missing })
}
