import assert from "node:assert/strict";
import {
  CandidateRing,
  hash53,
  HashRing,
  PrefixHasher,
  VIRTUAL_NODES,
} from "../../lib/policies/hash_ring.ts";
import { view, views } from "../../support/policies.ts";

const url = (i: number) => `http://w${i}:8000`;
const all = () => true;

function ringOf(urls: readonly string[]): HashRing {
  const r = new HashRing();
  for (const u of urls) r.add(u);
  return r;
}

function placements(r: HashRing, keys: number, accept: (u: string) => boolean = all) {
  return Array.from({ length: keys }, (_, i) => r.lookup(`key-${i}`, accept));
}

Deno.test("hash53: stable values (a change here moves every key of every deployed ring)", () => {
  assert.equal(hash53(""), 3338908027751811);
  assert.equal(hash53("a"), 7929297801672961);
  assert.equal(hash53("http://w0:8000#0"), 1587052432859665);
  assert.equal(hash53("key-1", 7), 8612160001983373);
  assert.ok(Number.isSafeInteger(hash53("x".repeat(1000))));
});

Deno.test("PrefixHasher: pushing a string's code units gives hash53 of every prefix", () => {
  const s = "héllo 😀 wörld";
  const h = new PrefixHasher(5);
  assert.equal(h.digest(), hash53("", 5));
  for (let i = 0; i < s.length; i++) {
    h.push(s.charCodeAt(i));
    assert.equal(h.digest(), hash53(s.slice(0, i + 1), 5));
  }
});

Deno.test("hash ring: empty ring finds nothing", () => {
  const r = new HashRing();
  assert.equal(r.lookup("k", all), null);
  assert.equal(r.nodes, 0);
});

Deno.test("hash ring: 150 virtual nodes per unique URL; repeats add nothing", () => {
  const r = ringOf([url(0), url(1), url(0), url(2), url(1)]);
  assert.equal(r.size, 3);
  assert.equal(r.nodes, 3 * VIRTUAL_NODES);
  assert.equal(VIRTUAL_NODES, 150);
});

Deno.test("hash ring: lookups are deterministic and independent of insertion order", () => {
  const urls = Array.from({ length: 10 }, (_, i) => url(i));
  const a = placements(ringOf(urls), 2000);
  assert.deepEqual(placements(ringOf(urls), 2000), a);
  assert.deepEqual(placements(ringOf(urls.toReversed()), 2000), a);
});

Deno.test("hash ring: the walk skips rejected URLs, each tried once; null when none accepted", () => {
  const r = ringOf([url(0), url(1), url(2)]);
  const tried: string[] = [];
  assert.equal(r.lookup("k", (u) => (tried.push(u), false)), null);
  assert.deepEqual(tried.toSorted(), [url(0), url(1), url(2)]);
  for (let i = 0; i < 200; i++) {
    assert.equal(r.lookup(`k${i}`, (u) => u === url(1)), url(1));
  }
});

Deno.test("hash ring: add and remove give the same ring as a rebuild", () => {
  const urls = Array.from({ length: 9 }, (_, i) => url(i));
  const grown = ringOf(urls.slice(0, 5));
  placements(grown, 10); // merge the first five before adding the rest
  for (const u of urls.slice(5)) grown.add(u);
  assert.deepEqual(placements(grown, 3000), placements(ringOf(urls), 3000));
  grown.remove(url(3));
  grown.remove(url(7));
  assert.equal(grown.remove(url(7)), false);
  const rest = urls.filter((u) => u !== url(3) && u !== url(7));
  assert.deepEqual(placements(grown, 3000), placements(ringOf(rest), 3000));
  assert.equal(grown.nodes, rest.length * VIRTUAL_NODES);
  // A URL removed before it was ever placed leaves no trace; freed slots are reused safely.
  grown.add("http://late:1");
  grown.remove("http://late:1");
  grown.add(url(3));
  assert.deepEqual(placements(grown, 3000), placements(ringOf([...rest, url(3)]), 3000));
  for (const u of [...rest, url(3)]) grown.remove(u);
  assert.equal(grown.nodes, 0);
  assert.equal(grown.lookup("k", all), null);
});

