/**
 * `controlByScheme`: every call of a `grpc://` or `grpcs://` worker goes to the gRPC control,
 * every other to the HTTP one, with the worker, the endpoint and the call as given, and the
 * chosen control's answer comes back unchanged.
 */

import assert from "node:assert/strict";
import type { LoadSnapshot } from "../../lib/core/types.ts";
import {
  controlByScheme,
  type ControlCall,
  type ControlTarget,
  type WorkerControl,
} from "../../lib/workers/control.ts";

type Seen = { method: string; args: unknown[] };

/** A control that records each call and answers with its own `name` in the text. */
function recording(name: string, seen: Seen[]): WorkerControl {
  const reply = (method: string) => (...args: unknown[]) => {
    seen.push({ method, args });
    return Promise.resolve({ status: 200, text: `${name} ${method}` });
  };
  return {
    probe: reply("probe"),
    healthGenerate: reply("healthGenerate"),
    serverInfo: reply("serverInfo"),
    modelInfo: reply("modelInfo"),
    flushCache: reply("flushCache"),
    models: (...args) => (seen.push({ method: "models", args }), Promise.resolve([name])),
    kvCapacity: (...args) => (seen.push({ method: "kvCapacity", args }), Promise.resolve(7)),
    load: (...args) => {
      seen.push({ method: "load", args });
      return Promise.resolve({ source: name } as unknown as LoadSnapshot);
    },
  };
}

/** Calls every method of `c` on `w`, returning what each answered. */
async function everyCall(c: WorkerControl, w: ControlTarget, call: ControlCall) {
  return [
    (await c.probe(w, "/healthz", call)).text,
    (await c.healthGenerate(w, call)).text,
    (await c.serverInfo(w, call)).text,
    (await c.modelInfo(w, call)).text,
    (await c.flushCache(w, call)).text,
    await c.models(w, call),
    await c.kvCapacity(w, call),
    (await c.load(w, { ...call, absent: new Set(["metrics"]) }))?.source,
  ];
}

const METHODS = [
  "probe",
  "healthGenerate",
  "serverInfo",
  "modelInfo",
  "flushCache",
  "models",
  "kvCapacity",
  "load",
];

Deno.test("controlByScheme: grpc:// and grpcs:// workers to the gRPC control, others to HTTP", async () => {
  const cases: [string, "http" | "grpc"][] = [
    ["http://10.0.0.1:8000", "http"],
    ["https://w.example", "http"],
    ["grpc://10.0.0.1:30000", "grpc"],
    ["grpcs://w.example:443", "grpc"],
  ];
  for (const [url, side] of cases) {
    const seen = { http: [] as Seen[], grpc: [] as Seen[] };
    const c = controlByScheme(recording("http", seen.http), recording("grpc", seen.grpc));
    const w = { url, apiKey: "k" };
    const got = await everyCall(c, w, { timeoutMs: 1234 });
    assert.deepEqual(got, [
      `${side} probe`,
      `${side} healthGenerate`,
      `${side} serverInfo`,
      `${side} modelInfo`,
      `${side} flushCache`,
      [side],
      7,
      side,
    ], url);
    const other = side === "http" ? "grpc" : "http";
    assert.deepEqual(seen[other], [], `${url}: nothing to the ${other} control`);
    assert.deepEqual(seen[side].map((s) => s.method), METHODS, url);
    for (const s of seen[side]) assert.equal(s.args[0], w, `${url} ${s.method}: the same worker`);
    assert.deepEqual(seen[side][0].args.slice(1), ["/healthz", { timeoutMs: 1234 }]);
    assert.deepEqual(seen[side][7].args[1], { timeoutMs: 1234, absent: new Set(["metrics"]) });
  }
});
