/**
 * Routing-quality benchmark: the same seeded multi-tenant, multi-turn chat workload sent through
 * our gateway (one run per available policy), HAProxy (roundrobin, leastconn, consistent hash of
 * `X-Session-Id`) and nginx (random two least_conn, consistent hash), each fronting a fresh fleet
 * of simulated workers, at a light load and near the fleet's saturation; and references on the
 * same workload (`references.ts`): the upper bound (one worker with the fleet's capacity) and an
 * oracle that pins each tenant to its own worker.
 *
 * Or, with `--trace FILE`, a real request trace in the Mooncake format (`trace.ts`) replayed at
 * one or more speeds (`replay.ts`) instead of the synthetic workload: the upper bound again,
 * `ref:affinity` (every turn of a conversation on one worker) in place of the oracle, and the
 * infinite-cache bound computed offline from the trace (`trace_bound.ts`).
 *
 *   deno task bench:routing [--workers 4] [--rate 4,16] [--duration 12] [--quick] [--json out.json]
 *   deno task bench:routing --trace FILE [--speed 2.5,5] [--trace-warmup 400] [--duration 60]
 *
 * - Per (load point, target): N `smg sim-worker` processes start fresh (empty KV caches, zeroed
 *   counters) pinned to CPU 1; the target starts pinned to CPU 0, where this process (the client)
 *   also runs; a warm-up, a measured window and a drain follow (`client.ts`); then every process
 *   of that measurement is stopped.
 * - Reported per target: requests ok/failed, throughput, client-side TTFT and end-to-end p50/p99,
 *   the cluster cache-hit rate Σcached/Σprompt tokens from the workers' own counters, and the
 *   load spread (max/mean of per-worker prompt tokens and requests); beside them cache hit ÷ the
 *   upper bound's (and on a trace ÷ the infinite-cache bound) and TTFT p50/p99 ÷ the oracle's;
 *   then a verdict on `smg:cache_aware` against its targets (`verdict.ts`).
 * - Policies this build does not implement yet are skipped with a note. Needs `taskset`;
 *   HAProxy and nginx targets are skipped when the tool is missing. Every child is killed at the
 *   end, on error and on SIGINT/SIGTERM too. Traffic goes to 127.0.0.1 only.
 *
 * Pieces: flags (`options.ts`), the plan (`workload.ts`; a trace: `trace.ts`, `trace_prompts.ts`),
 * the client (`client.ts`: the drive loop; `sessions.ts` and `replay.ts`: the arrivals;
 * `traffic.ts`: which per target; `stream.ts`), the fleet (`fleet.ts`), the targets (`targets.ts`,
 * `gateway.ts`, `peers.ts`), one measurement (`measure.ts`), the references (`references.ts`,
 * `trace_keys.ts`, `trace_bound.ts`) and the report (`describe.ts`, `report.ts`, `verdict.ts`);
 * children come from `support/processes.ts`.
 */

import { killAll, run } from "../../support/processes.ts";
import {
  type RunFacts,
  syntheticPreamble,
  type TokenizerFacts,
  type TraceFacts,
  tracePreamble,
} from "./describe.ts";
import { simWorkerArgs } from "./fleet.ts";
import { gatewayArgs, probePolicy } from "./gateway.ts";
import { measureOne, TARGET_CPU } from "./measure.ts";
import { type Options, parseOptions } from "./options.ts";
import { SIM_KNOBS } from "./scenarios.ts";
import { haproxyConfig, nginxConfig } from "./peers.ts";
import { oracleAssignment, upperBoundKnobs } from "./references.ts";
import { replayPlan } from "./replay.ts";
import {
  engineTtftMs,
  markdown,
  predictionMarkdown,
  routersMarkdown,
  ttftFloorMs,
  writeJson,
} from "./report.ts";
import type { Summary } from "./summary.ts";
import { describeTarget, meaningless, resolveTargets } from "./targets.ts";
import { loadTrace } from "./trace.ts";
import { infiniteCacheBound } from "./trace_bound.ts";
import { conversationKeys } from "./trace_keys.ts";
import { warmBlockTexts } from "./trace_prompts.ts";
import { syntheticTraffic, traceTraffic, type TrafficFor } from "./traffic.ts";
import { bundledQwen3 } from "../../lib/commands/grpc_support.ts";
import { balanceMarkdown, pointVerdict, verdictMarkdown } from "./verdict.ts";
import { charsPerSimToken, Workload } from "./workload.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

