// vitest's global setup: the algorithms compiled to Lua before any test
// runs (src/redis/internal/generated.ts is made, not committed). A module
// outside the subset that runs in Redis fails the run here.
import { generate } from "../../tools/lua/main.ts"

export default async () => {
  await generate()
}
