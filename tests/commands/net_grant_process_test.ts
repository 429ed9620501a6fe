/**
 * The runtime net grant, seen from outside: the gateway started as `deno task start` starts it
 * (a global `--allow-net`) with a static worker runs in a thread that may reach only its listen
 * sockets and that worker. A worker added through the API at another loopback address (our own
 * allow-list is off: no `--worker-host-allowlist`, and the address is neither link-local nor
 * ours) is accepted by our code, and every connection to it is refused by Deno (`NotCapable`):
 * the trap listening there sees none. The same gateway with the address allow-listed reaches
 * the trap, so the grant alone made the difference. And a name is held to the runtime's
 * `--deny-net` by the address it resolves to, which is what stops a name re-pointed at
 * 169.254.169.254 after registration (DNS rebinding).
 */

import assert from "node:assert/strict";
import { FakeWorker } from "../support/fake_worker.ts";
import {
  gatewayListenArgs,
  type GatewayProcess,
  RUN_FLAGS,
  spawnGateway,
} from "../../support/gateway_process.ts";
import { freePort } from "../../lib/core/free_port.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

/** A listener that counts the connections it gets and closes them at once. */
function trap(hostname: string) {
  const listener = Deno.listen({ hostname, port: 0 });
  let accepted = 0;
  const { promise: first, resolve } = Promise.withResolvers<void>();
  const done = (async () => {
    for await (const conn of listener) {
      accepted++;
      resolve();
      conn.close();
    }
  })().catch(() => {});
  return {
    port: listener.addr.port,
    accepted: () => accepted,
    first,
    async close() {
      listener.close();
      await done;
    },
  };
}

const base = (worker: string) => [
  ...gatewayListenArgs(),
  "--policy",
  "round_robin",
  "--worker-startup-check-interval",
  "1",
  "--shutdown-grace-period-secs",
  "0",
  "--worker-urls",
  worker,
];

/** Kills the gateway if a failed assertion left it running, and waits for it. */
async function ended(gw: GatewayProcess): Promise<void> {
  try {
    gw.child.kill("SIGKILL");
  } catch {
    // It has exited already.
  }
  await gw.exited;
}

async function addWorker(gw: string, url: string): Promise<Record<string, string>> {
  const res = await fetch(`${gw}/workers`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ url }),
  });
  assert.equal(res.status, 202);
  return await res.json();
}

Deno.test("net grant: with static workers, a connection anywhere else is refused by the runtime", async () => {
  const worker = new FakeWorker();
  const elsewhere = trap("127.0.0.2");
  try {
    const gw = await spawnGateway(MAIN, base(worker.url));
    try {
      const port = new URL(worker.url).port;
      assert.match(
        gw.stderr(),
        new RegExp(`net_grant="narrow: 127\\.0\\.0\\.1:0,127\\.0\\.0\\.1:${port}"`),
      );
      await gw.waitForOutput(/msg="worker ready"/);
      const target = `http://127.0.0.2:${elsewhere.port}`;
      const body = await addWorker(gw.url, target);
      assert.match(body.warning, /runtime net grant does not reach/);
      // The health checker tries at once and every second after: Deno refuses each try.
      const m = await gw.waitForOutput(/msg="health probe refused by the runtime".*\n/);
      assert.match(
        m[0],
        new RegExp(`Requires net access to \\\\"127\\.0\\.0\\.2:${elsewhere.port}`),
      );
      const inference = await fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "test-model", messages: [{ role: "user", content: "hi" }] }),
      });
      assert.equal(inference.status, 200, "the static worker still serves");
      await inference.body?.cancel();
      gw.child.kill("SIGTERM");
      assert.equal(await gw.exited, 0, gw.stderr());
    } finally {
      await ended(gw);
    }
    assert.equal(elsewhere.accepted(), 0, "no connection left the process");
  } finally {
    await elsewhere.close();
    await worker.close();
  }
});

Deno.test("net grant: the same worker allow-listed is in the grant and is reached", async () => {
  const worker = new FakeWorker();
  const elsewhere = trap("127.0.0.2");
  try {
    const gw = await spawnGateway(MAIN, [
      ...base(worker.url),
      "--worker-host-allowlist",
      "127.0.0.1",
      "127.0.0.2",
    ]);
    try {
      assert.match(gw.stderr(), /net_grant="narrow: [^"]*,127\.0\.0\.2"/);
      const body = await addWorker(gw.url, `http://127.0.0.2:${elsewhere.port}`);
      assert.equal(body.warning, undefined);
      await elsewhere.first; // the health probe got through
      gw.child.kill("SIGTERM");
      assert.equal(await gw.exited, 0, gw.stderr());
    } finally {
      await ended(gw);
    }
    assert.ok(elsewhere.accepted() > 0);
  } finally {
    await elsewhere.close();
    await worker.close();
  }
});

Deno.test("net grant: a name is held to --deny-net by the address it resolves to", async () => {
  const worker = new FakeWorker();
  const denied = trap("127.0.0.1");
  try {
    // The mesh makes the worker set dynamic: no allow-list, so the process's grant is kept,
    // here with one more address denied beside the tasks' 169.254.0.0/16.
    const deny = RUN_FLAGS.find((f) => f.startsWith("--deny-net="))!;
    const gw = await spawnGateway(
      MAIN,
      [
        ...base(worker.url),
        "--enable-mesh",
        "--mesh-server-name",
        "solo",
        "--mesh-host",
        "127.0.0.1",
        "--mesh-port",
        String(freePort()),
      ],
      undefined,
      [`${deny},127.0.0.1:${denied.port}`],
    );
    try {
      assert.match(gw.stderr(), /net_grant="process: --enable-mesh register workers at run time/);
      // Our code accepts the name (no allow-list; not this gateway's port); Deno resolves it
      // and refuses the address.
      await addWorker(gw.url, `http://localhost:${denied.port}`);
      const m = await gw.waitForOutput(/msg="health probe refused by the runtime".*\n/);
      assert.match(m[0], new RegExp(`Requires net access to \\\\"127\\.0\\.0\\.1:${denied.port}`));
      gw.child.kill("SIGTERM");
      assert.equal(await gw.exited, 0, gw.stderr());
    } finally {
      await ended(gw);
    }
    assert.equal(denied.accepted(), 0);
  } finally {
    await denied.close();
    await worker.close();
  }
});
