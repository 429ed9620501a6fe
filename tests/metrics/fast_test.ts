/**
 * The fast metric families rendered through a prom-client registry: the Prometheus text a scrape
 * sees (HELP/TYPE, escaped label values, cumulative histogram buckets with `+Inf`, `_sum`,
 * `_count`), series identity per label set, `reset()`, and reading series back (`entries()`).
 */

import assert from "node:assert/strict";
import client from "prom-client";
import { FastCounter, FastGauge, FastHistogram } from "../../lib/metrics/fast.ts";

/** The sample lines of `text` (no comments, no blanks). */
function samples(text: string): string[] {
  return text.split("\n").filter((l) => l !== "" && !l.startsWith("#"));
}

Deno.test("FastCounter: HELP, TYPE and one line per label set", async () => {
  const r = new client.Registry();
  const c = new FastCounter(r, "smg_test_total", "Things counted", ["method", "path"]);
  c.with("GET", "/a").inc();
  c.with("GET", "/a").inc(2);
  c.with("POST", "/b").inc();
  const text = await r.metrics();
  assert.match(text, /^# HELP smg_test_total Things counted$/m);
  assert.match(text, /^# TYPE smg_test_total counter$/m);
  assert.deepEqual(samples(text), [
    'smg_test_total{method="GET",path="/a"} 3',
    'smg_test_total{method="POST",path="/b"} 1',
  ]);
});

Deno.test("FastCounter: quotes, backslashes and newlines in label values are escaped", async () => {
  const r = new client.Registry();
  const c = new FastCounter(r, "esc_total", "escapes", ["v"]);
  c.with('say "hi"\\now\nbye').inc();
  assert.deepEqual(samples(await r.metrics()), ['esc_total{v="say \\"hi\\"\\\\now\\nbye"} 1']);
});

Deno.test("FastCounter: missing label values render as empty strings", async () => {
  const r = new client.Registry();
  const c = new FastCounter(r, "m_total", "missing", ["a", "b"]);
  c.with("x").inc();
  assert.deepEqual(samples(await r.metrics()), ['m_total{a="x",b=""} 1']);
});

Deno.test("with(): the same labels give the same series, different labels a different one", async () => {
  const r = new client.Registry();
  const c = new FastCounter(r, "same_total", "same", ["a"]);
  const s = c.with("x");
  assert.equal(c.with("x"), s);
  assert.notEqual(c.with("y"), s);
  s.inc(5);
  assert.equal(c.with("x").value, 5);
  assert.equal(c.with("y").value, 0);
  assert.deepEqual(samples(await r.metrics()), ['same_total{a="x"} 5', 'same_total{a="y"} 0']);
});

Deno.test("with(): label values are not merged by their concatenation", async () => {
  const r = new client.Registry();
  const c = new FastCounter(r, "split_total", "split", ["a", "b"]);
  c.with("ab", "c").inc();
  c.with("a", "bc").inc();
  assert.deepEqual(samples(await r.metrics()), [
    'split_total{a="ab",b="c"} 1',
    'split_total{a="a",b="bc"} 1',
  ]);
});

Deno.test("FastGauge: set, inc, dec and an unlabelled series", async () => {
  const r = new client.Registry();
  const g = new FastGauge(r, "smg_g", "A gauge", []);
  const s = g.with();
  s.set(10);
  s.inc();
  s.inc();
  s.dec();
  const text = await r.metrics();
  assert.match(text, /^# HELP smg_g A gauge$/m);
  assert.match(text, /^# TYPE smg_g gauge$/m);
  assert.deepEqual(samples(text), ["smg_g 11"]);
  s.set(-2.5);
  assert.deepEqual(samples(await r.metrics()), ["smg_g -2.5"]);
});

Deno.test("a family with no series renders HELP and TYPE but no sample", async () => {
  const r = new client.Registry();
  new FastCounter(r, "none_total", "Nothing yet", ["a"]);
  const text = await r.metrics();
  assert.match(text, /^# TYPE none_total counter$/m);
  assert.deepEqual(samples(text), []);
});

Deno.test("FastHistogram: cumulative buckets with le and +Inf, then _sum and _count", async () => {
  const r = new client.Registry();
  const h = new FastHistogram(r, "lat_seconds", "Latency", ["route"], [0.1, 1, 10]);
  const s = h.with("/x");
  for (const v of [0.05, 0.5, 0.7, 5, 50]) s.observe(v);
  const text = await r.metrics();
  assert.match(text, /^# HELP lat_seconds Latency$/m);
  assert.match(text, /^# TYPE lat_seconds histogram$/m);
  assert.deepEqual(samples(text), [
    'lat_seconds_bucket{route="/x",le="0.1"} 1',
    'lat_seconds_bucket{route="/x",le="1"} 3',
    'lat_seconds_bucket{route="/x",le="10"} 4',
    'lat_seconds_bucket{route="/x",le="+Inf"} 5',
    'lat_seconds_sum{route="/x"} 56.25',
    'lat_seconds_count{route="/x"} 5',
  ]);
});

Deno.test("FastHistogram: a value exactly on a bound lands in that bucket (le is inclusive)", async () => {
  const r = new client.Registry();
  const h = new FastHistogram(r, "b", "bounds", [], [1, 2]);
  h.with().observe(1);
  h.with().observe(2);
  h.with().observe(2.5);
  assert.deepEqual(samples(await r.metrics()), [
    'b_bucket{le="1"} 1',
    'b_bucket{le="2"} 2',
    'b_bucket{le="+Inf"} 3',
    "b_sum 5.5",
    "b_count 3",
  ]);
  assert.deepEqual(h.with().counts, [1, 1, 1]);
});

Deno.test("FastHistogram: separate label sets keep separate buckets", async () => {
  const r = new client.Registry();
  const h = new FastHistogram(r, "h", "two series", ["m"], [1]);
  h.with("a").observe(0.5);
  h.with("b").observe(3);
  assert.deepEqual(samples(await r.metrics()), [
    'h_bucket{m="a",le="1"} 1',
    'h_bucket{m="a",le="+Inf"} 1',
    'h_sum{m="a"} 0.5',
    'h_count{m="a"} 1',
    'h_bucket{m="b",le="1"} 0',
    'h_bucket{m="b",le="+Inf"} 1',
    'h_sum{m="b"} 3',
    'h_count{m="b"} 1',
  ]);
});

Deno.test("reset(): every series is forgotten and a new one starts from zero", async () => {
  const r = new client.Registry();
  const c = new FastCounter(r, "r_total", "reset", ["a"]);
  const h = new FastHistogram(r, "r_h", "reset", [], [1]);
  const old = c.with("x");
  old.inc(4);
  h.with().observe(0.5);
  c.reset();
  h.reset();
  assert.deepEqual(samples(await r.metrics()), []);
  const fresh = c.with("x");
  assert.notEqual(fresh, old);
  fresh.inc();
  assert.deepEqual(samples(await r.metrics()), ['r_total{a="x"} 1']);
});

Deno.test("two registries do not see each other's metrics", async () => {
  const r1 = new client.Registry();
  const r2 = new client.Registry();
  new FastCounter(r1, "same_name_total", "one", []).with().inc(1);
  new FastCounter(r2, "same_name_total", "two", []).with().inc(7);
  assert.deepEqual(samples(await r1.metrics()), ["same_name_total 1"]);
  assert.deepEqual(samples(await r2.metrics()), ["same_name_total 7"]);
});

Deno.test("entries(): every series with its labels, without creating one", () => {
  const r = new client.Registry();
  const c = new FastCounter(r, "t_total", "h", ["worker", "outcome"]);
  assert.deepEqual([...c.entries()], []);
  c.with("a", "failure").inc(3);
  c.with("b", "success").inc();
  assert.deepEqual(
    [...c.entries()].map(({ labels, s }) => [labels.worker, labels.outcome, s.value]),
    [["a", "failure", 3], ["b", "success", 1]],
  );
  const h = new FastHistogram(r, "t_seconds", "h", [], [0.1, 1]);
  h.with().observe(0.5);
  const [only] = [...h.entries()];
  assert.deepEqual(only.s.bounds, [0.1, 1]);
  assert.deepEqual(only.s.counts, [0, 1, 0]);
});
