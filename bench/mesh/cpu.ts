/**
 * The mesh's cost on the request path: a router's CPU per routed request with `cache_aware`,
 * mesh off and mesh on, side by side in one run (method of `bench:overhead`: wrk and the router
 * under test on CPU 0, two instant workers on CPU 1; CPU from `/proc/PID/stat` over each run,
 * divided by the requests wrk completed). With the mesh on, a second router (on CPU 1) is the
 * peer that receives the deltas, so every request is hashed, recorded as a placement and
 * published. The request carries a 2,000-character prompt (a small system prompt), so the path
 * hashing is paid in full.
 *
 * With `--distinct`, each request's prompt starts with its own number, so every request is a new
 * path (a miss, its whole ladder published); without it every request repeats one prompt (a hot
 * prompt: the tree matches it whole and its ladder goes out once a second).
 *
 *   deno task bench:mesh-cpu [--duration 8] [--warmup 2] [--conns 1,64] [--rounds 3] [--distinct]
 */

import { measure, type Row, type Target } from "../overhead/measure.ts";
import { parseOptions } from "../overhead/options.ts";
import { type Child, HOST, killAll, run, spawn, waitFor } from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import { markdown, ratios, summarise } from "../overhead/report.ts";
import { writeWrkScript } from "../overhead/wrk.ts";
import { gatewayCommand } from "../routing/gateway.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const WORKER = new URL("../overhead/instant_worker.ts", import.meta.url).pathname;
const PATH = "/v1/completions";
const PROMPT = "You are a careful assistant. Answer briefly and cite sources. ".repeat(33);
const BODY = JSON.stringify({ model: "sim-model", prompt: PROMPT, max_tokens: 1 });

function routerArgs(port: number, promPort: number, workers: string[], mesh: string[]) {
  // The routing benchmark's gateway command; grpc-js reads its environment variables.
  return gatewayCommand(ROOT, port, promPort, 1, [
    "--worker-urls",
    ...workers,
    "--policy",
    "cache_aware",
    ...mesh,
  ]).map((a) => (a.startsWith("--allow-env=") ? "--allow-env" : a));
}

/** A wrk script whose every request's prompt starts with its own number (a new path each). */
function distinctScript(): string {
  const [head, tail] = BODY.split(PROMPT);
  return [
    `local head, tail = '${head}', '${PROMPT}${tail}'`,
    "local n = 0",
    "request = function()",
    "  n = n + 1",
    '  return wrk.format("POST", nil, { ["Content-Type"] = "application/json" }, head .. n .. ": " .. tail)',
    "end",
    "",
  ].join("\n");
}

async function main(): Promise<number> {
  const distinct = Deno.args.includes("--distinct");
  const o = parseOptions(Deno.args.filter((a) => a !== "--distinct"));
  const clkTck = Number(await run("getconf", ["CLK_TCK"])) || 100;
  const dir = await Deno.makeTempDir({ prefix: "smg-mesh-cpu-" });
  const script = `${dir}/post.lua`;
  if (distinct) await Deno.writeTextFile(script, distinctScript());
  else await writeWrkScript(script, BODY);
  const [w1, w2, offPort, offProm, onPort, onProm, peerPort, peerProm, onMesh, peerMesh] =
    freePorts(10);
  const deno = Deno.execPath();
  const workers = [`http://${HOST}:${w1}`, `http://${HOST}:${w2}`];
  const mesh = (name: string, port: number, peer: number | null) => [
    "--enable-mesh",
    "--mesh-server-name",
    name,
    "--mesh-host",
    HOST,
    "--mesh-port",
    String(port),
    ...(peer === null ? [] : ["--mesh-peer-urls", `${HOST}:${peer}`]),
  ];
  const start = (name: string, cpu: number, cmd: string[]): Promise<Child> =>
    spawn(name, cpu, cmd, dir, ROOT);
  const rows: Row[] = [];
  try {
    for (const [i, p] of [w1, w2].entries()) {
      const w = await start(`worker${i + 1}`, 1, [
        deno,
        "run",
        `--allow-net=${HOST}`,
        WORKER,
        "--port",
        `${p}`,
      ]);
      await waitFor(`worker ${p}`, w, `http://${HOST}:${p}/health`, (s) => s === 200);
    }
    const off = await start("mesh-off", 0, [deno, ...routerArgs(offPort, offProm, workers, [])]);
    const on = await start("mesh-on", 0, [
      deno,
      ...routerArgs(onPort, onProm, workers, mesh("on", onMesh, null)),
    ]);
    const peer = await start("mesh-peer", 1, [
      deno,
      ...routerArgs(peerPort, peerProm, workers, mesh("peer", peerMesh, onMesh)),
    ]);
    for (const [c, port] of [[off, offPort], [on, onPort], [peer, peerPort]] as const) {
      await waitFor(
        c.name,
        c,
        `http://${HOST}:${port}/readiness`,
        (s, b) => s === 200 && JSON.parse(b).healthy_workers === 2,
      );
    }
    await waitFor(
      "mesh",
      on,
      `http://${HOST}:${onPort}/mesh/status`,
      (s, b) =>
        s === 200 &&
        JSON.parse(b).members.every((m: { stream: boolean; name: string }) =>
          m.name === "on" || m.stream
        ),
    );
    const targets: Target[] = [
      { name: "mesh off", url: `http://${HOST}:${offPort}${PATH}`, pid: off.proc.pid },
      { name: "mesh on", url: `http://${HOST}:${onPort}${PATH}`, pid: on.proc.pid },
    ];
    for (let n = 1; n <= o.rounds; n++) {
      for (const t of targets) rows.push(...await measure(t, o, n, clkTck, script));
    }
    const metrics = await (await fetch(`http://${HOST}:${onProm}/metrics`)).text();
    const sent = metrics.split("\n").find((l) =>
      l.startsWith('router_mesh_tree_deltas_total{result="sent"}')
    );
    console.error(`bench:mesh-cpu: ${sent ?? "no deltas sent?"}`);
  } finally {
    await killAll();
  }
  const names = ["mesh off", "mesh on"];
  const summary = summarise(rows, names, o.conns);
  // The overhead report's table, without its gateway-versus-HAProxy ratio lines.
  console.log(markdown(summary, ratios(summary, o.conns), o.conns, o.rounds).split("\n\n- ")[0]);
  for (const c of o.conns) {
    const cpu = (t: string) =>
      summary.find((x) => x.target === t && x.conns === c)?.proxyCpuUsPerReq;
    const [off, on] = [cpu("mesh off"), cpu("mesh on")];
    if (off && on) {
      console.log(`- ${c} conns: CPU per request, mesh on ÷ off = ${(on / off).toFixed(2)}`);
    }
  }
  return 0;
}

if (import.meta.main) {
  Deno.addSignalListener("SIGINT", () => killAll().finally(() => Deno.exit(130)));
  Deno.exit(await main());
}
