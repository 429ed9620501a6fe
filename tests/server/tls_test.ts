/**
 * HTTPS on the main port through the whole gateway, on both fronts: `curl --cacert` and the
 * official `openai` client (streaming and not) against `https://127.0.0.1:PORT`; HTTP/2 by ALPN on
 * `--http-server deno`; the certificate files replaced while serving (new connections are shown
 * the new certificate, a stream opened before runs to its end); and worker mTLS toward an
 * `https://` worker that requires a client certificate (refused without `--client-cert-path`,
 * served with it, the worker's CA trusted from the second of two `--ca-cert-paths` files). Tenant
 * `ip:` keys read the TLS client's address on both fronts (not the loopback pipe's on `deno`).
 */

import assert from "node:assert/strict";
import OpenAI from "openai";
import { defaultConfig, type TlsConfig } from "../../lib/config/config.ts";
import { httpsClient, NO_OPENSSL, OPENSSL, type Pki, withPki } from "../../support/certs.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { type Overrides, startGateway, type TestGateway } from "../../support/gateway.ts";
import { MtlsWorker } from "../support/mtls_worker.ts";
import { Waiters } from "../../support/wait.ts";

const SERVERS = ["own", "deno"] as const;
const chat = { model: "test-model", messages: [{ role: "user" as const, content: "hi" }] };

const CURL = await new Deno.Command("curl", { args: ["--version"], stdout: "null" }).output()
  .then((o) => o.success, () => false);
const NO_CURL = CURL ? "" : " (skipped: the curl command is not installed)";

function tls(o: Partial<TlsConfig>): TlsConfig {
  return { ...defaultConfig().tls, ...o };
}

/** Copies the server pair into `dir/tls.crt` and `dir/tls.key` (the files the gateway reads). */
async function install(dir: string, pair: { certPem: string; keyPem: string }): Promise<void> {
  await Deno.writeTextFile(`${dir}/tls.crt.tmp`, pair.certPem);
  await Deno.writeTextFile(`${dir}/tls.key.tmp`, pair.keyPem);
  await Deno.rename(`${dir}/tls.crt.tmp`, `${dir}/tls.crt`);
  await Deno.rename(`${dir}/tls.key.tmp`, `${dir}/tls.key`);
}

/** A gateway serving HTTPS with the files in `pki.dir/live/`, in front of `workers`. */
async function httpsGateway(
  pki: Pki,
  workers: FakeWorker[],
  httpServer: "own" | "deno",
  o: Overrides = {},
): Promise<TestGateway> {
  const live = `${pki.dir}/live`;
  await Deno.mkdir(live, { recursive: true });
  await install(live, pki.server);
  return await startGateway(workers.map((w) => w.url), {
    ...o,
    httpServer,
    tls: tls({ certPath: `${live}/tls.crt`, keyPath: `${live}/tls.key` }),
  });
}

async function curl(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const o = await new Deno.Command("curl", { args: ["-sS", ...args] }).output();
  const dec = new TextDecoder();
  return { code: o.code, out: dec.decode(o.stdout), err: dec.decode(o.stderr) };
}