Deno.test("hash ring: 8 workers each own 1/8 of 10,000 keys within ±25%", () => {
  const counts = new Map<string | null, number>();
  for (const u of placements(ringOf(Array.from({ length: 8 }, (_, i) => url(i))), 10_000)) {
    counts.set(u, (counts.get(u) ?? 0) + 1);
  }
  assert.equal(counts.size, 8);
  for (const [u, c] of counts) assert.ok(Math.abs(c / 1250 - 1) <= 0.25, `${u}: ${c}`);
});

// Property: with 10,000 keys, adding one worker to n moves about 1/(n+1) of the keys, all of
// them to the new worker; removing one of n moves about 1/n, all of them from the removed one.
// Tolerance ±30% relative: 150 virtual nodes put a worker's share within ~±8% (1σ) of 1/n.
Deno.test("hash ring: adding or removing one of n workers moves about 1/n of the keys", () => {
  const KEYS = 10_000;
  for (let n = 8; n <= 16; n++) {
    const urls = Array.from({ length: n + 1 }, (_, i) => url(100 + i));
    const r = ringOf(urls.slice(0, n));
    const before = placements(r, KEYS);
    r.add(urls[n]);
    const after = placements(r, KEYS);
    let moved = 0;
    for (let i = 0; i < KEYS; i++) {
      if (before[i] === after[i]) continue;
      moved++;
      assert.equal(after[i], urls[n], "a key moved between two old workers");
    }
    const addRatio = moved / KEYS * (n + 1);
    assert.ok(Math.abs(addRatio - 1) <= 0.3, `n=${n} add: moved ${moved}, ratio ${addRatio}`);

    // Removing the added worker restores every key exactly.
    r.remove(urls[n]);
    assert.deepEqual(placements(r, KEYS), before);

    // Removing one of the n (a different one each n) moves about 1/n.
    const gone = urls[n % 5];
    r.remove(gone);
    const removed = placements(r, KEYS);
    moved = 0;
    for (let i = 0; i < KEYS; i++) {
      if (before[i] === removed[i]) continue;
      moved++;
      assert.equal(before[i], gone, "a key moved that was not on the removed worker");
    }
    const rmRatio = moved / KEYS * n;
    assert.ok(Math.abs(rmRatio - 1) <= 0.3, `n=${n} remove: moved ${moved}, ratio ${rmRatio}`);
  }
});

Deno.test("candidate ring: a down worker's keys go clockwise and come back on recovery", () => {
  const ring = new CandidateRing();
  const cands = views(6, "cr");
  const owners = () =>
    Array.from({ length: 3000 }, (_, i) => {
      return ring.owner(hash53(`k${i}`))?.id;
    });
  ring.mark(cands);
  const healthy = owners();
  ring.mark(cands.filter((c) => c.id !== "cr2"));
  const degraded = owners();
  for (let i = 0; i < healthy.length; i++) {
    if (healthy[i] === "cr2") assert.notEqual(degraded[i], "cr2");
    else assert.equal(degraded[i], healthy[i], "a key of a healthy worker moved");
  }
  ring.mark(cands);
  assert.deepEqual(owners(), healthy);
});

Deno.test("candidate ring: only marked candidates are returned; removal by id forgets the URL", () => {
  const ring = new CandidateRing();
  const [a, b] = [view("cra"), view("crb")];
  ring.mark([a, b]);
  assert.equal(ring.ring.size, 2);
  ring.mark([b]);
  for (let i = 0; i < 100; i++) assert.equal(ring.owner(hash53(`k${i}`)), b);
  ring.mark([]);
  assert.equal(ring.owner(hash53("k")), null);
  ring.remove("cra");
  ring.remove("unknown");
  assert.equal(ring.ring.size, 1);
  // The same URL under a new worker id comes back on sight and owns the same keys as before.
  const a2 = view("cra2", { url: a.url });
  const fresh = new CandidateRing();
  fresh.mark([a, b]);
  ring.mark([a2, b]);
  for (let i = 0; i < 500; i++) {
    assert.equal(ring.owner(hash53(`k${i}`))?.url, fresh.owner(hash53(`k${i}`))?.url);
  }
});

Deno.test("candidate ring: a removed id whose URL another live worker shares heals on sight", () => {
  const ring = new CandidateRing();
  const a = view("sha");
  const twin = view("shb", { url: a.url });
  ring.mark([a, twin]);
  ring.remove("sha");
  ring.mark([twin]);
  assert.equal(ring.owner(hash53("k")), twin);
});
