/**
 * The overhead benchmark's report: recorded runs in, medians per (case, target, connection
 * count), the headline ratios (every proxy against HAProxy and direct; the gateway against the
 * floors with `--floor`; the paced SSE case against HAProxy) and markdown tables out, plus the
 * JSON file written by `--json`.
 */

import type { Row } from "./measure.ts";
import { median, round } from "./stats.ts";

/** Medians over rounds per (case, target, conns). */
export interface Summary {
  target: string;
  load: "tiny" | "sse";
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
  proxyCpuUsPerEvent: number | null;
  cpu0BusyPct: number | null;
  cpu1BusyPct: number | null;
}

/** Medians over rounds of the `load` case per target and connection count, in the order given. */
export function summarise(
  rows: Row[],
  targets: string[],
  conns: number[],
  load: "tiny" | "sse" = "tiny",
): Summary[] {
  const out: Summary[] = [];
  const med = (xs: (number | null)[]) => {
    const v = xs.filter((x): x is number => x !== null);
    return v.length ? median(v) : null;
  };
  for (const target of targets) {
    for (const c of conns) {
      const rs = rows.filter((r) => r.target === target && r.conns === c && r.load === load);
      if (rs.length === 0) continue;
      const rps = rs.map((r) => r.rps);
      out.push({
        target,
        load,
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
        proxyCpuUsPerEvent: med(rs.map((r) => r.proxyCpuUsPerEvent)),
        cpu0BusyPct: med(rs.map((r) => r.cpu0BusyPct)),
        cpu1BusyPct: med(rs.map((r) => r.cpu1BusyPct)),
      });
    }
  }
  return out;
}

/** One target against the references at one connection count (tiny request). */
export interface VsReferences {
  /** req/s ÷ HAProxy's. */
  rpsOverHaproxy: number | null;
  /** Proxy CPU µs/req ÷ HAProxy's. */
  cpuOverHaproxy: number | null;
  /** p50 added over direct, ms. */
  addedP50Ms: number | null;
}

/** One target against HAProxy in the paced SSE case. */
export interface SseVsHaproxy {
  /** Streams/s ÷ HAProxy's. */
  streamsOverHaproxy: number | null;
  /** p50 of the whole stream ÷ HAProxy's. */
  p50OverHaproxy: number | null;
  /** Proxy CPU µs per relayed event ÷ HAProxy's. */
  cpuPerEventOverHaproxy: number | null;
}

/** The headline ratios. */
export interface Ratios {
  /** Tiny request, per connection count, per target (all but direct). */
  tiny: Record<string, Record<string, VsReferences>>;
  /** Tiny request, per connection count: gateway CPU µs/req ÷ each floor's (`--floor`). */
  gatewayCpuOverFloor: Record<string, Record<string, number | null>>;
  /** Paced SSE, per target (all but direct; empty without the SSE case). */
  sse: Record<string, SseVsHaproxy>;
}

const FLOORS = ["floor", "connect_floor", "raw_floor"];

/** The headline ratios from the summaries. */
export function ratios(s: Summary[], conns: number[]): Ratios {
  const get = (load: string, t: string, c: number) =>
    s.find((x) => x.load === load && x.target === t && x.conns === c);
  const div = (a?: number | null, b?: number | null) =>
    a == null || b == null || b === 0 ? null : round(a / b, 2);
  const r: Ratios = { tiny: {}, gatewayCpuOverFloor: {}, sse: {} };
  const proxies = (
    load: string,
  ) => [...new Set(s.filter((x) => x.load === load && x.target !== "direct").map((x) => x.target))];
  for (const c of conns) {
    const d = get("tiny", "direct", c), h = get("tiny", "haproxy", c);
    r.tiny[c] = {};
    for (const name of proxies("tiny")) {
      const t = get("tiny", name, c);
      r.tiny[c][name] = {
        rpsOverHaproxy: div(t?.rps, h?.rps),
        cpuOverHaproxy: div(t?.proxyCpuUsPerReq, h?.proxyCpuUsPerReq),
        addedP50Ms: t && d ? round(t.p50Ms - d.p50Ms, 3) : null,
      };
    }
    const g = get("tiny", "gateway", c);
    r.gatewayCpuOverFloor[c] = {};
    for (const f of FLOORS.filter((f) => get("tiny", f, c))) {
      r.gatewayCpuOverFloor[c][f] = div(g?.proxyCpuUsPerReq, get("tiny", f, c)?.proxyCpuUsPerReq);
    }
  }
  const sse = s.filter((x) => x.load === "sse");
  const h = sse.find((x) => x.target === "haproxy");
  for (const name of proxies("sse")) {
    const t = sse.find((x) => x.target === name);
    r.sse[name] = {
      streamsOverHaproxy: div(t?.rps, h?.rps),
      p50OverHaproxy: div(t?.p50Ms, h?.p50Ms),
      cpuPerEventOverHaproxy: div(t?.proxyCpuUsPerEvent, h?.proxyCpuUsPerEvent),
    };
  }
  return r;
}

