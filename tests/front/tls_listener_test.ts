/**
 * The own front over HTTPS (`listenTlsFront`): answers on kept-alive connections to a client
 * that trusts the CA, refuses one that does not; and the certificate swapped while serving:
 * connections opened all through twenty swaps all get their answer, a connection opened after
 * the last swap is shown the new certificate (only a client trusting the new CA gets through),
 * and a stream opened before the first swap runs on to its end.
 */

import assert from "node:assert/strict";
import { systemClock } from "../../lib/core/clock.ts";
import type { ChunkSource, Reply } from "../../lib/core/http.ts";
import { silentLogger } from "../../lib/core/log.ts";
import { type FrontHandler, serveFront } from "../../lib/front/server.ts";
import { listenTlsFront, type TlsFrontListener } from "../../lib/front/tls_listener.ts";
import { httpsClient, NO_OPENSSL, OPENSSL, type Pki, withPki } from "../../support/certs.ts";
import { within } from "../../support/wait.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A stream of `parts`, the rest held until `gate` resolves after the first. */
function gated(parts: string[], gate: Promise<void>): ChunkSource {
  let i = 0;
  return {
    async read() {
      if (i === 1) await gate;
      return i < parts.length ? enc.encode(parts[i++]) : null;
    },
    cancel() {},
  };
}

async function withTlsFront(
  pki: Pki,
  handler: FrontHandler,
  fn: (l: TlsFrontListener, url: string) => Promise<void>,
): Promise<void> {
  const listener = await listenTlsFront({
    hostname: "127.0.0.1",
    port: 0,
    cert: pki.server.certPem,
    key: pki.server.keyPem,
  });
  const front = serveFront(
    {
      hostname: "127.0.0.1",
      port: 0,
      maxBody: 1 << 20,
      log: silentLogger,
      clock: systemClock,
      listener,
    },
    handler,
  );
  try {
    await fn(listener, `https://127.0.0.1:${front.addr.port}`);
  } finally {
    await front.shutdown();
  }
}

/** One request on a new TLS connection trusting `cas`; the answer's body, or the error. */
async function once(port: number, cas: string[]): Promise<string> {
  const conn = await Deno.connectTls({ hostname: "127.0.0.1", port, caCerts: cas });
  try {
    await conn.write(enc.encode("GET /hello HTTP/1.1\r\nhost: gw\r\nconnection: close\r\n\r\n"));
    let text = "";
    const buf = new Uint8Array(4096);
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) break;
      text += dec.decode(buf.subarray(0, n));
    }
    return text.slice(text.indexOf("\r\n\r\n") + 4);
  } finally {
    conn.close();
  }
}

const hello: FrontHandler = (inb) =>
  Promise.resolve({
    status: 200,
    headers: [["content-type", "text/plain"]],
    body: enc.encode(`hello ${inb.path}`),
  });

Deno.test({
  name: "front tls: HTTPS answers on kept-alive connections; an untrusting client is refused" +
    NO_OPENSSL,
  ignore: !OPENSSL,
  fn: () =>
    withPki((pki) =>
      withTlsFront(pki, hello, async (_l, url) => {
        const client = httpsClient([pki.caPem]);
        try {
          for (const path of ["/a", "/b", "/c"]) {
            const res = await fetch(url + path, { client });
            assert.equal(await res.text(), `hello ${path}`);
          }
        } finally {
          client.close();
        }
        const stranger = httpsClient([pki.ca2Pem]);
        try {
          await assert.rejects(fetch(url + "/a", { client: stranger }));
        } finally {
          stranger.close();
        }
      })
    ),
});

Deno.test({
  name: "front tls: a certificate swapped while serving loses no connection and keeps streams" +
    NO_OPENSSL,
  ignore: !OPENSSL,
  fn: () =>
    withPki(async (pki) => {
      const gate = Promise.withResolvers<void>();
      const handler: FrontHandler = (inb): Promise<Reply> =>
        inb.path === "/stream"
          ? Promise.resolve({
            status: 200,
            headers: [["content-type", "text/event-stream"]],
            body: gated(["data: 1\n\n", "data: 2\n\n", "data: 3\n\n"], gate.promise),
          })
          : hello(inb, Promise.resolve());
      await withTlsFront(pki, handler, async (listener, url) => {
        const port = Number(new URL(url).port);
        // A stream opened before any swap, on the first certificate.
        const old = httpsClient([pki.caPem]);
        const res = await fetch(url + "/stream", { client: old });
        const reader = res.body!.getReader();
        assert.equal(dec.decode((await reader.read()).value), "data: 1\n\n");

        // Eight clients open one connection per request while the certificate changes every
        // 25 answers, 20 times.
        const both = [pki.caPem, pki.ca2Pem];
        const pairs = [pki.server2, pki.server];
        let answered = 0;
        let swaps = 0;
        const failures: string[] = [];
        const client = async () => {
          while (swaps < 20) {
            try {
              const body = await once(port, both);
              if (body !== "hello /hello") failures.push(`body ${JSON.stringify(body)}`);
            } catch (e) {
              failures.push((e as Error).message);
            }
            if (++answered % 25 === 0 && swaps < 20) {
              const p = pairs[swaps++ % 2];
              listener.setCertificate({ cert: p.certPem, key: p.keyPem });
            }
          }
        };
        await within(Promise.all(Array.from({ length: 8 }, client)), "20 swaps under load", 60_000);
        assert.deepEqual(failures, [], `${failures.length} of ${answered} failed`);
        assert.ok(answered >= 500, `${answered} answered`);

        // The last swap installed server-1 (CA 1) again: swap to CA 2's and look.
        listener.setCertificate({ cert: pki.server2.certPem, key: pki.server2.keyPem });
        assert.equal(await once(port, [pki.ca2Pem]), "hello /hello");
        await assert.rejects(once(port, [pki.caPem]), /certificate|UnknownIssuer/i);

        // The stream from before the swaps ends as it would have.
        gate.resolve();
        let rest = "";
        for (;;) {
          const r = await reader.read();
          if (r.done) break;
          rest += dec.decode(r.value);
        }
        assert.equal(rest, "data: 2\n\ndata: 3\n\n");
        old.close();
      });
    }),
});
