/**
 * The physical floor for `npm run bench:http`: a plain node:http server, no
 * Effect, no router, that reads a JSON body and answers a small JSON object:
 * the least any Node service doing a JSON POST can cost on this machine.
 * Listens on 127.0.0.1:$PORT (0: any free port).
 */
import { createServer } from "node:http"

const server = createServer((request, response) => {
  let body = ""
  request.setEncoding("utf8")
  request.on("data", (chunk: string) => (body += chunk))
  request.on("end", () => {
    const parsed: unknown = JSON.parse(body)
    const out = JSON.stringify({ ok: true, received: typeof parsed })
    response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out) })
    response.end(out)
  })
})
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  const address = server.address()
  console.log(`Listening on http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`)
})
process.on("SIGTERM", () => server.close())
