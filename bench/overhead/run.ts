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
 * Deno itself costs on this machine. Needs `taskset`, `wrk` and `haproxy` on the PATH. Every
 * child is killed at the end, on error too. Traffic goes to 127.0.0.1 only.
 *
 * This file wires the pieces together: flags (`options.ts`), children (`processes.ts`), load
 * (`wrk.ts`), CPU accounting (`cpu.ts`, `measure.ts`) and the report (`report.ts`).
 */

import { parseOptions } from "./options.ts";
import { measure, type Row, type Target } from "./measure.ts";
import {
  assertAllRunning,
  type Child,
  freePorts,
  HOST,
  killAll,
  run,
  spawn,
  waitFor,
} from "./processes.ts";
import { markdown, ratios, summarise, writeJson } from "./report.ts";
import { writeWrkScript } from "./wrk.ts";

const BODY = '{"model":"sim-model","prompt":"hi","max_tokens":1}';
const PATH = "/v1/completions";
const ROOT = new URL("../../", import.meta.url).pathname;
const WORKER = new URL("./instant_worker.ts", import.meta.url).pathname;
const FLOOR = new URL("./floor_proxy.ts", import.meta.url).pathname;

/** Version flag per required tool; the tool counts as missing if it prints nothing. */
const TOOLS: Record<string, string[]> = {
  taskset: ["--version"],
  wrk: ["-v"],
  haproxy: ["-v"],
};

let tmpDir = "";
let interrupted = false;

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
  await writeWrkScript(script, BODY);
  const start = (name: string, cpu: number, cmd: string[]): Promise<Child> =>
    spawn(name, cpu, cmd, tmpDir, ROOT);

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
      await start("worker1", 1, [deno, "run", `--allow-net=${HOST}`, WORKER, "--port", `${w1}`]),
      await start("worker2", 1, [deno, "run", `--allow-net=${HOST}`, WORKER, "--port", `${w2}`]),
    ];
    for (const [i, p] of [w1, w2].entries()) {
      await waitFor(`worker ${p}`, workers[i], `http://${HOST}:${p}/health`, (s) => s === 200);
    }

    const gateway = await start("gateway", 0, [deno, ...gatewayArgs]);
    const haCfg = `${tmpDir}/haproxy.cfg`;
    await Deno.writeTextFile(haCfg, haproxyConfig(haPort, [w1, w2]));
    const haproxy = await start("haproxy", 0, ["haproxy", "-db", "-f", haCfg]);
    await waitFor(
      "gateway",
      gateway,
      `http://${HOST}:${gwPort}/readiness`,
      (s, b) => s === 200 && JSON.parse(b).healthy_workers === 2,
    );
    await waitFor("haproxy", haproxy, `http://${HOST}:${haPort}/health`, (s) => s === 200);
    const floor = o.floor
      ? await start("floor", 0, [
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
      for (const t of targets) rows.push(...await measure(t, o, n, clkTck, script));
    }
    await assertAllRunning();
  } finally {
    await killAll();
  }

  const summary = summarise(rows, names, o.conns);
  const r = ratios(summary, o.conns);
  console.log(markdown(summary, r, o.conns, o.rounds));
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
