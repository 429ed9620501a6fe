/**
 * What corrections leave behind: the branch a correction names (surrogate pairs whole, token
 * cuts on pages), the hashes of forgotten paths past their cut, tombstones that trim repaired
 * paths and refuse repaired placements until they expire, and the stamp log's answer to "what was
 * stamped before then".
 */

import assert from "node:assert/strict";
import {
  branchOf,
  CORRECTION_TTL_MS,
  MAX_TOMBSTONE_UNITS,
  MAX_TOMBSTONES,
  staleHashes,
  StampLog,
  Tombstones,
} from "../../../lib/policies/cache_aware/corrections.ts";
import { pathHashes } from "../../../lib/policies/cache_aware/shared_paths.ts";
import type { TreeCorrection } from "../../../lib/policies/replicas.ts";

const correction = (over: Partial<TreeCorrection> = {}): TreeCorrection => ({
  id: "a/1",
  worker: "http://w1:8000",
  branch: "system prompt: x",
  kept: 15,
  hashes: [],
  ageMs: 0,
  ...over,
});

Deno.test("branchOf: text one character past the kept depth (a surrogate pair whole), tokens one page past the cut", () => {
  assert.deepEqual(branchOf("abcdef", 3, 64), { branch: "abcd", kept: 3 });
  assert.deepEqual(branchOf("ab😀cd", 2, 64), { branch: "ab😀", kept: 2 });
  const ids = Array.from({ length: 40 }, (_, i) => i);
  const { branch, kept } = branchOf(ids, 21, 8);
  assert.equal(kept, 16);
  assert.deepEqual(branch, ids.slice(0, 24));
});

Deno.test("staleHashes: each forgotten path's block hashes past the cut, once each", () => {
  const into = new Set<number>();
  const visit = staleHashes(4, into);
  visit("abcdefghijkl", 5); // blocks end at 4, 8, 12: the first is held
  visit("abcdefghXYZW", 8); // shares the first two blocks, forgotten from 8
  const a = pathHashes("abcdefghijkl", 4);
  const b = pathHashes("abcdefghXYZW", 4);
  assert.deepEqual(new Set(into), new Set([a[1], a[2], b[2]]));
});

Deno.test("Tombstones: a repaired path through the branch is cut to the kept depth; a dropped placement is refused; other workers and paths pass", () => {
  const t = new Tombstones();
  t.record(correction({ hashes: [7] }), [7, 8], 1000);
  assert.ok(t.has("a/1"));
  assert.equal(t.admitted("system prompt: xyz", "http://w1:8000", 2000), 15);
  assert.equal(t.admitted("system prompt: yz", "http://w1:8000", 2000), 17, "another branch");
  assert.equal(t.admitted("system prompt: xyz", "http://w2:8000", 2000), 18, "another worker");
  assert.equal(t.admitted("system", "http://w1:8000", 2000), 6, "short of the kept depth");
  assert.equal(t.admits(8, "http://w1:8000", 2000), false, "the receiver's own forgotten path");
  assert.equal(t.admits(9, "http://w1:8000", 2000), true);
  assert.equal(t.admits(7, "http://w2:8000", 2000), true);
  const [live] = t.live(3000);
  assert.deepEqual(live, { ...correction({ hashes: [7, 8] }), ageMs: 2000 });
  // Expired: repairs may bring the branch back (the peers applied the correction long ago).
  const later = 1000 + CORRECTION_TTL_MS;
  assert.equal(t.admitted("system prompt: xyz", "http://w1:8000", later), 18);
  assert.equal(t.admits(7, "http://w1:8000", later), true);
  assert.equal(t.has("a/1"), false);
  assert.deepEqual(t.live(later), []);
});

Deno.test("Tombstones: a token branch cuts token paths; the oldest go past the bound", () => {
  const t = new Tombstones();
  t.record(correction({ branch: [1, 2, 3, 4], kept: 2 }), [], 0);
  assert.equal(t.admitted([1, 2, 3, 4, 5, 6], "http://w1:8000", 1), 2);
  assert.equal(t.admitted([1, 2, 9, 9], "http://w1:8000", 1), 4);
  assert.equal(t.admitted("text", "http://w1:8000", 1), 4, "a text path is not a token branch");
  for (let i = 0; i < MAX_TOMBSTONES; i++) t.record(correction({ id: `b/${i}` }), [], 2);
  assert.equal(t.has("a/1"), false);
  assert.equal(t.admitted([1, 2, 3, 4, 5, 6], "http://w1:8000", 3), 6);
  assert.equal(t.live(3).length, MAX_TOMBSTONES);
  // Long branches go by their size too.
  const long = new Tombstones();
  const branch = "b".repeat(MAX_TOMBSTONE_UNITS / 4);
  for (let i = 0; i < 5; i++) long.record(correction({ id: `l/${i}`, branch }), [1], 0);
  assert.deepEqual(long.live(0).map((c) => c.id), ["l/2", "l/3", "l/4"]);
});

Deno.test("StampLog: the stamp below which everything was stamped by a given time; nothing before the log", () => {
  const log = new StampLog();
  assert.equal(log.before("string", 1e9), 0);
  log.record(1000, 5, 0);
  log.record(1000, 7, 1); // more inserts at the same time
  log.record(3000, 9, 1);
  log.record(3100, 12, 2);
  log.record(3200, 13, 2); // 3100 was within 500 ms of 3000: this one replaces it
  assert.equal(log.before("string", 999), 0);
  assert.equal(log.before("string", 1000), 8);
  assert.equal(log.before("token", 2999), 2);
  assert.equal(log.before("string", 3150), 10, "the 3100 sample was replaced: 3000's answers");
  assert.equal(log.before("string", 3200), 14);
  assert.equal(log.before("token", 1e9), 3);
});
