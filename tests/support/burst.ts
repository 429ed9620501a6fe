/**
 * A fleet of fake workers behind the inference proxy (no server, no sockets) whose answers wait
 * until every request of a burst reached a worker, for tests of decisions taken in one turn of
 * the event loop: regular workers, or PD pairs (`pd`).
 */

import { FakeClock, seededRandom } from "../../lib/core/clock.ts";
import { silentLogger } from "../../lib/core/log.ts";
import { Metrics } from "../../lib/metrics/metrics.ts";
import { LeastLoadPolicy } from "../../lib/policies/least_load.ts";
import { Admission } from "../../lib/proxy/admission.ts";
import { InferenceProxy } from "../../lib/proxy/proxy.ts";
import { RequestInbound, toResponse } from "../../lib/server/inbound.ts";
import { type FetchFn, FetchUpstream } from "../../lib/upstream/fetch_upstream.ts";
import { testConfig } from "../../support/gateway.ts";
import { deps } from "../../support/policies.ts";
import { workerSetup } from "./workers.ts";

/**
 * `n` workers (with `pd`: `n` prefill and `n` decode workers) routed by least_load (backlog), whose
 * answers wait until a burst has reached them all; each request's worker URL in `calls`.
 */
export function burstFleet(n: number, pd = false) {
  const config = testConfig({});
  const clock = new FakeClock(1000);
  const { registry, manager } = workerSetup(clock, {
    health: config.health,
    circuitBreaker: config.circuitBreaker,
  });
  const urls: string[] = [];
  const add = (url: string, workerType?: "prefill" | "decode") => {
    urls.push(url);
    manager.add({ url, models: ["m"], workerType, bootstrapPort: pd ? 9000 : undefined })
      .setStatus("ready");
  };
  for (let i = 0; i < n; i++) {
    if (!pd) add(`http://w${i}`);
    else {
      add(`http://p${i}`, "prefill");
      add(`http://d${i}`, "decode");
    }
  }
  const calls: string[] = [];
  const gate = Promise.withResolvers<void>();
  const arrived = Promise.withResolvers<void>();
  let expected = Infinity;
  const fetchFn: FetchFn = async (url) => {
    calls.push(urls.find((u) => url.startsWith(u))!);
    if (calls.length >= expected) arrived.resolve();
    await gate.promise;
    return Response.json({ ok: true });
  };
  const metrics = new Metrics();
  const policy = new LeastLoadPolicy(deps(1, undefined, true));
  const proxy = new InferenceProxy({
    config,
    registry,
    policies: { forModel: () => policy },
    metrics,
    log: silentLogger,
    clock,
    random: seededRandom(1),
    upstream: new FetchUpstream(fetchFn),
    admission: new Admission(config.admission, metrics, clock),
    pd: pd
      ? {
        prefill: new LeastLoadPolicy(deps(2, undefined, true)),
        decode: new LeastLoadPolicy(deps(3, undefined, true)),
      }
      : undefined,
  });
  /** Sends `k` requests in one turn; resolves once every one reached a worker. */
  const burst = async (k: number) => {
    expected = k;
    const done = Promise.withResolvers<void>();
    const replies = Array.from({ length: k }, (_, i) => {
      const req = new Request("http://gw/v1/chat/completions", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "m",
          messages: [{ role: "user", content: "x".repeat(400) }],
        }),
      });
      return proxy.handle(new RequestInbound(req), "chat", {
        requestId: `r${i}`,
        completed: done.promise,
      });
    });
    await arrived.promise;
    gate.resolve();
    for (const r of await Promise.all(replies)) await toResponse(r).text();
    done.resolve();
    await proxy.close();
  };
  return { burst, calls, registry };
}
