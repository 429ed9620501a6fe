/**
 * The attempt loop's backoff on the gateway's clock, driven by a FakeClock: a retry waits its
 * delay and not a millisecond less, the client leaving cuts the wait short (its timer
 * cancelled), and no backoff configured means no timer at all. The plan is scripted: every
 * attempt fails retryably.
 */

import assert from "node:assert/strict";
import type { RetryConfig } from "../../lib/config/config.ts";
import { FakeClock, seededRandom } from "../../lib/core/clock.ts";
import { GatewayError } from "../../lib/core/errors.ts";
import { createLogger } from "../../lib/core/log.ts";
import { Metrics } from "../../lib/metrics/metrics.ts";
import { runAttempts } from "../../lib/proxy/attempts.ts";
import type { AttemptPlan, CallContext, ProxyDeps } from "../../lib/proxy/types.ts";
import { Cancel } from "../../lib/core/cancel.ts";
import type { Worker } from "../../lib/workers/worker.ts";
import { testConfig } from "../../support/gateway.ts";
import { Waiters } from "../../support/wait.ts";
import { workerSetup } from "../support/workers.ts";

function setup(retry: Partial<RetryConfig>) {
  const clock = new FakeClock();
  const events = new Waiters();
  const retries: string[] = [];
  const log = createLogger({
    level: "warn",
    sink: (line) => {
      retries.push(line);
      events.poke(); // the loop arms the backoff's timer right after this line
    },
  });
  const config = testConfig({
    retry: { maxAttempts: 2, initialBackoffMs: 100, maxBackoffMs: 100, jitter: 0, ...retry },
  });
  const deps = {
    config,
    metrics: new Metrics(),
    log,
    clock,
    random: seededRandom(1),
  } as unknown as ProxyDeps;
  const { manager } = workerSetup(clock);
  const workers = [manager.add({ url: "http://a" }), manager.add({ url: "http://b" })];
  const runs: string[] = [];
  const plan: AttemptPlan<Worker[], Worker> = {
    label: "regular",
    code: "no_available_workers",
    retryMessage: "attempt failed; retrying",
    candidates: () => workers,
    pick: (_c, cands, failed) => cands.find((w) => !failed.has(w.id)) ?? null,
    run: (_c, worker) => {
      runs.push(worker.url);
      events.poke();
      const error = new GatewayError(502, "call_upstream_failed", "scripted failure");
      return Promise.resolve({ kind: "failure", worker, failure: { retryable: true, error } });
    },
    describe: (w) => ({ worker: w.url }),
  };
  const cancel = new Cancel();
  const c = {
    cancel,
    inb: { gone: cancel },
    ctx: { requestId: "req-1" },
    series: { endpoint: "chat", selection: [] },
    timedOut: () => false,
  } as unknown as CallContext;
  const run = () => runAttempts(deps, 60_000, c, plan);
  return { clock, events, retries, runs, run, cancel };
}

Deno.test("attempts: a retry waits its backoff on the clock, not a millisecond less", async () => {
  const t = setup({});
  const reply = t.run();
  await t.events.wait(() => t.retries.length === 1, "the first failure");
  assert.equal(t.clock.pending, 1, "the backoff's timer");
  t.clock.advance(99);
  assert.deepEqual(t.runs, ["http://a"], "still backing off"); // its timer has not fired
  t.clock.advance(1);
  assert.equal((await reply).status, 502);
  assert.deepEqual(t.runs, ["http://a", "http://b"]);
});

Deno.test("attempts: a client that leaves during the backoff ends it at once", async () => {
  const t = setup({});
  const reply = t.run();
  await t.events.wait(() => t.retries.length === 1, "the first failure");
  t.cancel.cancel(new Error("client gone"));
  assert.equal((await reply).status, 499);
  assert.deepEqual(t.runs, ["http://a"], "no retry for a client that left");
  assert.equal(t.clock.pending, 0, "the backoff's timer is cancelled");
});

Deno.test("attempts: no backoff configured, no timer: the retry follows at once", async () => {
  const t = setup({ initialBackoffMs: 0, maxBackoffMs: 0 });
  assert.equal((await t.run()).status, 502);
  assert.deepEqual(t.runs, ["http://a", "http://b"]);
  assert.equal(t.clock.pending, 0);
});
