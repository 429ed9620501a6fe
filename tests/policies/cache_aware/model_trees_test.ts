/**
 * Corrections between cache-aware policies, with the mesh reduced to its sinks: the router that
 * saw the report forgets the worker's stale paths and their placements and publishes what it
 * forgot; a peer forgets its own record of the branch from before the request (not what came
 * later), drops the placements and relays those of its own paths; a repair from a peer that never
 * applied it brings nothing of the branch back; a correction applies once.
 */

import assert from "node:assert/strict";
import { defaultConfig } from "../../../lib/config/config.ts";
import { seededRandom } from "../../../lib/core/clock.ts";
import { silentLogger } from "../../../lib/core/log.ts";
import type { SelectionNote } from "../../../lib/core/types.ts";
import { CacheAwarePolicy } from "../../../lib/policies/cache_aware/cache_aware.ts";
import { pathHashes } from "../../../lib/policies/cache_aware/shared_paths.ts";
import {
  type NewCorrection,
  PolicyReplicas,
  type TreeCorrection,
  type TreeEntry,
} from "../../../lib/policies/replicas.ts";
import { believed } from "../../support/beliefs.ts";
import { request, view } from "../../../support/policies.ts";

const clock = { t: 0 };

function router(name: string) {
  const replicas = new PolicyReplicas();
  const deltas: { hash: number; tenant: string }[] = [];
  const published: TreeCorrection[] = [];
  replicas.deltaSink = (_role, _model, _kind, hash, tenant) => deltas.push({ hash, tenant });
  replicas.correctionSink = (_role, _model, _kind, c) => {
    const id = `${name}/${published.length + 1}`;
    published.push({ ...c, id });
    return id;
  };
  const p = new CacheAwarePolicy({
    random: seededRandom(5),
    now: () => clock.t,
    log: silentLogger,
    config: defaultConfig(),
    replicas,
  });
  replicas.mainFor = () => p;
  /** Sends `text` to `w` (the only candidate); returns the selection note. */
  const send = (text: string, w = W) => {
    const note: SelectionNote = { prefillTokens: 0, predictedCached: null };
    p.select([w], request(text), note);
    return note;
  };
  return { p, deltas, published, send };
}

const W = view("w1");
const V = view("w2");
const S = "You are the assistant of tenant nine; answer briefly and politely. ".repeat(6);
const [X, Y, Z, Q] = ["x", "y", "z", "q"].map((c) => S + `${c}${c} question ${c}, `.repeat(12));
const RELAY_FREE = (c: NewCorrection | null) => c === null;

Deno.test("corrections: the router that saw the report forgets the worker's stale paths and placements, and publishes them", () => {
  clock.t = 0;
  const a = router("a");
  a.send(X);
  a.send(Y);
  assert.equal(believed(a.p.shared, "m", Y, W.url), Y.length);
  clock.t = 5000;
  const note = a.send(Z);
  clock.t = 6000;
  // The worker held only half of S: it evicted the rest, and with it x and y.
  const half = Math.floor(S.length / 2);
  note.onReport!({ prompt: Z.length / 4, cached: (half + 2) / 4 });
  assert.equal(a.published.length, 1);
  const [c] = a.published;
  assert.equal(c.worker, W.url);
  assert.equal(c.kept, half + 2);
  assert.equal(c.branch, Z.slice(0, half + 3));
  assert.equal(c.ageMs, 1000);
  const hx = pathHashes(X, 64);
  const hz = new Set(pathHashes(Z, 64));
  for (const h of hx.slice(Math.ceil(S.length / 64))) assert.ok(c.hashes.includes(h), "x's");
  assert.ok(c.hashes.every((h) => !hz.has(h)), "nothing of the request's own path: it was re-sent");
  // Its own placements no longer name the worker for x or y; z stays whole.
  assert.equal(believed(a.p.shared, "m", X, W.url), S.length);
  assert.equal(believed(a.p.shared, "m", Y, W.url), S.length);
  assert.equal(believed(a.p.shared, "m", Z, W.url), Z.length);
  assert.equal(a.p.shared.corrections("m", "string").length, 1);
});

Deno.test("corrections: a peer forgets its record of the branch from before the request, drops the placements and relays its own", () => {
  clock.t = 0;
  const a = router("a");
  const b = router("b");
  const c = router("c");
  a.send(X);
  // b copies a's tree (a repair) and hears its decision; c only hears it.
  clock.t = 1000;
  const snapshot: TreeEntry[] = [...a.p.shared.exportTree("m", "string")];
  for (const e of snapshot) b.p.shared.applyEntry("m", "string", e);
  for (const d of a.deltas) {
    for (const r of [b, c]) r.p.shared.applyDelta("m", "string", d.hash, d.tenant);
  }
  clock.t = 2000;
  b.send(Y); // b's own decision under S, before a's request
  for (const d of b.deltas) c.p.shared.applyDelta("m", "string", d.hash, d.tenant);
  assert.equal(believed(b.p.shared, "m", X, W.url), X.length, "b: a's path");
  assert.equal(believed(c.p.shared, "m", X, W.url), X.length - X.length % 64, "c: a's placement");
  clock.t = 5000;
  const note = a.send(Z);
  clock.t = 6000;
  b.send(Q, V); // after the request: another worker's, and not stale
  b.send(S + "later turn, after a's request, sent to w1 and held by it", W);
  const half = Math.floor(S.length / 2);
  note.onReport!({ prompt: Z.length / 4, cached: half / 4 });
  const [correction] = a.published;
  const relay = b.p.shared.applyCorrection("m", "string", correction);
  assert.ok(relay !== null && relay.branch === null, "b forgot a path of its own: y");
  const hy = pathHashes(Y, 64);
  assert.ok(relay.hashes.includes(hy[hy.length - 1]));
  assert.ok(
    RELAY_FREE(c.p.shared.applyCorrection("m", "string", correction)),
    "c has no paths of w1",
  );
  c.p.shared.applyCorrection("m", "string", { ...relay, id: "b/1" });
  for (const r of [a, b, c]) {
    assert.ok(believed(r.p.shared, "m", X, W.url) <= S.length, "x: forgotten everywhere");
    assert.ok(believed(r.p.shared, "m", Y, W.url) <= S.length, "y: forgotten everywhere");
  }
  const later = S + "later turn, after a's request, sent to w1 and held by it";
  assert.equal(believed(b.p.shared, "m", later, W.url), later.length, "b's decision since is kept");
  // A repair from a peer that never applied it (the snapshot) brings nothing of the branch back.
  for (const e of snapshot) b.p.shared.applyEntry("m", "string", e);
  for (const e of [...a.p.shared.exportTree("m", "string")]) {
    c.p.shared.applyEntry("m", "string", e);
  }
  assert.ok(believed(b.p.shared, "m", X, W.url) <= S.length);
  assert.ok(believed(c.p.shared, "m", X, W.url) <= S.length);
  // Applied once: again, it forgets nothing more.
  assert.equal(b.p.shared.applyCorrection("m", "string", correction), null);
  assert.equal(believed(b.p.shared, "m", later, W.url), later.length);
  const [remembered] = b.p.shared.corrections("m", "string");
  assert.equal(remembered.id, "a/1");
  assert.ok(hy.slice(-1).every((h) => remembered.hashes.includes(h)), "with b's own placements");
});