for (const httpServer of SERVERS) {
  Deno.test({
    name: `tls (${httpServer}): curl --cacert and the openai client over https` + NO_OPENSSL +
      NO_CURL,
    ignore: !OPENSSL || !CURL,
    fn: () =>
      withPki(async (pki) => {
        const w = new FakeWorker();
        const g = await httpsGateway(pki, [w], httpServer);
        try {
          assert.match(g.url, /^https:\/\/127\.0\.0\.1:\d+$/);
          const r = await curl([
            "--cacert",
            pki.ca,
            "-H",
            "content-type: application/json",
            "-d",
            JSON.stringify(chat),
            `${g.url}/v1/chat/completions`,
          ]);
          assert.equal(r.code, 0, r.err);
          assert.match(JSON.parse(r.out).choices[0].message.content, /hello from/);
          // Without the CA, curl refuses the certificate.
          const untrusted = await curl([`${g.url}/health`]);
          assert.equal(untrusted.code, 60, untrusted.err);

          const client = httpsClient([pki.caPem]);
          try {
            const openai = new OpenAI({
              baseURL: `${g.url}/v1`,
              apiKey: "unused",
              maxRetries: 0,
              fetch: (url: string | URL | Request, init?: RequestInit) =>
                fetch(url, { ...init, client }),
            });
            const c = await openai.chat.completions.create(chat);
            assert.match(c.choices[0].message.content ?? "", /hello from/);
            const stream = await openai.chat.completions.create({ ...chat, stream: true });
            let text = "";
            for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
            assert.equal(text, "t0 t1 t2 ");
          } finally {
            client.close();
          }
          if (httpServer === "deno") {
            // Deno.serve behind the TLS listener still speaks HTTP/2 when ALPN picks it.
            const h2 = await curl(["--cacert", pki.ca, "--http2", "-i", `${g.url}/health`]);
            assert.equal(h2.code, 0, h2.err);
            assert.match(h2.out, /^HTTP\/2 200/);
          }
        } finally {
          await g.close();
          await w.close();
        }
      }),
  });

  Deno.test({
    name: `tls (${httpServer}): a tenant ip: key reads the TLS client's address` + NO_OPENSSL +
      NO_CURL,
    ignore: !OPENSSL || !CURL,
    fn: () =>
      withPki(async (pki) => {
        const limits = `${pki.dir}/limits.yaml`;
        await Deno.writeTextFile(
          limits,
          `default_policy:
  tokens_per_minute: 6000
  requests_per_minute: 6000
tenants:
  - tenant_key: ip:127.0.0.2
    tokens_per_minute: 6000
    requests_per_minute: 1
`,
        );
        const w = new FakeWorker();
        const g = await httpsGateway(pki, [w], httpServer, {
          tenantRateLimit: { enabled: true, configPath: limits, scope: "router", syncMs: 100 },
        });
        const from = async (ip: string) => {
          const r = await curl([
            ...["--cacert", pki.ca, "--interface", ip, "-o", "/dev/null", "-w", "%{http_code}"],
            ...["-H", "content-type: application/json", "-d", JSON.stringify(chat)],
            `${g.url}/v1/chat/completions`,
          ]);
          assert.equal(r.code, 0, r.err);
          return r.out;
        };
        try {
          // 127.0.0.2 has one request a minute; 127.0.0.1 (where the pipe comes from) is not it.
          assert.equal(await from("127.0.0.2"), "200");
          assert.equal(await from("127.0.0.2"), "429");
          assert.equal(await from("127.0.0.1"), "200");
          assert.equal(await from("127.0.0.1"), "200");
        } finally {
          await g.close();
          await w.close();
        }
      }),
  });

  Deno.test({
    name: `tls (${httpServer}): certificate files replaced while serving: new connections get ` +
      `the new one, a stream survives` + NO_OPENSSL,
    ignore: !OPENSSL,
    fn: () =>
      withPki(async (pki) => {
        const gate = Promise.withResolvers<void>();
        const w = new FakeWorker({ gate: gate.promise });
        const g = await httpsGateway(pki, [w], httpServer);
        const reloads = new Waiters();
        let reloaded = 0;
        g.serving.tls!.onReload = (o) => {
          if (o === "reloaded") reloaded++;
          reloads.poke();
        };
        const before = httpsClient([pki.caPem]);
        const after = httpsClient([pki.ca2Pem]);
        try {
          const ok = await fetch(`${g.url}/health`, { client: before });
          assert.equal(ok.status, 200);
          await ok.body?.cancel();
          const res = await fetch(`${g.url}/v1/chat/completions`, {
            client: before,
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ ...chat, stream: true }),
          });
          const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
          let text = "";
          while (!text.includes("t0")) {
            const r = await reader.read();
            if (r.done) assert.fail(`the stream ended before its first chunk: ${text}`);
            text += r.value;
          }

          await install(`${pki.dir}/live`, pki.server2);
          await reloads.wait(() => reloaded === 1, "the certificate reloaded");
          const fresh = await fetch(`${g.url}/health`, { client: after });
          assert.equal(fresh.status, 200);
          await fresh.body?.cancel();
          // A new connection trusting only the old CA is refused now.
          const stale = httpsClient([pki.caPem]);
          try {
            await assert.rejects(fetch(`${g.url}/health`, { client: stale }));
          } finally {
            stale.close();
          }

          gate.resolve();
          for (;;) {
            const r = await reader.read();
            if (r.done) break;
            text += r.value;
          }
          assert.match(text, /t2 .*\[DONE\]/s);
        } finally {
          before.close();
          after.close();
          await g.close();
          await w.close();
        }
      }),
  });
}

