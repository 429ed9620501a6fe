/**
 * `deno task bench:virtual`: `bench:routing`'s trace cells replayed in one process on a virtual
 * clock, in seconds instead of minutes, to iterate on routing-policy designs. The same trace,
 * plan (`../replay.ts`), prompts (`../trace_prompts.ts`), infinite-cache bound
 * (`../trace_bound.ts`), conversation keys (`../trace_keys.ts`), sim-worker knobs
 * (`../scenarios.ts`, parsed by the sim-worker's own parser) and gateway settings (the gateway's
 * parser and validation) as `bench:routing`; the real `SimEngine` and the real policies; only
 * the network, the processes and wall time are gone (`clock.ts`, `gateway.ts`, `replay.ts`).
 *
 *   deno task bench:virtual --trace /tmp/conv.jsonl --scenario trace-small-kv --speed 2.5 \
 *     --chars-per-token 8 --trace-warmup 200 --duration 40 --drain 30 \
 *     --targets ref:affinity,round_robin,cache_aware
 *
 * Per target, a fresh fleet and gateway, the same arrivals; reported: requests, TTFT mean, p50
 * and p99 (virtual ms, arrival to first token), cache hit (measured requests, and the window's
 * worker counters as `bench:routing` reads them), cache_aware's prediction check, token spread,
 * and the wall time each replay took (`report.ts`).
 *
 * Validated against `bench:routing` on the cell above (8 workers, 259 measured requests): cache
 * hit, spread and cache_aware's prediction check within the real run's noise; TTFT about 10 ms
 * under the real one's at every percentile, the time the real path spends between a pick and the
 * engine (HTTP hops, the worker parsing and tokenizing ~60 kB prompts), which `--overhead-ms 10`
 * adds back. A deterministic replay hides the real run's noise: `--jitter-ms 5 --repeats 5`
 * shows how far a figure moves with arrival timing (cache_aware's TTFT mean ±8 ms, hit ±1 pt).
 * Known gaps: see `gateway.ts` and `clock.ts` (no CPU time, no network, no retries); hash rings
 * place the fixed worker URLs (`workerUrls`), where `bench:routing`'s ports are random, so
 * `ref:affinity`'s spread is one draw of the real one's; `ref:upper-bound` is not replayed.
 */

import { renderChat } from "../../../lib/sim/chat_template.ts";
import { parseSimWorkerArgs } from "../../../lib/sim/cli.ts";
import { simTokenizer } from "../../../lib/sim/worker.ts";
import { conversationTrace } from "../conversation_trace.ts";
import { arrivalMs, replayPlan } from "../replay.ts";
import { SIM_KNOBS } from "../scenarios.ts";
import { loadTrace, parseTrace, type TraceRequest } from "../trace.ts";
import { infiniteCacheBound } from "../trace_bound.ts";
import { conversationKeys } from "../trace_keys.ts";
import { tracePrompt, warmBlockTexts } from "../trace_prompts.ts";
import {
  CONVERSATION,
  parseVirtualOptions,
  USAGE,
  UsageError,
  type VirtualOptions,
} from "./options.ts";
import { replayVirtual } from "./replay.ts";
import { summariseVirtual, virtualMarkdown, type VirtualSummary } from "./report.ts";
import { parseTarget, targetConfig } from "./targets.ts";

function note(msg: string): void {
  console.error(`bench:virtual: ${msg}`);
}

/** The trace `--trace` names: a file, or the generated conversation trace. */
async function readTrace(trace: string): Promise<TraceRequest[]> {
  if (trace !== CONVERSATION) return await loadTrace(trace);
  const text = conversationTrace().map((l) => JSON.stringify(l)).join("\n");
  return parseTrace(text, CONVERSATION);
}

/** Worker base URLs: fixed, so that hash rings place them the same in every run. */
export function workerUrls(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `http://127.0.0.1:${31001 + i}`);
}

