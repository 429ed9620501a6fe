/**
 * One target's virtual replay: a fresh fleet (one `SimEngine` per worker, fresh caches and
 * counters) and a fresh `VirtualGateway` (or several, behind a front that sends each request to
 * the next in turn, on a mesh if asked: `mesh.ts`) on a fresh `VirtualClock`, the trace's arrivals as
 * timers, driven to the end. In: the trace, its plan (`replay.ts`: which requests are sent and
 * measured), each request's prompt text and worker token ids, the engine settings and the
 * gateway's. Out: every request's record, the workers' counters at the window's opening and at
 * the end, and what the run cost.
 *
 * Phases as `bench:routing`'s (`measure.ts`, `client.ts`): one probe request ("ping", 2 tokens)
 * is sent and awaited first; then requests 0 … plan.to − 1 arrive at
 * (timestamp − first) ÷ speed, open loop; those from plan.from on are measured; the workers'
 * counters are read when the window opens (request plan.from's arrival, before it); the drain
 * waits for requests in flight up to `drainMs` past the window's close, then aborts the rest
 * (counted as failed). TTFT is the client's: arrival to first token, in virtual ms, which at
 * `--time-scale` T is T × the engine's simulated ms, as a real fleet's wall-clock figures are.
 */

import type { GatewayConfig } from "../../../lib/config/config.ts";
import { seededRandom } from "../../../lib/core/clock.ts";
import { PolicyReplicas } from "../../../lib/policies/replicas.ts";
import { noTotals, SimEngine } from "../../../lib/sim/engine.ts";
import { renderChat } from "../../../lib/sim/chat_template.ts";
import type { SimTokenizer } from "../../../lib/sim/tokenizer.ts";
import type { EngineConfig, EngineStats } from "../../../lib/sim/types.ts";
import { arrivalMs, type ReplayPlan } from "../replay.ts";
import type { TraceRequest } from "../trace.ts";
import { VirtualClock } from "./clock.ts";
import { type CallOutcome, VirtualGateway } from "./gateway.ts";
import { connectMesh, type VirtualMeshOptions } from "./mesh.ts";

/** The probe's message, as `measure.ts` sends it before the traffic. */
const PROBE = "ping";

/** A worker's cumulative counters (`EngineStats.totals`). */
export type Totals = EngineStats["totals"];

/** What one replay needs. */
export interface ReplayInput {
  /** The trace. */
  requests: readonly TraceRequest[];
  /** Which requests are sent and measured. */
  plan: ReplayPlan;
  /** Request i's user message. */
  prompt: (i: number) => string;
  /** Request i's prompt as the workers tokenize it (memoise: every target asks). */
  tokens: (i: number) => readonly number[];
  /** `ref:affinity`: each request's conversation key, sent as `X-SMG-Routing-Key`; else null. */
  keys: readonly string[] | null;
  /** Every worker's engine settings. */
  engine: EngineConfig;
  /** The workers' `--seed` (each engine's sampling seeds) and tokenizer. */
  engineSeed: number;
  tokenizer: SimTokenizer;
  /** The gateway's settings (its worker URLs among them) and its randomness seed. */
  config: GatewayConfig;
  seed: number;
  /** Virtual ms the drain waits after the window. */
  drainMs: number;
  /** `DriveOptions.together`. */
  together: boolean;
  /** `VirtualGatewayOptions.submitDelayMs` (default 0). */
  submitDelayMs?: number;
  /**
   * Each arrival is late by a uniform draw in [0, `jitterMs`) from `seededRandom(jitterSeed)`
   * (default 0: on time): the timing noise of a real run, to see how far a figure moves with it.
   */
  jitterMs?: number;
  /** The jitter's seed (default 1). */
  jitterSeed?: number;
  /** Called at each arrival before the request is sent, to look inside (debugging; default none). */
  onArrival?: (i: number, engines: readonly SimEngine[], gateway: VirtualGateway) => void;
  /**
   * Routers behind a front that sends each request to the next in turn (default 1), and, when
   * several, whether they form a mesh (`mesh.ts`; null: they share nothing).
   */
  routers?: number;
  mesh?: VirtualMeshOptions | null;
}

/** One request as recorded. */
export interface RequestRecord extends CallOutcome {
  /** Its index in the trace. */
  index: number;
  /** In the measured window. */
  measured: boolean;
}

