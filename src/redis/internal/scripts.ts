/**
 * Which algorithms have which scripts, and how a policy is sent to them:
 * each algorithm's lean script (one Take or Admit per key; not composites)
 * and batch script, all of them functions of one Redis Functions library
 * and each also an `EVAL` script (`Route`). An algorithm is recognised by
 * identity (the very `algorithm` object of its module), never by name, so a
 * look-alike cannot be run with another algorithm's arithmetic.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import * as AdaptiveAlgorithm from "../../internal/algorithm/Adaptive.ts"
import type { Algorithm } from "../../internal/algorithm/Algorithm.ts"
import * as BurstAlgorithm from "../../internal/algorithm/Burst.ts"
import * as CompositeAlgorithm from "../../internal/algorithm/Composite.ts"
import * as ConcurrencyAlgorithm from "../../internal/algorithm/Concurrency.ts"
import * as FixedWindowAlgorithm from "../../internal/algorithm/FixedWindow.ts"
import * as GcraAlgorithm from "../../internal/algorithm/Gcra.ts"
import * as SlidingLogAlgorithm from "../../internal/algorithm/SlidingLog.ts"
import * as SlidingWindowAlgorithm from "../../internal/algorithm/SlidingWindow.ts"
import * as TokenBucketAlgorithm from "../../internal/algorithm/TokenBucket.ts"
import * as UnlimitedAlgorithm from "../../internal/algorithm/Unlimited.ts"
import * as WarmUpAlgorithm from "../../internal/algorithm/WarmUp.ts"
import * as Entries from "./entries.ts"
import * as Fields from "./fields.ts"
import * as Generated from "./generated.ts"

/**
 * A Lua script with its SHA1 (what `EVALSHA` names it by).
 *
 * @since 0.1.0
 */
export interface Script {
  readonly name: string
  readonly lua: string
  readonly sha: string
}

const sha1 = (text: string): string => createHash("sha1").update(text).digest("hex")

const script = (name: string, lua: string): Script => ({ name, lua, sha: sha1(lua) })

// Each algorithm whose state is numbers: its code in the stored format
// (the first number of a stored state: a format, kept as it is from one
// version to the next), its module compiled from TypeScript, and whether
// a configuration runs the lean step (absent: always).
interface Module {
  readonly code: number
  readonly lean: Entries.Lean
  readonly leans?: ((config: unknown) => boolean) | undefined
}

const module = (
  code: number,
  compiled: Generated.Compiled,
  options?: { readonly shaper?: boolean; readonly leans?: (config: unknown) => boolean }
): Module => ({ code, lean: { module: compiled, code, delay: options?.shaper }, leans: options?.leans })

const modules = new Map<Algorithm<any, any>, Module>([
  [TokenBucketAlgorithm.algorithm, module(1, Generated.modules.TokenBucket)],
  // GCRA, as a meter and as a shaper (the leaky bucket): its lean reply carries the delay
  [GcraAlgorithm.algorithm, module(2, Generated.modules.Gcra, { shaper: true })],
  // with execEvenly a fixed window has no lean step: the batch entry point answers its delays
  // (a configuration looked up under its algorithm is that algorithm's)
  [
    FixedWindowAlgorithm.algorithm,
    module(4, Generated.modules.FixedWindow, {
      leans: (c) => !(c as FixedWindowAlgorithm.Config).execEvenly
    })
  ],
  [SlidingWindowAlgorithm.algorithm, module(5, Generated.modules.SlidingWindow)],
  [SlidingLogAlgorithm.algorithm, module(6, Generated.modules.SlidingLog)],
  [ConcurrencyAlgorithm.algorithm, module(7, Generated.modules.Concurrency)],
  [WarmUpAlgorithm.algorithm, module(8, Generated.modules.WarmUp)],
  [AdaptiveAlgorithm.algorithm, module(20, Generated.modules.Adaptive)]
])

// The policies made of others, and no limit: their codes in the stored format.
const structure: Entries.Structure = {
  interpreter: Generated.modules.Interpreter.path,
  block: Generated.modules.Block.path,
  algorithm: Generated.modules.Algorithm.path,
  composite: { code: 9, path: Generated.modules.Composite.path },
  burst: { code: 10, path: Generated.modules.Burst.path },
  unlimited: { code: 11, path: Generated.modules.Unlimited.path }
}

