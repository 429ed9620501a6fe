/**
 * Gateway overhead benchmark: the same tiny non-streaming request sent (a) straight to one
 * instant worker, (b) through the gateway (`main.ts`, round robin over two workers) and (c)
 * through HAProxy (roundrobin, nbthread 1), side by side in one run, so a noisy machine affects
 * every target alike. Method: `../shared/notes/proxy-hot-path.md`.
 *
 *   deno task bench:overhead [--duration 8] [--quick] [--rounds 1] [--json out.json]
 *
 * - The two workers (`instant_worker.ts`) run on CPU 1; wrk and the proxy under test on CPU 0.
 * - Per target: a 2 s warm-up at 64 connections (not recorded), then one wrk run per connection
 *   count (`-t 1 --timeout 10s --latency`). With `--rounds N` the targets are measured in turn N
 *   times and the table shows medians.
 * - Proxy CPU µs/req: the proxy process's utime+stime (all threads, `/proc/PID/stat`) over the
 *   run, divided by the requests wrk completed.
 *
 * `--floor` adds a 4th target, `floor_proxy.ts`: the bare Deno.serve + fetch proxy, i.e. what
 * Deno itself costs on this machine. Needs `taskset`, `wrk` and `haproxy` on the PATH. Every child is killed at the end, on error
 * too. Traffic goes to 127.0.0.1 only.
 */

const HOST = "127.0.0.1";
const BODY = '{"model":"sim-model","prompt":"hi","max_tokens":1}';
const PATH = "/v1/completions";
const ROOT = new URL("../../", import.meta.url).pathname;
const WORKER = new URL("./instant_worker.ts", import.meta.url).pathname;
const FLOOR = new URL("./floor_proxy.ts", import.meta.url).pathname;

// ---------------------------------------------------------------------------------------------
// Flags

interface Options {
  /** Seconds per recorded wrk run. */
  duration: number;
  /** Seconds of the unrecorded warm-up at 64 connections. */
  warmup: number;
  /** Connection counts, one recorded run each. */
  conns: number[];
  /** How many times every target is measured (medians reported). */
  rounds: number;
  /** Where to write the JSON results, or null. */
  json: string | null;
  /** Also measure `floor_proxy.ts`, the cheapest Deno proxy. */
  floor: boolean;
}

const USAGE = `usage: deno run -A bench/overhead/run.ts [options]
  --duration S   seconds per recorded run (default 8; 3 with --quick)
  --warmup S     seconds of warm-up at 64 connections per target (default 2; 1 with --quick)
  --conns A,B    connection counts (default 1,64)
  --rounds N     measure every target N times, report medians (default 1)
  --quick        short runs, for a smoke test
  --floor        also measure floor_proxy.ts (bare Deno.serve + fetch proxy) as a 4th target
  --json PATH    also write the results as JSON`;

function fail(msg: string): never {
  console.error(`bench:overhead: ${msg}\n${USAGE}`);
  Deno.exit(2);
}

function positive(flag: string, v: string | undefined, max: number): number {
  const n = Number(v);
  if (v === undefined || !Number.isInteger(n) || n < 1 || n > max) {
    fail(`${flag} needs an integer in 1..${max}, got ${v}`);
  }
  return n;
}

/** Parses the command line. */
export function parseOptions(args: string[]): Options {
  let duration: number | null = null;
  let warmup: number | null = null;
  let conns = [1, 64];
  let rounds = 1;
  let quick = false;
  let json: string | null = null;
  let floor = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const [flag, inline] = a.includes("=") ? a.split("=", 2) : [a, undefined];
    const value = () => inline ?? args[++i];
    switch (flag) {
      case "--duration":
        duration = positive(flag, value(), 600);
        break;
      case "--warmup":
        warmup = positive(flag, value(), 60);
        break;
      case "--rounds":
        rounds = positive(flag, value(), 20);
        break;
      case "--conns": {
        const v = value() ?? "";
        conns = v.split(",").map((c) => positive(flag, c, 10_000));
        break;
      }
      case "--quick":
        quick = true;
        break;
      case "--floor":
        floor = true;
        break;
      case "--json":
        json = value() ?? fail("--json needs a path");
        break;
      case "-h":
      case "--help":
        console.log(USAGE);
        Deno.exit(0);
        break;
      default:
        fail(`unknown argument ${a}`);
    }
  }
  return {
    duration: duration ?? (quick ? 3 : 8),
    warmup: warmup ?? (quick ? 1 : 2),
    conns,
    rounds,
    json,
    floor,
  };
}

