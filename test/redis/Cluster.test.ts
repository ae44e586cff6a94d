/**
 * The store on a real Redis Cluster of three primaries (and three
 * replicas): a call over several keys goes through when its keys share a
 * slot (a common `{hash tag}`) and is refused before it is sent otherwise;
 * a library or scripts gone from every primary are loaded again on each;
 * and a slot moved from one primary to another while callers run (`ASK`
 * while its keys migrate, `MOVED` once it has moved; the client follows
 * both and refreshes its table of slots) loses no decision and no count.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { Cluster, Redis as IORedis } from "ioredis"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Kind as OpKind } from "../../src/internal/operation/Op.ts"
import * as Policy from "../../src/Policy.ts"
import { RateLimiter } from "../../src/RateLimiter.ts"
import * as Scripts from "../../src/redis/internal/scripts.ts"
import * as Slot from "../../src/redis/internal/slot.ts"
import * as Store from "../../src/Store.ts"
import {
  Admin,
  cluster,
  type Deployment,
  describeOn,
  engineOn,
  hasCli,
  hasServer,
  startCluster,
  storeOn,
  uniquePrefix
} from "./redis.ts"

const policy = Policy.tokenBucket({ capacity: 2, refill: { tokens: 1, per: "1 hour" } })

describeOn(cluster, "calls over several keys", (it) => {
  it.effect("keys with a common {hash tag} go in one script; keys of different slots are refused before sending", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix("multi")
      const store = yield* storeOn(cluster, { prefix })
      const limiter = yield* RateLimiter.make({ policy, fallback: { mode: "error" } }).pipe(
        Effect.provideService(Store.CurrentStore, store)
      )
      const tagged = ["{org:a}:user:1", "{org:a}:org", "{org:a}:global"]
      assert.isTrue(yield* limiter.acquire(tagged, { cost: 2 }))
      assert.isFalse(yield* limiter.acquire(tagged))
      assert.isTrue(yield* limiter.acquire("user:2"))
      const refused = yield* Effect.flip(limiter.acquire(["user:1", "org:a"]))
      assert.strictEqual(refused._tag, "InvalidRequest")
      assert.include(refused.message, "hash tag")
      yield* (yield* Admin).cleanup(prefix)
    }))

  it.effect("a key's slot is the server's (CLUSTER KEYSLOT): ASCII, text beyond it, hash tags", () =>
    Effect.gen(function*() {
      const admin = yield* Admin
      const keys = [
        "123456789",
        "tollgate:user:42",
        "tollgate:{org:a}:user:1",
        "t:{}:x",
        "t:{a",
        "t:}{b}",
        "clé:ünïcode:東京",
        "{東京}:x",
        "",
        ...Array.from({ length: 200 }, (_, i) => `k${i}:${(i * 7919).toString(36)}`)
      ]
      for (const key of keys) {
        assert.strictEqual(Slot.slot(key), yield* admin.send<number>("CLUSTER", "KEYSLOT", key), key)
      }
    }))

  it.effect("a library or scripts gone from every primary are loaded again on each", () =>
    Effect.gen(function*() {
      const admin = yield* Admin
      const primaries = (admin.client as Cluster).nodes("master")
      for (const functions of [true, false]) {
        const prefix = uniquePrefix(`reload-${functions}`)
        const store = yield* engineOn(cluster, { prefix, functions })
        const take = (key: string) =>
          Effect.map(
            store.apply(key, policy as Policy.Valid, [{ kind: OpKind.Take, cost: 1, queued: 0 }]),
            ([r]) => r.allowed
          )
        // keys of every primary
        const keys = Array.from({ length: 30 }, (_, i) => `k${i}`)
        assert.isTrue((yield* Effect.forEach(keys, take, { concurrency: "unbounded" })).every(Boolean))
        yield* Effect.forEach(primaries, (node) =>
          Effect.promise(() =>
            functions
              ? node.call("FUNCTION", "DELETE", Scripts.library.name).catch(() => "already gone")
              : node.call("SCRIPT", "FLUSH")
          ))
        // the second take of each key: loaded again wherever it is
        assert.isTrue((yield* Effect.forEach(keys, take, { concurrency: "unbounded" })).every(Boolean))
        assert.isFalse((yield* Effect.forEach(keys, take, { concurrency: "unbounded" })).some(Boolean))
        if (functions) {
          for (const node of primaries) {
            const listed = yield* Effect.promise(() =>
              node.call("FUNCTION", "LIST", "LIBRARYNAME", Scripts.library.name)
            )
            expect(JSON.stringify(listed)).toContain(Scripts.library.name)
          }
        }
        yield* admin.cleanup(prefix)
      }
    }))
})

const skipped = "redis-server or redis-cli is not installed: the resharding test is skipped (.ci/run installs them)"
const available = hasServer && hasCli
if (!available) console.warn(skipped)

const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "tollgate-reshard-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

// A command on the node on `port`.
const on = (port: number, ...args: Array<string>) =>
  Effect.promise(async () => {
    const client = new IORedis(port, "127.0.0.1")
    try {
      return await client.call(args[0], ...args.slice(1))
    } finally {
      client.disconnect()
    }
  })

const suite = available ? describe : describe.skip
suite(available ? "a slot moved under load" : `a slot moved under load (${skipped})`, () => {
  it.live(
    "ASK while its keys migrate, MOVED once moved: every call decided by Redis, every count kept",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const own = yield* startCluster(dir, 2000)
        const deployment: Deployment = {
          name: "a cluster of the test's own",
          where: { cluster: { nodes: own.urls } },
          missing: ""
        }
        const prefix = "reshard:"
        // keys of one slot (a hash tag), so that all of them move
        const keys = Array.from({ length: 20 }, (_, i) => `{moving}:${i}`)
        const slot = Slot.slot(prefix + keys[0])
        const store = yield* storeOn(deployment, { prefix })
        const limit = 1_000_000
        const limiter = yield* RateLimiter.make({
          policy: Policy.fixedWindow({ limit, window: "1 hour" }),
          fallback: { mode: "deny", timeout: "2 seconds" },
          mailboxCapacity: 65_536
        }).pipe(Effect.provideService(Store.CurrentStore, store))

        // who holds the slot, and who takes it
        const nodes = String(yield* on(own.nodes[0].port, "CLUSTER", "NODES")).trim().split("\n").map((line) => {
          const [id, address, flags, , , , , , ...slots] = line.split(" ")
          return { id, port: Number(address.split(":")[1].split("@")[0]), primary: flags.includes("master"), slots }
        })
        const holds = (n: (typeof nodes)[number]) =>
          n.slots.some((range) => {
            const [from, to] = range.split("-").map(Number)
            return from <= slot && slot <= (to ?? from)
          })
        const source = nodes.find((n) => n.primary && holds(n))!
        const target = nodes.find((n) => n.primary && !holds(n))!

        let stopped = false
        let admitted = 0
        let degraded = 0
        let calls = 0
        const loop = Effect.gen(function*() {
          let i = 0
          while (!stopped) {
            const d = yield* limiter.consume(keys[i++ % keys.length])
            calls++
            if (d.degraded === true) degraded++
            else if (d.allowed) admitted++
          }
        })
        const fiber = yield* Effect.forkChild(
          Effect.forEach(Array.from({ length: 10 }), () => loop, { concurrency: 10, discard: true })
        )
        yield* Effect.sleep("500 millis")
        // the migration, as redis-cli --cluster reshard does it
        yield* on(target.port, "CLUSTER", "SETSLOT", String(slot), "IMPORTING", source.id)
        yield* on(source.port, "CLUSTER", "SETSLOT", String(slot), "MIGRATING", target.id)
        yield* Effect.sleep("300 millis")
        for (;;) {
          const moving = (yield* on(source.port, "CLUSTER", "GETKEYSINSLOT", String(slot), "100")) as Array<string>
          if (moving.length === 0) break
          yield* on(source.port, "MIGRATE", "127.0.0.1", String(target.port), "", "0", "5000", "KEYS", ...moving)
          yield* Effect.sleep("100 millis")
        }
        yield* Effect.sleep("300 millis")
        for (const n of nodes.filter((n) => n.primary)) {
          yield* on(n.port, "CLUSTER", "SETSLOT", String(slot), "NODE", target.id)
        }
        yield* Effect.sleep("1 second")
        stopped = true
        yield* Fiber.join(fiber)

        // every call decided by Redis; the counts are where the slot went
        expect(calls).toBeGreaterThan(100)
        assert.strictEqual(degraded, 0, "no call fell back")
        let counted = 0
        for (const key of keys) counted += limit - (yield* limiter.peek(key)).remaining
        assert.strictEqual(counted, admitted)
        const there = (yield* on(target.port, "CLUSTER", "COUNTKEYSINSLOT", String(slot))) as number
        assert.strictEqual(there, keys.length)
      }).pipe(Effect.scoped),
    60_000
  )
})
