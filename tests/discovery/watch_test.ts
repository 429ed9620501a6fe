/**
 * The list-and-watch loop against the API stand-in: a list then events as pods change; a reset
 * watch connection resumes from the last version without a relist; 410 Gone (status or event)
 * relists and forgets pods that vanished meanwhile; an unreachable API server is retried while
 * what is known stays. Waits on the loop's own callbacks, never on sleeps.
 */

import assert from "node:assert/strict";
import { FakeClock, systemClock } from "../../lib/core/clock.ts";
import { silentLogger } from "../../lib/core/log.ts";
import type { Pod } from "../../lib/discovery/pods.ts";
import { ApiStatusError, PodWatch, type WatchSource } from "../../lib/discovery/watch.ts";
import { FakeKube, pod } from "../support/fake_kube.ts";
import { Waiters } from "../../support/wait.ts";

/** A source over plain fetch, paging by 2 so lists take several pages. */
function fetchSource(k: FakeKube, selector: string): WatchSource {
  const path = "/api/v1/namespaces/default/pods";
  const headers = { authorization: `Bearer ${k.token}` };
  return {
    async list(cont) {
      const q = new URLSearchParams({ labelSelector: selector, limit: "2" });
      if (cont) q.set("continue", cont);
      const r = await fetch(`${k.url}${path}?${q}`, { headers });
      if (r.status !== 200) throw new ApiStatusError(r.status, await r.text());
      const j = await r.json();
      return {
        items: j.items,
        resourceVersion: j.metadata.resourceVersion,
        continueToken: j.metadata.continue ?? null,
      };
    },
    watch(rv, signal) {
      const q = new URLSearchParams({
        watch: "1",
        labelSelector: selector,
        resourceVersion: rv,
        allowWatchBookmarks: "true",
      });
      return fetch(`${k.url}${path}?${q}`, { headers, signal });
    },
  };
}

/** What the loop reported: the pods it believes in, and a way to wait for a belief. */
class Seen {
  readonly pods = new Map<string, Pod>();
  errors = 0;
  bookmark = "";
  readonly #waiters = new Waiters();
  readonly handlers = {
    onList: (pods: Pod[]) => {
      this.pods.clear();
      for (const p of pods) this.pods.set(p.metadata!.name!, p);
      this.#check();
    },
    onEvent: (type: string, p: Pod) => {
      if (type === "DELETED") this.pods.delete(p.metadata!.name!);
      else this.pods.set(p.metadata!.name!, p);
      this.#check();
    },
    onError: () => {
      this.errors++;
      this.#check();
    },
    onBookmark: (rv: string) => {
      this.bookmark = rv;
      this.#check();
    },
  };
  names(): string[] {
    return [...this.pods.keys()].sort();
  }
  wait(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
    return this.#waiters.wait(cond, what, ms);
  }
  #check(): void {
    this.#waiters.poke();
  }
}

async function setup() {
  const k = new FakeKube();
  const seen = new Seen();
  for (const [i, n] of ["w0", "w1", "w2"].entries()) {
    k.apply(pod(n, `10.0.0.${i + 1}`, { app: "sglang" }));
  }
  k.apply(pod("other", "10.0.0.9", { app: "redis" }));
  const watch = new PodWatch({
    name: "worker pods",
    source: fetchSource(k, "app=sglang"),
    handlers: seen.handlers,
    log: silentLogger,
    clock: systemClock,
    backoffMs: 20,
    maxBackoffMs: 100,
  });
  watch.start();
  await seen.wait(() => seen.pods.size === 3, "the first list");
  const stop = async () => {
    await watch.stop();
    await k.close();
  };
  return { k, seen, watch, stop };
}

Deno.test("pod watch: a paged list, then events as pods change", async () => {
  const { k, seen, watch, stop } = await setup();
  assert.deepEqual(seen.names(), ["w0", "w1", "w2"]);
  k.apply(pod("w3", "10.0.0.4", { app: "sglang" }));
  await seen.wait(() => seen.pods.has("w3"), "w3 added");
  k.apply(pod("w1", "10.0.0.2", { app: "sglang" }, { ready: false }));
  await seen.wait(
    () => seen.pods.get("w1")?.status?.conditions?.[0].status === "False",
    "w1 not ready",
  );
  k.delete("default", "w0");
  await seen.wait(() => !seen.pods.has("w0"), "w0 deleted");
  assert.equal(watch.lists, 1);
  assert.ok(k.requests.filter((r) => r.includes("continue=")).length >= 1, "paged");
  await stop();
});

Deno.test("pod watch: a reset watch connection resumes from the last version, no relist", async () => {
  const { k, seen, watch, stop } = await setup();
  k.apply(pod("w3", "10.0.0.4", { app: "sglang" }));
  await seen.wait(() => seen.pods.has("w3"), "w3");
  k.resetWatches();
  k.apply(pod("w4", "10.0.0.5", { app: "sglang" }));
  await seen.wait(() => seen.pods.has("w4"), "w4 after the reset");
  assert.equal(watch.lists, 1);
  const watches = k.requests.filter((r) => r.includes("watch=1"));
  assert.ok(watches.length >= 2, "watched again");
  assert.ok(!watches.at(-1)!.includes("resourceVersion=100&"), "from a newer version");
  await stop();
});

