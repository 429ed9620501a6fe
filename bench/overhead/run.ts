/**
 * Gateway overhead benchmark: the same load sent (a) straight to one instant worker, (b) through
 * the gateway (`main.ts`, round robin over two workers), (c) through HAProxy (roundrobin,
 * nbthread 1) and (d) through nginx (round robin, one process), side by side in one run, so a
 * noisy machine affects every target alike. Method and results: BENCHMARKS.md, "Gateway overhead".
 *
 *   deno task bench:overhead [--duration 8] [--quick] [--rounds 1] [--floor] [--no-sse]
 *     [--sse-only] [--json out.json]
 *
 * - The two workers (`instant_worker.ts --tokens 32 --token-ms 1`) run on CPU 1; wrk and the
 *   proxy under test on CPU 0.
 * - Two cases. The tiny request: `POST /v1/completions` `max_tokens: 1`, answered at once, at
 *   every `--conns` count. Paced SSE: the same with `"stream": true`, at 64 connections; the
 *   workers send 32 token events, each a timer tick of ≥ 1 ms after the previous one, then
 *   `[DONE]`; wrk times each whole stream. The events per stream are counted on a probe stream.
 * - Per target and case: a warm-up at 64 connections (not recorded), then one wrk run per
 *   connection count (`-t 1 --timeout 10s --latency`). With `--rounds N` the targets are
 *   measured in turn N times and the tables show medians.
 * - Proxy CPU µs/req: the proxy process's utime+stime (all threads, `/proc/PID/stat`) over the
 *   run, divided by the requests (streams) wrk completed; per event: ÷ events per stream.
 *
 * `--baseline DIR` adds the gateway of another checkout (row gateway_baseline), so a change is
 * measured against the commit before it in the same rounds.
 *
 * `--floor` adds the gateway on `Deno.serve` (`--http-server deno`, row gateway_deno),
 * `floor_proxy.ts` (bare Deno.serve + fetch, what Deno itself costs), `connect_floor_proxy.ts`
 * (bare Deno.serve + the gateway's `Http1Client`) and `raw_floor_proxy.ts` (a bare HTTP/1.1 front
 * on `Deno.listen` + `Http1Client`: the runtime and our client without the gateway's logic, the
 * floor the gateway stands on). Needs `taskset`, `wrk`, `haproxy` and `nginx` on the PATH. Every child is killed at the end, on error too. Traffic goes to 127.0.0.1 only.
 *
 * This file wires the pieces together: flags (`options.ts`), children (`processes.ts`), the
 * HAProxy and nginx configs (`peers.ts`), load (`wrk.ts`), CPU accounting (`cpu.ts`,
 * `measure.ts`) and the report (`report.ts`).
 */

import { parseOptions } from "./options.ts";
import { measure, type Row, type Target } from "./measure.ts";
import {
  assertAllRunning,
  type Child,
  HOST,
  killAll,
  run,
  spawn,
  waitFor,
} from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import { haproxyConfig, nginxConfig } from "./peers.ts";
import { markdown, ratios, summarise, writeJson } from "./report.ts";
import { median, round, round1 } from "./stats.ts";
import { writeWrkScript } from "./wrk.ts";

const BODY = '{"model":"sim-model","prompt":"hi","max_tokens":1}';
const SSE_BODY = '{"model":"sim-model","prompt":"hi","max_tokens":32,"stream":true}';
const PATH = "/v1/completions";
/** The paced SSE case: connections, token events per stream and ms between them. */
const SSE_CONNS = 64;
const TOKENS = 32;
const TOKEN_MS = 1;
const ROOT = new URL("../../", import.meta.url).pathname;
const WORKER = new URL("./instant_worker.ts", import.meta.url).pathname;
const FLOOR = new URL("./floor_proxy.ts", import.meta.url).pathname;
const CONNECT_FLOOR = new URL("./connect_floor_proxy.ts", import.meta.url).pathname;
const RAW_FLOOR = new URL("./raw_floor_proxy.ts", import.meta.url).pathname;

