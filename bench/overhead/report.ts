/**
 * The overhead benchmark's report: recorded runs in, medians per (target, connection count),
 * the headline ratios (gateway vs HAProxy, direct and, with `--floor`, the floor proxy) and a
 * markdown table out, plus the JSON file written by `--json`.
 */

import type { Row } from "./measure.ts";
import { median, round } from "./stats.ts";

/** Medians over rounds per (target, conns). */
export interface Summary {
  target: string;
  conns: number;
  n: number;
  rps: number;
  rpsMin: number;
  rpsMax: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  socketErrors: number;
  proxyCpuUsPerReq: number | null;
  cpu0BusyPct: number | null;
  cpu1BusyPct: number | null;
}

/** Medians over rounds per target and connection count, in the order given. */
export function summarise(rows: Row[], targets: string[], conns: number[]): Summary[] {
  const out: Summary[] = [];
  const med = (xs: (number | null)[]) => {
    const v = xs.filter((x): x is number => x !== null);
    return v.length ? median(v) : null;
  };
  for (const target of targets) {
    for (const c of conns) {
      const rs = rows.filter((r) => r.target === target && r.conns === c);
      if (rs.length === 0) continue;
      const rps = rs.map((r) => r.rps);
      out.push({
        target,
        conns: c,
        n: rs.length,
        rps: round(median(rps), 0),
        rpsMin: round(Math.min(...rps), 0),
        rpsMax: round(Math.max(...rps), 0),
        p50Ms: round(median(rs.map((r) => r.p50Ms)), 3),
        p99Ms: round(median(rs.map((r) => r.p99Ms)), 3),
        non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
        socketErrors: rs.reduce(
          (a, r) =>
            a + r.socketErrors.connect + r.socketErrors.read + r.socketErrors.write +
            r.socketErrors.timeout,
          0,
        ),
        proxyCpuUsPerReq: med(rs.map((r) => r.proxyCpuUsPerReq)),
        cpu0BusyPct: med(rs.map((r) => r.cpu0BusyPct)),
        cpu1BusyPct: med(rs.map((r) => r.cpu1BusyPct)),
      });
    }
  }
  return out;
}

/** The headline ratios. */
export interface Ratios {
  /** Gateway req/s ÷ HAProxy req/s, per connection count. */
  gatewayOverHaproxyRps: Record<string, number | null>;
  /** Gateway req/s ÷ direct req/s, per connection count. */
  gatewayOverDirectRps: Record<string, number | null>;
  /** Gateway proxy CPU µs/req ÷ HAProxy's, per connection count. */
  gatewayOverHaproxyCpu: Record<string, number | null>;
  /** With `--floor`: floor req/s ÷ HAProxy req/s, and gateway CPU µs/req ÷ floor's. */
  floorOverHaproxyRps?: Record<string, number | null>;
  gatewayOverFloorCpu?: Record<string, number | null>;
  /** p50 added over direct (ms), per target and connection count. */
  addedP50Ms: Record<string, Record<string, number | null>>;
}

/** The headline ratios from the summaries. */
export function ratios(s: Summary[], conns: number[]): Ratios {
  const get = (t: string, c: number) => s.find((x) => x.target === t && x.conns === c);
  const div = (a?: number | null, b?: number | null) =>
    a == null || b == null || b === 0 ? null : round(a / b, 2);
  const r: Ratios = {
    gatewayOverHaproxyRps: {},
    gatewayOverDirectRps: {},
    gatewayOverHaproxyCpu: {},
    addedP50Ms: { gateway: {}, haproxy: {} },
  };
  const floor = s.some((x) => x.target === "floor");
  if (floor) {
    r.floorOverHaproxyRps = {};
    r.gatewayOverFloorCpu = {};
    r.addedP50Ms.floor = {};
  }
  for (const c of conns) {
    const d = get("direct", c), g = get("gateway", c), h = get("haproxy", c);
    const f = get("floor", c);
    r.gatewayOverHaproxyRps[c] = div(g?.rps, h?.rps);
    r.gatewayOverDirectRps[c] = div(g?.rps, d?.rps);
    r.gatewayOverHaproxyCpu[c] = div(g?.proxyCpuUsPerReq, h?.proxyCpuUsPerReq);
    for (const [name, t] of [["gateway", g], ["haproxy", h], ["floor", f]] as const) {
      if (r.addedP50Ms[name]) r.addedP50Ms[name][c] = t && d ? round(t.p50Ms - d.p50Ms, 3) : null;
    }
    if (r.floorOverHaproxyRps && r.gatewayOverFloorCpu) {
      r.floorOverHaproxyRps[c] = div(f?.rps, h?.rps);
      r.gatewayOverFloorCpu[c] = div(g?.proxyCpuUsPerReq, f?.proxyCpuUsPerReq);
    }
  }
  return r;
}