function fmtInt(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}

function table(s: Summary[], rounds: number, sse: boolean): string[] {
  const rangeCol = rounds > 1;
  const unit = sse ? "stream" : "req";
  const rate = sse ? "streams/s" : "req/s";
  const head = [
    "target",
    "conns",
    rangeCol ? `${rate} (median of ${rounds} [min–max])` : rate,
    "p50 ms",
    "p99 ms",
    "non-2xx",
    "socket errors",
    `proxy CPU µs/${unit}`,
    ...(sse ? ["proxy CPU µs/event"] : []),
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
    const perEvent = sse ? ` ${x.proxyCpuUsPerEvent?.toFixed(2) ?? "–"} |` : "";
    lines.push(
      `| ${x.target} | ${x.conns} | ${rps} | ${x.p50Ms.toFixed(2)} | ${x.p99Ms.toFixed(2)} | ` +
        `${x.non2xx} | ${x.socketErrors} | ${x.proxyCpuUsPerReq?.toFixed(1) ?? "–"} |${perEvent} ` +
        `${x.cpu0BusyPct ?? "?"} / ${x.cpu1BusyPct ?? "?"} |`,
    );
  }
  return lines;
}

/**
 * The tiny request's table, then (if measured) the paced SSE table under `sseCaption`, then the
 * ratios as a list, as markdown.
 */
export function markdown(
  s: Summary[],
  r: Ratios,
  conns: number[],
  rounds: number,
  sseCaption = "Paced SSE streams:",
): string {
  const tiny = s.filter((x) => x.load === "tiny");
  const sse = s.filter((x) => x.load === "sse");
  const lines: string[] = [];
  if (tiny.length) lines.push(...table(tiny, rounds, false), "");
  if (sse.length) lines.push(sseCaption, "", ...table(sse, rounds, true), "");
  const fmt = (v: number | null | undefined, bold = false) =>
    v == null ? "n/a" : bold ? `**${v.toFixed(2)}**` : v.toFixed(2);
  const ms = (v: number | null) => v == null ? "n/a" : `${v >= 0 ? "+" : ""}${v.toFixed(2)} ms`;
  const list = <T>(m: Record<string, T>, f: (v: T, name: string) => string, skip = "haproxy") =>
    Object.entries(m).filter(([n]) => n !== skip).map(([n, v]) => `${n} ${f(v, n)}`).join(", ");
  const bold = (n: string) => n === "gateway";
  for (const c of tiny.length ? conns : []) {
    const t = r.tiny[c] ?? {};
    lines.push(
      `- ${c} conn${c === 1 ? "" : "s"}:`,
      `  - req/s ÷ HAProxy's: ${list(t, (v, n) => fmt(v.rpsOverHaproxy, bold(n)))}`,
      `  - proxy CPU/req ÷ HAProxy's: ${list(t, (v, n) => fmt(v.cpuOverHaproxy, bold(n)))}`,
      `  - added p50 vs direct: ${list(t, (v) => ms(v.addedP50Ms), "")}`,
    );
    const f = r.gatewayCpuOverFloor[c] ?? {};
    if (Object.keys(f).length) {
      lines.push(`  - gateway CPU/req ÷ the floors': ${list(f, (v) => fmt(v))}`);
    }
  }
  if (sse.length) {
    lines.push(
      `- paced SSE, ${sse[0].conns} conns:`,
      `  - streams/s ÷ HAProxy's: ${list(r.sse, (v, n) => fmt(v.streamsOverHaproxy, bold(n)))}`,
      `  - p50 ÷ HAProxy's: ${list(r.sse, (v, n) => fmt(v.p50OverHaproxy, bold(n)))}`,
      `  - proxy CPU/event ÷ HAProxy's: ${
        list(r.sse, (v, n) => fmt(v.cpuPerEventOverHaproxy, bold(n)))
      }`,
    );
  }
  return lines.join("\n").trimEnd();
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
