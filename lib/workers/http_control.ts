/**
 * Worker control over HTTP: each call a request on `{url}{path}` through one `FetchFn` (which
 * sets the pool, TLS and `redirect: manual`), with the worker's bearer key and a timeout. The
 * load report tries `GET /v1/loads`, else `/get_load`, else the engine's Prometheus `/metrics`;
 * a source is ruled out after 404/405/501 or a 200 that does not parse, while transport errors
 * and 5xx are inconclusive (tried again next call).
 */

import type { LoadSnapshot } from "../core/types.ts";
import type { ControlCall, ControlTarget, LoadSource, WorkerControl } from "./control.ts";
import { type FetchFn, getText, tryJson } from "./http.ts";
import { parseGetLoad, parseLoads, parsePrometheusLoad } from "./load_report.ts";
import { discoverCapacity, discoverModels } from "./model_discovery.ts";

const SOURCES: { source: LoadSource; path: string; parse: (t: string) => LoadSnapshot | null }[] = [
  {
    source: "loads",
    path: "/v1/loads?include=core,disagg,queues,memory",
    parse: (t) => parseLoads(tryJson(t)),
  },
  { source: "get_load", path: "/get_load", parse: (t) => parseGetLoad(tryJson(t)) },
  { source: "metrics", path: "/metrics", parse: parsePrometheusLoad },
];

/** Statuses that say a load source does not exist. */
const ABSENT = new Set([404, 405, 501]);

/** Fetches one worker's load report, trying the sources `absent` has not ruled out. */
async function fetchLoad(
  fetchFn: FetchFn,
  w: ControlTarget,
  absent: Set<LoadSource>,
  call: ControlCall,
): Promise<LoadSnapshot | null> {
  for (const s of SOURCES) {
    if (absent.has(s.source)) continue;
    const res = await getText(fetchFn, w.url + s.path, call.timeoutMs, w.apiKey, call.signal);
    if (res.status === 200) {
      const snap = s.parse(res.text);
      if (snap) return snap;
      absent.add(s.source);
    } else if (ABSENT.has(res.status)) {
      absent.add(s.source);
    }
  }
  if (absent.size === SOURCES.length) absent.clear(); // try again from the top next time
  return null;
}

/** Worker control over `fetchFn`. */
export function httpWorkerControl(fetchFn: FetchFn): WorkerControl {
  const get = (w: ControlTarget, path: string, call: ControlCall, method = "GET") =>
    getText(fetchFn, w.url + path, call.timeoutMs, w.apiKey, call.signal, method);
  return {
    probe: (w, endpoint, call) => get(w, endpoint, call),
    models: (w, call) => discoverModels(fetchFn, w.url, call.timeoutMs, w.apiKey, call.signal),
    kvCapacity: (w, call) =>
      discoverCapacity(fetchFn, w.url, call.timeoutMs, w.apiKey, call.signal),
    load: (w, call) => fetchLoad(fetchFn, w, call.absent ?? new Set(), call),
    healthGenerate: (w, call) => get(w, "/health_generate", call),
    serverInfo: (w, call) => get(w, "/get_server_info", call),
    modelInfo: (w, call) => get(w, "/get_model_info", call),
    flushCache: (w, call) => get(w, "/flush_cache", call, "POST"),
  };
}
