/**
 * What the status page costs the gateway's CPU, two ways.
 *
 * 1. In process, per call, for fleets of 4 and 64 workers with five minutes of history: the
 *    sampler's tick (`RoutingHistory.sample`, once a second whether or not a page is open), one
 *    update of an open page (the snapshot of the samples since its last, as JSON), and a page's
 *    first load (every kept sample).
 * 2. End to end: `smg serve --backend sim --dp-size 4 --sim-processes` as a child (its workers in
 *    their own processes), the gateway process's CPU time (every thread's, in ns, from
 *    /proc/PID/task/TID/schedstat, read with `cat`) over a window with N pages polling as the
 *    page does (`GET /dashboard/snapshot?since=` its last sample, once a second), each right
 *    after a window with none. The extra CPU over that idle window, divided by the updates
 *    served, is the cost of one update over HTTP; times one a second, of one open page (on an
 *    otherwise idle gateway, each poll also wakes it).
 *
 *   deno task bench:dashboard [--pages 1,10,50] [--secs 30]
 *
 * Linux only (/proc). Traffic goes to 127.0.0.1 only; the child is stopped at the end and on
 * error.
 */

import { defaultConfig } from "../../lib/config/config.ts";
import { FakeClock } from "../../lib/core/clock.ts";
import { freePort } from "../../lib/core/free_port.ts";
import { silentLogger } from "../../lib/core/log.ts";
import { RoutingHistory } from "../../lib/dashboard/history.ts";
import { snapshot, type SnapshotDeps } from "../../lib/dashboard/snapshot.ts";
import { Metrics } from "../../lib/metrics/metrics.ts";
import { WorkerManager } from "../../lib/workers/manager.ts";
import { WorkerRegistry } from "../../lib/workers/registry.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

function flag(name: string, fallback: string): string {
  const i = Deno.args.indexOf(name);
  return i >= 0 && Deno.args[i + 1] ? Deno.args[i + 1] : fallback;
}
const PAGES = flag("--pages", "1,10,50").split(",").map(Number);
const SECS = Number(flag("--secs", "30"));

/** A gateway's metrics and workers after five minutes of steady traffic, with its history. */
function fleet(n: number): SnapshotDeps {
  const clock = new FakeClock();
  const metrics = new Metrics();
  const registry = new WorkerRegistry();
  const c = defaultConfig();
  const manager = new WorkerManager({
    registry,
    health: c.health,
    circuitBreaker: c.circuitBreaker,
    clock,
    log: silentLogger,
  });
  for (let i = 0; i < n; i++) {
    const url = `http://10.0.${i >> 8}.${i & 255}:8000`;
    const w = manager.add({ url, models: ["m"] });
    w.setStatus("ready");
    for (const o of ["success", "failure", "neutral"]) metrics.workerRequests.with(url, o).inc(9);
  }
  const requests = metrics.routerRequests.with("http", "regular", "http", "m", "chat", "true");
  const ttft = metrics.ttft.with("http", "regular", "m", "chat");
  const duration = metrics.routerDuration.with("http", "regular", "http", "m", "chat");
  const error = metrics.cachePredictionError.with("cache_aware");
  const history = new RoutingHistory({ metrics, clock });
  for (let s = 0; s <= 300; s++) {
    requests.inc(16);
    for (const b of ["hit", "miss", "spill"]) metrics.policyDecisions.with("cache_aware", b).inc(5);
    for (let r = 0; r < 16; r++) {
      ttft.observe(0.02 + r / 100);
      duration.observe(0.5 + r / 10);
      error.observe((r - 8) / 20);
    }
    clock.advance(1000);
    history.sample();
  }
  return {
    workers: () => registry.all(),
    metrics,
    history,
    clock,
    startedAt: 0,
    policy: "cache_aware",
    draining: () => false,
    mesh: () => null,
  };
}

/** Microseconds per call of `fn`, over `iters` calls after a warm-up. */
function perCall(fn: () => void, iters: number): number {
  for (let i = 0; i < 200; i++) fn();
  const t = performance.now();
  for (let i = 0; i < iters; i++) fn();
  return (performance.now() - t) * 1000 / iters;
}

