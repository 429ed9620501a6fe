/**
 * The load monitor: every `--load-monitor-interval` it asks each ready worker for a load report
 * (`GET /v1/loads`, else `/get_load`, else the engine's Prometheus `/metrics`), stores it on the
 * worker for policies, and applies the overload veto. Which source a worker answers is
 * remembered per URL; a worker that fails to report keeps no stale veto.
 *
 * A source is "absent" after 404/405/501 or a 200 that does not parse; transport errors and 5xx
 * are inconclusive (tried again next poll).
 */

import type { LoadMonitorConfig } from "../config/config.ts";
import { type Clock, pause } from "../core/clock.ts";
import type { Logger } from "../core/log.ts";
import type { LoadSnapshot } from "../core/types.ts";
import { type FetchFn, getText, tryJson } from "./http.ts";
import { parseGetLoad, parseLoads, parsePrometheusLoad } from "./load_report.ts";
import type { WorkerRegistry } from "./registry.ts";
import type { Worker } from "./worker.ts";

type Source = "loads" | "get_load" | "metrics";

const SOURCES: { source: Source; path: string; parse: (text: string) => LoadSnapshot | null }[] = [
  {
    source: "loads",
    path: "/v1/loads?include=core,disagg,queues,memory",
    parse: (t) => parseLoads(tryJson(t)),
  },
  { source: "get_load", path: "/get_load", parse: (t) => parseGetLoad(tryJson(t)) },
  { source: "metrics", path: "/metrics", parse: parsePrometheusLoad },
];

const ABSENT = new Set([404, 405, 501]);

/** What the monitor is built from. */
export interface LoadMonitorDeps {
  /** Load monitor settings. */
  config: LoadMonitorConfig;
  /** Workers to poll. */
  registry: WorkerRegistry;
  /** HTTP client. */
  fetch: FetchFn;
  /** Clock. */
  clock: Clock;
  /** Logger (module `load`). */
  log: Logger;
  /** Per-poll timeout in ms (default 5000). */
  timeoutMs?: number;
  /** Whether anything needs loads; polling is skipped when this says no and monitoring is off. */
  wanted?: () => boolean;
}

/** Fetches one worker's load report, trying the sources it has not ruled out. */
export async function fetchLoad(
  fetchFn: FetchFn,
  w: Worker,
  absent: Set<Source>,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<LoadSnapshot | null> {
  for (const s of SOURCES) {
    if (absent.has(s.source)) continue;
    const res = await getText(fetchFn, w.url + s.path, timeoutMs, w.apiKey, signal);
    if (res.status === 200) {
      const snap = s.parse(res.text);
      if (snap) return snap;
      absent.add(s.source);
    } else if (ABSENT.has(res.status)) {
      absent.add(s.source);
    }
  }
  return null;
}

/** Polls worker loads. */
export class LoadMonitor {
  readonly #d: LoadMonitorDeps;
  readonly #absent = new Map<string, Set<Source>>();

  /** A monitor over `deps.registry`. */
  constructor(deps: LoadMonitorDeps) {
    this.#d = deps;
  }

  /** Whether polling is worth doing. */
  get active(): boolean {
    const c = this.#d.config;
    if (!c.disabled) return true;
    return c.overloadTokenUsage !== null || c.overloadWaitingRequests !== null ||
      (this.#d.wanted?.() ?? false);
  }

  /** Polls every ready worker once. */
  async pollOnce(signal?: AbortSignal): Promise<void> {
    const d = this.#d;
    const live = new Set<string>();
    await Promise.all(
      d.registry.all().map(async (w) => {
        live.add(w.url);
        if (w.status !== "ready") {
          w.overloaded = false;
          return;
        }
        let absent = this.#absent.get(w.url);
        if (!absent) this.#absent.set(w.url, absent = new Set());
        const snap = await fetchLoad(d.fetch, w, absent, d.timeoutMs ?? 5000, signal);
        if (signal?.aborted) return;
        if (absent.size === SOURCES.length) absent.clear(); // try again from the top next time
        if (!snap) {
          w.overloaded = false;
          return;
        }
        w.load = snap;
        w.loadAt = d.clock.now();
        w.overloaded = this.#overloaded(snap);
      }),
    );
    for (const url of this.#absent.keys()) if (!live.has(url)) this.#absent.delete(url);
  }

  #overloaded(s: LoadSnapshot): boolean {
    const c = this.#d.config;
    return (c.overloadWaitingRequests !== null && s.waitingRequests >= c.overloadWaitingRequests) ||
      (c.overloadTokenUsage !== null && s.tokenUsage >= c.overloadTokenUsage);
  }

  /** Polls every interval until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const ms = this.#d.config.intervalSecs * 1000;
    while (!signal.aborted) {
      if (this.active) {
        try {
          await this.pollOnce(signal);
        } catch (e) {
          this.#d.log.error("load poll failed", { err: e });
        }
      }
      await pause(this.#d.clock, ms, signal).done;
    }
  }
}
