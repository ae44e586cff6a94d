/**
 * Which algorithms have a script, the script of each, and how a policy is
 * sent to it. An algorithm is recognised by identity (the very `algorithm`
 * object of its module), never by name, so a look-alike cannot be run with
 * another algorithm's arithmetic.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import type { Algorithm } from "../../internal/algorithm/Algorithm.ts"
import * as CompositeAlgorithm from "../../internal/algorithm/Composite.ts"
import * as ConcurrencyAlgorithm from "../../internal/algorithm/Concurrency.ts"
import * as FixedWindowAlgorithm from "../../internal/algorithm/FixedWindow.ts"
import * as GcraAlgorithm from "../../internal/algorithm/Gcra.ts"
import * as LeakyBucketAlgorithm from "../../internal/algorithm/LeakyBucket.ts"
import * as SlidingLogAlgorithm from "../../internal/algorithm/SlidingLog.ts"
import * as SlidingWindowAlgorithm from "../../internal/algorithm/SlidingWindow.ts"
import * as TokenBucketAlgorithm from "../../internal/algorithm/TokenBucket.ts"
import * as WarmUpAlgorithm from "../../internal/algorithm/WarmUp.ts"
import * as Composite from "./composite.ts"
import * as Concurrency from "./concurrency.ts"
import * as Driver from "./driver.ts"
import * as FixedWindow from "./fixedWindow.ts"
import * as Gcra from "./gcra.ts"
import * as LeakyBucket from "./leakyBucket.ts"
import * as Prelude from "./prelude.ts"
import * as SlidingLog from "./slidingLog.ts"
import * as SlidingWindow from "./slidingWindow.ts"
import * as TokenBucket from "./tokenBucket.ts"
import * as WarmUp from "./warmUp.ts"

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

const script = (name: string, modules: ReadonlyArray<string>): Script => {
  const lua = Prelude.lua + modules.join("") + Driver.lua
  return { name, lua, sha: createHash("sha1").update(lua).digest("hex") }
}

interface Module {
  readonly code: number
  readonly lua: string
  readonly config: (config: any) => ReadonlyArray<number>
}

const modules = new Map<Algorithm<any, any>, Module>([
  [TokenBucketAlgorithm.algorithm, TokenBucket],
  [GcraAlgorithm.algorithm, Gcra],
  [LeakyBucketAlgorithm.algorithm, LeakyBucket],
  [FixedWindowAlgorithm.algorithm, FixedWindow],
  [SlidingWindowAlgorithm.algorithm, SlidingWindow],
  [SlidingLogAlgorithm.algorithm, SlidingLog],
  [ConcurrencyAlgorithm.algorithm, Concurrency],
  [WarmUpAlgorithm.algorithm, WarmUp]
])

const scripts = new Map<Algorithm<any, any>, Script>(
  Array.from(modules, ([algorithm, module]) => [algorithm, script(algorithm.name, [module.lua])])
)
scripts.set(
  CompositeAlgorithm.algorithm,
  script(CompositeAlgorithm.algorithm.name, [...Array.from(modules.values(), (m) => m.lua), Composite.lua])
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
export const supported: ReadonlyArray<string> = Array.from(scripts.keys(), (a) => a.name)

// A number as text that Lua's `tonumber` reads back exactly.
const show = (n: number): string =>
  n === Infinity ? "inf" : n === -Infinity ? "-inf" : Object.is(n, -0) ? "-0" : String(n)

// `code canRelease config…` of an algorithm and its configuration (a
// composite's parts each the same way); false if one has no module.
const encode = (algorithm: Algorithm<any, any>, config: unknown, out: Array<string>): boolean => {
  const canRelease = algorithm.release === undefined ? "0" : "1"
  if (algorithm === CompositeAlgorithm.algorithm) {
    const parts = (config as CompositeAlgorithm.Config).parts
    out.push(String(Composite.code), canRelease, String(parts.length))
    for (const part of parts) {
      if (!encode(part.algorithm, part.config, out)) return false
    }
    return true
  }
  const module = modules.get(algorithm)
  if (module === undefined) return false
  out.push(String(module.code), canRelease)
  for (const n of module.config(config)) out.push(show(n))
  return true
}

/**
 * What a policy sends: its script and its `ARGV[3]`.
 *
 * @since 0.1.0
 */
export interface Encoded {
  readonly script: Script
  readonly policy: string
}

/**
 * The script and encoded policy for an algorithm and its configuration, or a
 * sentence saying why there is none.
 *
 * @example
 * ```ts
 * import * as TokenBucket from "../../internal/algorithm/TokenBucket.ts"
 * import { forPolicy } from "./scripts.ts"
 *
 * const c = TokenBucket.config({ capacity: 10, tokens: 1, periodMillis: 1000 })
 * const encoded = forPolicy(TokenBucket.algorithm, c) // { script, policy: "1 1 10 1 1000 10 10000 0 0" }
 * ```
 *
 * @since 0.1.0
 */
export const forPolicy = (algorithm: Algorithm<any, any>, config: unknown): Encoded | string => {
  const found = scripts.get(algorithm)
  const out: Array<string> = []
  if (found === undefined || !encode(algorithm, config, out)) {
    return `the redis store has no script for the ${describe(algorithm, config)} algorithm; it runs ${
      supported.join(", ")
    }`
  }
  return { script: found, policy: out.join(" ") }
}

const describe = (algorithm: Algorithm<any, any>, config: unknown): string => {
  if (algorithm === CompositeAlgorithm.algorithm) {
    const missing = (config as CompositeAlgorithm.Config).parts.map((p) => p.algorithm).find((a) => !modules.has(a))
    if (missing !== undefined) return `${JSON.stringify(missing.name)} (a part of a composite)`
  }
  return JSON.stringify(algorithm.name)
}

/**
 * Every script, for loading ahead of time (`SCRIPT LOAD`).
 *
 * @example
 * ```ts
 * import { all } from "./scripts.ts"
 *
 * all.length // one per supported algorithm
 * ```
 *
 * @since 0.1.0
 */
export const all: ReadonlyArray<Script> = Array.from(scripts.values())
