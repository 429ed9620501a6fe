/**
 * Worker registry convergence over a real mesh (`deno task bench:mesh-workers`): N gateways in
 * this process on loopback (real gRPC transports, default timing) form a mesh; then, `--rounds`
 * times, a worker is registered on a random router and the time until every other router's
 * registry holds it is measured, and likewise for its removal by the owner; last, a router
 * that joins after 10 workers exist is timed until it holds them all. The routers share
 * one event loop, so the figures include every router's processing on one core.
 *
 *   deno task bench:mesh-workers -- --sizes 3,5 --rounds 20 [--json out.json]
 */

import { defaultConfig } from "../../lib/config/config.ts";
import { seededRandom } from "../../lib/core/clock.ts";
import { silentLogger } from "../../lib/core/log.ts";
import { Gateway } from "../../lib/server/app.ts";
import { listenGateway, type Listening } from "../../lib/server/listen.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import { quantile } from "./chaos_stats.ts";

function arg(name: string, fallback: string): string {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 && Deno.args[i + 1] ? Deno.args[i + 1] : fallback;
}

/** Resolves when `holds()` becomes true on every registry change of `gw`, or after `limitMs`. */
function when(gws: Gateway[], holds: (g: Gateway) => boolean, limitMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const offs: (() => void)[] = [];
    const done = (ok: boolean) => {
      clearTimeout(timer);
      offs.forEach((f) => f());
      resolve(ok);
    };
    const check = () => gws.every(holds) && done(true);
    const timer = setTimeout(() => done(false), limitMs);
    for (const g of gws) offs.push(g.registry.subscribe(check));
    check();
  });
}

async function measure(n: number, rounds: number) {
  const gws: Gateway[] = [];
  const servings: Listening[] = [];
  const ports = freePorts(n + 1);
  const start = async (i: number) => {
    const d = defaultConfig();
    const config = {
      ...d,
      host: "127.0.0.1",
      port: 0,
      prometheusHost: "127.0.0.1",
      prometheusPort: 0,
      policy: "round_robin" as const,
      shutdownGracePeriodSecs: 0,
      health: { ...d.health, intervalSecs: 3600, startupCheckIntervalSecs: 3600 },
      mesh: {
        ...d.mesh,
        enabled: true,
        serverName: `w${i}`,
        host: "127.0.0.1",
        advertiseHost: "127.0.0.1",
        port: ports[i],
        peerUrls: i === 0 ? [] : [`127.0.0.1:${ports[0]}`],
      },
    };
    const gw = new Gateway({ config, log: silentLogger });
    servings.push(await listenGateway(gw, silentLogger, { signals: false }));
    return gw;
  };
  for (let i = 0; i < n; i++) gws.push(await start(i));
  // Formed: every router holds a stream with every other.
  const formed = performance.now();
  while (!gws.every((g) => g.mesh!.node.members().filter((m) => m.stream).length === n - 1)) {
    if (performance.now() - formed > 30_000) throw new Error(`N=${n}: no full mesh`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const random = seededRandom(n);
  const add: number[] = [];
  const remove: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const owner = gws[Math.floor(random() * n)];
    const others = gws.filter((g) => g !== owner);
    const url = `http://10.99.${n}.${r + 1}:8000`;
    const t0 = performance.now();
    const w = owner.manager.add({ url, models: ["m"] });
    if (!await when(others, (g) => g.registry.byUrl(url) !== undefined, 10_000)) {
      throw new Error(`N=${n}: ${url} never arrived`);
    }
    add.push(performance.now() - t0);
    const t1 = performance.now();
    owner.manager.remove(w.id);
    if (!await when(others, (g) => g.registry.byUrl(url) === undefined, 20_000)) {
      throw new Error(`N=${n}: ${url} never left`);
    }
    remove.push(performance.now() - t1);
  }
  // A router that joins late: the time until it holds every worker already registered.
  for (let i = 0; i < 10; i++) gws[i % n].manager.add({ url: `http://10.98.${n}.${i}:8000` });
  await when(gws, (g) => g.registry.all().length === 10, 10_000);
  const t2 = performance.now();
  const late = await start(n);
  if (!await when([late], (g) => g.registry.all().length === 10, 30_000)) {
    throw new Error(`N=${n}: the late router never caught up`);
  }
  const join = performance.now() - t2;
  for (const s of servings) await s.shutdown();
  const sum = (xs: number[]) => ({
    median: quantile(xs, 0.5)!,
    p99: quantile(xs, 0.99)!,
    max: Math.max(...xs),
  });
  return { n, rounds, add: sum(add), remove: sum(remove), joinMs: join };
}

const results = [];
for (const n of arg("sizes", "3,5").split(",").map(Number)) {
  const r = await measure(n, Number(arg("rounds", "20")));
  results.push(r);
  const f = (x: { median: number; p99: number }) =>
    `${x.median.toFixed(0)} / ${x.p99.toFixed(0)} ms`;
  console.log(
    `N=${n}: add reaches every router ${f(r.add)}; owner's removal ${f(r.remove)} ` +
      `(median / p99); a router joining late holds all 10 workers after ${r.joinMs.toFixed(0)} ms`,
  );
}
const out = arg("json", "");
if (out) Deno.writeTextFileSync(out, JSON.stringify(results, null, 2));
