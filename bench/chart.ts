/**
 * The ratio chart: for every throughput scenario, each contender's
 * throughput relative to rate-limiter-flexible measured in the same rounds,
 * as horizontal bars from the 1× line on a log scale (right: faster than
 * rate-limiter-flexible, left: slower). Plain SVG, no dependencies.
 */
import type { ContenderId, ThroughputResult } from "./types.ts"

const colors: Record<ContenderId, string> = {
  plain: "#9aa0a6",
  "effect-floor": "#c58af9",
  "lazy-floor": "#a142f4",
  "ref-floor": "#7627bb",
  "mailbox-floor": "#4a148c",
  rlf: "#444444",
  effect: "#e8710a",
  tollgate: "#1a73e8",
  "tollgate-nofast": "#7baaf7",
  "tollgate-fast": "#1a73e8"
}

/** Short names for the chart and the summary table. */
export const shortNames: Record<ContenderId, string> = {
  plain: "plain JS (floor)",
  "effect-floor": "Effect floor (Effect.sync)",
  "lazy-floor": "lazy floor (one-object Effect)",
  "ref-floor": "Ref floor (a bucket object that is its state's Ref)",
  "mailbox-floor": "mailbox floor (a fiber per key, a Queue in, a Deferred back)",
  rlf: "rate-limiter-flexible",
  effect: "effect/persistence",
  tollgate: "tollgate",
  "tollgate-nofast": "tollgate, fastPath: false",
  "tollgate-fast": "tollgate, fastPath: true"
}

const escape = (s: string): string =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

const fmt = (r: number): string => (r >= 10 ? r.toFixed(0) : r >= 0.1 ? r.toFixed(2) : r.toPrecision(2)) + "×"
const fmtTick = (t: number): string => `${Number(t.toPrecision(1))}×`

/** 1-2-5 ticks covering [lo, hi]. */
const ticks = (lo: number, hi: number): Array<number> => {
  const out: Array<number> = []
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e
      if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v)
    }
  }
  return out
}

/** The nearest 1-2-5 value below (or above) v. */
const snap = (v: number, direction: "down" | "up"): number => {
  const e = Math.floor(Math.log10(v))
  const candidates = [1, 2, 5, 10].map((m) => m * 10 ** e)
  return direction === "down"
    ? candidates.filter((c) => c <= v * 1.0001).pop() ?? candidates[0]
    : candidates.find((c) => c >= v * 0.9999) ?? candidates[3]
}

export const renderChart = (scenarios: ReadonlyArray<ThroughputResult>, subtitle: string): string => {
  const rows: Array<{ kind: "header"; title: string } | { kind: "bar"; id: ContenderId; r: number }> = []
  const values: Array<number> = []
  for (const s of scenarios) {
    rows.push({ kind: "header", title: s.title })
    for (const c of s.contenders) {
      const r = c.ratios.rlf
      if (c.id === "rlf" || c.error !== undefined || r === undefined || !(r > 0)) continue
      rows.push({ kind: "bar", id: c.id, r })
      values.push(r)
    }
  }
  const domainLo = snap(Math.min(0.5, ...values.map((v) => v / 3)), "down")
  const hi = snap(Math.max(2, ...values.map((v) => v * 1.6)), "up")
  const width = 900
  const left = 200
  const right = width - 30
  // Legend entries, wrapped to the width.
  const legend: Array<ContenderId> = []
  for (const r of rows) if (r.kind === "bar" && !legend.includes(r.id)) legend.push(r.id)
  const legendItems: Array<{ id: ContenderId; x: number; y: number }> = []
  let lx = 16
  let ly = 54
  for (const id of legend) {
    const w = 30 + shortNames[id].length * 6.6
    if (lx + w > width - 16) {
      lx = 16
      ly += 18
    }
    legendItems.push({ id, x: lx, y: ly })
    lx += w
  }
  const top = ly + 26
  const headerH = 24
  const barH = 17
  const height = top + rows.reduce((h, r) => h + (r.kind === "header" ? headerH : barH), 0) + 52
  const xOf = (v: number) =>
    left + (Math.log10(v) - Math.log10(domainLo)) / (Math.log10(hi) - Math.log10(domainLo)) * (right - left)
  const out: Array<string> = []
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="16" y="24" font-size="16" font-weight="600">Throughput relative to rate-limiter-flexible (same rounds, medians; log scale)</text>`,
    `<text x="16" y="44" fill="#555">${escape(subtitle)}</text>`
  )
  for (const item of legendItems) {
    out.push(
      `<rect x="${item.x}" y="${item.y}" width="12" height="12" fill="${colors[item.id]}"/>`,
      `<text x="${item.x + 16}" y="${item.y + 10}">${escape(shortNames[item.id])}</text>`
    )
  }
  // Grid.
  const plotTop = top - 4
  const plotBottom = height - 46
  for (const t of ticks(domainLo, hi)) {
    const gx = xOf(t).toFixed(1)
    out.push(
      `<line x1="${gx}" y1="${plotTop}" x2="${gx}" y2="${plotBottom}" stroke="${
        t === 1 ? "#444" : "#e3e3e3"
      }" stroke-width="${t === 1 ? 1.5 : 1}"/>`,
      `<text x="${gx}" y="${plotBottom + 16}" text-anchor="middle" fill="#555">${fmtTick(t)}</text>`
    )
  }
  out.push(
    `<text x="${xOf(1).toFixed(1)}" y="${
      plotBottom + 36
    }" text-anchor="middle" fill="#444">rate-limiter-flexible = 1×</text>`
  )
  // Rows.
  let y = top
  for (const r of rows) {
    if (r.kind === "header") {
      out.push(`<text x="16" y="${y + 17}" font-weight="600">${escape(r.title)}</text>`)
      y += headerH
      continue
    }
    const x1 = xOf(1)
    const x2 = xOf(r.r)
    const bx = Math.min(x1, x2)
    const bw = Math.max(1, Math.abs(x2 - x1))
    out.push(
      `<text x="${left - 8}" y="${y + 12}" text-anchor="end" fill="#333">${escape(shortNames[r.id])}</text>`,
      `<rect x="${bx.toFixed(1)}" y="${y + 2}" width="${bw.toFixed(1)}" height="${barH - 5}" fill="${colors[r.id]}"/>`,
      r.r >= 1
        ? `<text x="${(x2 + 4).toFixed(1)}" y="${y + 12}" fill="#333">${fmt(r.r)}</text>`
        : `<text x="${(x2 - 4).toFixed(1)}" y="${y + 12}" text-anchor="end" fill="#333">${fmt(r.r)}</text>`
    )
    y += barH
  }
  out.push("</svg>")
  return out.join("\n") + "\n"
}
