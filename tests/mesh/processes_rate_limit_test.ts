/**
 * Cluster-wide tenant limits between real router processes on loopback: three meshed routers in
 * front of one fake worker, a tenant (`header:team-a`, trusted) allowed 6 requests a minute, its
 * requests spread evenly over the routers. With `--tenant-rate-limit-scope cluster` the cluster
 * admits the tenant's 6 once every router has heard the others' shares, and refuses the rest; with
 * `router` scope each router admits its own 6, 18 in all. Waits on log lines and on the routers'
 * metrics (another process's counters: polled), never on fixed sleeps but one: a share first
 * seen in the next wall-clock minute is not counted (by design, `rate_limit_sync.ts`), so the
 * test starts away from a minute's edge.
 */

import assert from "node:assert/strict";
import { FakeWorker } from "../support/fake_worker.ts";
import {
  type GatewayProcess,
  meshRouterArgs,
  spawnGateway,
} from "../../support/gateway_process.ts";
import { freePort } from "../../lib/core/free_port.ts";
import { poll } from "../../support/wait.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

/** The tenant's limit, requests per minute (a tenth of a request a second: refills are slow). */
const RPM = 6;
const LIMITS = `default_policy:
  tokens_per_minute: 1000000
  requests_per_minute: 1000
tenants:
  - tenant_key: header:team-a
    tokens_per_minute: 1000000
    requests_per_minute: ${RPM}
`;

interface Router {
  proc: GatewayProcess;
  metrics: string;
}

type Scope = "router" | "cluster";

async function router(
  name: string,
  meshPort: number,
  seed: number | null,
  worker: string,
  limits: string,
  scope: Scope,
): Promise<Router> {
  const metricsPort = freePort();
  const seeds = seed === null ? [] : [`127.0.0.1:${seed}`];
  const proc = await spawnGateway(
    MAIN,
    [
      ...meshRouterArgs(name, meshPort, seeds, metricsPort),
      "--worker-urls",
      worker,
      "--trust-tenant-header",
      "--tenant-rate-limit-enabled",
      "--tenant-rate-limit-config",
      limits,
      "--tenant-rate-limit-scope",
      scope,
    ],
    undefined,
    [`--allow-read=${limits}`],
  );
  return { proc, metrics: `http://127.0.0.1:${metricsPort}/metrics` };
}

/** Waits for a `Status:` line of `r` in which every peer of `want` is ALIVE with a stream. */
function streamsTo(r: Router, want: string[]) {
  const parts = want.map((n) => `(?=[^\\n]*\\b${n}=ALIVE#\\d+\\+stream)`).join("");
  return r.proc.waitForOutput(new RegExp(`msg="Status: ${parts}[^\\n]*`), 0, 20_000);
}

