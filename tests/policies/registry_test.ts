/**
 * The model → policy map: a worker's `policy` label gives its model its own instance, built
 * with the operator's tuning; later labels are ignored; the mapping ends with the model's last
 * worker; unknown labels fall back to the default; removals reach every instance.
 */

import assert from "node:assert/strict";
import type { PolicyName } from "../../lib/config/config.ts";
import { silentLogger } from "../../lib/core/log.ts";
import type { Policy } from "../../lib/policies/policy.ts";
import { normalise, PolicyRegistry, type WorkerEvent } from "../../lib/policies/registry.ts";
import { NEEDS_NOTHING } from "../../lib/policies/policy.ts";

function fake(name: PolicyName, removed: string[]): Policy {
  return {
    name,
    needs: NEEDS_NOTHING,
    select: (c) => c[0] ?? null,
    onWorkerRemoved: (id) => removed.push(`${name}:${id}`),
  };
}

function registry() {
  const removed: string[] = [];
  const built: string[] = [];
  const reg = new PolicyRegistry(fake("cache_aware", removed), (name) => {
    if (name === "bucket") throw new Error("not in this build");
    built.push(name);
    return fake(name, removed);
  }, silentLogger);
  return { reg, removed, built };
}

Deno.test("policy registry: a labelled model gets its own policy; others use the default", () => {
  const { reg, built } = registry();
  reg.workerModels("w1", ["llama"], "round_robin");
  reg.workerModels("w2", ["qwen"], undefined);
  assert.equal(reg.forModel("llama").name, "round_robin");
  assert.equal(reg.forModel("qwen").name, "cache_aware");
  assert.equal(reg.forModel(null).name, "cache_aware");
  assert.equal(reg.forModel("other").name, "cache_aware");
  assert.deepEqual(built, ["round_robin"]);
});

Deno.test("policy registry: the first worker decides; the mapping ends with the last worker", () => {
  const { reg, built } = registry();
  reg.workerModels("w1", ["llama"], "RoundRobin");
  reg.workerModels("w2", ["llama"], "random"); // ignored: llama is decided
  assert.equal(reg.forModel("llama").name, "round_robin");
  reg.workerRemoved("w1");
  assert.equal(reg.forModel("llama").name, "round_robin", "w2 still serves llama");
  reg.workerRemoved("w2");
  assert.equal(reg.forModel("llama").name, "cache_aware");
  reg.workerModels("w3", ["llama"], "random");
  assert.equal(reg.forModel("llama").name, "random", "a new first worker decides again");
  assert.deepEqual(built, ["round_robin", "random"]);
});

Deno.test("policy registry: unknown or unbuildable labels fall back to the default", () => {
  const { reg } = registry();
  reg.workerModels("w1", ["a"], "fastest");
  reg.workerModels("w2", ["b"], "bucket");
  reg.workerModels("w3", ["c"], "cache-aware"); // the default's own name: shares the default
  assert.equal(reg.forModel("a").name, "cache_aware");
  assert.equal(reg.forModel("b").name, "cache_aware");
  assert.equal(reg.all().length, 1);
});

Deno.test("policy registry: discovery moving a worker between models, and removals reach every policy", () => {
  const { reg, removed } = registry();
  reg.workerModels("w1", null, "manual"); // models unknown yet: nothing decided
  assert.equal(reg.forModel("m").name, "cache_aware");
  reg.workerModels("w1", ["m"], "manual");
  assert.equal(reg.forModel("m").name, "manual");
  reg.workerModels("w1", ["n"], "manual");
  assert.equal(reg.forModel("m").name, "cache_aware", "m lost its only worker");
  assert.equal(reg.forModel("n").name, "manual");
  reg.workerRemoved("w1");
  assert.deepEqual(removed.sort(), ["cache_aware:w1", "manual:w1"]);
});

Deno.test("policy registry: labels are matched ignoring case, underscores and dashes", () => {
  assert.equal(normalise("PowerOfTwo"), "power_of_two");
  assert.equal(normalise("prefix-hash"), "prefix_hash");
  assert.equal(normalise("nope"), null);
  assert.equal(normalise(undefined), null);
});

Deno.test("policy registry: following the worker events, models decide and removals reach PD's legs too", () => {
  const { reg, removed } = registry();
  const listeners: ((e: WorkerEvent) => void)[] = [];
  const prefill = fake("round_robin", removed);
  const off = reg.follow((l) => {
    listeners.push(l);
    return () => listeners.splice(listeners.indexOf(l), 1);
  }, [prefill]);
  const emit = (kind: string, id: string, models: string[] | null, policy?: string) =>
    listeners.forEach((l) => l({ kind, worker: { id, models, labels: { policy } } }));
  emit("added", "w1", null, "manual");
  assert.equal(reg.forModel("m").name, "cache_aware");
  emit("models", "w1", ["m"], "manual");
  assert.equal(reg.forModel("m").name, "manual");
  emit("status", "w1", ["m"]); // not read
  emit("removed", "w1", ["m"]);
  assert.equal(reg.forModel("m").name, "cache_aware", "m lost its only worker");
  assert.deepEqual(removed.sort(), ["cache_aware:w1", "manual:w1", "round_robin:w1"]);
  off();
  assert.equal(listeners.length, 0);
});