// ---------------------------------------------------------------------------------------------
// Processes

interface Child {
  name: string;
  proc: Deno.ChildProcess;
  log: string;
}

const children: Child[] = [];
/** wrk runs in progress (killed with the children on exit). */
const loads = new Set<Deno.ChildProcess>();
let tmpDir = "";

/** Starts `cmd` pinned to `cpu`, stdout/stderr to a log file in the temp dir. */
async function spawn(name: string, cpu: number, cmd: string[], cwd = ROOT): Promise<Child> {
  const log = `${tmpDir}/${name}.log`;
  const file = await Deno.open(log, { write: true, create: true, truncate: true });
  const proc = new Deno.Command("taskset", {
    args: ["-c", String(cpu), ...cmd],
    cwd,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // Both streams into one file; the file closes when both end.
  const out = file.writable.getWriter();
  const pump = async (s: ReadableStream<Uint8Array>) => {
    for await (const chunk of s) await out.write(chunk).catch(() => {});
  };
  Promise.all([pump(proc.stdout), pump(proc.stderr)]).finally(() => out.close().catch(() => {}));
  const child = { name, proc, log };
  children.push(child);
  return child;
}

function tail(log: string, lines = 15): string {
  try {
    return Deno.readTextFileSync(log).split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

function exited(c: Child, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    c.proc.status.then(() => true),
    new Promise<boolean>((r) => timer = setTimeout(() => r(false), ms)),
  ]).finally(() => clearTimeout(timer));
}

let killing: Promise<void> | null = null;
let interrupted = false;

/** SIGTERM every child, SIGKILL whatever is still running after a second; once. */
function killAll(): Promise<void> {
  killing ??= killChildren();
  return killing;
}

async function killChildren(): Promise<void> {
  for (const p of loads) {
    try {
      p.kill("SIGKILL");
    } catch { /* already gone */ }
  }
  const all = children.splice(0);
  for (const c of all) {
    try {
      c.proc.kill("SIGTERM");
    } catch { /* already gone */ }
  }
  await Promise.all(all.map(async (c) => {
    if (await exited(c, 1000)) return;
    try {
      c.proc.kill("SIGKILL");
    } catch { /* already gone */ }
    await exited(c, 2000);
  }));
}

async function run(cmd: string, args: string[]): Promise<string> {
  try {
    const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
    return new TextDecoder().decode(out.stdout).trim() ||
      new TextDecoder().decode(out.stderr).trim();
  } catch {
    return "";
  }
}

/** Free loopback ports (bound, then released). */
function freePorts(n: number): number[] {
  const listeners = Array.from({ length: n }, () => Deno.listen({ hostname: HOST, port: 0 }));
  const ports = listeners.map((l) => (l.addr as Deno.NetAddr).port);
  listeners.forEach((l) => l.close());
  return ports;
}

/** Polls `url` until `ok(status, body)`, at most `attempts` times 100 ms apart. */
async function waitFor(
  what: string,
  child: Child | null,
  url: string,
  ok: (status: number, body: string) => boolean,
  attempts = 300,
): Promise<void> {
  let last = "";
  for (let i = 0; i < attempts; i++) {
    if (child && await exited(child, 0)) {
      throw new Error(`${what} exited during start-up:\n${tail(child.log)}`);
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      const body = await res.text();
      if (ok(res.status, body)) return;
      last = `${res.status} ${body.slice(0, 200)}`;
    } catch (e) {
      last = String(e);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} not ready after ${attempts / 10} s (${last})`);
}

// ---------------------------------------------------------------------------------------------
// Measurements

let clkTck = 100;

/** utime+stime of `pid` (all threads) in ticks. */
function cpuTicks(pid: number): number {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  // Fields after the `(comm)`; utime and stime are fields 14 and 15 of the whole line.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(rest[11]) + Number(rest[12]);
}

/** Busy and total jiffies of each CPU, from /proc/stat. */
function cpuLoad(): Map<string, { busy: number; total: number }> {
  const m = new Map<string, { busy: number; total: number }>();
  for (const line of Deno.readTextFileSync("/proc/stat").split("\n")) {
    const match = /^(cpu\d+)\s+(.*)$/.exec(line);
    if (!match) continue;
    const f = match[2].split(/\s+/).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    m.set(match[1], { busy: total - f[3] - f[4], total });
  }
  return m;
}

function busyPct(
  before: ReturnType<typeof cpuLoad>,
  after: ReturnType<typeof cpuLoad>,
  cpu: string,
): number | null {
  const a = before.get(cpu), b = after.get(cpu);
  if (!a || !b || b.total === a.total) return null;
  return round(100 * (b.busy - a.busy) / (b.total - a.total), 0);
}

/** What wrk reported. */
export interface WrkResult {
  requests: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  socketErrors: { connect: number; read: number; write: number; timeout: number };
}

function toMs(v: string, unit: string): number {
  const n = Number(v);
  switch (unit) {
    case "us":
      return n / 1000;
    case "ms":
      return n;
    case "s":
      return n * 1000;
    case "m":
      return n * 60_000;
    case "h":
      return n * 3_600_000;
  }
  return NaN;
}

/** Parses `wrk --latency` output. */
export function parseWrk(out: string): WrkResult {
  const num = (re: RegExp): number | null => {
    const m = re.exec(out);
    return m ? Number(m[1]) : null;
  };
  const pct = (p: string): number => {
    const m = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s|m|h)\\s*$`, "m").exec(out);
    return m ? toMs(m[1], m[2]) : NaN;
  };
  const done = /(\d+) requests in ([\d.]+)(us|ms|s|m|h)/.exec(out);
  if (!done) throw new Error(`unexpected wrk output:\n${out}`);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  return {
    requests: Number(done[1]),
    seconds: toMs(done[2], done[3]) / 1000,
    rps: num(/Requests\/sec:\s+([\d.]+)/) ?? NaN,
    p50Ms: pct("50"),
    p99Ms: pct("99"),
    non2xx: num(/Non-2xx or 3xx responses: (\d+)/) ?? 0,
    socketErrors: {
      connect: Number(sock?.[1] ?? 0),
      read: Number(sock?.[2] ?? 0),
      write: Number(sock?.[3] ?? 0),
      timeout: Number(sock?.[4] ?? 0),
    },
  };
}

let luaScript = "";

/** One wrk run on CPU 0, killed if it overruns its duration by 30 s. */
async function wrk(url: string, conns: number, seconds: number): Promise<WrkResult> {
  const proc = new Deno.Command("taskset", {
    args: [
      "-c",
      "0",
      "wrk",
      "-t",
      "1",
      "-c",
      String(conns),
      "-d",
      `${seconds}s`,
      "--timeout",
      "10s",
      "--latency",
      "-s",
      luaScript,
      url,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  loads.add(proc);
  const guard = setTimeout(() => {
    try {
      proc.kill("SIGKILL");
    } catch { /* gone */ }
  }, (seconds + 30) * 1000);
  try {
    const out = await proc.output();
    const text = new TextDecoder().decode(out.stdout);
    if (!out.success) {
      throw new Error(`wrk failed (${out.code}): ${new TextDecoder().decode(out.stderr)}${text}`);
    }
    return parseWrk(text);
  } finally {
    clearTimeout(guard);
    loads.delete(proc);
  }
}

/** One recorded run. */
export interface Row extends WrkResult {
  target: string;
  conns: number;
  round: number;
  /** Proxy CPU per completed request, µs (null for direct). */
  proxyCpuUsPerReq: number | null;
  /** Proxy CPU share of one core over the run, %. */
  proxyCpuPct: number | null;
  cpu0BusyPct: number | null;
  cpu1BusyPct: number | null;
}

interface Target {
  name: string;
  url: string;
  /** The proxy's pid, or null (direct). */
  pid: number | null;
}

async function measure(t: Target, o: Options, roundNo: number): Promise<Row[]> {
  await wrk(t.url, 64, o.warmup);
  const rows: Row[] = [];
  for (const conns of o.conns) {
    const load0 = cpuLoad();
    const ticks0 = t.pid === null ? 0 : cpuTicks(t.pid);
    const r = await wrk(t.url, conns, o.duration);
    const ticks1 = t.pid === null ? 0 : cpuTicks(t.pid);
    const load1 = cpuLoad();
    const cpuSec = (ticks1 - ticks0) / clkTck;
    rows.push({
      target: t.name,
      conns,
      round: roundNo,
      ...r,
      proxyCpuUsPerReq: t.pid === null || r.requests === 0
        ? null
        : round1(cpuSec * 1e6 / r.requests),
      proxyCpuPct: t.pid === null ? null : round(100 * cpuSec / r.seconds, 0),
      cpu0BusyPct: busyPct(load0, load1, "cpu0"),
      cpu1BusyPct: busyPct(load0, load1, "cpu1"),
    });
    const last = rows[rows.length - 1];
    console.error(
      `  ${t.name} c=${conns}: ${Math.round(last.rps)} req/s, p50 ${last.p50Ms} ms, ` +
        `p99 ${last.p99Ms} ms, cpu ${last.proxyCpuUsPerReq ?? "-"} µs/req`,
    );
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Report

function round(n: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}
const round1 = (n: number) => round(n, 1);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

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

function summarise(rows: Row[], targets: string[], conns: number[]): Summary[] {
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

function ratios(s: Summary[], conns: number[]): Ratios {
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

function markdown(s: Summary[], r: Ratios, conns: number[], rounds: number): string {
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

// ---------------------------------------------------------------------------------------------
// Main

function haproxyConfig(port: number, workers: number[]): string {
  return `global
  nbthread 1
  maxconn 4096

defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  option http-no-delay
  http-reuse always

frontend fe
  bind ${HOST}:${port}
  default_backend workers

backend workers
  balance roundrobin
  option httpchk GET /health
${workers.map((p, i) => `  server w${i + 1} ${HOST}:${p} check inter 2s`).join("\n")}
`;
}

async function main(args: string[]): Promise<number> {
  const o = parseOptions(args);
  for (const tool of ["taskset", "wrk", "haproxy"]) {
    if (!(await run("sh", ["-c", `command -v ${tool}`]))) {
      console.error(`bench:overhead: ${tool} not found on PATH (apt-get install -y ${tool})`);
      return 2;
    }
  }
  clkTck = Number(await run("getconf", ["CLK_TCK"])) || 100;
  tmpDir = await Deno.makeTempDir({ prefix: "smg-overhead-" });
  luaScript = `${tmpDir}/post.lua`;
  await Deno.writeTextFile(
    luaScript,
    `wrk.method = "POST"\nwrk.body = '${BODY}'\n` +
      `wrk.headers["Content-Type"] = "application/json"\n`,
  );

  const [w1, w2, gwPort, promPort, haPort, floorPort] = freePorts(6);
  const deno = Deno.execPath();
  const gatewayArgs = [
    "run",
    "--unstable-no-legacy-abort",
    "--allow-net",
    "--allow-env=RUST_LOG,SMG_LOG",
    "main.ts",
    "--host",
    HOST,
    "--port",
    String(gwPort),
    "--prometheus-port",
    String(promPort),
    "--worker-urls",
    `http://${HOST}:${w1}`,
    `http://${HOST}:${w2}`,
    "--policy",
    "round_robin",
    "--log-level",
    "warn",
  ];
  const machine = {
    date: new Date().toISOString(),
    cpus: navigator.hardwareConcurrency,
    kernel: await run("uname", ["-r"]),
    deno: Deno.version.deno,
    haproxy: (await run("haproxy", ["-v"])).split("\n")[0],
    wrk: (await run("wrk", ["-v"])).split("\n")[0],
    clkTck,
    pinning: "workers on CPU 1; wrk and the proxy under test on CPU 0",
  };
  const settings = {
    duration: o.duration,
    warmup: o.warmup,
    conns: o.conns,
    rounds: o.rounds,
    wrk: "-t 1 --timeout 10s --latency",
    request: `POST ${PATH} ${BODY}`,
    gateway: `deno ${gatewayArgs.join(" ")}`,
    floor: o.floor,
  };
  const names = ["direct", "gateway", ...(o.floor ? ["floor"] : []), "haproxy"];
  console.error(
    `bench:overhead: ${o.rounds} round(s) × ${names.length} targets × ${
      o.conns.join("/")
    } conns × ` +
      `${o.duration} s (+${o.warmup} s warm-up); logs in ${tmpDir}`,
  );

  const rows: Row[] = [];
  try {
    const workers = [
      await spawn("worker1", 1, [deno, "run", `--allow-net=${HOST}`, WORKER, "--port", `${w1}`]),
      await spawn("worker2", 1, [deno, "run", `--allow-net=${HOST}`, WORKER, "--port", `${w2}`]),
    ];
    for (const [i, p] of [w1, w2].entries()) {
      await waitFor(`worker ${p}`, workers[i], `http://${HOST}:${p}/health`, (s) => s === 200);
    }

    const gateway = await spawn("gateway", 0, [deno, ...gatewayArgs]);
    const haCfg = `${tmpDir}/haproxy.cfg`;
    await Deno.writeTextFile(haCfg, haproxyConfig(haPort, [w1, w2]));
    const haproxy = await spawn("haproxy", 0, ["haproxy", "-db", "-f", haCfg]);
    await waitFor(
      "gateway",
      gateway,
      `http://${HOST}:${gwPort}/readiness`,
      (s, b) => s === 200 && JSON.parse(b).healthy_workers === 2,
    );
    await waitFor("haproxy", haproxy, `http://${HOST}:${haPort}/health`, (s) => s === 200);
    const floor = o.floor
      ? await spawn("floor", 0, [
        deno,
        "run",
        "--unstable-no-legacy-abort",
        `--allow-net=${HOST}`,
        FLOOR,
        "--port",
        `${floorPort}`,
        `http://${HOST}:${w1}`,
        `http://${HOST}:${w2}`,
      ])
      : null;
    if (floor) {
      await waitFor("floor", floor, `http://${HOST}:${floorPort}/health`, (s) => s === 200);
    }

    const targets: Target[] = [
      { name: "direct", url: `http://${HOST}:${w1}${PATH}`, pid: null },
      { name: "gateway", url: `http://${HOST}:${gwPort}${PATH}`, pid: gateway.proc.pid },
      ...(floor
        ? [{ name: "floor", url: `http://${HOST}:${floorPort}${PATH}`, pid: floor.proc.pid }]
        : []),
      { name: "haproxy", url: `http://${HOST}:${haPort}${PATH}`, pid: haproxy.proc.pid },
    ];
    // A request through each target must succeed before measuring.
    for (const t of targets) {
      const res = await fetch(t.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: BODY,
        signal: AbortSignal.timeout(5000),
      });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`${t.name}: ${res.status} ${text}`);
    }
    for (let n = 1; n <= o.rounds; n++) {
      for (const t of targets) rows.push(...await measure(t, o, n));
    }
    for (const c of children) {
      if (await exited(c, 0)) throw new Error(`${c.name} exited during the run:\n${tail(c.log)}`);
    }
  } finally {
    await killAll();
  }

  const summary = summarise(rows, names, o.conns);
  const r = ratios(summary, o.conns);
  console.log(markdown(summary, r, o.conns, o.rounds));
  if (o.json) {
    await Deno.writeTextFile(
      o.json,
      JSON.stringify({ machine, settings, summary, ratios: r, runs: rows }, null, 2) + "\n",
    );
    console.error(`bench:overhead: wrote ${o.json}`);
  }
  await Deno.remove(tmpDir, { recursive: true }).catch(() => {});
  return 0;
}

if (import.meta.main) {
  const onSignal = () => {
    interrupted = true;
    killAll().finally(() => {
      if (tmpDir) Deno.removeSync(tmpDir, { recursive: true });
      Deno.exit(130);
    });
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  let code = 1;
  try {
    code = await main(Deno.args);
  } catch (e) {
    if (interrupted) {
      console.error("bench:overhead: interrupted");
      code = 130;
    } else {
      console.error(`bench:overhead: ${e instanceof Error ? e.message : e}`);
      if (tmpDir) console.error(`bench:overhead: logs kept in ${tmpDir}`);
    }
  } finally {
    await killAll();
  }
  Deno.exit(code);
}
