/**
 * The routing benchmark's PD variant: how evenly each prefill-leg policy spreads prefill work.
 * Our gateway runs with `--pd-disaggregation` in front of P simulated prefill workers and D
 * simulated decode workers (`smg sim-worker --role prefill|decode`, the routing benchmark's
 * engine knobs); an open-loop Poisson stream of one-off prompts of mixed sizes goes through it
 * once per (workload, rate, prefill policy), each on a fresh fleet; the decode leg is always
 * `round_robin`.
 *
 *   deno task bench:pd [--prefill 4] [--decode 2] [--rate 3,8] [--workloads mixed,two-size]
 *                      [--policies bucket,round_robin,random] [--duration 30] [--warmup 10]
 *                      [--seeds 0] [--json out.json]
 *
 * - Workloads (`SIZES` in `pd_options.ts`): `mixed`, prompt sizes log-uniform over 64–8,192 tokens; `two-size`, 80 %
 *   of 256 tokens and 20 % of 4,096. Every prompt starts with its own words, so nothing is cached
 *   and every prompt token is prefill work. `max_tokens` 8 keeps the decode leg light.
 * - The warm-up (10 s by default) covers bucket's first adaptations (every 5 s); the measured
 *   window follows, then up to `--drain` s for the requests in flight.
 * - Reported per run: ok/failed, TTFT and end-to-end p50/p99 (client side), each prefill worker's
 *   uncached prompt tokens over the window from its own counters, and their **spread** (max ÷
 *   mean; 1.00 is perfectly even) — the figure the bucket policy is judged by — and the spread of
 *   request counts.
 *
 * Processes: workers on CPU 1, the gateway and this client on CPU 0, every child killed at the end
 * (and on error or SIGINT). Traffic goes to 127.0.0.1 only.
 */

import { seededRandom } from "../../lib/core/clock.ts";
import { busyPct, sampleCpu } from "../overhead/cpu.ts";
import {
  type Child,
  exited,
  HOST,
  killAll,
  run,
  spawn,
  stop,
  tail,
  waitFor,
} from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import { round } from "../overhead/stats.ts";
import { delta, readCounters, startFleet, type WorkerCounters } from "./fleet.ts";
import { gatewayCommand } from "./gateway.ts";
import { TARGET_CPU } from "./measure.ts";
import { SIM_KNOBS } from "./scenarios.ts";
import { fmt, maxOverMean, percentile } from "./report.ts";
import { sleepUntil } from "./client.ts";
import { streamChat } from "./stream.ts";
import { mix } from "./workload.ts";
import { parsePdOptions, type PdOptions, prompt, SIZES } from "./pd_options.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** One run, summarised. */
export interface PdSummary {
  workload: string;
  rate: number;
  policy: string;
  seed: number;
  sent: number;
  ok: number;
  failed: number;
  ttftP50Ms: number | null;
  ttftP99Ms: number | null;
  e2eP50Ms: number | null;
  e2eP99Ms: number | null;
  /** Uncached prompt tokens each prefill worker processed in the window. */
  prefillTokens: number[];
  /** Max ÷ mean of `prefillTokens`, and of the prefill workers' request counts. */
  spreadTokens: number | null;
  spreadRequests: number | null;
  cpuBusyPct: (number | null)[];
  errors: string[];
}

/** The PD gateway command line after `deno`. */
export function pdGatewayArgs(
  port: number,
  promPort: number,
  prefill: { url: string; bootstrapPort: number }[],
  decode: string[],
  policy: string,
  seed: number,
): string[] {
  return gatewayCommand(ROOT, port, promPort, seed, [
    "--pd-disaggregation",
    ...prefill.flatMap((p) => ["--prefill", p.url, String(p.bootstrapPort)]),
    ...decode.flatMap((u) => ["--decode", u]),
    "--prefill-policy",
    policy,
    "--decode-policy",
    "round_robin",
  ]);
}

interface Cell {
  workload: string;
  rate: number;
  policy: string;
  seed: number;
}

/**
 * A fresh PD fleet (prefill workers with their bootstrap ports, decode workers) and our gateway in
 * front of it with `c.policy` on the prefill leg, ready; every process started goes into
 * `children`.
 */
async function startPd(
  o: PdOptions,
  c: Cell,
  tag: string,
  dir: string,
  signal: AbortSignal,
  children: Child[],
): Promise<{ url: string; prefillUrls: string[] }> {
  const boot = freePorts(o.prefill);
  const knobs = [...SIM_KNOBS, "--seed", String(c.seed)];
  const prefillKnobs = (i: number) => [
    ...knobs,
    "--role",
    "prefill",
    "--bootstrap-port",
    String(boot[i]),
  ];
  const prefill = await startFleet(o.prefill, prefillKnobs, `${tag}-prefill`, dir, ROOT, signal);
  children.push(...prefill.children);
  const decodeKnobs = [...knobs, "--role", "decode"];
  const decode = await startFleet(o.decode, decodeKnobs, `${tag}-decode`, dir, ROOT, signal);
  children.push(...decode.children);
  const [port, promPort] = freePorts(2);
  const prefillSpecs = prefill.urls.map((url, i) => ({ url, bootstrapPort: boot[i] }));
  const args = pdGatewayArgs(port, promPort, prefillSpecs, decode.urls, c.policy, c.seed);
  const gw = await spawn(`${tag}-smg`, TARGET_CPU, [Deno.execPath(), ...args], dir, ROOT);
  children.push(gw);
  const url = `http://${HOST}:${port}`;
  await waitFor(
    `gateway --prefill-policy ${c.policy}`,
    gw,
    `${url}/readiness`,
    (s, b) => s === 200 && JSON.parse(b).healthy_workers === o.prefill + o.decode,
  );
  return { url, prefillUrls: prefill.urls };
}

