/**
 * Wire form of tree sync: deltas, requests and pages round-trip (front-coded paths included,
 * surrogate pairs never split), corrections in their order among a group's deltas and on pages,
 * and malformed input is refused with a reason, never thrown.
 */

import assert from "node:assert/strict";
import * as codec from "../../../lib/mesh/adapters/tree_codec.ts";
import type { TreeCorrection, TreeEntry } from "../../../lib/policies/replicas.ts";

Deno.test("tree codec: delta groups round-trip with their stream's round; workers are interned", () => {
  const groups: codec.DeltaGroup[] = [{
    role: "main",
    model: "m",
    kind: "string",
    deltas: [
      { hash: 2 ** 53 - 1, worker: "http://10.0.0.1:8000" },
      { hash: 5, worker: "http://10.0.0.2:8000" },
      { hash: 7, worker: "http://10.0.0.1:8000" },
    ],
    corrections: [],
  }, { role: "decode", model: "", kind: "token", deltas: [], corrections: [] }];
  const bytes = codec.withRound(codec.encodeDeltas(groups), 42);
  assert.deepEqual(codec.decodeDeltas(bytes), { ok: true, value: { round: 42, groups } });
  assert.ok(bytes.byteLength < 90, `${bytes.byteLength} B`);
});

Deno.test("tree codec: pages round-trip; paths are front-coded against the previous one", () => {
  const system = "You are the assistant of tenant 3. 😀 ".repeat(40);
  const entries: TreeEntry[] = [
    { path: "", tenants: ["a"] },
    { path: system + "q1", tenants: ["a"] },
    { path: system + "q2 longer", tenants: ["b", "a"] },
    { path: system.slice(0, 37) + "other", tenants: ["b"] }, // cut inside the emoji's pair
    { hash: 99, tenants: ["c"] },
    { path: system + "q3", tenants: ["c"] },
  ];
  const page = {
    session: "s",
    role: "prefill" as const,
    model: "m",
    kind: "string" as const,
    index: 3,
    entries,
    nextCursor: 10,
    last: true,
    corrections: [],
  };
  const bytes = codec.encodePage(page);
  assert.deepEqual(codec.decodePage(bytes), { ok: true, value: page });
  // The system prompt travels twice (the fourth path cuts it short), not four times.
  const utf8 = new TextEncoder().encode(system).byteLength;
  assert.ok(bytes.byteLength < utf8 * 2 + 200, `${bytes.byteLength} B`);
  const tokens: TreeEntry[] = [
    { tokens: [1, 2, 3, 4], tenants: ["a"] },
    { tokens: [1, 2, 3, 5, 6], tenants: ["a"] },
    { tokens: [], tenants: ["b"] },
  ];
  const t = { ...page, kind: "token" as const, entries: tokens };
  assert.deepEqual(codec.decodePage(codec.encodePage(t)), { ok: true, value: t });
});

Deno.test("tree codec: requests round-trip; malformed bytes are refused with a reason", () => {
  const r = { session: "x", role: "main" as const, model: "", kind: "string" as const, cursor: 7 };
  assert.deepEqual(codec.decodeRequest(codec.encodeRequest(r)), { ok: true, value: r });
  for (const bad of [new Uint8Array([1, 2, 3, 4]), new Uint8Array([0x0a, 0xff])]) {
    assert.equal(codec.decodeDeltas(bad).ok, false);
    assert.equal(codec.decodePage(bad).ok, false);
    assert.equal(codec.decodeRequest(bad).ok, false);
  }
});

Deno.test("tree codec: a page that expands past its cap is malformed; a declined head is not expanded", () => {
  const long = "y".repeat(1000);
  const entries = Array.from({ length: 50 }, (_, i) => ({ path: long + i, tenants: ["a"] }));
  const page = {
    session: "s",
    role: "main" as const,
    model: "m",
    kind: "string" as const,
    index: 0,
    entries,
    nextCursor: 50,
    last: true,
    corrections: [],
  };
  const bytes = codec.encodePage(page);
  assert.ok(bytes.byteLength < 2000, "front-coded: small on the wire");
  const r = codec.decodePage(bytes, () => true, 10_000);
  assert.equal(r.ok, false);
  assert.match(r.ok ? "" : r.detail, /expands past 10000/);
  assert.deepEqual(codec.decodePage(bytes, () => false, 10), { ok: true, value: null });
});

const correction = (over: Partial<TreeCorrection> = {}): TreeCorrection => ({
  id: "r0/k3x/1",
  worker: "http://10.0.0.1:8000",
  branch: "system prompt 😀",
  kept: 14,
  hashes: [2 ** 53 - 1, 12345],
  ageMs: 1500,
  ...over,
});

Deno.test("tree codec: corrections ride delta groups in their place among the deltas, and repair pages", () => {
  const groups: codec.DeltaGroup[] = [{
    role: "main",
    model: "m",
    kind: "string",
    deltas: [{ hash: 5, worker: "http://10.0.0.2:8000" }, {
      hash: 6,
      worker: "http://10.0.0.1:8000",
    }],
    corrections: [
      { after: 1, correction: correction() },
      { after: 2, correction: correction({ id: "r1/x/9", branch: null, kept: 0, hashes: [3] }) },
    ],
  }, {
    role: "decode",
    model: "m",
    kind: "token",
    deltas: [],
    corrections: [{ after: 0, correction: correction({ branch: [1, 2, 3, 4], kept: 2 }) }],
  }];
  const bytes = codec.withRound(codec.encodeDeltas(groups), 3);
  assert.deepEqual(codec.decodeDeltas(bytes), { ok: true, value: { round: 3, groups } });
  const page: codec.RepairPage = {
    session: "s",
    role: "main",
    model: "m",
    kind: "token",
    index: 0,
    entries: [{ tokens: [1, 2, 3, 4, 5, 6], tenants: ["http://10.0.0.1:8000"] }],
    nextCursor: 1,
    last: true,
    corrections: [correction({ branch: [1, 2, 3, 4], kept: 2 })],
  };
  assert.deepEqual(codec.decodePage(codec.encodePage(page)), { ok: true, value: page });
});

Deno.test("tree codec: a correction with a branch of the other tree kind or an unknown worker is malformed", () => {
  const group = (c: TreeCorrection): codec.DeltaGroup => ({
    role: "main",
    model: "m",
    kind: "token",
    deltas: [],
    corrections: [{ after: 0, correction: c }],
  });
  const text = codec.decodeDeltas(codec.encodeDeltas([group(correction())]));
  assert.equal(text.ok, false);
  assert.match(text.ok ? "" : text.detail, /other tree kind/);
  // A page whose correction names a worker index past its list.
  const page = codec.encodePage({
    session: "s",
    role: "main",
    model: "m",
    kind: "string",
    index: 0,
    entries: [],
    nextCursor: 0,
    last: true,
    corrections: [correction()],
  });
  const bad = new Uint8Array([...page, 0x52, 0x04, 0x0a, 0x00, 0x10, 0x07]); // corrections {id "", worker_index 7}
  const r = codec.decodePage(bad);
  assert.equal(r.ok, false);
  assert.match(r.ok ? "" : r.detail, /worker index 7 out of range/);
  // Corrections count towards a page's unit cap.
  const long = codec.encodePage({
    session: "s",
    role: "main",
    model: "m",
    kind: "string",
    index: 0,
    entries: [],
    nextCursor: 0,
    last: true,
    corrections: [correction({ branch: "z".repeat(100) })],
  });
  assert.equal(codec.decodePage(long, () => true, 50).ok, false);
});
