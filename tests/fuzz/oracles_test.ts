/**
 * The fuzzers can fail: their oracles, pointed at fronts with a planted defect (a request
 * smuggled to the worker, a 500, a hang, a body changed in transit), report it; and a front
 * without one passes. Also the driver: a seed replays the same inputs, `only` replays one.
 */

import assert from "node:assert/strict";
import { systemClock } from "../../lib/core/clock.ts";
import { GatewayError } from "../../lib/core/errors.ts";
import type { Reply } from "../../lib/core/http.ts";
import { silentLogger } from "../../lib/core/log.ts";
import type { FrontInbound } from "../../lib/front/request.ts";
import { serveFront } from "../../lib/front/server.ts";
import { type FuzzFamily, type FuzzTarget, runFamily } from "../../support/fuzz/driver.ts";
import { FramingTarget } from "../../support/fuzz/http_framing.ts";
import { JsonTarget } from "../../support/fuzz/json_bodies.ts";
import { RecordingWorker } from "../../support/fuzz/recording_worker.ts";

const enc = new TextEncoder();
const INFERENCE = [
  "/generate",
  "/v1/completions",
  "/v1/chat/completions",
  "/v1/embeddings",
  "/v1/rerank",
];

/** What a planted front does with one request, given a way to forward a body to the worker. */
type Plant = (
  inb: FrontInbound,
  forward: (body: Uint8Array, requestId: string) => Promise<void>,
) => Promise<Reply>;

/** A reply carrying `requestId`. */
const reply = (status: number, requestId: string): Reply => ({
  status,
  headers: [["x-request-id", requestId], ["content-type", "application/json"]],
  body: enc.encode('{"ok":true}'),
});

/** A well-behaved front: forwards inference requests once, answers everything. */
const honest: Plant = async (inb, forward) => {
  const id = inb.headers.get("x-request-id") ?? "none";
  if (inb.method === "POST" && INFERENCE.includes(inb.path)) {
    let body: Uint8Array;
    try {
      body = await inb.bytes(1 << 20);
    } catch (e) {
      return reply(e instanceof GatewayError ? e.status : 400, id); // a broken body
    }
    await forward(body, id);
  }
  return reply(200, id);
};

/** Starts a planted front and a worker; the target `make` builds is fed by both. */
function planted<T extends FuzzTarget & { received(id: string, body: string): void }>(
  plant: Plant,
  make: (port: number, shutdown: () => Promise<void>, close: () => Promise<void>) => T,
  release = () => {},
): FuzzFamily & { name: string } {
  return {
    name: "planted",
    concurrency: 4,
    start() {
      let target: T | null = null;
      const worker = new RecordingWorker((q) => target?.received(q.requestId, q.body));
      const forward = async (body: Uint8Array, requestId: string) => {
        const res = await fetch(`${worker.url}/generate`, {
          method: "POST",
          headers: { "x-request-id": requestId },
          body: body as Uint8Array<ArrayBuffer>,
        });
        await res.body?.cancel();
      };
      const front = serveFront(
        {
          hostname: "127.0.0.1",
          port: 0,
          maxBody: 1 << 20,
          log: silentLogger,
          clock: systemClock,
          idleTimeoutMs: 2000,
        },
        async (inb) => await plant(inb, forward),
      );
      let stopped: Promise<void> | null = null;
      // Hung handlers are released first: the front's shutdown waits for them.
      const shutdown = () => stopped ??= (release(), front.shutdown());
      target = make(front.addr.port, shutdown, async () => {
        front.close();
        await shutdown();
        await worker.close();
      });
      return Promise.resolve(target);
    },
  };
}

function framing(plant: Plant, release?: () => void) {
  const family = planted(
    plant,
    (port, shutdown, close) => new FramingTarget({ port, shutdown, close, hangMs: 300 }),
    release,
  );
  return { ...family, name: "http" };
}

function json(plant: Plant) {
  const family = planted(
    plant,
    (port, _shutdown, close) => new JsonTarget(`http://127.0.0.1:${port}`, close),
  );
  return { ...family, name: "json" };
}