/** One run: a fresh PD fleet and gateway, the stream of prompts, the counters read back. */
async function measure(
  o: PdOptions,
  c: Cell,
  dir: string,
  signal: AbortSignal,
): Promise<PdSummary> {
  const tag = `${c.workload}-${c.rate}-${c.policy}-${c.seed}`;
  const children: Child[] = [];
  try {
    const { url, prefillUrls } = await startPd(o, c, tag, dir, signal, children);

    const records: {
      measured: boolean;
      ok: boolean;
      ttft: number | null;
      e2e: number;
      error: string | null;
    }[] = [];
    const cutter = new AbortController();
    const all = AbortSignal.any([signal, cutter.signal]);
    const t0 = performance.now();
    const measureAt = t0 + o.warmup * 1000;
    const stopAt = measureAt + o.duration * 1000;
    const gaps = seededRandom(mix(c.seed, 0x51, Math.round(c.rate * 1000)));
    const running = new Set<Promise<void>>();
    let before: WorkerCounters[] | null = null;
    let cpuBefore: Awaited<ReturnType<typeof sampleCpu>> | null = null;
    let at = t0;
    for (let n = 0;; n++) {
      at += -Math.log(1 - gaps()) * 1000 / c.rate;
      if (at >= stopAt || signal.aborted) break;
      if (before === null && at >= measureAt) {
        await sleepUntil(measureAt, Infinity, all);
        [before, cpuBefore] = await Promise.all([readCounters(prefillUrls), sampleCpu(null)]);
      }
      await sleepUntil(at, Infinity, all);
      const measured = at >= measureAt;
      const p = prompt(c.workload, c.seed, n);
      const req = streamChat({
        baseUrl: url,
        model: "sim-model",
        messages: [{ role: "user", content: p.text }],
        maxTokens: 8,
        headers: {},
        signal: all,
      }).then((r) => {
        records.push({ measured, ok: r.ok, ttft: r.ttftMs, e2e: r.e2eMs, error: r.error });
      });
      running.add(req);
      req.finally(() => running.delete(req));
    }
    if (before === null) {
      [before, cpuBefore] = await Promise.all([readCounters(prefillUrls), sampleCpu(null)]);
    }
    await sleepUntil(stopAt, Infinity, all);
    const drained = Promise.all(running);
    await Promise.race([drained, sleepUntil(performance.now() + o.drain * 1000, Infinity, all)]);
    cutter.abort();
    await drained;
    const [after, cpuAfter] = await Promise.all([readCounters(prefillUrls), sampleCpu(null)]);
    for (const ch of children) {
      if (await exited(ch, 0)) {
        throw new Error(`${ch.name} exited during the run:\n${tail(ch.log)}`);
      }
    }
    const b = before;
    const d = after.map((a, i) => delta(b[i], a));
    const measured = records.filter((r) => r.measured);
    const ok = measured.filter((r) => r.ok);
    const ttft = ok.flatMap((r) => r.ttft === null ? [] : [r.ttft]);
    const r1 = (x: number | null) => x === null ? null : round(x, 1);
    const prefillTokens = d.map((w) => w.promptTokens - w.cachedTokens);
    return {
      ...c,
      sent: measured.length,
      ok: ok.length,
      failed: measured.length - ok.length,
      ttftP50Ms: r1(percentile(ttft, 0.5)),
      ttftP99Ms: r1(percentile(ttft, 0.99)),
      e2eP50Ms: r1(percentile(ok.map((r) => r.e2e), 0.5)),
      e2eP99Ms: r1(percentile(ok.map((r) => r.e2e), 0.99)),
      prefillTokens,
      spreadTokens: maxOverMean(prefillTokens, 3),
      spreadRequests: maxOverMean(d.map((w) => w.requests)),
      cpuBusyPct: ["cpu0", "cpu1"].map((n) => busyPct(cpuBefore!.load, cpuAfter.load, n)),
      errors: [...new Set(measured.filter((r) => !r.ok).map((r) => r.error ?? "?"))].slice(0, 3),
    };
  } finally {
    await stop(children);
  }
}

