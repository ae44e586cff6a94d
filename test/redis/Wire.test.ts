/**
 * The store's own connection: the RESP reader against replies cut at every
 * place a socket may cut them, commands encoded as Redis reads them (a real
 * redis-server echoes them back), and the connection's life: the handshake
 * (AUTH, SELECT, PING), a command refused at once while it is down, every
 * command out failed when the connection drops, connecting again after a
 * restart, closing (waiting for the replies due, then failing them), and
 * TLS against a redis-server that speaks only TLS.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as Resp from "../../src/redis/internal/resp.ts"
import * as Wire from "../../src/redis/internal/wire.ts"
import { freePort, hasServer, killServer, startServer } from "./redis.ts"

const url = process.env.REDIS_URL

// A reply as Redis writes it, from the value it stands for.
const write = (reply: Resp.Reply): string => {
  if (reply === null) return "$-1\r\n"
  if (typeof reply === "number") return `:${reply}\r\n`
  if (typeof reply === "string") return `$${Buffer.byteLength(reply)}\r\n${reply}\r\n`
  if (reply instanceof Resp.ReplyError) return `-${reply.message}\r\n`
  return `*${reply.length}\r\n${reply.map(write).join("")}`
}

const replyArb: fc.Arbitrary<Resp.Reply> = fc.letrec((tie) => ({
  reply: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.integer({ min: -(2 ** 53) + 1, max: 2 ** 53 - 1 }),
    fc.string({ unit: "binary", maxLength: 40 }),
    fc.constant(null),
    fc.stringMatching(/^[A-Z]+ [a-z ]{0,20}$/).map((m) => new Resp.ReplyError(m)),
    fc.array(tie("reply"), { maxLength: 6 })
  )
})).reply as fc.Arbitrary<Resp.Reply>

// Errors compare by message.
const plain = (reply: Resp.Reply): unknown =>
  reply instanceof Resp.ReplyError ? { error: reply.message } : Array.isArray(reply) ? reply.map(plain) : reply

describe("RESP", () => {
  it("reads every reply whole and in order, however the bytes are cut into chunks", () =>
    fc.assert(
      fc.property(
        fc.array(replyArb, { minLength: 1, maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 10 }),
        (replies, cuts) => {
          const bytes = Buffer.from(replies.map(write).join(""), "utf8")
          const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
          const read: Array<Resp.Reply> = []
          const reader = new Resp.Reader((r) => read.push(r))
          let from = 0
          for (const to of [...at, bytes.length]) {
            reader.feed(bytes.subarray(from, to))
            from = to
          }
          assert.deepStrictEqual(read.map(plain), replies.map(plain))
        }
      ),
      { numRuns: 400 }
    ))

  it("reads a simple string, a nil array, and refuses bytes that are not RESP", () => {
    const read: Array<Resp.Reply> = []
    const reader = new Resp.Reader((r) => read.push(r))
    reader.feed(Buffer.from("+OK\r\n*-1\r\n"))
    assert.deepStrictEqual(read, ["OK", null])
    assert.throws(() => reader.feed(Buffer.from("hello\r\n")), /unexpected byte/)
  })

  it("writes each argument's length in bytes, not in characters", () => {
    assert.strictEqual(Resp.encode(["SET", "ключ", "v"]), "*3\r\n$3\r\nSET\r\n$8\r\nключ\r\n$1\r\nv\r\n")
  })
})

// Waits that the test ends itself (no real time passes in these tests),
// and the connection's log, which says when it is back.
const harness = () => {
  const timers: Array<{ readonly millis: number; readonly fire: () => void }> = []
  const logged: Array<string> = []
  const waiting: Array<{ readonly match: RegExp; readonly resolve: () => void }> = []
  const sleep: Wire.Sleep = (millis, fire) => {
    const timer = { millis, fire }
    timers.push(timer)
    return () => {
      const i = timers.indexOf(timer)
      if (i >= 0) timers.splice(i, 1)
    }
  }
  const log: Wire.Log = (level, message) => {
    logged.push(`${level} ${message}`)
    for (const w of waiting.splice(0)) {
      if (w.match.test(`${level} ${message}`)) w.resolve()
      else waiting.push(w)
    }
  }
  const until = (match: RegExp): Promise<void> =>
    logged.some((line) => match.test(line))
      ? Promise.resolve()
      : new Promise((resolve) => waiting.push({ match, resolve }))
  return { timers, logged, sleep, log, until }
}

const open = (config: Wire.Config, h = harness()): Promise<Wire.Wire> => {
  const wire = new Wire.Wire(config, h.sleep, h.log)
  return new Promise((resolve, reject) =>
    wire.open((failure) => failure === undefined ? resolve(wire) : reject(failure))
  )
}

// A server of the test's own on 127.0.0.1: it answers what `answer` says
// for each command it reads (nothing, when undefined).
const fakeServer = async (answer: (args: ReadonlyArray<string>) => string | undefined) => {
  const sockets = new Set<net.Socket>()
  const seen: Array<ReadonlyArray<string>> = []
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
    let text = ""
    socket.on("data", (chunk) => {
      text += chunk.toString("utf8")
      // commands as the wire writes them: *n then n bulk strings
      for (;;) {
        const lines = text.split("\r\n")
        if (!lines[0].startsWith("*")) return
        const n = Number(lines[0].slice(1))
        if (lines.length < 1 + 2 * n + 1) return
        const args = Array.from({ length: n }, (_, i) => lines[2 + 2 * i])
        text = lines.slice(1 + 2 * n).join("\r\n")
        seen.push(args)
        const out = answer(args)
        if (out !== undefined) socket.write(out)
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as net.AddressInfo).port
  return {
    port,
    seen,
    drop: () => {
      for (const s of sockets) s.destroy()
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      })
  }
}

describe("Wire", () => {
  it("reads redis:// and rediss:// URLs; refuses others", () => {
    assert.deepStrictEqual(Wire.fromUrl("redis://u%40x:p%3As@10.0.0.1:6380/3"), {
      host: "10.0.0.1",
      port: 6380,
      tls: undefined,
      username: "u@x",
      password: "p:s",
      database: 3
    })
    assert.deepStrictEqual(Wire.fromUrl("rediss://cache.example"), {
      host: "cache.example",
      port: 6379,
      tls: { servername: "cache.example" },
      username: undefined,
      password: undefined,
      database: undefined
    })
    assert.include(Wire.fromUrl("http://x") as string, "not a redis://")
    assert.include(Wire.fromUrl("redis://x/db") as string, "not a database number")
  })

  it("says who it is before anything else, and is ready once PING is answered", async () => {
    const server = await fakeServer((args) => args[0] === "GET" ? "$1\r\nv\r\n" : "+OK\r\n")
    const wire = await open({ host: "127.0.0.1", port: server.port, username: "u", password: "p", database: 2 })
    assert.deepStrictEqual(server.seen, [["AUTH", "u", "p"], ["SELECT", "2"], ["PING"]])
    assert.strictEqual(await wire.call(["GET", "k"]), "v")
    wire.destroy()
    await server.close()
  })

  it("a refused handshake fails the connecting with Redis's own words", async () => {
    const server = await fakeServer((args) => args[0] === "AUTH" ? "-WRONGPASS invalid password\r\n" : "+PONG\r\n")
    const failure = await open({ host: "127.0.0.1", port: server.port, password: "nope" }).then(
      () => undefined,
      (e: Error) => e.message
    )
    assert.include(failure, "WRONGPASS")
    await server.close()
  })

  it("a dropped connection fails every command out at once, refuses new ones, and connects again", async () => {
    let silent = false
    const server = await fakeServer((args) => args[0] === "PING" ? "+PONG\r\n" : silent ? undefined : ":1\r\n")
    const h = harness()
    const wire = await open({ host: "127.0.0.1", port: server.port }, h)
    assert.strictEqual(await wire.call(["INCR", "k"]), 1)
    silent = true
    const out = [wire.call(["INCR", "k"]), wire.call(["INCR", "k"])].map((p) =>
      p.then(() => "answered", (e: Error) => e.message)
    )
    server.drop()
    for (const message of await Promise.all(out)) assert.include(message, "the connection to Redis was lost")
    assert.include(await wire.call(["INCR", "k"]).then(() => "answered", (e: Error) => e.message), "is down")
    assert.isTrue(h.logged.some((line) => line.startsWith("Warn the connection was lost")))
    // it waits before connecting again: 50 ms and some jitter the first time
    assert.strictEqual(h.timers.length, 1)
    assert.isTrue(h.timers[0].millis >= 50 && h.timers[0].millis < 150)
    silent = false
    h.timers.shift()!.fire()
    await h.until(/^Info connected again/)
    assert.strictEqual(await wire.call(["INCR", "k"]), 1)
    wire.destroy()
    await server.close()
  })

  it("while the server is gone, each attempt waits longer, up to about a second", async () => {
    const server = await fakeServer(() => "+PONG\r\n")
    const h = harness()
    const wire = await open({ host: "127.0.0.1", port: server.port }, h)
    await server.close()
    await h.until(/^Warn the connection was lost/)
    const waits: Array<number> = []
    for (let attempt = 1; attempt <= 6; attempt++) {
      assert.strictEqual(h.timers.length, 1)
      const timer = h.timers.shift()!
      waits.push(timer.millis)
      timer.fire()
      await h.until(new RegExp(`^Debug connecting again failed`))
      h.logged.length = 0
    }
    const floors = waits.map((w) => Math.floor(w / 50) * 50)
    for (let i = 0; i < 5; i++) assert.isAtMost(floors[i], floors[i + 1] + 100)
    assert.isAtLeast(waits[5], 1000)
    assert.isBelow(waits[5], 1100)
    wire.destroy()
    assert.strictEqual(h.timers.length, 0, "destroy cancels the wait")
  })

  it("a reply to no command drops the connection (out of step, nothing on it is trusted)", async () => {
    const server = await fakeServer((args) => args[0] === "PING" ? "+PONG\r\n" : ":1\r\n:2\r\n")
    const h = harness()
    const wire = await open({ host: "127.0.0.1", port: server.port }, h)
    assert.strictEqual(await wire.call(["INCR", "k"]), 1)
    await h.until(/^Warn the connection was lost \(a reply to no command\)/)
    assert.include(await wire.call(["INCR", "k"]).then(() => "answered", (e: Error) => e.message), "is down")
    wire.destroy()
    await server.close()
  })

  it("drain waits for the replies due; destroy fails what is still out", async () => {
    let answer = true
    const server = await fakeServer((args) => args[0] === "PING" ? "+PONG\r\n" : answer ? ":7\r\n" : undefined)
    const wire = await open({ host: "127.0.0.1", port: server.port })
    const first = wire.call(["GET", "a"])
    await wire.drain()
    assert.strictEqual(await first, 7)
    answer = false
    const second = wire.call(["GET", "b"]).then(() => "answered", (e: Error) => e.message)
    wire.destroy()
    assert.include(await second, "closed")
    await server.close()
  })

  it.skipIf(url === undefined)(
    "talks to a real redis-server: arrays, nil, errors, and bytes beyond ASCII",
    async () => {
      const wire = await open(Wire.fromUrl(url!) as Wire.Config)
      const key = `wire:test:${process.pid}:ключ`
      assert.strictEqual(await wire.call(["SET", key, "värde ✓"]), "OK")
      assert.strictEqual(await wire.call(["GET", key]), "värde ✓")
      assert.strictEqual(await wire.call(["GET", `${key}:none`]), null)
      assert.deepStrictEqual(await wire.call(["EVAL", "return {1, 'two', {3}}", "0"]), [1, "two", [3]])
      assert.include(await wire.call(["NOSUCHCOMMAND"]).then(() => "", (e: Error) => e.message), "unknown command")
      // pipelined: many commands written before any reply is read, answered in order
      const many = await Promise.all(Array.from({ length: 500 }, (_, i) => wire.call(["ECHO", `m${i}`])))
      assert.deepStrictEqual(many, Array.from({ length: 500 }, (_, i) => `m${i}`))
      await wire.call(["DEL", key])
      wire.destroy()
    }
  )
})

// A redis-server that speaks only TLS, with a certificate made for the test
// (openssl, as Debian ships it): the connection's TLS path, end to end.
const hasOpenssl = spawnSync("openssl", ["version"]).status === 0
const tlsSuite = hasServer && hasOpenssl ? describe : describe.skip
tlsSuite("Wire over TLS (rediss://)", () => {
  it("connects to a TLS redis-server it can verify, and refuses one it cannot", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tollgate-tls-"))
    const cert = path.join(dir, "cert.pem")
    const key = path.join(dir, "key.pem")
    const made = spawnSync("openssl", [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      key,
      "-out",
      cert,
      "-days",
      "1",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=DNS:localhost,IP:127.0.0.1"
    ])
    assert.strictEqual(made.status, 0, String(made.stderr))
    const port = await Effect.runPromise(freePort)
    const server = await Effect.runPromise(startServer(0, dir, [
      "--tls-port",
      String(port),
      "--tls-cert-file",
      cert,
      "--tls-key-file",
      key,
      "--tls-auth-clients",
      "no"
    ]))
    try {
      const ca = fs.readFileSync(cert, "utf8")
      const wire = await open({ host: "127.0.0.1", port, tls: { ca, servername: "localhost" } })
      assert.strictEqual(await wire.call(["SET", "tls:k", "v"]), "OK")
      assert.strictEqual(await wire.call(["GET", "tls:k"]), "v")
      wire.destroy()
      // rediss:// trusts the system's CAs only: this self-signed server is refused
      const refused = await open(Wire.fromUrl(`rediss://localhost:${port}`) as Wire.Config).then(
        () => "connected",
        (e: Error) => e.message
      )
      assert.match(refused, /self[- ]signed|certificate/i)
    } finally {
      await Effect.runPromise(killServer(server))
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
