/**
 * `smg serve` as a user runs it: simulated workers (child processes and in-process) behind the
 * gateway, a ready banner with a working curl and the status page's address, SIGTERM stopping
 * everything (no orphan workers), and a worker that cannot start failing the command with the
 * others stopped.
 */

import assert from "node:assert/strict";
import { ownModulesRead } from "../../support/gateway_process.ts";
import { Waiters } from "../../support/wait.ts";

const main = new URL("../../main.ts", import.meta.url).pathname;
const FLAGS = [
  "--unstable-no-legacy-abort",
  "--unstable-worker-options",
  "--allow-net",
  "--allow-env=RUST_LOG,SMG_LOG",
  "--allow-run",
  ownModulesRead(main),
];

interface Served {
  child: Deno.ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<number>;
  /** Poked after each chunk of output and at exit. */
  output: Waiters;
  /** Whether the process has exited and its output is read. */
  done: () => boolean;
}

function spawnServe(args: string[]): Served {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...FLAGS, main, "serve", ...args],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  let out = "";
  let err = "";
  const dec = new TextDecoder();
  const output = new Waiters();
  const pumps = [
    (async () => {
      for await (const c of child.stdout) {
        out += dec.decode(c);
        output.poke();
      }
    })(),
    (async () => {
      for await (const c of child.stderr) err += dec.decode(c);
    })(),
  ];
  let done = false;
  const exited = child.status.then(async (s) => {
    await Promise.all(pumps);
    done = true;
    output.poke();
    return s.code;
  });
  return { child, out: () => out, err: () => err, exited, output, done: () => done };
}

const BANNER = /smg is ready on (http:\/\/\S+) with/;

/** Waits for the banner; returns the gateway URL. */
async function banner(s: Served): Promise<string> {
  await s.output.wait(() => BANNER.test(s.out()) || s.done(), "the banner", 30_000)
    .catch((e) => Promise.reject(new Error(`${e.message}:\n${s.out()}\n${s.err()}`)));
  const m = BANNER.exec(s.out());
  if (!m) throw new Error(`serve exited early:\n${s.err()}`);
  return m[1];
}

async function reachable(url: string): Promise<boolean> {
  try {
    const r = await fetch(`${url}/health`);
    await r.body?.cancel();
    return true;
  } catch {
    return false;
  }
}

const common = [
  "--port",
  "0",
  "--worker-base-port",
  "0",
  "--router-prometheus-port",
  "0",
  "--router-shutdown-grace-period-secs",
  "0",
];

Deno.test("serve: simulated child workers behind the gateway; SIGTERM leaves no worker running", async () => {
  const s = spawnServe([
    "--backend",
    "sim",
    "--dp-size",
    "2",
    "--sim-processes",
    "--time-scale",
    "0",
    ...common,
  ]);
  const url = await banner(s);
  assert.match(s.out(), /2 simulated workers \(policy cache_aware\)/);
  assert.match(s.out(), /curl -si http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions/);
  // The status page's address is printed beside the curl line, and it answers there.
  const page = s.out().match(/live: (http:\/\/127\.0\.0\.1:\d+\/dashboard)\n/);
  assert.ok(page, s.out());
  const p = await fetch(page[1]);
  assert.equal(p.status, 200);
  assert.match(await p.text(), /<title>smg status<\/title>/);
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "sim-model", messages: [{ role: "user", content: "hi" }] }),
  });
  assert.equal(r.status, 200);
  assert.ok(r.headers.get("x-smg-routed-worker-id"));
  assert.equal((await r.json()).object, "chat.completion");
  const workers = (await (await fetch(`${url}/workers`)).json()).workers.map((w: { url: string }) =>
    w.url
  );
  assert.equal(workers.length, 2);
  assert.ok(await reachable(workers[0]));
  s.child.kill("SIGTERM");
  assert.equal(await s.exited, 0, s.err());
  for (const w of workers) assert.equal(await reachable(w), false, `${w} stopped`);
});

Deno.test("serve: one in-process worker switches to passthrough", async () => {
  const s = spawnServe(["--backend", "sim", "--time-scale", "0", ...common]);
  const url = await banner(s);
  assert.match(s.out(), /1 simulated worker \(policy passthrough\)/);
  const r = await fetch(`${url}/generate`, {
    method: "POST",
    body: JSON.stringify({ text: "hello" }),
  });
  assert.equal(r.status, 200);
  assert.equal(typeof (await r.json()).text, "string");
  s.child.kill("SIGINT");
  assert.equal(await s.exited, 0);
});

Deno.test("serve: a worker that cannot start fails the command and the others are stopped", async () => {
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (taken.addr as Deno.NetAddr).port;
  try {
    const s = spawnServe([
      "--backend",
      "sim",
      "--dp-size",
      "2",
      "--sim-processes",
      "--worker-base-port",
      String(port - 1),
      "--worker-startup-timeout",
      "20",
      "--port",
      "0",
      "--router-prometheus-port",
      "0",
    ]);
    assert.equal(await s.exited, 1, s.err());
    assert.match(s.err(), /exited with code \d+ before it was healthy/);
    assert.equal(
      await reachable(`http://127.0.0.1:${port - 1}`),
      false,
      "the healthy worker was stopped",
    );
  } finally {
    taken.close();
  }
});

Deno.test("serve: bad flags fail at start with one line and exit 2", async () => {
  for (
    const args of [["--backend", "tpu"], ["--backend", "sim", "--kv-tokens", "-3"], [
      "--router-policy",
      "nope",
    ]]
  ) {
    const s = spawnServe(args);
    assert.equal(await s.exited, 2, args.join(" "));
    assert.equal(s.err().trim().split("\n").length, 1, s.err());
  }
});
