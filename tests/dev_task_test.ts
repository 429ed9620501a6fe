/**
 * `deno task dev`, the development loop: the task's own command (from deno.json) serves the
 * simulated fleet, and a watched file's change restarts gateway and workers without leaving the
 * old workers behind. Run with `--sim-processes` so the workers are child processes (the
 * in-process default has nothing to leave behind), on free ports, and watching a temporary
 * file as well, so the test edits nothing in the tree.
 */

import assert from "node:assert/strict";
import denoJson from "../deno.json" with { type: "json" };
import { Waiters } from "../support/wait.ts";

const root = new URL("..", import.meta.url).pathname;

async function refused(url: string): Promise<boolean> {
  try {
    const r = await fetch(`${url}/health`);
    await r.body?.cancel();
    return false;
  } catch {
    return true;
  }
}

Deno.test("deno task dev: serves the sim fleet and restarts it on a change, old workers gone", async () => {
  const [deno, run, ...flags] = denoJson.tasks.dev.split(" ");
  assert.deepEqual([deno, run], ["deno", "run"]);
  assert.ok(flags.includes("--watch"), "watch mode");
  const main = flags.indexOf("main.ts");
  assert.deepEqual(flags.slice(main, main + 4), ["main.ts", "serve", "--backend", "sim"]);
  const touched = await Deno.makeTempFile({ prefix: "smg-dev-" });
  const args = [
    run,
    ...flags.map((f) => (f === "--watch" ? `--watch=${touched}` : f)),
    // Free ports, child workers (see the module comment).
    "--port",
    "0",
    "--worker-base-port",
    "0",
    "--router-prometheus-port",
    "0",
    "--dp-size",
    "2",
    "--sim-processes",
  ];
  const child = new Deno.Command(Deno.execPath(), {
    args,
    cwd: root,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  let out = "";
  const output = new Waiters();
  const dec = new TextDecoder();
  const pump = (s: ReadableStream<Uint8Array>) =>
    (async () => {
      for await (const c of s) {
        out += dec.decode(c);
        output.poke();
      }
    })();
  const pumps = [pump(child.stdout), pump(child.stderr)];
  const BANNER = /smg is ready on (http:\/\/\S+) with 2 simulated workers/g;
  const banners = () => [...out.matchAll(BANNER)].map((m) => m[1]);
  const workers = () => [...out.matchAll(/sim-worker listening" addr=(\S+)/g)].map((m) => m[1]);
  try {
    await output.wait(() => banners().length === 1, "the first banner", 30_000);
    const first = workers();
    assert.equal(first.length, 2, out);
    const ready = await fetch(`${banners()[0]}/readiness`);
    assert.equal(ready.status, 200);
    await ready.body?.cancel();

    await Deno.writeTextFile(touched, "changed");
    await output.wait(() => banners().length === 2, "the banner after the restart", 30_000);
    assert.match(out, /Restarting! File change detected/);
    assert.match(out, /msg="shutdown complete"/, "the old fleet was shut down, not cut");
    const again = await fetch(`${banners()[1]}/readiness`);
    assert.equal(again.status, 200);
    await again.body?.cancel();
    for (const w of first) assert.ok(await refused(w), `old worker ${w} still answers`);
  } finally {
    child.kill("SIGINT");
    await child.status;
    await Promise.all(pumps);
    await Deno.remove(touched);
  }
  for (const w of workers()) assert.ok(await refused(w), `worker ${w} left running`);
});
