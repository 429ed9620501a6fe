/**
 * Real routers on loopback: three gateway processes meshed as in docs/high-availability.md's
 * example (a bootstrap router, the others joining it), a SIGKILL (SUSPECTED, then DOWN on the
 * survivors, streams closed), a restart under the same name (ALIVE everywhere again) and a SIGTERM
 * (LEAVING, nobody suspects it). Waits on the routers' `Status:` log lines, never on fixed sleeps.
 */

import assert from "node:assert/strict";
import {
  type GatewayProcess,
  meshRouterArgs,
  spawnGateway,
} from "../../support/gateway_process.ts";
import { freePort } from "../../lib/core/free_port.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

interface Router {
  name: string;
  meshPort: number;
  proc: GatewayProcess;
  metrics: string;
}

/** `peers` are ports on 127.0.0.1, or `host:port` strings. */
async function router(name: string, meshPort: number, peers: (number | string)[]): Promise<Router> {
  const metricsPort = freePort();
  const seeds = peers.map((p) => typeof p === "number" ? `127.0.0.1:${p}` : p);
  const proc = await spawnGateway(MAIN, meshRouterArgs(name, meshPort, seeds, metricsPort));
  return { name, meshPort, proc, metrics: `http://127.0.0.1:${metricsPort}/metrics` };
}

/** Waits for a `Status:` line written after `from` in which every `want` entry holds. */
function status(r: Router, want: Record<string, string>, from = 0) {
  const parts = Object.entries(want).map(([n, s]) => {
    const [st, stream] = s.split("+");
    return `(?=[^\\n]*\\b${n}=${st}#\\d+${stream ? "\\+stream" : ""})`;
  }).join("");
  return r.proc.waitForOutput(new RegExp(`msg="Status: ${parts}[^\\n]*`), from, 20_000);
}

async function meshStatus(r: Router) {
  const res = await fetch(`${r.proc.url}/mesh/status`);
  assert.equal(res.status, 200);
  return await res.json() as {
    name: string;
    members: {
      name: string;
      address: string;
      status: string;
      incarnation: number;
      stream: boolean;
    }[];
  };
}

async function acceptedStreams(r: Router): Promise<number> {
  const text = await (await fetch(r.metrics)).text();
  return [...text.matchAll(/^router_mesh_peer_connections\{peer="([^"]*)"\} (\d+)/gm)]
    .filter((m) => m[1] !== "" && m[2] === "1").length;
}

async function stop(r: Router, signal: Deno.Signal = "SIGTERM"): Promise<void> {
  try {
    r.proc.child.kill(signal);
  } catch { /* already gone */ }
  await r.proc.exited;
}

Deno.test("mesh processes: three routers form, survive a SIGKILL, rejoin and leave", async () => {
  const [pa, pb, pc] = [freePort(), freePort(), freePort()];
  const a = await router("a", pa, []);
  const b = await router("b", pb, [pa]);
  const c = await router("c", pc, [`localhost:${pb}`]); // a host name, resolved by the mesh
  const all = [a, b, c];
  try {
    const alive = { a: "ALIVE", b: "ALIVE", c: "ALIVE" };
    await Promise.all(all.map((r) => status(r, alive)));
    // Streams: a opens to b and c, b to c; counted by the acceptors: b 1, c 2.
    await Promise.all([
      status(a, { b: "ALIVE+stream", c: "ALIVE+stream" }),
      status(c, { a: "ALIVE+stream", b: "ALIVE+stream" }),
    ]);
    const views = await Promise.all(all.map(meshStatus));
    for (const v of views) {
      assert.deepEqual(v.members.map((m) => [m.name, m.status]), [["a", "ALIVE"], ["b", "ALIVE"], [
        "c",
        "ALIVE",
      ]]);
      assert.equal(v.members.find((m) => m.name === "a")!.address, `127.0.0.1:${pa}`);
    }
    const streams = await Promise.all(all.map(acceptedStreams));
    assert.deepEqual(streams, [0, 1, 2]);

    // SIGKILL c: suspected, then DOWN on both survivors.
    const mark = [a.proc.stderr().length, b.proc.stderr().length];
    await stop(c, "SIGKILL");
    await Promise.all([
      status(a, { c: "SUSPECTED" }, mark[0]),
      status(b, { c: "SUSPECTED" }, mark[1]),
    ]);
    await Promise.all([status(a, { c: "DOWN" }, mark[0]), status(b, { c: "DOWN" }, mark[1])]);
    assert.equal((await meshStatus(a)).members.find((m) => m.name === "c")!.stream, false);

    // Restart c under the same name: ALIVE everywhere, with a newer incarnation.
    const mark2 = [a.proc.stderr().length, b.proc.stderr().length];
    const c2 = await router("c", pc, [pa]);
    all[2] = c2;
    await Promise.all([status(a, alive, mark2[0]), status(b, alive, mark2[1]), status(c2, alive)]);
    assert.ok((await meshStatus(b)).members.find((m) => m.name === "c")!.incarnation > 1);

    // SIGTERM b: it announces LEAVING before it exits; nobody has to suspect it.
    const mark3 = [a.proc.stderr().length, c2.proc.stderr().length];
    await stop(b);
    await Promise.all([
      status(a, { b: "LEAVING" }, mark3[0]),
      status(c2, { b: "LEAVING" }, mark3[1]),
    ]);
    assert.doesNotMatch(a.proc.stderr().slice(mark3[0]), /b=SUSPECTED/);
    assert.match(b.proc.stderr(), /shutdown complete/);
  } finally {
    await Promise.all(all.map((r) => stop(r)));
  }
});