// Every compiled module, the codecs and the batch and multi entry points' definitions.
const compiled = [
  ...Object.values(Generated.modules).map((m) => m.lua),
  Fields.codecs(Array.from(modules.values(), (m) => ({ code: m.code, module: m.lean.module }))),
  Entries.definitions(structure)
].join("")

/**
 * How a call reaches one entry point: as a function of the tollgate library
 * (`FCALL`, Redis 7 and later), or as an `EVAL` script (`EVALSHA`), which
 * runs the same Lua on any Redis.
 *
 * @since 0.2.0
 */
export interface Route {
  /** What a round trip's span names it: the algorithm (lean) or `batch`. */
  readonly name: string
  /** Its function in the library. */
  readonly fn: string
  /** The same entry point as an `EVAL` script. */
  readonly script: Script
}

// The library: the prelude, every module and the batch entry point's
// definitions, made once when it is loaded, and one function per entry
// point. Its name carries a hash of its text, so versions that differ are
// different libraries (function names are global in Redis) and a server
// never runs a stale one.
const fnName = (version: string, entry: string) => `tollgate_${version}_${entry.replace(/-/g, "_")}`
const leanEntries = Array.from(modules, ([algorithm, module]) => ({
  algorithm,
  fn: Entries.leanBody(module.lean, "function"),
  script: Entries.leanBody(module.lean, "script")
}))
const libraryText = (version: string): string =>
  [
    `#!lua name=tollgate_${version}\n`,
    Generated.runtime + Entries.prelude,
    compiled,
    `redis.register_function("${fnName(version, "batch")}", function(KEYS, ARGV)\n`,
    "if floor == nil then bind() end\n",
    Entries.body,
    "end)\n",
    `redis.register_function("${fnName(version, "multi")}", function(KEYS, ARGV)\n`,
    "if floor == nil then bind() end\n",
    Entries.multi,
    "end)\n",
    Entries.configReader,
    ...Array.from(modules.values(), (m) => m.lean.module.lean + Entries.leanDefinitions(m.lean.module)),
    ...leanEntries.map(({ algorithm, fn }) =>
      `redis.register_function("${fnName(version, algorithm.name)}", function(KEYS, ARGV)\n${fn}end)\n`
    )
  ].join("")
const version = sha1(libraryText("")).slice(0, 12)

/**
 * The Redis Functions library of every entry point (`FUNCTION LOAD`).
 *
 * @example
 * ```ts
 * import { library } from "./scripts.ts"
 *
 * library.name // "tollgate_" + 12 hex digits
 * ```
 *
 * @since 0.2.0
 */
export const library: { readonly name: string; readonly lua: string } = {
  name: `tollgate_${version}`,
  lua: libraryText(version)
}

// One batch script serves every policy: it carries every compiled module
// (run only when a call first requires it).
const batchRoute: Route = {
  name: "batch",
  fn: fnName(version, "batch"),
  script: script("batch", Generated.runtime + Entries.prelude + compiled + "bind()\n" + Entries.body)
}

const batches = new Map<Algorithm<any, any>, Route>(Array.from(modules.keys(), (algorithm) => [algorithm, batchRoute]))
batches.set(CompositeAlgorithm.algorithm, batchRoute)
batches.set(BurstAlgorithm.algorithm, batchRoute)
batches.set(UnlimitedAlgorithm.algorithm, batchRoute)

/**
 * The all-or-nothing entry point over several keys (any policies): its
 * library function, and its `EVAL` script with every module.
 *
 * @example
 * ```ts
 * import { multi } from "./scripts.ts"
 *
 * multi.name // "multi"
 * ```
 *
 * @since 0.2.0
 */
export const multi: Route = {
  name: "multi",
  fn: fnName(version, "multi"),
  script: script("multi", Generated.runtime + Entries.prelude + compiled + "bind()\n" + Entries.multi)
}

const leans = new Map<Algorithm<any, any>, Route>(
  leanEntries.map(({ algorithm, script: lua }) => [algorithm, {
    name: algorithm.name,
    fn: fnName(version, algorithm.name),
    script: script(algorithm.name, lua)
  }])
)

/**
 * The names of the algorithms the Redis store runs.
 *
 * @example
 * ```ts
 * import { supported } from "./scripts.ts"
 *
 * supported.includes("token-bucket") // true
 * ```
 *
 * @since 0.1.0
 */
export const supported: ReadonlyArray<string> = Array.from(batches.keys(), (a) => a.name)

// A number as text that Lua's `tonumber` reads back exactly.
const show = (n: number): string =>
  n === Infinity ? "inf" : n === -Infinity ? "-inf" : Object.is(n, -0) ? "-0" : String(n)