/** The value of a counter of `r` with `labels` (0 before its first increment). */
async function counter(r: Router, name: string, labels: string): Promise<number> {
  const text = await (await fetch(r.metrics)).text();
  const m = new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

/** One chat of the tenant through `r`: its status, checking a refusal is SMG's 429. */
async function chat(r: Router): Promise<number> {
  const res = await fetch(`${r.proc.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-smg-tenant-id": "team-a" },
    body: JSON.stringify({ model: "test-model", messages: [{ role: "user", content: "hi" }] }),
  });
  const body = await res.text();
  if (res.status === 429) {
    assert.equal(res.headers.get("x-smg-error-code"), "tenant_rate_limit_exceeded", body);
    const wait = Number(res.headers.get("retry-after"));
    assert.ok(wait >= 1 && wait <= 60 / RPM, `Retry-After ${wait}: a request every 10 s`);
  } else assert.equal(res.status, 200, body);
  return res.status;
}

/** `n` chats through each router in turn (a, b, c, a, ...): how many each admitted. */
async function spread(routers: Router[], n: number): Promise<number[]> {
  const admitted = routers.map(() => 0);
  for (let i = 0; i < n; i++) {
    for (const [j, r] of routers.entries()) if (await chat(r) === 200) admitted[j]++;
  }
  return admitted;
}

/**
 * Resolves at once unless the wall-clock minute ends within 5 s; then at its end. Shares are
 * counted per minute, and one first seen after the minute it was written in is ignored.
 */
function awayFromMinuteEdge(): Promise<void> {
  const left = 60_000 - Date.now() % 60_000;
  return left > 5_000 ? Promise.resolve() : new Promise((r) => setTimeout(r, left + 100));
}

async function stop(r: Router): Promise<void> {
  try {
    r.proc.child.kill("SIGTERM");
  } catch { /* gone */ }
  await r.proc.exited;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/**
 * Three meshed routers with the tenant limits of `scope`: 2 chats through each (6, the tenant's
 * whole minute), then (cluster scope) once each router has heard the 4 of the others, 6 more
 * through each. What each router admitted in each round, the seconds the rounds took, and the
 * peers' requests each had taken after the first round and at the end.
 */
async function offer(scope: Scope) {
  const worker = new FakeWorker();
  const limits = Deno.makeTempFileSync({ dir: "/tmp", suffix: ".yaml" });
  Deno.writeTextFileSync(limits, LIMITS);
  const [pa, pb, pc] = [freePort(), freePort(), freePort()];
  const routers: Router[] = [];
  try {
    routers.push(await router("a", pa, null, worker.url, limits, scope));
    routers.push(await router("b", pb, pa, worker.url, limits, scope));
    routers.push(await router("c", pc, pa, worker.url, limits, scope));
    const [a, , c] = routers;
    await Promise.all([
      ...routers.map((r) => r.proc.waitForOutput(/msg="worker ready"/)),
      streamsTo(a, ["b", "c"]),
      streamsTo(c, ["a", "b"]),
    ]);
    await awayFromMinuteEdge();
    const start = Date.now();
    const first = await spread(routers, 2);
    const heard = (r: Router) =>
      counter(r, "smg_tenant_rate_limit_cluster_total", 'kind="requests_in"');
    if (scope === "cluster") {
      await poll(
        async () => (await Promise.all(routers.map(heard))).every((n) => n >= 4),
        "every router to hear the other routers' 4 requests",
        10_000,
      );
    }
    const heardFirst = await Promise.all(routers.map(heard));
    const second = await spread(routers, 6);
    const secs = (Date.now() - start) / 1000;
    const allowed = await Promise.all(
      routers.map((r) => counter(r, "smg_tenant_rate_limit_total", 'result="allowed"')),
    );
    assert.deepEqual(allowed, first.map((n, i) => n + second[i]), "the routers' own counts");
    return {
      first,
      second,
      secs,
      heard: heardFirst,
      heardLast: await Promise.all(routers.map(heard)),
    };
  } finally {
    await Promise.all(routers.map(stop));
    await worker.close();
    Deno.removeSync(limits);
  }
}

Deno.test("mesh processes: cluster-scope tenant limits admit the tenant's limit over three routers, router scope three times it", async () => {
  const cluster = await offer("cluster");
  // Within a minute's refill (a request per router every 10 s) the rounds add at most that.
  const refill = (secs: number) => 3 * Math.floor(secs * RPM / 60);
  assert.deepEqual(cluster.first, [2, 2, 2], "the minute's 6, spread over the routers");
  assert.deepEqual(cluster.heard, [4, 4, 4], "each router took the others' requests");
  assert.ok(
    sum(cluster.second) <= refill(cluster.secs),
    `cluster: ${sum(cluster.second)} more admitted in ${cluster.secs} s once the shares spread`,
  );

  const router = await offer("router");
  assert.deepEqual(router.first, [2, 2, 2]);
  assert.deepEqual(router.heardLast, [0, 0, 0], "router scope shares nothing");
  const total = sum(router.first) + sum(router.second);
  assert.ok(
    total >= 3 * RPM && total <= 3 * RPM + refill(router.secs),
    `router scope: ${total} admitted in ${router.secs} s, each router its own ${RPM}`,
  );
});