Deno.test("fuzz oracles: a front without defects passes the framing oracles", async () => {
  const r = await runFamily(framing(honest), { seed: 3, inputs: 150 });
  assert.deepEqual(r.violations, []);
  assert.equal(r.inputs, 150);
});

Deno.test("fuzz oracles: a request forwarded twice but answered once is smuggling", async () => {
  const r = await runFamily(
    framing(async (inb, forward) => {
      const res = await honest(inb, forward);
      if (inb.method === "POST") {
        await forward(enc.encode("{}"), `${inb.headers.get("x-request-id")}-again`);
      }
      return res;
    }),
    { seed: 3, inputs: 60, maxViolations: 1 },
  );
  assert.ok(r.violations.length > 0, "smuggling went unseen");
  assert.match(r.violations[0].detail, /-again/);
});

Deno.test("fuzz oracles: a 500 to client input is a violation; 501 and 505 are not", async () => {
  const r = await runFamily(framing(() => Promise.resolve(reply(500, "x"))), {
    seed: 3,
    inputs: 30,
    maxViolations: 1,
  });
  assert.match(r.violations[0]?.detail ?? "", /answered 500/);
  const ok = await runFamily(
    framing((inb) => Promise.resolve(reply(inb.path === "/health" ? 200 : 501, "x"))),
    { seed: 3, inputs: 30 },
  );
  assert.deepEqual(ok.violations, []);
});

Deno.test("fuzz oracles: a connection left open after the client half-closed is a hang", async () => {
  const hung = new Set<() => void>();
  const hang: Plant = (inb) =>
    inb.path === "/health"
      ? Promise.resolve(reply(200, "x"))
      : new Promise<Reply>((resolve) => hung.add(() => resolve(reply(200, "x"))));
  const r = await runFamily(framing(hang, () => hung.forEach((release) => release())), {
    seed: 3,
    inputs: 8,
    maxViolations: 1,
  });
  assert.match(r.violations[0]?.detail ?? "", /no close 300 ms after the client half-closed/);
});

Deno.test("fuzz oracles: a body changed on its way to the worker, and a 502, are violations", async () => {
  const changed = await runFamily(
    json(async (inb, forward) => {
      const id = inb.headers.get("x-request-id") ?? "";
      await forward(enc.encode(`${new TextDecoder().decode(await inb.bytes(1 << 20))} `), id);
      return reply(200, id);
    }),
    { seed: 3, inputs: 20, maxViolations: 1 },
  );
  assert.match(changed.violations[0]?.detail ?? "", /the worker got another body/);
  const bad = await runFamily(json(() => Promise.resolve(reply(502, "x"))), {
    seed: 3,
    inputs: 5,
    maxViolations: 1,
  });
  assert.match(bad.violations[0]?.detail ?? "", /answered 502/);
});

Deno.test("fuzz driver: a seed replays the same inputs; `only` replays one of them", async () => {
  const seen: string[][] = [];
  const family = (log: string[]): FuzzFamily => ({
    name: "echo",
    concurrency: 3,
    start: () =>
      Promise.resolve({
        run(index, r) {
          const v = `${index}:${r().toFixed(6)}`;
          log.push(v);
          return Promise.resolve({
            labels: [String(index % 3)],
            violations: index === 7 ? ["planted"] : [],
            input: v,
          });
        },
        finish: () => Promise.resolve([]),
        close: () => Promise.resolve(),
      }),
  });
  for (let i = 0; i < 2; i++) {
    seen.push([]);
    const r = await runFamily(family(seen[i]), { seed: 5, inputs: 12 });
    assert.equal(r.inputs, 12);
    assert.deepEqual(r.violations.map((v) => v.index), [7]);
    assert.deepEqual([...r.histogram.entries()].sort(), [["0", 4], ["1", 4], ["2", 4]]);
  }
  assert.deepEqual(seen[0].sort(), seen[1].sort());
  const one: string[] = [];
  await runFamily(family(one), { seed: 5, only: [7] });
  assert.deepEqual(one, seen[0].filter((v) => v.startsWith("7:")));
  const other: string[] = [];
  await runFamily(family(other), { seed: 6, only: [7] });
  assert.notDeepEqual(other, one, "another seed draws other inputs");
});