/** The markdown table of one (workload, rate): a row per policy and seed. */
export function pdMarkdown(rows: PdSummary[]): string {
  const head = [
    "prefill policy",
    "seed",
    "ok",
    "failed",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "E2E p99 ms",
    "prefill tokens per worker",
    "spread tokens",
    "spread reqs",
    "CPU0/CPU1 %",
  ];
  return [
    `| ${head.join(" | ")} |`,
    `|${head.map((_, i) => i < 1 ? "---" : "---:").join("|")}|`,
    ...rows.map((s) =>
      `| ${
        [
          s.policy,
          String(s.seed),
          fmt(s.ok),
          fmt(s.failed),
          fmt(s.ttftP50Ms),
          fmt(s.ttftP99Ms),
          fmt(s.e2eP99Ms),
          s.prefillTokens.map((x) => fmt(x)).join(" / "),
          fmt(s.spreadTokens, 3),
          fmt(s.spreadRequests, 2),
          s.cpuBusyPct.map((x) => x ?? "?").join("/"),
        ].join(" | ")
      } |`
    ),
  ].join("\n");
}

async function main(args: string[], signal: AbortSignal): Promise<number> {
  const o = parsePdOptions(args);
  if (!(await run("taskset", ["--version"]))) {
    console.error("bench:pd: taskset not found on PATH (apt-get install -y util-linux)");
    return 2;
  }
  await run("taskset", ["-a", "-p", "-c", String(TARGET_CPU), String(Deno.pid)]);
  const dir = await Deno.makeTempDir({ prefix: "smg-pd-" });
  const cells: Cell[] = o.workloads.flatMap((workload) =>
    o.rates.flatMap((rate) =>
      o.policies.flatMap((policy) => o.seeds.map((seed) => ({ workload, rate, policy, seed })))
    )
  );
  console.error(
    `bench:pd: ${cells.length} runs × (${o.warmup} + ${o.duration} s), ${o.prefill} prefill + ` +
      `${o.decode} decode workers (≈${
        Math.ceil(cells.length * (o.warmup + o.duration + 6) / 60)
      } ` +
      `min); logs in ${dir}`,
  );
  const started = performance.now();
  const rows: PdSummary[] = [];
  const failures: string[] = [];
  for (const c of cells) {
    if (signal.aborted) break;
    try {
      const s = await measure(o, c, dir, signal);
      rows.push(s);
      console.error(
        `bench:pd: ${c.workload} ${c.rate} req/s ${c.policy} seed ${c.seed}: ok ${s.ok}/${s.sent}, ` +
          `TTFT p50 ${s.ttftP50Ms} p99 ${s.ttftP99Ms} ms, spread ${s.spreadTokens}` +
          (s.errors.length ? `; errors: ${s.errors.join(" | ")}` : ""),
      );
    } catch (e) {
      if (signal.aborted) throw e;
      const msg = `${c.workload} ${c.rate} req/s ${c.policy} seed ${c.seed}: ${
        e instanceof Error ? e.message.split("\n")[0] : String(e)
      }`;
      console.error(`bench:pd: failed: ${msg}`);
      failures.push(msg);
    }
  }
  await killAll();
  const elapsedS = Math.round((performance.now() - started) / 1000);
  console.log(
    `${o.prefill} prefill + ${o.decode} decode × \`smg sim-worker ${SIM_KNOBS.join(" ")} ` +
      `--role prefill|decode\`; decode policy round_robin; ${o.warmup} s warm-up + ${o.duration} s ` +
      `measured; ${rows.length} runs in ${Math.floor(elapsedS / 60)} min ${elapsedS % 60} s.\n`,
  );
  for (const w of o.workloads) {
    for (const rate of o.rates) {
      const here = rows.filter((r) => r.workload === w && r.rate === rate);
      if (!here.length) continue;
      console.log(`#### ${w} (${SIZES[w].about}), ${rate} req/s\n\n${pdMarkdown(here)}\n`);
    }
  }
  for (const f of failures) console.log(`- failed: ${f}`);
  if (o.json) {
    await Deno.writeTextFile(
      o.json,
      JSON.stringify(
        {
          date: new Date().toISOString(),
          deno: Deno.version.deno,
          options: o,
          simKnobs: SIM_KNOBS,
          gateway: `deno ${
            pdGatewayArgs(
              0,
              0,
              [{ url: "PREFILL_URL", bootstrapPort: 0 }],
              ["DECODE_URL"],
              "POLICY",
              0,
            )
              .join(" ")
          }`,
          elapsedS,
          rows,
          failures,
        },
        null,
        2,
      ) + "\n",
    );
    console.error(`bench:pd: wrote ${o.json}`);
  }
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  return failures.length ? 1 : 0;
}

if (import.meta.main) {
  const shutdown = new AbortController();
  const onSignal = () => {
    shutdown.abort();
    killAll().finally(() => Deno.exit(130));
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  let code = 1;
  try {
    code = await main(Deno.args, shutdown.signal);
  } catch (e) {
    console.error(`bench:pd: ${e instanceof Error ? e.message : String(e)}`);
  } finally {
    await killAll();
  }
  Deno.exit(code);
}
