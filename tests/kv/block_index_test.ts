/**
 * The KV-event block index as scenario tables: chains from the start and under a parent, two
 * workers at different depths, removals and clears, the refusals a caller must resynchronise
 * after (unknown parent, another block size), and pruning by age and by capacity.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { BlockIndex } from "../../lib/kv/block_index.ts";
import type { StoredBlock } from "../../lib/kv/events.ts";

/** Blocks of `size` tokens over `tokens`, with engine hashes `prefix0`, `prefix1`, ... */
function blocks(tokens: number[], size: number, prefix: string, from = 0): StoredBlock[] {
  const out: StoredBlock[] = [];
  for (let at = from; at + size <= tokens.length; at += size) {
    out.push({ hash: `${prefix}${at / size}`, tokenIds: tokens.slice(at, at + size) });
  }
  return out;
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

Deno.test("block index: a chain from the start matches whole leading blocks per worker", () => {
  const idx = new BlockIndex({ clock: new FakeClock() });
  const prompt = range(100, 40); // 10 blocks of 4, the last partial for a 42-token request
  assert.equal(idx.store("w1", null, blocks(prompt, 4, "a")), null);
  assert.equal(idx.store("w2", null, blocks(prompt.slice(0, 12), 4, "b")), null);
  assert.equal(idx.blockSize, 4);
  assert.deepEqual(idx.match([...prompt, 7, 8]), new Map([["w1", 40], ["w2", 12]]));
  assert.deepEqual(idx.match(prompt.slice(0, 10)), new Map([["w1", 8], ["w2", 8]]));
  assert.deepEqual(idx.match([1, 2, 3, 4]), new Map(), "another prefix");
  assert.deepEqual(idx.match([100, 101, 102]), new Map(), "shorter than a block");
  const diverged = [...prompt.slice(0, 8), 0, 0, 0, 0, ...prompt.slice(12)];
  assert.deepEqual(idx.match(diverged), new Map([["w1", 8], ["w2", 8]]), "stops where it differs");
});

Deno.test("block index: blocks stored under a parent extend its chain; an unknown parent is refused", () => {
  const idx = new BlockIndex({ clock: new FakeClock() });
  const prompt = range(0, 24);
  idx.store("w1", null, blocks(prompt.slice(0, 8), 4, "h"));
  // The engine names the parent by its own hash; the extension continues the same prefix.
  assert.equal(idx.store("w1", "h1", blocks(prompt, 4, "h", 8)), null);
  assert.deepEqual(idx.match(prompt), new Map([["w1", 24]]));
  assert.equal(idx.store("w1", "nope", blocks(prompt, 4, "x", 8)), "unknown_parent");
  assert.equal(idx.store("w2", "h1", blocks(prompt, 4, "x", 8)), "unknown_parent", "w1's hash");
  assert.equal(idx.store("w1", null, [{ hash: "z", tokenIds: [1, 2, 3] }]), "block_size");
  assert.deepEqual(idx.match(prompt), new Map([["w1", 24]]), "refusals change nothing");
});

Deno.test("block index: removals cut a worker's chain where they fall; a clear empties it", () => {
  const idx = new BlockIndex({ clock: new FakeClock() });
  const prompt = range(0, 16);
  idx.store("w1", null, blocks(prompt, 4, "a"));
  idx.store("w2", null, blocks(prompt, 4, "b"));
  idx.remove("w1", ["a2", "a3", "unknown"]);
  assert.deepEqual(idx.match(prompt), new Map([["w1", 8], ["w2", 16]]));
  assert.equal(idx.blocksOf("w1"), 2);
  idx.remove("w1", ["a0"]); // the first block gone: nothing from the start
  assert.deepEqual(idx.match(prompt), new Map([["w2", 16]]));
  idx.clearWorker("w2");
  assert.deepEqual(idx.match(prompt), new Map());
  assert.equal(idx.blocksOf("w2"), 0);
  idx.clearWorker("w1");
  assert.ok(idx.empty, "no key left behind");
  // A block stored again after its removal counts again.
  idx.store("w1", null, blocks(prompt, 4, "a"));
  assert.deepEqual(idx.match(prompt), new Map([["w1", 16]]));
});

Deno.test("block index: pruning drops keys past the TTL and the oldest past capacity", () => {
  const clock = new FakeClock();
  const idx = new BlockIndex({ clock, ttlMs: 60_000, maxEntries: 10 });
  const old = range(0, 40); // 10 blocks
  idx.store("w1", null, blocks(old, 4, "o"));
  clock.advance(30_000);
  const fresh = range(1000, 20); // 5 blocks
  idx.store("w1", null, blocks(fresh, 4, "f"));
  // 15 keys > 10: the oldest go down to 9, the fresh ones (touched < 2 s ago) are spared.
  assert.equal(idx.prune(), 6);
  assert.equal(idx.size, 9);
  assert.deepEqual(idx.match(fresh), new Map([["w1", 20]]));
  clock.advance(45_000); // old keys now 75 s untouched, fresh ones 45 s (and just read)
  assert.equal(idx.prune(), 4);
  assert.deepEqual(idx.match(fresh), new Map([["w1", 20]]));
  assert.equal(idx.blocksOf("w1"), 5, "the worker's own map follows");
});

Deno.test("block index: events apply as the engine published them; off-GPU and tokenless blocks are left out", () => {
  const idx = new BlockIndex({ clock: new FakeClock() });
  const prompt = range(0, 8);
  const stored = (medium: string | null, tokens = true) => ({
    kind: "stored" as const,
    blocks: blocks(prompt, 4, "h").map((b) => tokens ? b : { ...b, tokenIds: [] }),
    parentHash: null,
    blockSize: 4,
    loraId: null,
    medium,
  });
  assert.equal(idx.apply("w1", stored("CPU")), null);
  assert.equal(idx.apply("w1", stored(null, false)), null);
  assert.ok(idx.empty, "nothing a prefill could reuse");
  assert.equal(idx.apply("w1", stored("GPU")), null);
  assert.deepEqual(idx.match(prompt), new Map([["w1", 8]]));
  idx.apply("w1", { kind: "removed", hashes: ["h1"], medium: "CPU" });
  assert.deepEqual(idx.match(prompt), new Map([["w1", 8]]), "a CPU copy's removal");
  idx.apply("w1", { kind: "removed", hashes: ["h1"], medium: null });
  assert.deepEqual(idx.match(prompt), new Map([["w1", 4]]));
  idx.apply("w1", { kind: "cleared" });
  assert.ok(idx.empty);
});