// `code canRelease config…` of an algorithm and its configuration (a
// composite's parts each the same way); false if one has no module.
const encode = (algorithm: Algorithm<any, any>, config: unknown, out: Array<string>): boolean => {
  const canRelease = algorithm.release === undefined ? "0" : "1"
  if (algorithm === UnlimitedAlgorithm.algorithm) {
    out.push(String(structure.unlimited.code), canRelease)
    return true
  }
  if (algorithm === BurstAlgorithm.algorithm) {
    const { base, burst } = config as BurstAlgorithm.Config
    out.push(String(structure.burst.code), canRelease)
    for (const part of [base, burst]) {
      if (!encode(part.algorithm, part.config, out)) return false
    }
    return true
  }
  if (algorithm === CompositeAlgorithm.algorithm) {
    const parts = (config as CompositeAlgorithm.Config).parts
    out.push(String(structure.composite.code), canRelease, String(parts.length))
    for (const part of parts) {
      if (!encode(part.algorithm, part.config, out)) return false
    }
    return true
  }
  const module = modules.get(algorithm)
  if (module === undefined) return false
  out.push(String(module.code), canRelease)
  for (const n of Fields.configNumbers(module.lean.module, config)) out.push(show(n))
  return true
}

/**
 * What a policy sends: its batch route and `policy` text, and when its
 * algorithm has a lean entry point, that route and the policy's numbers.
 *
 * @since 0.1.0
 */
export interface Encoded {
  readonly batch: Route
  /** The batch entry point's `code canRelease config…`. */
  readonly policy: string
  readonly lean: Route | undefined
  /** The lean entry point's `ARGV[3]`: the configuration's numbers, separated by spaces. */
  readonly leanConfig: string
  /** One lean call carries keys of one policy: the route and the numbers. */
  readonly leanGroup: string
  /** Values per key in the lean entry point's reply: 6 for a shaper (its delay), else 5. */
  readonly leanWidth: number
}

/**
 * The routes and encoded policy for an algorithm and its configuration, or
 * a sentence saying why there is none.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "../../internal/algorithm/TokenBucket.ts"
 * import { forPolicy } from "./scripts.ts"
 *
 * const c = TokenBucket.config({ capacity: 10, tokens: 1, periodMillis: 1000 })
 * const encoded = forPolicy(TokenBucket.algorithm, c) // { policy: "1 1 10 1 1000 10 10000 0 0 0 -inf 0", leanConfig: "10 1 1000 ...", ... }
 * ```
 *
 * @since 0.1.0
 */
export const forPolicy = (policyAlgorithm: object, config: unknown): Encoded | string => {
  // an algorithm module (looked up by identity below: an unknown one finds no script)
  const algorithm = policyAlgorithm as Algorithm<any, any>
  const found = batches.get(algorithm)
  const out: Array<string> = []
  if (found === undefined || !encode(algorithm, config, out)) {
    return `the redis store has no script for the ${describe(algorithm, config)} algorithm; it runs ${
      supported.join(", ")
    }`
  }
  const module = modules.get(algorithm)
  const lean = module?.leans?.(config) === false ? undefined : leans.get(algorithm)
  const leanConfig = lean === undefined ? "" : Fields.configNumbers(module!.lean.module, config).map(show).join(" ")
  return {
    batch: found,
    policy: out.join(" "),
    lean,
    leanConfig,
    leanGroup: lean === undefined ? "" : `${lean.fn} ${leanConfig}`,
    leanWidth: module?.lean.delay === true ? 6 : 5
  }
}

const describe = (algorithm: Algorithm<any, any>, config: unknown): string => {
  if (algorithm === CompositeAlgorithm.algorithm) {
    const missing = (config as CompositeAlgorithm.Config).parts.map((p) => p.algorithm).find((a) => !modules.has(a))
    if (missing !== undefined) return `${JSON.stringify(missing.name)} (a part of a composite)`
  }
  return JSON.stringify(algorithm.name)
}

/**
 * Every `EVAL` script, for loading ahead of time (`SCRIPT LOAD`).
 *
 * @example
 * ```ts
 * import { all } from "./scripts.ts"
 *
 * all.length // a batch script per supported algorithm and a lean one per module
 * ```
 *
 * @since 0.1.0
 */
export const all: ReadonlyArray<Script> = [
  batchRoute.script,
  multi.script,
  ...Array.from(leans.values(), (r) => r.script)
]