/** The gateway's answer to a chat through `g`, as status and body text. */
async function chatThrough(g: TestGateway): Promise<[number, string]> {
  const res = await fetch(`${g.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(chat),
  });
  return [res.status, await res.text()];
}

/** A fake worker behind an `https://` front that requires a client certificate of `pki`'s CA. */
async function mtlsWorker(pki: Pki): Promise<{ w: FakeWorker; mtls: MtlsWorker }> {
  const w = new FakeWorker();
  const mtls = await MtlsWorker.start(Number(new URL(w.url).port), {
    cert: pki.server.certPem,
    key: pki.server.keyPem,
    ca: pki.caPem,
  });
  return { w, mtls };
}

Deno.test({
  name: "tls: an https:// worker requiring a client certificate refuses a gateway without one " +
    "and serves one with it" + NO_OPENSSL,
  ignore: !OPENSSL,
  fn: () =>
    withPki(async (pki) => {
      const { w, mtls } = await mtlsWorker(pki);
      try {
        // Trusting the worker's CA but presenting nothing: every handshake is refused.
        const bare = await startGateway([], { tls: tls({ caCertPaths: [pki.ca] }) });
        try {
          bare.gw.manager.add({ url: mtls.url });
          await mtls.waiters.wait(() => mtls.refused > 0, "a refused handshake");
          const [status] = await chatThrough(bare);
          assert.equal(status, 503);
          assert.deepEqual(mtls.accepted, []);
        } finally {
          await bare.close();
        }

        // With the client certificate (and the CA in the second of two files): served.
        const g = await startGateway([mtls.url], {
          tls: tls({
            clientCertPath: pki.client.cert,
            clientKeyPath: pki.client.key,
            caCertPaths: [pki.stranger, pki.ca],
          }),
        });
        try {
          const [status, body] = await chatThrough(g);
          assert.equal(status, 200, body);
          assert.match(JSON.parse(body).choices[0].message.content, /hello from/);
          // Health checks (fetch) and the request (the HTTP/1.1 client) both presented it.
          assert.ok(mtls.accepted.length >= 2, mtls.accepted.join(","));
          assert.ok(mtls.accepted.every((cn) => cn === "gateway"), mtls.accepted.join(","));
        } finally {
          await g.close();
        }
      } finally {
        await mtls.close();
        await w.close();
      }
    }),
});

Deno.test({
  name: "tls: a renewed client certificate reaches the workers without a restart" + NO_OPENSSL,
  ignore: !OPENSSL,
  fn: () =>
    withPki(async (pki) => {
      const { w, mtls } = await mtlsWorker(pki);
      const cert = `${pki.dir}/live-client.pem`;
      const key = `${pki.dir}/live-client.key`;
      await Deno.writeTextFile(cert, pki.client.certPem);
      await Deno.writeTextFile(key, pki.client.keyPem);
      const g = await startGateway([mtls.url], {
        tls: tls({ clientCertPath: cert, clientKeyPath: key, caCertPaths: [pki.ca] }),
      });
      try {
        assert.equal((await chatThrough(g))[0], 200);
        assert.ok(mtls.accepted.every((cn) => cn === "gateway"), mtls.accepted.join(","));
        // The renewal is written (key first: a reload between the two files fails, keeps the
        // pair in use); SIGHUP's reload takes it, and new connections present it.
        await Deno.writeTextFile(key, pki.client2.keyPem);
        await Deno.writeTextFile(cert, pki.client2.certPem);
        await g.gw.reload("test");
        const results = await Promise.all([chatThrough(g), chatThrough(g), chatThrough(g)]);
        assert.deepEqual(results.map(([status]) => status), [200, 200, 200]);
        await mtls.waiters.wait(() => mtls.accepted.includes("gateway-2"), "the renewed pair");
        assert.equal(mtls.refused, 0);
      } finally {
        await g.close();
        await mtls.close();
        await w.close();
      }
    }),
});
