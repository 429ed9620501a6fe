/**
 * `GrpcWorkers`' clients: one per worker for generations and control calls, and a separate one
 * (its own channel, so its own connection) for the worker's KV-event stream; a removed worker's
 * clients are closed, and closing closes every one.
 */

import assert from "node:assert/strict";
import type { SglangClient } from "../../lib/grpc/sglang_client.ts";
import { GrpcWorkers } from "../../lib/proxy/grpc/workers.ts";

Deno.test("grpc clients: the KV-event stream gets its own channel; forget and close end both", async () => {
  const made: { url: string; closed: boolean }[] = [];
  const make = (url: string) => {
    const c = { url, closed: false, close: () => Promise.resolve(void (c.closed = true)) };
    made.push(c);
    return c as unknown as SglangClient;
  };
  const g = new GrpcWorkers(make);
  const a = "grpc://127.0.0.1:1";
  const b = "grpc://127.0.0.1:2";
  assert.equal(g.client(a), g.client(a), "one generation channel per worker");
  assert.equal(g.eventsClient(a), g.eventsClient(a), "one event channel per worker");
  assert.notEqual(g.eventsClient(a), g.client(a), "the event stream does not share it");
  g.client(b);
  g.eventsClient(b);
  assert.equal(made.length, 4);
  g.forget(a);
  assert.deepEqual(made.map((c) => c.closed), [true, true, false, false]);
  assert.notEqual(g.client(a), made[0] as unknown, "a worker added again gets a new channel");
  await g.close();
  assert.ok(made.every((c) => c.closed));
});
