/**
 * Tree repair benchmark: one router's cache_aware tree holds `--entries` tenant leaves (chat
 * conversations: a few thousand characters of tenant system prompt, then each conversation's
 * own turns), a second router with an empty tree connects and copies it over an in-process
 * stream (real timers, envelopes delivered through the event loop), and this reports the time
 * from the stream opening to the repair finishing, pages and bytes sent, and the longest stall
 * of the event loop meanwhile (both routers share this process's loop, so that is the most any
 * request would have waited on either). Then it checks that the copy routes a sample of the
 * conversations' next turns like the original.
 *
 *   deno task bench:mesh-repair [--entries 100000] [--tenants 50] [--turn-chars 400]
 */

import { parseArgs } from "node:util";
import { defaultConfig } from "../../lib/config/config.ts";
import { seededRandom, systemClock } from "../../lib/core/clock.ts";
import { silentLogger } from "../../lib/core/log.ts";
import type { WorkerView } from "../../lib/core/types.ts";
import { type TreeCounter, TreeSync } from "../../lib/mesh/adapters/tree_sync.ts";
import { CacheAwarePolicy } from "../../lib/policies/cache_aware/cache_aware.ts";
import { PolicyReplicas } from "../../lib/policies/replicas.ts";
import { request, view } from "../../support/policies.ts";
import { taskArgs } from "../task_args.ts";

const { values: v } = parseArgs({
  args: taskArgs(),
  options: {
    entries: { type: "string", default: "100000" },
    tenants: { type: "string", default: "50" },
    "turn-chars": { type: "string", default: "400" },
  },
});
const ENTRIES = Number(v.entries);
const TENANTS = Number(v.tenants);
const TURN = Number(v["turn-chars"]);
const WORKERS: WorkerView[] = Array.from({ length: 8 }, (_, i) => view(`w${i}`));

const random = seededRandom(42);
const word = () => Math.floor(random() * 1e9).toString(36);
const text = (chars: number) => {
  let s = "";
  while (s.length < chars) s += word() + " ";
  return s.slice(0, chars);
};
const systems = Array.from({ length: TENANTS }, (_, i) => `tenant ${i}: ` + text(2000));
const conversation = (i: number) => systems[i % TENANTS] + `user ${i}: ` + text(TURN);

function router(name: string) {
  const replicas = new PolicyReplicas();
  const policy = new CacheAwarePolicy({
    random: seededRandom(name.length),
    now: () => performance.now(),
    log: silentLogger,
    config: defaultConfig(),
    replicas,
  });
  replicas.mainFor = () => policy;
  const counts = new Map<TreeCounter, number>();
  const sync = new TreeSync({
    replicas,
    clock: systemClock,
    log: silentLogger,
    random: seededRandom(7),
    name,
    count: (what, n) => counts.set(what, (counts.get(what) ?? 0) + n),
  });
  return { policy, sync, counts };
}

const a = router("a");
const b = router("b");
const built = performance.now();
for (let i = 0; i < ENTRIES; i++) {
  const ws = WORKERS.map((w, j) => ({ ...w, inFlight: (i + j) % 8 }));
  a.policy.select(ws, request(conversation(i)));
}
const buildMs = performance.now() - built;

let open = false;
for (const [me, peer, name, other] of [[a, b, "a", "b"], [b, a, "b", "a"]] as const) {
  me.sync.attach({
    openPeers: () => (open ? [other] : []),
    send(_to, type, payload) {
      if (!open) return false;
      setTimeout(() => peer.sync.onEnvelope(name, type, payload), 0);
      return true;
    },
  });
}

// The longest gap between 1 ms ticks is the longest the loop was blocked.
let maxStallMs = 0;
let last = performance.now();
const monitor = setInterval(() => {
  const now = performance.now();
  maxStallMs = Math.max(maxStallMs, now - last - 1);
  last = now;
}, 1);

const t0 = performance.now();
open = true;
a.sync.peerChanged("b", true);
b.sync.peerChanged("a", true);
const deadline = t0 + 600_000;
while ((b.counts.get("repairs_finished") ?? 0) === 0 && performance.now() < deadline) {
  await new Promise((r) => setTimeout(r, 5));
}
const repairMs = performance.now() - t0;
clearInterval(monitor);
a.sync.stop();
b.sync.stop();

let same = 0;
const sample = 1000;
for (let k = 0; k < sample; k++) {
  const i = Math.floor(random() * ENTRIES);
  const next = conversation(i) + " assistant: ok. user: and then?";
  const pa = a.policy.select(WORKERS, request(next))!.url;
  const pb = b.policy.select(WORKERS, request(next))!.url;
  if (pa === pb) same++;
}
const bytes = a.counts.get("page_bytes_sent") ?? 0;
const mib = (n: number) => (n / 2 ** 20).toFixed(1);
console.log(
  `| ${ENTRIES.toLocaleString("en")} leaves | ${(buildMs / 1000).toFixed(1)} s to build | ` +
    `${(repairMs / 1000).toFixed(2)} s to repair | ${a.counts.get("pages_sent") ?? 0} pages | ` +
    `${mib(bytes)} MiB (${(bytes / ENTRIES).toFixed(0)} B/leaf) | longest loop stall ${
      maxStallMs.toFixed(1)
    } ms | next turns routed alike ${same}/${sample} |`,
);
if ((b.counts.get("repairs_finished") ?? 0) === 0) {
  console.error("the repair did not finish");
  Deno.exit(1);
}