let tmpDir = "";
let interrupted = false;
const shutdown = new AbortController();

function note(msg: string): void {
  console.error(`bench:routing: ${msg}`);
}

/** The trace of `o`, ready to replay, and what the preamble says of it. */
async function prepareTrace(o: Options, trace: NonNullable<Options["trace"]>) {
  const requests = await loadTrace(trace.path);
  const keys = conversationKeys(requests);
  const sizes = new Map<string, number>();
  for (const k of keys) sizes.set(k, (sizes.get(k) ?? 0) + 1);
  const points = o.points.map((p) => {
    if (!("speed" in p.load)) throw new Error(`${p.label}: a trace is replayed at a speed`);
    const plan = replayPlan(requests, {
      speed: p.load.speed,
      warmup: trace.warmup,
      durationS: o.duration,
      maxRequests: o.requests,
    });
    return { label: p.label, plan, bound: infiniteCacheBound(requests, plan.from, plan.to).rate };
  });
  const facts: TraceFacts = {
    path: trace.path,
    requests,
    keys: sizes.size,
    largestKey: Math.max(...sizes.values()),
    points,
    seed: o.seed,
  };
  const blocks = warmBlockTexts(
    o.seed,
    requests.slice(0, Math.max(...points.map((p) => p.plan.to))),
    o.charsPerToken,
  );
  const traffic = traceTraffic({
    requests,
    keys,
    blocks,
    plans: new Map(points.map((p) => [p.label, p.plan])),
  });
  // The preamble's measure of the tokens: the first requests' distinct blocks.
  const sample = [...new Set(requests.slice(0, 100).flatMap((r) => r.hashIds))].slice(0, 200);
  const tokenizer: TokenizerFacts = {
    charsPerToken: o.charsPerToken,
    measured: charsPerSimToken(sample.map((id) => blocks.text(id)), o.charsPerToken),
    sample: `${sample.length} of the trace's block texts`,
  };
  return { facts, traffic, tokenizer };
}

