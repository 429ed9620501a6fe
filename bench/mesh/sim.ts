/**
 * Failure detection in the simulator (`deno task bench:mesh-sim`): clusters of in-memory routers
 * under fake time (1 ms links), repeatedly one router is crashed and the time until the first
 * survivor holds it SUSPECTED and until every survivor holds it DOWN is measured; then it
 * restarts under the same name and rejoins before the next round. Two kinds of failure: a crash
 * whose connections reset (what SIGKILL does on a live host), and a hang that only goes silent
 * (no reset; detection by probes alone). Also idle traffic per router (approximate JSON bytes).
 *
 *   deno task bench:mesh-sim -- --sizes 10,100,500 --kills 20 [--json out.json]
 */

import { quantile } from "./chaos_stats.ts";
import { Cluster } from "../../support/mesh_cluster.ts";

function arg(name: string, fallback: string): string {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 && Deno.args[i + 1] ? Deno.args[i + 1] : fallback;
}

/** One size: kills by reset and by silence, then idle bytes. */
async function measure(n: number, kills: number, seed: number) {
  const c = new Cluster({ seed });
  const names = await c.grow(n);
  const formed = c.waitFor(() => c.converged(), 600_000, 100);
  if (formed === null) throw new Error(`N=${n}: the cluster did not form`);
  c.clock.advance(10_000);
  const rows: Record<string, { suspected: number[]; down: number[] }> = {
    reset: { suspected: [], down: [] },
    silent: { suspected: [], down: [] },
  };
  let pick = seed;
  for (const kind of ["reset", "silent"] as const) {
    for (let k = 0; k < kills; k++) {
      pick = (pick * 1103515245 + 12345) % 2 ** 31;
      const victim = names[pick % n];
      if (kind === "reset") await c.kill(victim);
      else c.isolate(victim);
      const others = c.live().filter((x) => x.name !== victim);
      const susp = c.waitFor(
        () =>
          others.some((x) =>
            x.node.statusOf(victim) === "SUSPECTED" || x.node.statusOf(victim) === "DOWN"
          ),
        120_000,
        5,
      );
      const t0 = c.clock.now() - (susp ?? 0);
      const down = c.waitFor(
        () => others.every((x) => x.node.statusOf(victim) === "DOWN"),
        300_000,
        20,
      );
      if (susp === null || down === null) {
        throw new Error(`N=${n} ${kind}: ${victim} never detected`);
      }
      rows[kind].suspected.push(susp);
      rows[kind].down.push(c.clock.now() - t0);
      if (kind === "reset") {
        await c.restart(victim, [
          names[(pick + 1) % n] === victim ? names[(pick + 2) % n] : names[(pick + 1) % n],
        ]);
      } else {
        c.net.heal();
        if (victim !== undefined) await c.kill(victim);
        await c.restart(victim, [names[0] === victim ? names[1] : names[0]]);
      }
      if (c.waitFor(() => c.converged(), 300_000, 50) === null) {
        throw new Error(`N=${n}: no rejoin`);
      }
      c.clock.advance(5000);
    }
  }
  // Idle traffic over 60 s.
  const before = c.live().map((x) =>
    c.net.stats(x.address).bytesSent + c.net.stats(x.address).bytesReceived
  );
  c.clock.advance(60_000);
  const after = c.live().map((x) =>
    c.net.stats(x.address).bytesSent + c.net.stats(x.address).bytesReceived
  );
  const idle = after.map((a, i) => (a - before[i]) / 60);
  await c.stop();
  const summary = (xs: number[]) => ({
    median: quantile(xs, 0.5)!,
    p99: quantile(xs, 0.99)!,
    max: Math.max(...xs),
  });
  return {
    n,
    formedMs: formed,
    reset: { suspected: summary(rows.reset.suspected), down: summary(rows.reset.down) },
    silent: { suspected: summary(rows.silent.suspected), down: summary(rows.silent.down) },
    idleBytesPerSec: { median: quantile(idle, 0.5)!, max: Math.max(...idle) },
  };
}

const sizes = arg("sizes", "10,100,500").split(",").map(Number);
const kills = Number(arg("kills", "20"));
const results = [];
for (const n of sizes) {
  const t = performance.now();
  const r = await measure(n, kills, 11 + n);
  results.push(r);
  const f = (x: { median: number; p99: number }) =>
    `${(x.median / 1000).toFixed(2)} / ${(x.p99 / 1000).toFixed(2)} s`;
  console.log(
    `N=${n}: reset: first SUSPECTED ${f(r.reset.suspected)}, DOWN everywhere ${f(r.reset.down)}; ` +
      `silent: first SUSPECTED ${f(r.silent.suspected)}, DOWN everywhere ${f(r.silent.down)}; ` +
      `idle ${r.idleBytesPerSec.median.toFixed(0)} B/s per router (median); ${
        ((performance.now() - t) / 1000).toFixed(0)
      } s wall`,
  );
}
const out = arg("json", "");
if (out) Deno.writeTextFileSync(out, JSON.stringify(results, null, 2));
