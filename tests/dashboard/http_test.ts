/**
 * The status page as served: self-contained (no address outside the page, a CSP that forbids
 * any), small, a script that compiles and finds every element it looks up; and the snapshot
 * answer (`?since=` read leniently, never cached).
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import { RoutingHistory } from "../../lib/dashboard/history.ts";
import { dashboardPage, dashboardPageBytes, dashboardSnapshot } from "../../lib/dashboard/http.ts";
import { PAGE_SCRIPT } from "../../lib/dashboard/page_script.ts";
import { Metrics } from "../../lib/metrics/metrics.ts";

Deno.test("page: HTML with a CSP that allows nothing but the page itself and its origin", async () => {
  const res = dashboardPage();
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "text/html; charset=utf-8");
  const csp = res.headers.get("content-security-policy") ?? "";
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /connect-src 'self'/);
  assert.doesNotMatch(csp, /https?:|\*/);
  const html = await res.text();
  assert.equal(new TextEncoder().encode(html).byteLength, dashboardPageBytes());
  assert.ok(dashboardPageBytes() < 32 * 1024, `the page is small: ${dashboardPageBytes()} bytes`);
  // The SVG namespace is a name, never fetched; any other absolute address would be a fetch.
  const addresses = html.match(/\b(https?:)?\/\/[\w.-]+/g) ?? [];
  assert.deepEqual(addresses.filter((a) => a !== "http://www.w3.org"), []);
  assert.doesNotMatch(html, /<(script|link|img)[^>]+(src|href)="(?!data:)/);
});

Deno.test("page: the script compiles and every element it looks up is in the page", async () => {
  new Function(PAGE_SCRIPT); // a syntax error throws here
  const html = await dashboardPage().text();
  const ids = new Set([...html.matchAll(/ id="([\w-]+)"/g)].map((m) => m[1]));
  const wanted = [...PAGE_SCRIPT.matchAll(/\$\("([\w-]+)"\)/g)].map((m) => m[1]);
  for (const chart of ["req", "lat", "pred", "lag"]) wanted.push(`c-${chart}`, `l-${chart}`);
  assert.ok(wanted.length > 10);
  assert.deepEqual(wanted.filter((id) => !ids.has(id)), []);
});

Deno.test("snapshot: ?since= picks newer samples; anything else means all", async () => {
  const clock = new FakeClock();
  const metrics = new Metrics();
  const history = new RoutingHistory({ metrics, clock });
  for (let i = 0; i < 4; i++) {
    history.sample();
    clock.advance(1000);
  }
  const deps = {
    workers: () => [],
    metrics,
    history,
    clock,
    startedAt: 0,
    policy: "round_robin",
    draining: () => true,
    mesh: () => null,
  };
  const seqs = async (query: string) => {
    const res = dashboardSnapshot(deps, new URL(`http://x/dashboard/snapshot${query}`));
    assert.equal(res.headers.get("content-type"), "application/json");
    assert.equal(res.headers.get("cache-control"), "no-store");
    const body = await res.json();
    assert.equal(body.draining, true);
    return body.routing.samples.map((s: { seq: number }) => s.seq);
  };
  assert.deepEqual(await seqs(""), [1, 2, 3]);
  assert.deepEqual(await seqs("?since=1"), [2, 3]);
  assert.deepEqual(await seqs("?since=2.7"), [3]);
  assert.deepEqual(await seqs("?since=abc"), [1, 2, 3]);
  assert.deepEqual(await seqs("?since=-4"), [1, 2, 3]);
  assert.deepEqual(await seqs("?since=3"), []);
});
