/**
 * The virtual gateway's load monitor: each interval every worker gets its engine's report,
 * parsed as the gateway parses `/v1/loads`, stamped with the poll's time; the overload veto; it
 * polls when the real one would, and stops on abort.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../../../lib/core/clock.ts";
import { RoundRobinPolicy } from "../../../lib/policies/mod.ts";
import { SimEngine } from "../../../lib/sim/engine.ts";
import { VirtualClock } from "./clock.ts";
import { VirtualGateway } from "./gateway.ts";
import { monitorsLoads } from "./loads.ts";
import { workerUrls } from "./run.ts";
import { parseTarget, targetConfig } from "./targets.ts";
import type { EngineConfig } from "../../../lib/sim/types.ts";
import { DEFAULTS, prompt } from "../../../support/sim_engine.ts";

/** A gateway for `target` (a policy and gateway flags) over 2 engines with `engine`. */
function fleet(target: string, engine: EngineConfig = DEFAULTS) {
  const clock = new VirtualClock();
  const engines = [0, 1].map(() =>
    new SimEngine(engine, { now: () => clock.now(), sleep: (ms, s) => clock.sleep(ms, s) })
  );
  const urls = workerUrls(2);
  const config = targetConfig(parseTarget(target), urls, 0);
  const gateway = new VirtualGateway({ config, clock, engines, urls, random: seededRandom(0) });
  return { clock, engines, gateway };
}

Deno.test("virtual loads: each interval every worker holds its engine's report, stamped", async () => {
  const { clock, engines, gateway } = fleet("least_load");
  const stop = new AbortController();
  gateway.startLoadMonitor(stop.signal);
  // 2,000 tokens decoded at ~6.35 ms each: still running at 10 s.
  const busy = engines[1].submit({ tokens: prompt(1, 2000), maxNewTokens: 2000 }, () => {});
  await clock.drive({ until: 1_000 });
  const [idle, loaded] = gateway.workers;
  assert.deepEqual([idle.loadAt, loaded.loadAt], [0, 0]);
  assert.equal(loaded.load?.runningRequests, 0); // polled before the request arrived
  await clock.drive({ until: 10_000 });
  assert.deepEqual([idle.loadAt, loaded.loadAt], [10_000, 10_000]);
  assert.equal(idle.load?.source, "loads");
  assert.equal(idle.load?.maxTokens, DEFAULTS.kvTokens);
  assert.equal(loaded.load?.runningRequests, 1);
  stop.abort();
  await clock.drive();
  assert.equal(clock.pending, 0);
  await busy;
  assert.equal(loaded.loadAt, 10_000);
});

Deno.test("virtual loads: the overload veto takes a worker out of selection", async () => {
  const { clock, engines, gateway } = fleet("round_robin:--worker-overload-waiting-requests 1", {
    ...DEFAULTS,
    maxRunning: 1,
  });
  assert.equal(gateway.monitorsLoads, true);
  const runs = [1, 2].map((s) =>
    engines[0].submit({ tokens: prompt(s, 100), maxNewTokens: 50 }, () => {})
  );
  const stop = new AbortController();
  clock.at(1, () => gateway.startLoadMonitor(stop.signal));
  await clock.drive({ until: 1 });
  const [full, free] = gateway.workers;
  assert.deepEqual([full.overloaded, free.overloaded], [true, false]);
  assert.deepEqual([full.available(1), free.available(1)], [false, true]);
  stop.abort();
  await clock.drive();
  await Promise.all(runs);
});

Deno.test("virtual loads: polled unless disabled with nothing needing loads", () => {
  assert.equal(fleet("round_robin").gateway.monitorsLoads, true);
  assert.equal(fleet("round_robin:--disable-load-monitoring").gateway.monitorsLoads, false);
  assert.equal(fleet("least_load:--disable-load-monitoring").gateway.monitorsLoads, true);
  const off = targetConfig(parseTarget("least_load:--disable-load-monitoring"), workerUrls(2), 0);
  assert.equal(monitorsLoads(off.loadMonitor, { needs: { backendLoads: true } } as never), true);
  assert.equal(monitorsLoads(off.loadMonitor, new RoundRobinPolicy()), false);
});