function inProcess(): void {
  console.log("In process (µs per call, median of 5 runs):");
  console.log("| workers | sampler tick | page update (JSON bytes) | first load (JSON bytes) |");
  console.log("| ------: | -----------: | -----------------------: | ----------------------: |");
  for (const n of [4, 64]) {
    const d = fleet(n);
    const h = d.history;
    const median = (fn: () => void, iters: number) =>
      [0, 1, 2, 3, 4].map(() => perCall(fn, iters)).sort((a, b) => a - b)[2];
    const update = () => JSON.stringify(snapshot(d, h.seq - 1));
    const first = () => JSON.stringify(snapshot(d, 0));
    // The sampler's tick keeps 300 samples: sampling more only rolls the window.
    const tick = median(() => h.sample(), 2000);
    const up = median(update, 2000);
    const load = median(first, 200);
    console.log(
      `| ${n} | ${tick.toFixed(1)} | ${up.toFixed(1)} (${update().length}) | ${
        load.toFixed(0)
      } (${first().length}) |`,
    );
  }
}

/** The gateway process's CPU time so far, ns, summed over its threads (`cat`: Deno's own reads
 * of /proc need every permission). */
async function cpuNs(pid: number): Promise<number> {
  const out = await new Deno.Command("sh", {
    args: ["-c", `cat /proc/${pid}/task/*/schedstat`],
    stdout: "piped",
    stderr: "null",
  }).output();
  return new TextDecoder().decode(out.stdout).trim().split("\n")
    .reduce((ns, line) => ns + Number(line.split(" ")[0]), 0);
}

/** One page: polls like the page's script until `signal` aborts; counts its updates. */
async function page(base: string, signal: AbortSignal, counts: { updates: number }) {
  let since = 0;
  while (!signal.aborted) {
    const next = performance.now() + 1000;
    const snap = await (await fetch(`${base}/dashboard/snapshot?since=${since}`)).json();
    since = snap.routing.seq;
    counts.updates++;
    const wait = next - performance.now();
    if (wait > 0) {
      await new Promise<void>((r) => {
        const t = setTimeout(r, wait);
        signal.addEventListener("abort", () => (clearTimeout(t), r()), { once: true });
      });
    }
  }
}

async function endToEnd(): Promise<void> {
  const port = freePort();
  const metricsPort = freePort();
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--unstable-no-legacy-abort",
      "--unstable-worker-options",
      "--allow-net=127.0.0.1,0.0.0.0",
      "--allow-env",
      "--allow-run",
      "--allow-read",
      `${ROOT}main.ts`,
      "serve",
      "--backend",
      "sim",
      "--dp-size",
      "4",
      "--sim-processes",
      "--worker-base-port",
      "0",
      "--port",
      String(port),
      "--router-prometheus-port",
      String(metricsPort),
      "--router-log-level",
      "warn",
    ],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  try {
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let out = "";
    while (!out.includes("/dashboard")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`serve ended before its banner:\n${out}`);
      out += value;
    }
    await reader.cancel(); // nothing more to read: the gateway logs to stderr (discarded)
    const base = `http://127.0.0.1:${metricsPort}`;
    const window = async (pages: number) => {
      const stop = new AbortController();
      const counts = { updates: 0 };
      const t0 = performance.now();
      const c0 = await cpuNs(child.pid);
      const polls = Array.from({ length: pages }, () => page(base, stop.signal, counts));
      await new Promise((r) => setTimeout(r, SECS * 1000));
      const c1 = await cpuNs(child.pid);
      const secs = (performance.now() - t0) / 1000;
      stop.abort();
      await Promise.all(polls);
      return { msPerSec: (c1 - c0) / 1e6 / secs, updates: counts.updates, secs };
    };
    await window(0); // settle after start
    console.log(
      `\nEnd to end, gateway process CPU over ${SECS} s windows (each after an idle one):`,
    );
    console.log(
      "| open pages | updates served | gateway CPU | idle before | extra per page | per update |",
    );
    console.log(
      "| ---------: | -------------: | ----------: | ----------: | -------------: | ---------: |",
    );
    for (const n of PAGES) {
      // An idle window right before each: the baseline drifts (probes, GC) over minutes.
      const idle = await window(0);
      const w = await window(n);
      const extra = w.msPerSec - idle.msPerSec;
      const perUpdate = extra * w.secs / w.updates;
      console.log(
        `| ${n} | ${w.updates} | ${w.msPerSec.toFixed(2)} ms/s | ${
          idle.msPerSec.toFixed(2)
        } ms/s | ${(extra / n).toFixed(3)} ms/s | ${(perUpdate * 1000).toFixed(0)} µs |`,
      );
    }
  } finally {
    child.kill("SIGTERM");
    await child.status;
  }
}

inProcess();
await endToEnd();