function fmtInt(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}

/** The summary table and one line of ratios per connection count, as markdown. */
export function markdown(s: Summary[], r: Ratios, conns: number[], rounds: number): string {
  const rangeCol = rounds > 1;
  const head = [
    "target",
    "conns",
    rangeCol ? `req/s (median of ${rounds} [min–max])` : "req/s",
    "p50 ms",
    "p99 ms",
    "non-2xx",
    "socket errors",
    "proxy CPU µs/req",
    "CPU0 / CPU1 busy %",
  ];
  const lines = [
    `| ${head.join(" | ")} |`,
    `|${head.map((_, i) => i < 1 ? "---" : "---:").join("|")}|`,
  ];
  for (const x of s) {
    const rps = rangeCol
      ? `${fmtInt(x.rps)} [${fmtInt(x.rpsMin)}–${fmtInt(x.rpsMax)}]`
      : fmtInt(x.rps);
    lines.push(
      `| ${x.target} | ${x.conns} | ${rps} | ${x.p50Ms.toFixed(2)} | ${x.p99Ms.toFixed(2)} | ` +
        `${x.non2xx} | ${x.socketErrors} | ${x.proxyCpuUsPerReq?.toFixed(1) ?? "–"} | ` +
        `${x.cpu0BusyPct ?? "?"} / ${x.cpu1BusyPct ?? "?"} |`,
    );
  }
  lines.push("");
  const fmt = (v: number | null | undefined, suffix = "") => v == null ? "n/a" : `${v}${suffix}`;
  for (const c of conns) {
    lines.push(
      `- ${c} conn${c === 1 ? "" : "s"}: gateway req/s ÷ HAProxy req/s = ` +
        `**${fmt(r.gatewayOverHaproxyRps[c])}**; gateway ÷ direct = ${
          fmt(r.gatewayOverDirectRps[c])
        }; ` +
        `added p50 vs direct: gateway ${fmt(r.addedP50Ms.gateway[c], " ms")}, HAProxy ${
          fmt(r.addedP50Ms.haproxy[c], " ms")
        }; proxy CPU/req gateway ÷ HAProxy = ${fmt(r.gatewayOverHaproxyCpu[c])}`,
    );
    if (r.floorOverHaproxyRps && r.gatewayOverFloorCpu) {
      lines.push(
        `  - floor (bare Deno proxy): floor req/s ÷ HAProxy req/s = ${
          fmt(r.floorOverHaproxyRps[c])
        }; added p50 vs direct ${fmt(r.addedP50Ms.floor?.[c], " ms")}; ` +
          `proxy CPU/req gateway ÷ floor = ${fmt(r.gatewayOverFloorCpu[c])}`,
      );
    }
  }
  return lines.join("\n");
}

/** Everything `--json` writes. */
export interface Results {
  /** Date, CPUs, kernel, tool versions and pinning. */
  machine: Record<string, unknown>;
  /** The options and the exact commands measured. */
  settings: Record<string, unknown>;
  summary: Summary[];
  ratios: Ratios;
  /** Every recorded run. */
  runs: Row[];
}

/** Writes `results` to `path` as indented JSON. */
export async function writeJson(path: string, results: Results): Promise<void> {
  await Deno.writeTextFile(path, JSON.stringify(results, null, 2) + "\n");
}