/** Version flag per required tool; the tool counts as missing if it prints nothing. */
const TOOLS: Record<string, string[]> = {
  taskset: ["--version"],
  wrk: ["-v"],
  haproxy: ["-v"],
  nginx: ["-v"],
};

let tmpDir = "";
let interrupted = false;

/** POSTs `body` to `url` and reads the whole answer; throws unless it is a 200. */
async function probe(
  name: string,
  url: string,
  body: string,
): Promise<{ text: string; ms: number }> {
  const t0 = performance.now();
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
    signal: AbortSignal.timeout(5000),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${name}: ${res.status} ${text}`);
  return { text, ms: performance.now() - t0 };
}

/** The SSE `data:` events in a stream's text. */
function countEvents(text: string): number {
  return text.split("\n").filter((l) => l.startsWith("data:")).length;
}

/**
 * The events a worker sends per stream and the median time of 5 streams straight from it
 * (`targets[0]` is direct); throws unless every target relays a whole stream.
 */
async function probeStreams(targets: Target[]): Promise<{ events: number; directMs: number }> {
  const times: number[] = [];
  let events = 0;
  for (let i = 0; i < 5; i++) {
    const { text, ms } = await probe("direct", targets[0].url, SSE_BODY);
    events = countEvents(text);
    times.push(ms);
  }
  for (const t of targets) {
    const { text } = await probe(t.name, t.url, SSE_BODY);
    const n = countEvents(text);
    if (n !== events || !text.trimEnd().endsWith("data: [DONE]")) {
      throw new Error(`${t.name}: a stream carried ${n} events, the worker sends ${events}`);
    }
  }
  return { events, directMs: round1(median(times)) };
}

async function main(args: string[]): Promise<number> {
  const o = parseOptions(args);
  // Probing each tool directly, not through `sh -c "command -v …"`, keeps `sh` out of the
  // task's --allow-run list.
  for (const [tool, versionFlag] of Object.entries(TOOLS)) {
    if (!(await run(tool, versionFlag))) {
      console.error(`bench:overhead: ${tool} not found on PATH (apt-get install -y ${tool})`);
      return 2;
    }
  }
  const clkTck = Number(await run("getconf", ["CLK_TCK"])) || 100;
  tmpDir = await Deno.makeTempDir({ prefix: "smg-overhead-" });
  const script = `${tmpDir}/post.lua`;
  const sseScript = `${tmpDir}/sse.lua`;
  await writeWrkScript(script, BODY);
  await writeWrkScript(sseScript, SSE_BODY);
  const start = (name: string, cpu: number, cmd: string[]): Promise<Child> =>
    spawn(name, cpu, cmd, tmpDir, ROOT);

  const [
    w1,
    w2,
    gwPort,
    promPort,
    haPort,
    ngPort,
    floorPort,
    cfPort,
    rawPort,
    gdPort,
    gdProm,
    gbPort,
    gbProm,
  ] = freePorts(13);
  const workerUrls = [`http://${HOST}:${w1}`, `http://${HOST}:${w2}`];
  const deno = Deno.execPath();
  const gatewayArgs = [
    "run",
    "--unstable-no-legacy-abort",
    // An explicit list (the gateway's addresses, its workers' host): the gateway then runs in
    // the main thread with exactly it, as measured before the launcher narrowed global grants.
    `--allow-net=${HOST},0.0.0.0`,
    "--allow-env=RUST_LOG,SMG_LOG",
    "main.ts",
    "--host",
    HOST,
    "--port",
    String(gwPort),
    "--prometheus-port",
    String(promPort),
    "--worker-urls",
    ...workerUrls,
    "--policy",
    "round_robin",
    "--log-level",
    "warn",
  ];
  // The same gateway on Deno.serve (`--floor`): what the own front saves, side by side.
  const gatewayDenoArgs = gatewayArgs.map((a) =>
    a === String(gwPort) ? String(gdPort) : a === String(promPort) ? String(gdProm) : a
  ).concat(["--http-server", "deno"]);
  // The same gateway from another checkout (`--baseline`), on its own ports.
  const gatewayBaselineArgs = gatewayArgs.map((a) =>
    a === String(gwPort) ? String(gbPort) : a === String(promPort) ? String(gbProm) : a
  );
  const workerArgs = (port: number) => [
    "run",
    `--allow-net=${HOST}`,
    WORKER,
    "--port",
    `${port}`,
    "--tokens",
    `${TOKENS}`,
    "--token-ms",
    `${TOKEN_MS}`,
  ];
  const denoProxy = (name: string, file: string, port: number) =>
    start(name, 0, [
      deno,
      "run",
      "--unstable-no-legacy-abort",
      `--allow-net=${HOST}`,
      file,
      "--port",
      `${port}`,
      ...workerUrls,
    ]);
  const ngPrefix = `${tmpDir}/nginx`;
  const ngCmd = [
    "nginx",
    "-e",
    `${ngPrefix}/error.log`,
    "-p",
    ngPrefix,
    "-c",
    `${ngPrefix}/nginx.conf`,
  ];
  const machine = {
    date: new Date().toISOString(),
    cpus: navigator.hardwareConcurrency,
    kernel: await run("uname", ["-r"]),
    deno: Deno.version.deno,
    haproxy: (await run("haproxy", ["-v"])).split("\n")[0],
    nginx: await run("nginx", ["-v"]),
    wrk: (await run("wrk", ["-v"])).split("\n")[0],
    clkTck,
    pinning: "workers on CPU 1; wrk and the proxy under test on CPU 0",
  };
  const settings: Record<string, unknown> = {
    duration: o.duration,
    warmup: o.warmup,
    conns: o.tiny ? o.conns : [],
    rounds: o.rounds,
    wrk: "-t 1 --timeout 10s --latency",
    request: `POST ${PATH} ${BODY}`,
    workers: `instant_worker.ts --tokens ${TOKENS} --token-ms ${TOKEN_MS}`,
    gateway: `deno ${gatewayArgs.join(" ")}`,
    nginx: ngCmd.join(" "),
    floor: o.floor,
    baseline: o.baseline,
  };
  const names = [
    "direct",
    "gateway",
    ...(o.baseline ? ["gateway_baseline"] : []),
    ...(o.floor ? ["gateway_deno", "floor", "connect_floor", "raw_floor"] : []),
    "haproxy",
    "nginx",
  ];
  const cases = [o.tiny ? `tiny × ${o.conns.join("/")} conns` : "", o.sse ? "SSE × 64 conns" : ""];
  console.error(
    `bench:overhead: ${o.rounds} round(s) × ${names.length} targets × ` +
      `(${cases.filter((c) => c).join(", ")}) × ${o.duration} s (+${o.warmup} s warm-up); ` +
      `logs in ${tmpDir}`,
  );

  const rows: Row[] = [];
  let sse = { events: 0, directMs: 0 };
  try {
    const workers = [
      await start("worker1", 1, [deno, ...workerArgs(w1)]),
      await start("worker2", 1, [deno, ...workerArgs(w2)]),
    ];
    for (const [i, p] of [w1, w2].entries()) {
      await waitFor(`worker ${p}`, workers[i], `http://${HOST}:${p}/health`, (s) => s === 200);
    }

    const gateway = await start("gateway", 0, [deno, ...gatewayArgs]);
    const gatewayDeno = o.floor ? await start("gateway_deno", 0, [deno, ...gatewayDenoArgs]) : null;
    const gatewayBaseline = o.baseline
      ? await spawn("gateway_baseline", 0, [deno, ...gatewayBaselineArgs], tmpDir, o.baseline)
      : null;
    await Deno.writeTextFile(`${tmpDir}/haproxy.cfg`, haproxyConfig(haPort, [w1, w2]));
    const haproxy = await start("haproxy", 0, ["haproxy", "-db", "-f", `${tmpDir}/haproxy.cfg`]);
    await Deno.mkdir(ngPrefix);
    await Deno.writeTextFile(`${ngPrefix}/nginx.conf`, nginxConfig(ngPort, [w1, w2], ngPrefix));
    const nginx = await start("nginx", 0, ngCmd);
    const floor = o.floor ? await denoProxy("floor", FLOOR, floorPort) : null;
    const connectFloor = o.floor ? await denoProxy("connect_floor", CONNECT_FLOOR, cfPort) : null;
    const rawFloor = o.floor ? await denoProxy("raw_floor", RAW_FLOOR, rawPort) : null;
    await waitFor(
      "gateway",
      gateway,
      `http://${HOST}:${gwPort}/readiness`,
      (s, b) => s === 200 && JSON.parse(b).healthy_workers === 2,
    );
    for (const [c, port] of [[gatewayDeno, gdPort], [gatewayBaseline, gbPort]] as const) {
      if (!c) continue;
      await waitFor(
        c.name,
        c,
        `http://${HOST}:${port}/readiness`,
        (s, b) => s === 200 && JSON.parse(b).healthy_workers === 2,
      );
    }
    const proxies: [Child | null, number][] = [
      [haproxy, haPort],
      [nginx, ngPort],
      [floor, floorPort],
      [connectFloor, cfPort],
      [rawFloor, rawPort],
    ];
    for (const [c, port] of proxies) {
      if (c) await waitFor(c.name, c, `http://${HOST}:${port}/health`, (s) => s === 200);
    }

    const target = (name: string, port: number, c: Child | null): Target[] =>
      names.includes(name)
        ? [{ name, url: `http://${HOST}:${port}${PATH}`, pid: c?.proc.pid ?? null }]
        : [];
    const targets: Target[] = [
      ...target("direct", w1, null),
      ...target("gateway", gwPort, gateway),
      ...target("gateway_baseline", gbPort, gatewayBaseline),
      ...target("gateway_deno", gdPort, gatewayDeno),
      ...target("floor", floorPort, floor),
      ...target("connect_floor", cfPort, connectFloor),
      ...target("raw_floor", rawPort, rawFloor),
      ...target("haproxy", haPort, haproxy),
      ...target("nginx", ngPort, nginx),
    ];
    // A request and a stream through each target must succeed before measuring.
    for (const t of targets) await probe(t.name, t.url, BODY);
    sse = await probeStreams(targets);
    settings.sse = o.sse
      ? {
        request: `POST ${PATH} ${SSE_BODY}`,
        conns: SSE_CONNS,
        tokens: TOKENS,
        tokenMs: TOKEN_MS,
        eventsPerStream: sse.events,
        directStreamMs: sse.directMs,
      }
      : null;
    const sseLoad = { conns: SSE_CONNS, events: sse.events };
    for (let n = 1; n <= o.rounds; n++) {
      for (const t of o.tiny ? targets : []) {
        rows.push(...await measure(t, o, n, clkTck, script));
      }
      for (const t of o.sse ? targets : []) {
        rows.push(...await measure(t, o, n, clkTck, sseScript, sseLoad));
      }
    }
    await assertAllRunning();
  } finally {
    await killAll();
  }

  const summary = [
    ...summarise(rows, names, o.conns),
    ...summarise(rows, names, [SSE_CONNS], "sse"),
  ];
  const r = ratios(summary, o.tiny ? o.conns : []);
  const caption = `Paced SSE: \`POST ${PATH} ${SSE_BODY}\` at ${SSE_CONNS} connections; ` +
    `${sse.events} events per stream (${TOKENS} tokens, \`--token-ms ${TOKEN_MS}\`, then ` +
    `[DONE]); one stream alone straight from a worker: ${sse.directMs} ms ` +
    `(${round(sse.directMs / TOKENS, 2)} ms per token).`;
  console.log(markdown(summary, r, o.conns, o.rounds, caption));
  if (o.json) {
    await writeJson(o.json, { machine, settings, summary, ratios: r, runs: rows });
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