/** A finished replay. */
export interface ReplayResult {
  /** Every request sent, in completion order. */
  records: RequestRecord[];
  /** Each worker's counters when the window opened, and at the end. */
  before: Totals[];
  after: Totals[];
  /** Requests aborted at the drain timeout. */
  cut: number;
  /** Timers fired, rounds driven, virtual ms elapsed, wall ms taken. */
  events: number;
  rounds: number;
  virtualMs: number;
  wallMs: number;
}

/** Replays `input.plan` through one fresh fleet and gateway. */
export async function replayVirtual(input: ReplayInput): Promise<ReplayResult> {
  const started = performance.now();
  const { plan, requests, config } = input;
  const clock = new VirtualClock();
  const urls = config.workerUrls;
  const engines = urls.map(() =>
    new SimEngine(input.engine, {
      now: () => clock.now(),
      sleep: (ms, signal) => clock.sleep(ms, signal),
      random: seededRandom(input.engineSeed),
      tokenizer: input.tokenizer,
    })
  );
  const n = Math.max(1, input.routers ?? 1);
  const replicas = Array.from({ length: n }, () => new PolicyReplicas());
  // As `bench:routing` starts them: router i with `--random-seed seed + i`.
  const gateways = replicas.map((r, i) =>
    new VirtualGateway({
      config,
      clock,
      engines,
      urls,
      random: seededRandom(input.seed + i),
      submitDelayMs: input.submitDelayMs,
      replicas: n > 1 && input.mesh ? r : undefined,
    })
  );
  let turn = 0;
  const front = () => gateways[turn++ % n];
  const monitor = new AbortController();
  if (n > 1 && input.mesh) {
    connectMesh(replicas, gateways.map((g) => g.workers), clock, input.mesh, monitor.signal);
  }
  const cutter = new AbortController();
  const records: RequestRecord[] = [];
  const totals = () => engines.map((e) => e.stats().totals);
  const window: { before: Totals[] | null } = { before: null };
  let inFlight = 0;
  let arrived = 0;
  let cut = 0;
  for (const g of gateways) g.startLoadMonitor(monitor.signal);
  // `bench:routing` proves the path with one request first: it moves round robin's rotation and
  // draws from the policy's randomness, as here.
  let probed = false;
  front().send({
    content: PROBE,
    tokens: input.tokenizer.tokenize(renderChat([{ role: "user", content: PROBE }])),
    maxTokens: 2,
  }).then(() => (probed = true));
  const probe = await clock.drive({ done: () => probed, together: input.together });
  const t0 = clock.now();
  // Registered first: at the window's opening, the counters are read before its first arrival.
  clock.at(t0 + plan.warmupMs, () => (window.before = totals()));
  const jitter = seededRandom(input.jitterSeed ?? 1);
  const late = () => (input.jitterMs ? jitter() * input.jitterMs : 0);
  for (let i = 0; i < plan.to; i++) {
    clock.at(t0 + arrivalMs(requests, i, plan.speed) + late(), () => {
      arrived++;
      inFlight++;
      const gateway = front();
      input.onArrival?.(i, engines, gateway);
      const r = requests[i];
      gateway.send({
        content: input.prompt(i),
        tokens: input.tokens(i),
        maxTokens: r.outputLength,
        headers: input.keys ? { "x-smg-routing-key": input.keys[i] } : {},
        signal: cutter.signal,
      }).then((o) => {
        records.push({ ...o, index: i, measured: i >= plan.from });
        if (!o.ok && cutter.signal.aborted) cut++;
      }).finally(() => inFlight--);
    });
  }
  clock.at(t0 + plan.warmupMs + plan.durationMs + input.drainMs, () => cutter.abort());
  const stats = await clock.drive({
    done: () => arrived === plan.to && inFlight === 0,
    together: input.together,
  });
  const after = totals();
  monitor.abort();
  await Promise.all(engines.map((e) => e.close()));
  if (stats.reason !== "done") throw new Error(`the replay stalled (${stats.reason})`);
  return {
    records,
    before: window.before ?? after.map(() => noTotals()),
    after,
    cut,
    events: probe.events + stats.events,
    rounds: probe.rounds + stats.rounds,
    virtualMs: clock.now(),
    wallMs: performance.now() - started,
  };
}
