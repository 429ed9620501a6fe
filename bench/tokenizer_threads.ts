/**
 * What tokenizing off the event loop (`--tokenizer-threads`) buys: `smg serve --backend sim
 * --connection-mode grpc` (in-process simulated gRPC workers at `--time-scale 0`, so the gateway's
 * own work is all there is) gets long prompts the gateway must encode, each new (no cache hit),
 * from `--clients` concurrent clients for `--secs`; meanwhile `GET /liveness` is probed every
 * 20 ms, a request that waits only for the event loop. Per thread count, interleaved over
 * `--rounds`: completed requests per second, their p50/p99 latency, and the liveness probes'
 * p50/p99/max (how long the event loop was held). Everything on 127.0.0.1; the gateway is
 * stopped after each run.
 *
 *   deno task bench:tokenizer-threads [--threads 0,1,2] [--rounds 3] [--secs 10] [--clients 8]
 *                                     [--prompt-chars 40000]
 */

import { parseArgs } from "node:util";
import { simGrpcServeCommand } from "../support/gateway_process.ts";
import { HOST, killAll, spawn, stop, waitFor } from "../support/processes.ts";
import { freePorts } from "../lib/core/free_port.ts";
import { taskArgs } from "./task_args.ts";

const ROOT = new URL("../", import.meta.url).pathname;

const { values: v } = parseArgs({
  args: taskArgs(),
  options: {
    threads: { type: "string", default: "0,1,2" },
    rounds: { type: "string", default: "3" },
    secs: { type: "string", default: "10" },
    clients: { type: "string", default: "8" },
    "prompt-chars": { type: "string", default: "40000" },
  },
});
const threads = v.threads.split(",").map(Number);
const rounds = Number(v.rounds);
const secs = Number(v.secs);
const clients = Number(v.clients);
const promptChars = Number(v["prompt-chars"]);

const WORDS = "the quick brown fox jumps over lazy dogs while seventeen engineers debug routing"
  .split(" ");

/** A prompt of about `promptChars` characters that no earlier prompt begins like. */
function prompt(n: number): string {
  let s = `${n} ${crypto.randomUUID()} `;
  for (let i = n; s.length < promptChars; i++) s += `${WORDS[(i * 7) % WORDS.length]} `;
  return s;
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))] : NaN;
};

interface Run {
  threads: number;
  rps: number;
  reqP50: number;
  reqP99: number;
  liveP50: number;
  liveP99: number;
  liveMax: number;
}

async function run(t: number, dir: string): Promise<Run> {
  const [port, prom] = freePorts(2);
  const child = await spawn(
    `smg-t${t}`,
    0,
    simGrpcServeCommand(`${ROOT}main.ts`, port, 2, [
      "--router-prometheus-host",
      HOST,
      "--router-prometheus-port",
      String(prom),
      "--router-policy",
      "round_robin",
      "--router-tokenizer-threads",
      String(t),
      "--router-log-level",
      "warn",
    ]),
    dir,
    ROOT,
  );
  // `taskset -c 0` above is replaced: the gateway may use both cores, as its threads would.
  await new Deno.Command("taskset", { args: ["-a", "-p", "-c", "0,1", String(child.proc.pid)] })
    .output();
  const url = `http://${HOST}:${port}`;
  try {
    await waitFor(child.name, child, `${url}/readiness`, (s) => s === 200, 600);
    // Warm up: the template and the first encodes compile.
    for (let i = 0; i < 4; i++) await send(url, -1 - i);
    const end = performance.now() + secs * 1000;
    const lat: number[] = [];
    const live: number[] = [];
    let n = 0;
    const prober = (async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        const r = await fetch(`${url}/liveness`);
        await r.body?.cancel();
        live.push(performance.now() - t0);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await Promise.all(Array.from({ length: clients }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        await send(url, n++);
        lat.push(performance.now() - t0);
      }
    }));
    await prober;
    return {
      threads: t,
      rps: lat.length / secs,
      reqP50: quantile(lat, 0.5),
      reqP99: quantile(lat, 0.99),
      liveP50: quantile(live, 0.5),
      liveP99: quantile(live, 0.99),
      liveMax: Math.max(...live),
    };
  } finally {
    await stop([child]);
  }
}

async function send(url: string, n: number): Promise<void> {
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "sim-model", prompt: prompt(n), max_tokens: 1 }),
    signal: AbortSignal.timeout(30_000),
  });
  const body = await res.text();
  if (res.status !== 200) throw new Error(`status ${res.status}: ${body.slice(0, 200)}`);
}

async function main(): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "smg-tokthreads-" });
  const runs: Run[] = [];
  try {
    for (let r = 0; r < rounds; r++) {
      for (const t of r % 2 ? [...threads].reverse() : threads) {
        const x = await run(t, dir);
        console.error(
          `round ${r + 1} threads ${t}: ${x.rps.toFixed(1)} req/s, p50 ${
            x.reqP50.toFixed(0)
          } ms, liveness p99 ${x.liveP99.toFixed(1)} ms`,
        );
        runs.push(x);
      }
    }
  } finally {
    await killAll();
  }
  const med = (xs: number[]) => quantile(xs, 0.5);
  console.log(
    `${clients} clients, prompts of ${promptChars} chars (each new), ${secs} s per run, ` +
      `medians of ${rounds} interleaved rounds\n`,
  );
  console.log(
    "| --tokenizer-threads | req/s | request p50 / p99 ms | liveness p50 / p99 / max ms |",
  );
  console.log("|---|---|---|---|");
  for (const t of threads) {
    const rs = runs.filter((r) => r.threads === t);
    const f = (k: keyof Run, d = 0) => med(rs.map((r) => r[k])).toFixed(d);
    console.log(
      `| ${t} | ${f("rps", 1)} | ${f("reqP50")} / ${f("reqP99")} | ${f("liveP50", 1)} / ${
        f("liveP99", 1)
      } / ${f("liveMax", 1)} |`,
    );
  }
}

if (import.meta.main) await main();