for (const asEvent of [false, true]) {
  Deno.test(`pod watch: 410 Gone ${asEvent ? "as an ERROR event" : "as the status"} relists; pods that vanished meanwhile are forgotten`, async () => {
    const { k, seen, watch, stop } = await setup();
    k.goneAsEvent = asEvent;
    k.down = true;
    k.resetWatches();
    await seen.wait(() => seen.errors > 0, "the watch failing");
    // While the watch is down: w2 is deleted and the history is compacted.
    k.delete("default", "w2");
    k.apply(pod("w5", "10.0.0.6", { app: "sglang" }));
    k.compact();
    k.down = false;
    await seen.wait(() => watch.lists === 2, "a relist");
    assert.deepEqual(seen.names(), ["w0", "w1", "w5"]);
    await stop();
  });
}

Deno.test("pod watch: an API server down at start is retried; the list comes once it is up", async () => {
  const k = new FakeKube();
  k.down = true;
  k.apply(pod("w0", "10.0.0.1", { app: "sglang" }));
  const seen = new Seen();
  const watch = new PodWatch({
    name: "worker pods",
    source: fetchSource(k, "app=sglang"),
    handlers: seen.handlers,
    log: silentLogger,
    clock: systemClock,
    backoffMs: 10,
    maxBackoffMs: 40,
  });
  watch.start();
  await seen.wait(() => seen.errors >= 3, "retries");
  assert.equal(seen.pods.size, 0);
  k.down = false;
  await seen.wait(() => seen.pods.has("w0"), "the list");
  await watch.stop();
  await k.close();
});

Deno.test("pod watch: a watch that delivers nothing for idleMs is dropped and watched again", async () => {
  const k = new FakeKube();
  k.apply(pod("w0", "10.0.0.1", { app: "sglang" }));
  const seen = new Seen();
  const watch = new PodWatch({
    name: "worker pods",
    source: fetchSource(k, "app=sglang"),
    handlers: seen.handlers,
    log: silentLogger,
    clock: systemClock,
    idleMs: 50,
    backoffMs: 10,
  });
  watch.start();
  await seen.wait(() => seen.errors >= 1, "the stalled watch dropped");
  assert.ok(k.requests.filter((r) => r.includes("watch=1")).length >= 1);
  await watch.stop();
  await k.close();
});

Deno.test("pod watch: a bookmark moves the resume point, so a reset after compaction needs no relist", async () => {
  const { k, seen, watch, stop } = await setup();
  // Changes this watch does not see advance the server's version; a bookmark tells the watch.
  for (let i = 0; i < 5; i++) k.apply(pod(`db${i}`, "10.0.1.1", { app: "redis" }));
  k.apply(pod("w3", "10.0.0.4", { app: "sglang" }));
  await seen.wait(() => seen.pods.has("w3"), "w3");
  k.apply(pod("db9", "10.0.1.9", { app: "redis" }));
  const before = k.requests.length;
  k.bookmark();
  await seen.wait(() => seen.bookmark !== "", "the bookmark read");
  k.compact(); // history gone: resuming from before the bookmark would be 410
  k.resetWatches();
  k.apply(pod("w4", "10.0.0.5", { app: "sglang" }));
  await seen.wait(() => seen.pods.has("w4"), "w4 after the reset");
  assert.equal(watch.lists, 1, "resumed from the bookmark");
  assert.ok(k.requests.slice(before).some((r) => r.includes("watch=1")));
  await stop();
});

Deno.test("pod watch: a server whose watches end at once, or answer 410 at once, is retried with backoff", async () => {
  for (const answer of [() => new Response(""), () => new Response("{}", { status: 410 })]) {
    const clock = new FakeClock();
    let watches = 0;
    let lists = 0;
    const seen = new Seen();
    const watch = new PodWatch({
      name: "stub",
      source: {
        list:
          () => (lists++,
            Promise.resolve({ items: [], resourceVersion: "1", continueToken: null })),
        watch: () => (watches++, Promise.resolve(answer())),
      },
      handlers: seen.handlers,
      log: silentLogger,
      clock,
      backoffMs: 20,
      maxBackoffMs: 40,
    });
    watch.start();
    // Each failure waits its backoff (doubling to the cap, jittered by ±20 %) on the clock.
    for (const [i, delay] of [20, 40, 40].entries()) {
      await seen.wait(() => seen.errors === i + 1, `failure ${i + 1}`);
      const tries = watches + lists;
      clock.advance(0.8 * delay - 0.001);
      assert.equal(watches + lists, tries, `no retry before ${0.8 * delay} ms`); // none fired
      clock.advance(0.4 * delay);
    }
    await seen.wait(() => seen.errors >= 4, "four failed watches");
    await watch.stop();
    // Four failures with backoff between them, not thousands of requests.
    assert.ok(watches <= 6 && lists <= 6, `${watches} watches, ${lists} lists`);
  }
});