async function main(o: VirtualOptions): Promise<number> {
  const targets = o.targets.map(parseTarget);
  const urls = workerUrls(o.workers);
  const configs = targets.map((t) => targetConfig(t, urls, o.seed)); // bad flags fail first
  const requests = await readTrace(o.trace);
  const plan = replayPlan(requests, {
    speed: o.speed,
    warmup: o.warmup,
    durationS: o.duration,
    maxRequests: o.requests,
  });
  const bound = infiniteCacheBound(requests, plan.from, plan.to).rate;
  const simArgs = [...SIM_KNOBS, "--seed", String(o.seed), ...o.simArgs];
  const sim = parseSimWorkerArgs(simArgs);
  if (sim === "help") throw new UsageError("--sim: no --help here");
  const tokenizer = simTokenizer(sim.charsPerToken ?? null);

  const prep = performance.now();
  const sent = requests.slice(0, plan.to);
  const blocks = warmBlockTexts(o.seed, sent, o.charsPerToken);
  const prompts = sent.map((r) => tracePrompt(blocks, r));
  const tokens = prompts.map((content) =>
    tokenizer.tokenize(renderChat([{ role: "user", content }]))
  );
  const keys = conversationKeys(requests);
  const prepS = (performance.now() - prep) / 1000;

  console.log(
    `Trace ${o.trace} (${requests.length} requests) at ${o.speed}×, scenario ${o.scenario}, ` +
      `${o.workers} workers; requests ${plan.from}–${plan.to - 1} measured (${
        plan.to - plan.from
      }), ` +
      `window ${(plan.durationMs / 1000).toFixed(1)} s after ${
        (plan.warmupMs / 1000).toFixed(1)
      } s ` +
      `of warm-up, drain ${o.drain} s. Infinite-cache bound over the window: ${
        bound === null ? "–" : `${(bound * 100).toFixed(1)} %`
      }.\nsim-worker ${simArgs.join(" ")}\nPrompts and tokens built in ${prepS.toFixed(1)} s.\n`,
  );
  const rows: VirtualSummary[] = [];
  const records: Record<string, unknown[]> = {};
  for (const [i, t] of targets.entries()) {
    for (let k = 1; k <= o.repeats; k++) {
      const r = await replayVirtual({
        requests,
        plan,
        prompt: (n) => prompts[n],
        tokens: (n) => tokens[n],
        keys: t.affinity ? keys : null,
        engine: sim.engine,
        engineSeed: sim.seed,
        tokenizer,
        config: configs[i],
        seed: o.seed,
        drainMs: o.drain * 1000,
        together: o.together,
        submitDelayMs: o.overheadMs,
        jitterMs: o.jitterMs,
        jitterSeed: k,
        routers: t.routers,
        mesh: t.mesh ? { roundMs: o.meshRoundMs, loadMs: o.meshLoadMs } : null,
      });
      const s = summariseVirtual(o.repeats > 1 ? `${t.name} #${k}` : t.name, r, o.workers, keys);
      rows.push(s);
      // Every measured request, for a closer look (`--json`): the trace's arrival order.
      records[s.target] = r.records.filter((x) => x.measured).sort((a, b) => a.index - b.index)
        .map((x) => ({
          index: x.index,
          at: arrivalMs(requests, x.index, o.speed),
          worker: x.worker,
          ttftMs: x.ttftMs,
          prompt: x.promptTokens,
          cached: x.cachedTokens,
          predicted: x.prediction?.predicted ?? null,
        }));
      note(
        `${s.target}: TTFT mean ${s.ttftMeanMs} p50 ${s.ttftP50Ms} p99 ${s.ttftP99Ms} ms, hit ` +
          `${s.cacheHit}, spread ${s.spreadTokens}; ${s.events} events in ${s.wallS} s`,
      );
    }
  }
  console.log(virtualMarkdown(rows));
  if (o.json) {
    const settings = { options: o, simArgs, plan, bound };
    const targetsOut = Object.fromEntries(targets.map((t) => [t.name, t]));
    await Deno.writeTextFile(
      o.json,
      JSON.stringify({ settings, targets: targetsOut, prepS, summary: rows, records }) + "\n",
    );
    note(`wrote ${o.json}`);
  }
  return 0;
}

if (import.meta.main) {
  let code = 1;
  try {
    const o = parseVirtualOptions(Deno.args);
    if (o === "help") {
      console.log(USAGE);
      code = 0;
    } else code = await main(o);
  } catch (e) {
    if (e instanceof UsageError) {
      console.error(`bench:virtual: ${e.message}\n${USAGE}`);
      code = 2;
    } else note(e instanceof Error ? e.message : String(e));
  }
  Deno.exit(code);
}
