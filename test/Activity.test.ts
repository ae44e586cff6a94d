// The slot table the sweep and the eviction at the cap go round
// (src/internal/actor/Activity.ts): what it promises its two users, the
// bucket (a slot while it lives, its last decision's time in it) and the
// supervisor (every owner found by its slot, freed slots reused, a flood's
// slots given back).
import { describe, expect, it } from "@effect/vitest"
import * as Activity from "../src/internal/actor/Activity.ts"

describe("Activity", () => {
  it("a slot taken holds its start time and no owner until one is named", () => {
    const activity = new Activity.Activity<string>()
    const slot = activity.take(1_000)
    expect(slot).toBe(0)
    expect(activity.times[slot]).toBe(1_000)
    expect(activity.owners[slot]).toBeUndefined()
    activity.own(slot, "a")
    expect(activity.owners[slot]).toBe("a")
    expect(activity.end).toBe(1)
  })

  it("a freed slot goes to the next bucket, and the table does not grow", () => {
    const activity = new Activity.Activity<string>()
    const a = activity.take(1)
    activity.own(a, "a")
    const b = activity.take(2)
    activity.own(b, "b")
    activity.free(a)
    expect(activity.owners[a]).toBeUndefined()
    const c = activity.take(3)
    expect(c).toBe(a)
    expect(activity.end).toBe(2)
    expect(activity.times[c]).toBe(3)
    expect(activity.owners[b]).toBe("b")
  })

  it("freeing a slot of a bucket already forgotten (-1) changes nothing", () => {
    const activity = new Activity.Activity<string>()
    const a = activity.take(1)
    activity.own(a, "a")
    activity.free(-1)
    const b = activity.take(2)
    expect(b).toBe(1)
    expect(activity.owners[a]).toBe("a")
    expect(activity.end).toBe(2)
  })

  it("the table grows past its first size keeping every slot's time and owner", () => {
    const activity = new Activity.Activity<number>()
    const n = 3_000
    for (let i = 0; i < n; i++) activity.own(activity.take(10_000 + i), i)
    expect(activity.end).toBe(n)
    expect(activity.times.length).toBeGreaterThanOrEqual(n)
    for (let i = 0; i < n; i++) {
      expect(activity.times[i]).toBe(10_000 + i)
      expect(activity.owners[i]).toBe(i)
    }
  })

  it("once every bucket of a flood is forgotten, the table goes back to its first size", () => {
    const activity = new Activity.Activity<number>()
    const slots: Array<number> = []
    for (let i = 0; i < 3_000; i++) {
      const slot = activity.take(i)
      activity.own(slot, i)
      slots.push(slot)
    }
    const grown = activity.times.length
    for (const slot of slots.slice(1)) activity.free(slot)
    // One bucket still lives: nothing is given back yet, and it keeps its slot.
    expect(activity.times.length).toBe(grown)
    expect(activity.owners[slots[0]!]).toBe(0)
    expect(activity.times[slots[0]!]).toBe(0)
    activity.free(slots[0]!)
    expect(activity.end).toBe(0)
    expect(activity.times.length).toBeLessThan(grown)
    expect(activity.owners.length).toBe(0)
    expect(activity.take(5)).toBe(0)
  })
})