async function main(args: string[]): Promise<number> {
  const o = parseOptions(args);
  // A trace is read and planned first: a bad file or plan fails before any process starts.
  const replay = o.trace ? await prepareTrace(o, o.trace) : null;
  if (!(await run("taskset", ["--version"]))) {
    note("taskset not found on PATH (apt-get install -y util-linux)");
    return 2;
  }
  const resolved = resolveTargets(o.targets);
  resolved.notes.forEach(note);
  const skipped: Record<string, string> = meaningless(
    resolved.targets,
    o.trace ? "trace" : "synthetic",
  );
  for (const tool of ["haproxy", "nginx"]) {
    if (o.connectionMode === "grpc") {
      for (const t of resolved.targets.filter((t) => t.kind === tool)) {
        skipped[t.name] = `${tool} does not speak sglang's gRPC service`;
      }
      continue;
    }
    if (resolved.targets.some((t) => t.kind === tool) && !(await run(tool, ["-v"]))) {
      for (const t of resolved.targets.filter((t) => t.kind === tool)) {
        skipped[t.name] = `${tool} not found on PATH`;
      }
    }
  }
  tmpDir = await Deno.makeTempDir({ prefix: "smg-routing-" });
  // The client shares CPU 0 with the target, as wrk does in the overhead benchmark.
  await run("taskset", ["-a", "-p", "-c", String(TARGET_CPU), String(Deno.pid)]);

  // ref:oracle and ref:affinity run our gateway with consistent_hashing: they need it too.
  const policies = resolved.targets.filter((t) => !(t.name in skipped)).flatMap((t) =>
    t.kind === "smg"
      ? [{ ...t }]
      : t.kind === "ref" && t.ref !== "upper-bound"
      ? [{ name: t.name, policy: "consistent_hashing" }]
      : []
  );
  const gatewayRoot = o.gatewayRoot ?? ROOT;
  const probes = await Promise.all(
    policies.map((t) => probePolicy(t.policy, tmpDir, gatewayRoot, 0)),
  );
  policies.forEach((t, i) => {
    if (probes[i] !== "ok") skipped[t.name] = probes[i];
  });
  for (const [name, why] of Object.entries(skipped)) note(`skipping ${name}: ${why}`);
  const targets = resolved.targets.filter((t) => !(t.name in skipped));
  if (targets.length === 0) {
    note("no target to measure");
    return 2;
  }

  const modelPath = o.connectionMode === "http" ? undefined : await bundledQwen3();
  const workload = new Workload({
    seed: o.seed,
    tenants: o.tenants,
    tenantSkew: o.tenantSkew,
    systemTokens: o.systemTokens,
    charsPerToken: o.charsPerToken,
  });
  const traffic: TrafficFor = replay?.traffic ?? syntheticTraffic(workload, o);
  const simKnobs = [...SIM_KNOBS, "--seed", String(o.seed), ...o.simArgs];
  // Seconds per cell: the warm-up (a trace's: its warm-up requests' arrival) and the window.
  const perCell = replay
    ? Math.max(...replay.facts.points.map((p) => (p.plan.warmupMs + p.plan.durationMs) / 1000))
    : o.warmup + o.duration;
  note(
    `${o.points.length} load point(s) × ${targets.length} targets × ${o.workers} workers, ` +
      `${Math.round(perCell - o.duration)} s warm-up + ${o.duration} s measured each (≈${
        Math.ceil(o.points.length * targets.length * (perCell + 4) / 60)
      } min); logs in ${tmpDir}`,
  );

  const started = performance.now();
  const rows: Summary[] = [];
  for (const [pi, point] of o.points.entries()) {
    for (const t of targets) {
      if (interrupted) break;
      const tag = `p${pi + 1}-${t.name.replace(/[^a-z0-9_-]/gi, "-")}`;
      try {
        const s = await measureOne(
          {
            options: o,
            traffic,
            simKnobs,
            dir: tmpDir,
            root: ROOT,
            gatewayRoot: o.gatewayRoot,
            signal: shutdown.signal,
            modelPath,
            kvEvents: o.connectionMode === "http-kv",
          },
          t,
          point,
          tag,
        );
        const bound = replay?.facts.points.find((p) => p.label === point.label)?.bound;
        const engineTtftMeanMs = engineTtftMs(s.workers, simKnobs);
        rows.push(
          bound === undefined ? { ...s, engineTtftMeanMs } : {
            ...s,
            engineTtftMeanMs,
            cacheBound: bound,
            ttftFloorMs: ttftFloorMs(s.meanPromptTokens, bound, simKnobs),
          },
        );
        note(
          `${point.label} ${t.name}: ok ${s.ok}/${s.sent}, ${s.rps} req/s, TTFT mean ${s.ttftMeanMs} p50 ${s.ttftP50Ms} ` +
            `p99 ${s.ttftP99Ms} ms, cache hit ${s.cacheHitRate}, spread ${s.spreadTokens}` +
            (s.errors.length ? `; errors: ${s.errors.join(" | ")}` : ""),
        );
      } catch (e) {
        if (interrupted) throw e;
        const msg = e instanceof Error ? e.message : String(e);
        note(`${point.label} ${t.name} failed: ${msg}`);
        skipped[`${t.name} @ ${point.label}`] = msg.split("\n")[0];
      }
    }
  }
  await killAll();
  const elapsedS = Math.round((performance.now() - started) / 1000);

  const w = workload.config;
  const upperKnobs = upperBoundKnobs(simKnobs, o.workers);
  const oracle = oracleAssignment(workload, o.workers);
  const facts: RunFacts = {
    workers: o.workers,
    tokenizer: replay?.tokenizer ?? {
      charsPerToken: o.charsPerToken,
      measured: charsPerSimToken(workload.tenants.map((t) => t.system), o.charsPerToken),
      sample: "the tenants' system prompts",
    },
    simKnobs,
    upperKnobs,
    measurements: rows.length,
    elapsedS,
  };
  if (o.connectionMode === "grpc") {
    console.log(
      "Connection: gRPC. Every worker also serves sglang's scheduler service (`--grpc-port`, " +
        "`--model-path` Qwen3) and our gateway reaches it there with `--model-path` Qwen3: the " +
        "gateway applies the chat template and tokenizes with Qwen3, so token counts (and the " +
        "simulated prefill work) differ from the HTTP mode's stand-in tokenizer.\n",
    );
  }
  if (o.connectionMode === "http-kv") {
    console.log(
      "Connection: HTTP with KV events. Every worker tokenizes with Qwen3 as our gateway does " +
        "(`--model-path`) and publishes its KV cache's events over ZeroMQ (`--kv-events-port`, " +
        "`--kv-events-replay-port`); our gateway has `--model-path` Qwen3 and registers the " +
        "workers with their `kv_events` labels, so cache_aware routes on the events. Token " +
        "counts (and the simulated prefill work) differ from the HTTP mode's stand-in tokenizer.\n",
    );
  }
  const preamble = replay
    ? tracePreamble(facts, replay.facts, targets.map((t) => t.name))
    : syntheticPreamble(facts, w, o.warmup, o.duration, oracle);
  preamble.forEach((l) => console.log(l));
  for (const point of o.points) console.log(markdown(point.label, rows) + "\n");
  verdictMarkdown(rows, o.points.map((p) => p.label)).forEach((l) => console.log(l));
  balanceMarkdown(rows, o.points.map((p) => p.label)).forEach((l) => console.log(l));
  const predictions = predictionMarkdown(rows);
  if (predictions) {
    console.log(
      "\ncache_aware's predictions (reported − predicted cached share of each prompt, " +
        "`smg_policy_cache_prediction_error`, over the window):\n\n" + predictions,
    );
  }
  const routers = routersMarkdown(rows);
  if (routers) {
    console.log(
      "\nSeveral routers (all routers' CPU, and tree-sync bytes sent, per ok request; " +
        "predictions above summed over the routers):\n\n" + routers,
    );
  }
  for (const [name, why] of Object.entries(skipped)) console.log(`- skipped ${name}: ${why}`);

  if (o.json) {
    // Example addresses: every measurement picks free ports.
    const ports = ["http://127.0.0.1:30001", "http://127.0.0.1:30002"];
    await writeJson(o.json, {
      machine: {
        date: new Date().toISOString(),
        cpus: navigator.hardwareConcurrency,
        kernel: await run("uname", ["-r"]),
        deno: Deno.version.deno,
        haproxy: (await run("haproxy", ["-v"])).split("\n")[0],
        nginx: await run("nginx", ["-v"]),
        pinning: "sim workers on CPU 1; the target and the client on CPU 0",
      },
      settings: {
        options: o,
        workload: replay
          ? {
            trace: replay.facts.path,
            requests: replay.facts.requests.length,
            conversationKeys: replay.facts.keys,
            largestKey: replay.facts.largestKey,
            points: replay.facts.points,
          }
          : w,
        targets: Object.fromEntries(targets.map((t) => [t.name, describeTarget(t)])),
        simWorker: `deno ${simWorkerArgs(ROOT, simKnobs).join(" ")} --host 127.0.0.1 --port P`,
        upperBoundWorker: `deno ${simWorkerArgs(ROOT, upperKnobs).join(" ")} --host 127.0.0.1 ` +
          `--port P`,
        oracle: replay ? null : oracle,
        gateway: `deno ${gatewayArgs(ROOT, "POLICY", 0, 0, ports, o.seed).join(" ")}`,
        haproxy: haproxyConfig("roundrobin", 0, ports),
        nginx: nginxConfig("hash-session", 0, ports, "PREFIX"),
      },
      skipped,
      elapsedS,
      summary: rows,
      verdict: o.points.flatMap((p) => pointVerdict(rows, p.label) ?? []),
    });
    note(`wrote ${o.json}`);
  }
  await Deno.remove(tmpDir, { recursive: true }).catch(() => {});
  return 0;
}

if (import.meta.main) {
  const onSignal = () => {
    interrupted = true;
    shutdown.abort();
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
      note("interrupted");
      code = 130;
    } else {
      note(e instanceof Error ? e.message : String(e));
      if (tmpDir) note(`logs kept in ${tmpDir}`);
    }
  } finally {
    await killAll();
  }
  Deno.exit(code);
}
