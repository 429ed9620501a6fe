import assert from "node:assert/strict";
import type { WorkerType } from "../../lib/core/types.ts";
import { CircuitBreaker } from "../../lib/workers/circuit_breaker.ts";
import {
  DuplicateWorkerError,
  type RegistryEvent,
  WorkerRegistry,
} from "../../lib/workers/registry.ts";
import { Worker } from "../../lib/workers/worker.ts";

function setup() {
  const reg = new WorkerRegistry();
  const events: string[] = [];
  reg.subscribe((e: RegistryEvent) =>
    events.push(
      e.kind === "status" ? `status ${e.worker.id} ${e.from}->${e.to}` : `${e.kind} ${e.worker.id}`,
    )
  );
  let n = 0;
  const make = (models: string[] | null, type: WorkerType = "regular", url?: string) =>
    new Worker(
      `w${++n}`,
      { url: url ?? `http://w${n}:8000`, models: models ?? undefined, workerType: type },
      new CircuitBreaker({
        failureThreshold: 3,
        successThreshold: 1,
        openMs: 1000,
        windowMs: 1000,
        disabled: false,
      }),
      "pending",
      0,
      reg.statusChanged,
    );
  return { reg, events, make };
}

const ids = (ws: readonly Worker[]) => ws.map((w) => w.id);

Deno.test("registry: add, get, byUrl, remove", () => {
  const { reg, make } = setup();
  const a = make(["m"]);
  const b = make(["m"]);
  reg.add(a);
  reg.add(b);
  assert.equal(reg.size, 2);
  assert.equal(reg.get("w1"), a);
  assert.equal(reg.byUrl("http://w2:8000"), b);
  assert.deepEqual(ids(reg.all()), ["w1", "w2"]);
  assert.equal(reg.remove("w1"), true);
  assert.equal(reg.remove("w1"), false);
  assert.equal(reg.get("w1"), undefined);
  assert.equal(reg.byUrl("http://w1:8000"), undefined);
  assert.deepEqual(ids(reg.all()), ["w2"]);
  assert.equal(reg.size, 1);
});

Deno.test("registry: a URL registered twice throws DuplicateWorkerError naming the first", () => {
  const { reg, make, events } = setup();
  const first = make(["m"], "regular", "http://same:1");
  reg.add(first);
  const second = make(["m"], "regular", "http://same:1");
  assert.throws(() => reg.add(second), (e) => {
    assert.ok(e instanceof DuplicateWorkerError);
    assert.equal(e.existing, first);
    assert.match(e.message, /http:\/\/same:1/);
    return true;
  });
  assert.equal(reg.size, 1);
  assert.deepEqual(events, ["added w1"]);
  // Once removed, the URL can be registered again.
  reg.remove(first.id);
  reg.add(second);
  assert.equal(reg.byUrl("http://same:1"), second);
});

Deno.test("registry: forModel picks workers by model and type, wildcards serve any model", () => {
  const { reg, make } = setup();
  reg.add(make(["llama"])); // w1
  reg.add(make(["qwen"])); // w2
  reg.add(make(null)); // w3: models unknown
  reg.add(make(["llama", "qwen"])); // w4
  reg.add(make(["llama"], "prefill")); // w5
  reg.add(make(null, "decode")); // w6
  const table: [string | null, WorkerType | undefined, string[]][] = [
    ["llama", undefined, ["w1", "w3", "w4"]],
    ["qwen", "regular", ["w2", "w3", "w4"]],
    ["mistral", undefined, ["w3"]],
    [null, undefined, ["w1", "w2", "w3", "w4"]],
    ["llama", "prefill", ["w5"]],
    ["qwen", "prefill", []],
    ["qwen", "decode", ["w6"]],
  ];
  for (const [model, type, want] of table) {
    assert.deepEqual(ids(reg.forModel(model, type)), want, `${model} ${type}`);
  }
});

Deno.test("registry: forModel sees adds, removes and model changes", () => {
  const { reg, make } = setup();
  const a = make(["llama"]);
  reg.add(a);
  assert.deepEqual(ids(reg.forModel("llama")), ["w1"]);
  assert.deepEqual(ids(reg.forModel("qwen")), []);

  const b = make(["qwen"]);
  reg.add(b);
  assert.deepEqual(ids(reg.forModel("qwen")), ["w2"]);
  assert.deepEqual(ids(reg.all()), ["w1", "w2"]);

  reg.setModels(a, ["qwen"]);
  assert.deepEqual(ids(reg.forModel("llama")), []);
  assert.deepEqual(ids(reg.forModel("qwen")), ["w1", "w2"]);

  reg.setModels(b, []); // nothing discovered: serves any model
  assert.equal(b.models, null);
  assert.deepEqual(ids(reg.forModel("llama")), ["w2"]);

  reg.remove("w2");
  assert.deepEqual(ids(reg.forModel("llama")), []);
  assert.deepEqual(ids(reg.forModel("qwen")), ["w1"]);
});

Deno.test("registry: status changes do not change forModel (eligibility is decided later)", () => {
  const { reg, make } = setup();
  const a = make(["m"]);
  reg.add(a);
  a.setStatus("ready");
  a.setStatus("not_ready");
  assert.deepEqual(ids(reg.forModel("m")), ["w1"]);
});

Deno.test("registry: models() lists each model once, in first-seen order", () => {
  const { reg, make } = setup();
  reg.add(make(["b", "a"]));
  reg.add(make(null));
  reg.add(make(["a", "c"]));
  reg.add(make(["b"], "prefill"));
  assert.deepEqual(reg.models(), ["b", "a", "c"]);
  reg.remove("w1");
  assert.deepEqual(reg.models(), ["a", "c", "b"]);
});

Deno.test("registry: subscribers hear adds, removes, model and status changes", () => {
  const { reg, make, events } = setup();
  const a = make(["m"]);
  reg.add(a);
  a.setStatus("ready");
  a.setStatus("ready"); // no change, no event
  reg.setModels(a, ["m2"]);
  a.setStatus("draining");
  reg.remove(a.id);
  reg.remove(a.id); // already gone, no event
  assert.deepEqual(events, [
    "added w1",
    "status w1 pending->ready",
    "models w1",
    "status w1 ready->draining",
    "removed w1",
  ]);
});

Deno.test("registry: unsubscribe stops the events", () => {
  const { reg, make } = setup();
  const heard: string[] = [];
  const off = reg.subscribe((e) => heard.push(e.kind));
  reg.add(make(["m"]));
  off();
  reg.add(make(["m"]));
  assert.deepEqual(heard, ["added"]);
});
