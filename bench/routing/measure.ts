/**
 * One measurement: a fresh fleet, one target in front of it, one request through it to prove the
 * path, the traffic at one load point (`traffic.ts`: the synthetic workload or a trace, with a
 * reference's route), then the workers' counters and both CPUs' busy share over the measured
 * window, summarised. Every process it starts is stopped before it returns. `ref:upper-bound` is
 * a fleet of one scaled worker that the client talks to directly.
 */

import { busyPct, type CpuSample, sampleCpu } from "../overhead/cpu.ts";
import { type Child, exited, HOST, stop, tail } from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import { drive } from "./client.ts";
import { delta, readCounters, startFleet, type WorkerCounters } from "./fleet.ts";
import type { LoadPoint, Options } from "./options.ts";
import { summarise } from "./report.ts";
import type { Summary } from "./summary.ts";
import { upperBoundKnobs } from "./references.ts";
import { readRouters, routerCost, type RouterReading, type Started } from "./front.ts";
import { sumHistograms, summarisePrediction } from "./prediction.ts";
import { streamChat } from "./stream.ts";
import { startTarget, type TargetSpec } from "./targets.ts";
import type { TrafficFor } from "./traffic.ts";

/** The CPU the target runs on (and this process, the client). */
export const TARGET_CPU = 0;

/** Where and how to measure. */
export interface MeasureContext {
  /** The parsed command line. */
  options: Options;
  /** What to send to each target at each load point. */
  traffic: TrafficFor;
  /** sim-worker flags for every worker. */
  simKnobs: string[];
  /** Temp dir for logs and configs. */
  dir: string;
  /** Repository root (ends with `/`). */
  root: string;
  /** Our gateway's root when not `root` (`--gateway-root`). */
  gatewayRoot?: string | null;
  /** Aborts the measurement (SIGINT). */
  signal: AbortSignal;
  /** gRPC and KV-event modes: the tokenizer directory (workers and gateway), else undefined. */
  modelPath?: string;
  /** KV-event mode: HTTP workers publishing KV events over ZeroMQ (with `modelPath`). */
  kvEvents?: boolean;
}

/** Measures `target` at `point` on a fresh fleet; `tag` prefixes its log files. */
export async function measureOne(
  c: MeasureContext,
  target: TargetSpec,
  point: LoadPoint,
  tag: string,
): Promise<Summary> {
  const o = c.options;
  const direct = target.kind === "ref" && target.ref === "upper-bound";
  const fleet = direct
    ? await startFleet(1, upperBoundKnobs(c.simKnobs, o.workers), tag, c.dir, c.root, c.signal)
    : await startFleet(
      o.workers,
      c.simKnobs,
      tag,
      c.dir,
      c.root,
      c.signal,
      c.modelPath,
      c.kvEvents,
    );
  const children: Child[] = [...fleet.children];
  try {
    let url = fleet.urls[0];
    let started: Started = { children: [], metrics: [], routers: [] };
    if (!direct) {
      const [port] = freePorts(1);
      c.signal.throwIfAborted();
      started = await startTarget(target, {
        port,
        workers: fleet.targets,
        seed: o.seed,
        tag,
        dir: c.dir,
        root: c.gatewayRoot ?? c.root,
        cpu: TARGET_CPU,
        modelPath: c.modelPath,
        labels: fleet.labels,
      });
      children.push(...started.children);
      url = `http://${HOST}:${port}`;
    }
    const probe = await streamChat({
      baseUrl: url,
      model: "sim-model",
      messages: [{ role: "user", content: "ping" }],
      maxTokens: 2,
      headers: {},
      signal: AbortSignal.any([c.signal, AbortSignal.timeout(10_000)]),
    });
    if (!probe.ok) throw new Error(`${target.name}: a first request failed: ${probe.error}`);

    let before: WorkerCounters[] | null = null;
    let cpuBefore: CpuSample | null = null;
    let routersBefore: RouterReading[] = [];
    const traffic = c.traffic(point, target, fleet.targets);
    const d = await drive(url, traffic.offer, {
      warmupMs: traffic.warmupMs,
      durationMs: traffic.durationMs,
      maxRequests: traffic.maxRequests,
      drainMs: o.drain * 1000,
      model: "sim-model",
      signal: c.signal,
      onMeasureStart: async () => {
        [before, cpuBefore, routersBefore] = await Promise.all([
          readCounters(fleet.urls),
          sampleCpu(null),
          readRouters(started),
        ]);
      },
    });
    const [after, cpuAfter, routersAfter] = await Promise.all([
      readCounters(fleet.urls),
      sampleCpu(null),
      readRouters(started),
    ]);
    if (!before || !cpuBefore) throw new Error("the measured window never opened");
    for (const ch of children) {
      if (await exited(ch, 0)) {
        throw new Error(`${ch.name} exited during the run:\n${tail(ch.log)}`);
      }
    }
    const b: WorkerCounters[] = before;
    const cpu = ["cpu0", "cpu1"].map((n) => busyPct(cpuBefore!.load, cpuAfter.load, n));
    const s = summarise(point.label, target.name, d, after.map((a, i) => delta(b[i], a)), cpu);
    const prediction = started.metrics.length === 0 ? null : summarisePrediction(
      sumHistograms(routersBefore.map((x) => x.histogram)),
      sumHistograms(routersAfter.map((x) => x.histogram)),
    );
    const routers = target.kind === "smg" && target.routers
      ? routerCost(target.routers, routersBefore, routersAfter, s.ok)
      : null;
    return { ...s, prediction, routers };
  } finally {
    await stop(children);
  }
}
