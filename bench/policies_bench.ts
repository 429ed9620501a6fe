/**
 * Decision cost per policy (`deno task bench`): one `select` over 8, 64 and 512 eligible
 * workers, plus the per-request routing-input extraction. Results go to BENCHMARKS.md.
 */

import { defaultConfig } from "../lib/config/config.ts";
import { seededRandom } from "../lib/core/clock.ts";
import { silentLogger } from "../lib/core/log.ts";
import type { RouteRequest, WorkerView } from "../lib/core/types.ts";
import { AVAILABLE_POLICIES, createPolicy } from "../lib/policies/mod.ts";
import { extractRouteRequest } from "../lib/requests/route_request.ts";
import { request as makeRequest } from "../support/policies.ts";

const request: RouteRequest = makeRequest();

/** consistent_hashing routes keyless requests at random; bench its ring path instead. */
const KEYED: Partial<Record<string, RouteRequest>> = {
  consistent_hashing: { ...request, routingKey: "conv-1" },
};

/** bucket routes only the PD prefill leg (elsewhere it picks at random): bench its buckets. */
const ROLE: Partial<Record<string, WorkerView["type"]>> = { bucket: "prefill" };

/** bucket keeps a 5 s window of requests: time passes 1 ms a call so it expires and adapts. */
const CLOCK: Partial<Record<string, () => () => number>> = {
  bucket: () => {
    let t = 0;
    return () => t++;
  },
};

/** Every worker has a fresh load report, as with the load monitor running (the usual case). */
function fleet(n: number, type: WorkerView["type"] = "regular"): WorkerView[] {
  return Array.from({ length: n }, (_, i) => ({
    id: crypto.randomUUID(),
    seq: i + 1,
    url: `http://10.0.${i >> 8}.${i & 255}:8000`,
    inFlight: i % 7,
    prefillTokens: (i % 7) * 500,
    load: {
      runningRequests: i % 11,
      waitingRequests: i % 5,
      waitingUncachedTokens: (i % 5) * 900,
      usedTokens: null,
      maxTokens: null,
      tokenUsage: (i % 10) / 12,
      genThroughput: 1500 + (i % 4) * 250,
      cacheHitRate: null,
      source: "loads" as const,
      details: null,
    },
    loadAt: 0,
    keyInFlight: () => 0,
    activeKeys: 0,
    type,
  }));
}

for (const name of AVAILABLE_POLICIES) {
  for (const n of [8, 64, 512]) {
    const policy = createPolicy(name, {
      random: seededRandom(1),
      now: CLOCK[name]?.() ?? (() => 0),
      log: silentLogger,
      config: defaultConfig(),
    });
    const workers = fleet(n, ROLE[name]);
    const req = KEYED[name] ?? request;
    Deno.bench({ name: `${name} select, ${n} workers`, group: `${n} workers` }, () => {
      policy.select(workers, req);
    });
  }
}

const chatBody = {
  model: "m",
  messages: [
    { role: "system", content: "You are a helpful assistant. ".repeat(40) },
    { role: "user", content: "Summarise the following text. ".repeat(100) },
  ],
  stream: true,
};
const headers = new Headers({ "x-smg-routing-key": "conv-1" });
Deno.bench({ name: "extractRouteRequest, 4 KB chat", group: "routing input" }, () => {
  extractRouteRequest("chat", chatBody, headers, { routingKeyHeaders: ["x-smg-routing-key"] });
});
