/**
 * Redis goes away in the middle of a run and comes back: on a redis-server
 * of the test's own (its own port), killed and started again. While it is
 * down, every fallback mode decides as configured (a local share, allow,
 * deny, or StoreUnavailable), every call completes within the timeout, and
 * once it is back every limiter uses it again (its scripts loaded anew).
 * First the server hangs (stopped: its socket stays open, calls time out),
 * then it dies (killed: calls are refused at once), then it restarts empty.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Clock, Context, Duration, Effect, Exit, Fiber, Layer, Logger, Scope } from "effect"
import { Redis as IORedis } from "ioredis"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Engine from "../../src/internal/actor/Engine.ts"
import { Kind as OpKind } from "../../src/internal/operation/Op.ts"
import * as Policy from "../../src/Policy.ts"
import { RateLimiter } from "../../src/RateLimiter.ts"
import * as RedisStore from "../../src/redis/RedisStore.ts"
import * as Store from "../../src/Store.ts"
import {
  decidedByRedis,
  freePort,
  generousOn,
  hasServer,
  killServer,
  relay,
  silentServer,
  startServer,
  tempDir,
  untilBackOnRedis
} from "./redis.ts"

const skipped = "redis-server is not installed: the restart test is skipped (.ci/run installs it)"
if (!hasServer) console.warn(skipped)

const modes = ["local", "allow", "deny", "error"] as const
// Long enough that a busy machine does not time out a call while Redis is up.
const TIMEOUT = 1000
// A call that ends this long after its timeout counts as hung: a bound on
// hanging, not on speed, with room for a loaded machine's scheduling.
const HUNG = TIMEOUT + 4000

// A redis-server of the test's own in `dir` (`extra`: more of its options),
// killed with the scope: its port and process.
const ownServer = (dir: string, extra: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const server = yield* Effect.acquireRelease(startServer(port, dir, extra), killServer)
    return { port, server }
  })

// The warnings logged while `effect` runs.
const warningsOf = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const logger = Logger.make<unknown, void>(({ logLevel, message }) => {
      if (logLevel === "Warn") lines.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
    })
    const value = yield* effect.pipe(Effect.provide(Logger.layer([logger])))
    return { value, lines }
  })

const suite = hasServer ? describe : describe.skip
suite(hasServer ? "Redis stopped and restarted mid-run" : `Redis stopped and restarted mid-run (${skipped})`, () => {
  it.live(
    "the fallback decides while it is down, no call hangs, and the store is used again once it is back",
    () =>
      Effect.gen(function*() {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tollgate-redis-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
        const port = yield* freePort
        const server = { current: yield* startServer(port, dir) }
        yield* Effect.addFinalizer(() => killServer(server.current))

        const context = yield* Layer.build(RedisStore.layer({ url: `redis://127.0.0.1:${port}`, prefix: "restart:" }))
        const store = Engine.engineOf(Context.get(context, Store.CurrentStore))
        const limiters = yield* Effect.forEach(modes, (mode) =>
          RateLimiter.make({
            policy: Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } }),
            fallback: { mode, share: 0.5, timeout: Duration.millis(TIMEOUT), retryAfter: "200 millis" }
          }).pipe(Effect.provideService(Store.CurrentStore, Engine.pluggable(store))))

        let slowest = 0
        const consume = (i: number) =>
          Effect.timed(Effect.exit(limiters[i].consume(`k-${modes[i]}`))).pipe(
            Effect.map(([took, exit]) => {
              slowest = Math.max(slowest, Duration.toMillis(took))
              return exit
            })
          )
        // Rounds of calls while Redis does not answer: each mode's fallback.
        const degradedRounds = (rounds: number) =>
          Effect.gen(function*() {
            for (let round = 0; round < rounds; round++) {
              for (let i = 0; i < modes.length; i++) {
                const exit = yield* consume(i)
                switch (modes[i]) {
                  case "local":
                    // half of the limit, decided here
                    assert.isTrue(Exit.isSuccess(exit) && exit.value.degraded === true && exit.value.limit === 5)
                    break
                  case "allow":
                    assert.isTrue(Exit.isSuccess(exit) && exit.value.allowed && exit.value.degraded === true)
                    break
                  case "deny":
                    assert.isTrue(Exit.isSuccess(exit) && !exit.value.allowed && exit.value.degraded === true)
                    break
                  case "error":
                    assert.isTrue(Exit.isFailure(exit) && String(exit.cause).includes("StoreUnavailable"), String(exit))
                    break
                }
              }
              yield* Effect.sleep("50 millis")
            }
          })
        // Until every limiter's calls are decided by Redis again.
        const recovered = Effect.gen(function*() {
          const back = new Set<number>()
          for (let round = 0; round < 200 && back.size < modes.length; round++) {
            for (let i = 0; i < modes.length; i++) {
              const exit = yield* consume(i)
              if (Exit.isSuccess(exit) && exit.value.degraded === undefined) back.add(i)
            }
            if (back.size < modes.length) yield* Effect.sleep("50 millis")
          }
          assert.strictEqual(back.size, modes.length, "every limiter recovered")
        })

        // up: decided by Redis
        for (let i = 0; i < modes.length; i++) {
          const exit = yield* consume(i)
          assert.isTrue(Exit.isSuccess(exit) && exit.value.allowed && exit.value.degraded === undefined)
        }

        // hung (stopped, its socket open): calls time out into the fallback
        server.current.kill("SIGSTOP")
        yield* degradedRounds(2)
        expect(slowest).toBeGreaterThanOrEqual(TIMEOUT - 10) // the timeout fired
        expect(slowest).toBeLessThan(HUNG)
        server.current.kill("SIGCONT")
        yield* recovered

        // down (killed): refused at once, into the fallback; no call waits for its timeout
        yield* killServer(server.current)
        slowest = 0
        yield* degradedRounds(10)
        expect(slowest).toBeLessThan(TIMEOUT - 10)

        // back (empty, without the scripts): every limiter uses Redis again
        server.current = yield* startServer(port, dir)
        yield* recovered
        expect(slowest).toBeLessThan(HUNG)
        for (let i = 0; i < modes.length; i++) {
          const stats = yield* limiters[i].stats
          expect(stats.storeFailures).toBeGreaterThan(0)
        }
      }),
    90_000
  )
})

describe("an unreachable Redis", () => {
  it.live("fails building the layer at once with RedisError, instead of hanging", () =>
    Effect.gen(function*() {
      const port = yield* freePort // nothing listens there
      const exit = yield* Effect.exit(Layer.build(RedisStore.layer({ url: `redis://127.0.0.1:${port}` })))
      assert.isTrue(Exit.isFailure(exit) && String(exit.cause).includes("RedisError"), String(exit))
    }).pipe(Effect.scoped), 10_000)

  it.live(
    "that accepts the connection and never answers: building fails with RedisError after connectTimeout",
    () =>
      Effect.gen(function*() {
        const port = yield* silentServer
        const exit = yield* Layer.build(
          RedisStore.layer({ url: `redis://127.0.0.1:${port}`, connectTimeout: "300 millis" })
        ).pipe(
          Effect.exit,
          Effect.timeoutOrElse({ duration: "10 seconds", orElse: () => Effect.die("building the layer hung") })
        )
        assert.isTrue(Exit.isFailure(exit), String(exit))
        assert.include(String(exit), "RedisError")
        assert.include(String(exit), "no answer within 300ms")
      }).pipe(Effect.scoped),
    20_000
  )
})

const hung = hasServer ? describe : describe.skip
hung(hasServer ? "a Redis that hangs" : `a Redis that hangs (${skipped})`, () => {
  it.live(
    "closing the layer gives up on the replies still due after closeTimeout, failing their calls",
    () =>
      Effect.gen(function*() {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tollgate-redis-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
        const port = yield* freePort
        const server = yield* startServer(port, dir)
        yield* Effect.addFinalizer(() => killServer(server))
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(
          RedisStore.layer({ url: `redis://127.0.0.1:${port}`, prefix: "close:", closeTimeout: "300 millis" }),
          scope
        )
        const store = Engine.engineOf(Context.get(context, Store.CurrentStore))
        const policy = Policy.tokenBucket({ capacity: 10, refill: { tokens: 1, per: "1 second" } }) as Policy.Valid
        const take = [{ kind: OpKind.Take, cost: 1, queued: 0 }]
        const up = yield* store.apply("k", policy, take, 10_000)
        assert.strictEqual(up[0].allowed, true)

        server.kill("SIGSTOP") // its socket stays open; no reply comes
        const due = yield* store.apply("k", policy, take, 60_000).pipe(Effect.exit, Effect.forkChild)
        yield* Effect.sleep("50 millis")
        yield* Scope.close(scope, Exit.void).pipe(
          Effect.timeoutOrElse({ duration: "10 seconds", orElse: () => Effect.die("closing the layer hung") })
        )
        const exit = yield* Fiber.join(due).pipe(
          Effect.timeoutOrElse({ duration: "10 seconds", orElse: () => Effect.die("the call due hung") })
        )
        assert.isTrue(Exit.isFailure(exit) && String(exit.cause).includes("StoreUnavailable"), String(exit))
        server.kill("SIGCONT")
      }),
    30_000
  )
})

const silent = hasServer ? describe : describe.skip
silent(hasServer ? "a connection that goes silent" : `a connection that goes silent (${skipped})`, () => {
  // A route lost, or a middlebox between that forgot the connection: no
  // reply comes and nothing closes it, so the client never learns it is
  // gone. Every call times out into the fallback; after `silenceTimeout`
  // of that the store closes the connection, and the client's next one
  // (through the same relay, which lets new connections through) works.
  it.live(
    "cut on the way (nothing answers, nothing closes): the store opens another after silenceTimeout, and Redis decides again",
    () =>
      Effect.gen(function*() {
        const { port } = yield* ownServer(yield* tempDir("tollgate-redis-"))
        const link = yield* relay(port)
        const context = yield* Layer.build(
          RedisStore.layer({ url: `redis://127.0.0.1:${link.port}`, prefix: "silent:", silenceTimeout: "1 second" })
        )
        const limiter = yield* generousOn(Context.get(context, Store.CurrentStore), "200 millis", "100 millis")
        yield* decidedByRedis(limiter.consume("k"))

        link.cut()
        const m = yield* untilBackOnRedis(() => limiter.consume("k"), 20_000)
        console.info(`a silent connection: ${JSON.stringify(m)}`)
        expect(m.degraded).toBeGreaterThan(0)
        // the silence (1 s), the timeout and retryAfter of the calls that
        // measure it, and a reconnection: a bound loose enough for a loaded machine
        expect(m.backAfter).toBeLessThan(6000)
        expect(m.slowest).toBeLessThan(HUNG)
      }).pipe(Effect.scoped),
    30_000
  )
  // A server that is only slow (stopped for about half a second, twice,
  // 3.5 s apart, with silenceTimeout 3 s: room for a loaded machine's
  // stalls) keeps its connection: each silence counts from its own first
  // timeout, and a reply in between ends the first.
  it.live(
    "a server silent for less than silenceTimeout, twice: the connection is kept",
    () =>
      Effect.gen(function*() {
        const { port, server } = yield* ownServer(yield* tempDir("tollgate-redis-"))
        const admin = yield* Effect.acquireRelease(
          Effect.sync(() => new IORedis({ host: "127.0.0.1", port })),
          (c) => Effect.sync(() => c.disconnect())
        )
        const connections = Effect.promise(() => admin.info("stats")).pipe(
          Effect.map((info) => Number(/total_connections_received:(\d+)/.exec(info)?.[1]))
        )
        const context = yield* Layer.build(
          RedisStore.layer({ url: `redis://127.0.0.1:${port}`, prefix: "slow:", silenceTimeout: "3 seconds" })
        )
        const limiter = yield* generousOn(Context.get(context, Store.CurrentStore), "200 millis", "50 millis")
        const onRedis = Effect.map(limiter.consume("k"), (d) => d.degraded === undefined)
        yield* decidedByRedis(limiter.consume("k"))
        const before = yield* connections
        for (let pause = 0; pause < 2; pause++) {
          server.kill("SIGSTOP")
          // a call times out (200 ms) with nothing heard; then a second call, too
          assert.isFalse(yield* onRedis)
          yield* Effect.sleep("100 millis")
          assert.isFalse(yield* onRedis)
          server.kill("SIGCONT")
          // the late replies come; calls are decided by Redis again
          yield* decidedByRedis(limiter.consume("k"))
          yield* Effect.sleep("3500 millis")
        }
        assert.strictEqual(yield* connections, before, "no connection opened again")
      }).pipe(Effect.scoped),
    30_000
  )
  // Replies that come, but each after its call's timeout (held back by a
  // relay and let through every 300 ms): the connection answers, so it is kept.
  it.live(
    "a server whose every reply comes after the call's timeout: the connection is kept",
    () =>
      Effect.gen(function*() {
        const { port } = yield* ownServer(yield* tempDir("tollgate-redis-"))
        const link = yield* relay(port)
        const context = yield* Layer.build(
          RedisStore.layer({ url: `redis://127.0.0.1:${link.port}`, prefix: "late:", silenceTimeout: "3 seconds" })
        )
        const limiter = yield* generousOn(Context.get(context, Store.CurrentStore), "200 millis", "50 millis")
        yield* decidedByRedis(limiter.consume("k"))
        const before = link.accepted()
        link.gate.hold()
        yield* Effect.sleep("300 millis").pipe(
          Effect.andThen(Effect.sync(() => {
            link.gate.release()
            link.gate.hold()
          })),
          Effect.forever,
          Effect.forkScoped
        )
        let degraded = 0
        const start = yield* Clock.currentTimeMillis
        while ((yield* Clock.currentTimeMillis) - start < 5000) {
          if ((yield* limiter.consume("k")).degraded === true) degraded++
          yield* Effect.sleep("20 millis")
        }
        expect(degraded).toBeGreaterThan(0)
        assert.strictEqual(link.accepted(), before, "no connection opened again")
      }).pipe(Effect.scoped),
    30_000
  )
})

// The warnings a store built on the server at `port` logs as it starts.
const startWarnings = (port: number, password = "") =>
  Effect.map(
    warningsOf(
      Layer.build(RedisStore.layer({ url: `redis://${password === "" ? "" : `:${password}@`}127.0.0.1:${port}` })).pipe(
        Effect.scoped
      )
    ),
    ({ lines }) => lines
  )

const memory = hasServer ? describe : describe.skip
memory(hasServer ? "a Redis that may evict keys" : `a Redis that may evict keys (${skipped})`, () => {
  // A key Redis evicts starts afresh and admits again: the store says so
  // when it starts, naming the server's policy; a server that refuses
  // writes when full (noeviction) is not named.
  it.live(
    "the store warns at its start when the server's maxmemory-policy may evict its keys",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("tollgate-redis-")
        const warnings = (policy: string) =>
          Effect.flatMap(
            ownServer(dir, ["--maxmemory", "100mb", "--maxmemory-policy", policy]),
            ({ port }) => startWarnings(port)
          ).pipe(Effect.scoped)
        const lru = yield* warnings("allkeys-lru")
        assert.isTrue(lru.some((l) => l.includes("maxmemory-policy allkeys-lru")), lru.join("\n"))
        const ttl = yield* warnings("volatile-ttl")
        assert.isTrue(ttl.some((l) => l.includes("maxmemory-policy volatile-ttl")), ttl.join("\n"))
        assert.deepStrictEqual(yield* warnings("noeviction"), [])
      }).pipe(Effect.scoped),
    30_000
  )
})

const moved = hasServer ? describe : describe.skip
moved(hasServer ? "a primary turned replica" : `a primary turned replica (${skipped})`, () => {
  // A managed Redis fails over behind one name (a DNS name that moves to
  // the new primary): the old primary, turned replica, keeps the store's
  // connection and refuses every write with READONLY. The store then
  // connects again, and finds the new primary behind the name (a relay
  // here, whose next connections go to it).
  it.live(
    "writes refused with READONLY: the store connects again and finds the new primary",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("tollgate-redis-")
        const old = yield* ownServer(dir)
        const next = yield* ownServer(dir, ["--dbfilename", "next.rdb"])
        const name = yield* relay(old.port)
        const context = yield* Layer.build(
          RedisStore.layer({ url: `redis://127.0.0.1:${name.port}`, prefix: "moved:" })
        )
        const limiter = yield* generousOn(Context.get(context, Store.CurrentStore), "500 millis", "50 millis")
        yield* decidedByRedis(limiter.consume("k"))

        // the failover: the old primary follows the new one, and the name moves
        yield* Effect.promise(async () => {
          const admin = new IORedis({ host: "127.0.0.1", port: old.port })
          try {
            await admin.call("REPLICAOF", "127.0.0.1", String(next.port))
          } finally {
            admin.disconnect()
          }
        })
        name.retarget(next.port)
        const m = yield* untilBackOnRedis(() => limiter.consume("k"), 10_000)
        console.info(`a primary turned replica: ${JSON.stringify(m)}`)
        expect(m.degraded).toBeGreaterThan(0)
        expect(m.backAfter).toBeLessThan(5000)
      }).pipe(Effect.scoped),
    30_000
  )

  it.live(
    "a store given a replica warns at its start that it refuses the limiter's writes",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("tollgate-redis-")
        const primary = yield* ownServer(dir)
        const replica = yield* ownServer(dir, [
          "--dbfilename",
          "replica.rdb",
          "--replicaof",
          "127.0.0.1",
          String(primary.port)
        ])
        const onReplica = yield* startWarnings(replica.port)
        assert.isTrue(onReplica.some((l) => l.includes(`127.0.0.1:${replica.port} is a replica`)), onReplica.join("\n"))
        assert.deepStrictEqual(yield* startWarnings(primary.port), [])
      }).pipe(Effect.scoped),
    30_000
  )
})

const credentials = hasServer ? describe : describe.skip
credentials(hasServer ? "credentials refused" : `credentials refused (${skipped})`, () => {
  // A password rotated on the server: every attempt to connect again is
  // refused. That is a warning (once, not once a second), where a server
  // that is down is only noted at debug level.
  it.live("a password changed on the server: one warning naming the refusal", () =>
    Effect.gen(function*() {
      const { port } = yield* ownServer(yield* tempDir("tollgate-redis-"), ["--requirepass", "before"])
      const { lines } = yield* warningsOf(Effect.gen(function*() {
        const context = yield* Layer.build(RedisStore.layer({ url: `redis://:before@127.0.0.1:${port}` }))
        const limiter = yield* generousOn(Context.get(context, Store.CurrentStore), "500 millis", "100 millis")
        yield* decidedByRedis(limiter.consume("k"))
        yield* Effect.promise(async () => {
          const admin = new IORedis({ host: "127.0.0.1", port, password: "before" })
          try {
            await admin.call("CONFIG", "SET", "requirepass", "after")
            await admin.call("CLIENT", "KILL", "TYPE", "normal")
          } finally {
            admin.disconnect()
          }
        })
        // several attempts to connect again (backing off to about a second)
        for (let i = 0; i < 12; i++) {
          assert.isTrue((yield* limiter.consume("k")).degraded === true)
          yield* Effect.sleep("250 millis")
        }
      }))
      const refusals = lines.filter((l) => l.includes("refuses the store's credentials: WRONGPASS"))
      assert.strictEqual(refusals.length, 1, lines.join("\n"))
    }).pipe(Effect.scoped), 30_000)
})
