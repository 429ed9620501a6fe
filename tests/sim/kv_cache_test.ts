/**
 * The KV pool: prefix keys, matching, LRU eviction leaf first, pins that eviction respects,
 * reservations against capacity, flush, counts, and the block events it reports (replayed into
 * the gateway's block index, they must agree with the pool).
 */

import assert from "node:assert/strict";
import { FakeClock, seededRandom } from "../../lib/core/clock.ts";
import { BlockIndex } from "../../lib/kv/block_index.ts";
import { blockKeys, type KvBlockEvent, KvCache } from "../../lib/sim/kv_cache.ts";

/** `n` token ids unique to `salt`. */
function seq(salt: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => salt * 100_000 + i);
}

/** A pool of `blocks` blocks of 4 tokens. */
function pool(blocks: number): KvCache {
  return new KvCache({ blockSize: 4, capacityTokens: blocks * 4 });
}

Deno.test("blockKeys: one key per full block, naming the whole prefix", () => {
  const a = seq(1, 10);
  const keys = blockKeys(a, 4);
  assert.equal(keys.length, 2);
  assert.ok(keys.every(Number.isSafeInteger));
  assert.deepEqual(blockKeys(a.slice(0, 8), 4), keys);
  assert.deepEqual(blockKeys(a, 4, 1), keys.slice(0, 1));
  // Same second block after a different first block: a different key.
  const b = [...seq(2, 4), ...a.slice(4, 8)];
  assert.notEqual(blockKeys(b, 4)[1], keys[1]);
  assert.equal(
    new Set(Array.from({ length: 500 }, (_, s) => blockKeys(seq(s, 4), 4)[0])).size,
    500,
  );
});

Deno.test("match: leading tokens in full blocks, only along the common prefix", () => {
  const c = pool(100);
  const a = seq(1, 22);
  assert.equal(c.match(a), 0);
  assert.equal(c.insert(a), 20);
  assert.equal(c.match(a), 20);
  assert.equal(c.match(a.slice(0, 13)), 12);
  assert.equal(c.match([...a.slice(0, 9), 7, 7, 7, 7, 7]), 8);
  assert.equal(c.match(seq(2, 22)), 0);
  assert.deepEqual(c.counts(), { blocks: 5, pinnedBlocks: 0, insertedBlocks: 5, evictedBlocks: 0 });
  assert.equal(c.insert(a), 20, "inserting again touches, adds nothing");
  assert.equal(c.counts().insertedBlocks, 5);
});

Deno.test("eviction: the least recently used prefix goes first; match does not touch", () => {
  const c = pool(4);
  const [a, b, d] = [seq(1, 8), seq(2, 8), seq(3, 8)];
  c.insert(a);
  c.insert(b);
  c.insert(a); // a is now the most recent
  c.match(b); // a lookup is not a use
  assert.equal(c.insert(d), 8);
  assert.equal(c.match(b), 0);
  assert.equal(c.match(a), 8);
  assert.equal(c.match(d), 8);
  assert.equal(c.counts().evictedBlocks, 2);
  assert.equal(c.blockTokens, 16);
});

Deno.test("eviction: leaves before their prefix, so a shared parent outlives its children", () => {
  const c = pool(4);
  const parent = seq(1, 4);
  const x = [...parent, ...seq(2, 8)];
  const y = [...parent, ...seq(3, 4)];
  c.insert(x); // 3 blocks
  c.evict(4); // one block: x's leaf, not the prefix it hangs from
  assert.equal(c.match(x), 8);
  c.insert(y);
  c.insert(seq(4, 8)); // needs 2 blocks of room out of 1 free: the LRU leaf, x's 2nd block
  assert.equal(c.match(x), 4);
  assert.equal(c.match(y), 8);
});

Deno.test("pins: a pinned prefix is never evicted; unpinning makes it the most recent", () => {
  const c = pool(4);
  const a = seq(1, 8);
  const keys = c.keys(a);
  c.insert(a);
  c.insert(seq(2, 8));
  assert.equal(c.pin(keys, 0, 2, a), 2);
  assert.equal(c.evictableTokens, 8);
  assert.equal(c.reserve(16), false, "only 8 tokens could be freed");
  assert.equal(c.match(seq(2, 8)), 0, "the failed reservation still evicted what it could");
  assert.equal(c.match(a), 8);
  assert.equal(c.flush(), 0);
  assert.deepEqual(c.counts(), { blocks: 2, pinnedBlocks: 2, insertedBlocks: 4, evictedBlocks: 2 });
  c.unpin(keys, 2);
  assert.throws(() => c.unpin(keys, 1), /not pinned/);
  assert.equal(c.flush(), 2);
  assert.equal(c.blockTokens, 0);
});

Deno.test("pin: creates missing blocks while there is room, stops where there is none", () => {
  const c = pool(3);
  const a = seq(1, 16);
  const keys = c.keys(a);
  assert.equal(c.pin(keys, 0, 4, a), 3);
  assert.equal(c.freeTokens, 0);
  c.unpin(keys, 3);
  assert.equal(c.match(a), 12);
});

Deno.test("reserve: counts against capacity, evicts for room, forced may overdraw", () => {
  const c = pool(4);
  c.insert(seq(1, 8));
  assert.equal(c.freeTokens, 8);
  assert.ok(c.fits(16));
  assert.equal(c.fits(16, c.keys(seq(1, 8)), 1), false, "the prefix about to be pinned is kept");
  assert.ok(c.reserve(12));
  assert.equal(c.blockTokens, 4, "one block evicted");
  assert.equal(c.freeTokens, 0);
  assert.equal(c.reserve(10), false);
  assert.ok(c.reserve(10, true));
  assert.equal(c.freeTokens, -6, "the last block evicted, then 6 over");
  assert.equal(c.blockTokens, 0);
  c.unreserve(22);
  assert.equal(c.reservedTokens, 0);
  assert.equal(c.freeTokens, 16);
});

Deno.test("events: what the pool reports, replayed into the gateway's block index, agrees with it", () => {
  const events: KvBlockEvent[] = [];
  const c = new KvCache({ blockSize: 4, capacityTokens: 10 * 4, onEvent: (e) => events.push(e) });
  const index = new BlockIndex({ clock: new FakeClock() });
  const apply = () => {
    for (const e of events.splice(0)) {
      if (e.type === "stored") {
        const blocks = e.keys.map((k, i) => ({
          hash: String(k),
          tokenIds: e.tokens.slice(i * 4, (i + 1) * 4),
        }));
        assert.equal(index.store("w", e.parent === null ? null : String(e.parent), blocks), null);
      } else if (e.type === "removed") index.remove("w", e.keys.map(String));
      else index.clearWorker("w");
    }
  };
  const random = seededRandom(3);
  const prompts = Array.from({ length: 6 }, (_, i) => seq(i % 3, 8 + 4 * (i % 4)));
  for (let round = 0; round < 40; round++) {
    const p = prompts[Math.floor(random() * prompts.length)];
    const extended = [...p, ...seq(50 + round, 4 * Math.floor(random() * 3))];
    c.insert(extended);
    apply();
    for (const q of prompts) {
      assert.equal(index.match(q).get("w") ?? 0, c.match(q), `round ${round}`);
    }
  }
  assert.ok(c.counts().evictedBlocks > 0, "evictions happened and were followed");
  c.flush();
  apply();
  assert.ok(index.empty, "a flush of everything clears the index");
});
