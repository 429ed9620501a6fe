/**
 * What KV-event mode's block index costs the gateway (`deno bench bench/kv_index_bench.ts`):
 * matching a request's token ids (the per-request read cache_aware makes), and applying a
 * worker's stored and removed events (the per-batch write).
 *
 * Setup (seeded): 8 workers, blocks of 16 tokens, each worker holding 256 prompts of 12,288
 * tokens whose first 4,096 are shared in groups of 8 (1.57 M blocks stored in all). A match is
 * one 12,288-token prompt:
 * `full` (held whole by one worker), `half` (its first 6,144 tokens held), `miss` (the first
 * block unknown). A store is one event of 32 blocks under a known parent, then its removal.
 */

import { FakeClock, seededRandom } from "../lib/core/clock.ts";
import { BlockIndex } from "../lib/kv/block_index.ts";
import type { StoredBlock } from "../lib/kv/events.ts";

const BLOCK = 16;
const PROMPT = 12_288;
const SHARED = 4_096;
const WORKERS = Array.from({ length: 8 }, (_, i) => `http://10.0.0.${i}:8000`);
const PER_WORKER = 256;
const random = seededRandom(7);

const tokens = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 150_000));
const groups = Array.from({ length: PER_WORKER / 8 }, () => tokens(SHARED));
const prompt = (g: number) => groups[g % groups.length].concat(tokens(PROMPT - SHARED));

const clock = new FakeClock();
const index = new BlockIndex({ clock });
let hashes = 0;
const blocksOf = (ids: readonly number[]): StoredBlock[] => {
  const out: StoredBlock[] = [];
  for (let at = 0; at + BLOCK <= ids.length; at += BLOCK) {
    out.push({ hash: String(++hashes), tokenIds: ids.slice(at, at + BLOCK) });
  }
  return out;
};
const held: number[][] = [];
for (const w of WORKERS) {
  for (let i = 0; i < PER_WORKER; i++) {
    const p = prompt(i);
    index.store(w, null, blocksOf(p));
    if (w === WORKERS[3] && i === 5) held.push(p);
  }
}
const full = held[0];
const half = full.slice(0, PROMPT / 2).concat(tokens(PROMPT / 2));
const miss = tokens(PROMPT);
// With `--v8-flags=--expose-gc`, the heap after a full collection: what the index keeps alive.
(globalThis as { gc?: () => void }).gc?.();
const mem = Deno.memoryUsage();
const mb = (n: number) => (n / 2 ** 20).toFixed(0);
console.error(
  `kv index: ${index.size} keys, heap ${mb(mem.heapUsed)} MB + ${mb(mem.external)} MB off-heap`,
);

Deno.bench("kv index match, 12,288 tokens held whole by one worker", () => {
  index.match(full);
});
Deno.bench("kv index match, 12,288 tokens, the first half held", () => {
  index.match(half);
});
Deno.bench("kv index match, 12,288 tokens, nothing held", () => {
  index.match(miss);
});

const parent = blocksOf(tokens(BLOCK));
index.store(WORKERS[0], null, parent);
Deno.bench("kv index store then remove 32 blocks", () => {
  const blocks = blocksOf(tokens(32 * BLOCK));
  index.store(WORKERS[0], parent[0].hash, blocks);
  index.remove(WORKERS[0], blocks.map((b) => b.hash));
});
