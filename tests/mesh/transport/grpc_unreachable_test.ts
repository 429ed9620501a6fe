/**
 * The gRPC mesh transport when a connection cannot be made or is cut while it is being made:
 * a closed port, `close()` during the connect, and the mTLS refusals.
 *
 * These tests run without Deno's op and resource sanitizers, on purpose. When grpc-js 1.14
 * fails to connect, its subchannel keeps a reconnect-backoff timer (unref'd, at most ~2.4 s)
 * and may make one more connection attempt after its channel is closed; nothing public lets
 * `close()` cancel or await that. It is bounded and harmless in a router, but the sanitizers
 * would blame it on whichever test runs next, so these tests live in their own file (a test
 * module gets its own isolate) and `grpc_test.ts` keeps the sanitizers on for everything else.
 */

import { MeshCertificates } from "../../../lib/mesh/transport/certificates.ts";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import { systemClock } from "../../../lib/core/clock.ts";
import { encodePing } from "../../../lib/mesh/transport/codec.ts";
import { GrpcTransport, MESH_TLS_NAME } from "../../../lib/mesh/transport/grpc.ts";
import { ask, makeCerts, ping, rawUnary, startNode } from "./grpc_support.ts";

const unsanitized = { sanitizeOps: false, sanitizeResources: false };

Deno.test({
  name: "grpc: a closed port is unreachable well before the deadline",
  ...unsanitized,
  fn: async () => {
    const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = probe.addr.port;
    probe.close();
    const a = new GrpcTransport({ clock: systemClock });
    try {
      const { err, reply } = await ask(a, `127.0.0.1:${port}`, ping("a"), 30_000);
      assert.equal(reply, null);
      assert.equal(err?.code, "unreachable");
    } finally {
      await a.close();
    }
  },
});

Deno.test({
  name: "grpc: after close, requests fail as closed, and one in flight does too",
  ...unsanitized,
  fn: async () => {
    const b = await startNode("b", {}, () => {});
    const a = new GrpcTransport({ clock: systemClock });
    const inFlight = ask(a, b.address, ping("a"), 30_000);
    await a.close();
    try {
      assert.equal((await inFlight).err?.code, "closed");
      assert.equal((await ask(a, b.address, ping("a"))).err?.code, "closed");
    } finally {
      await b.t.close();
    }
  },
});

Deno.test({
  name: "grpc: mTLS refuses every party without a certificate signed by the mesh CA",
  ...unsanitized,
  fn: async (t) => {
    const certs = await makeCerts();
    const tls = (pair: { cert: string; key: string }) =>
      new MeshCertificates(certs.ca, pair.cert, pair.key);
    const b = await startNode("b", { tls: tls(certs.b) });
    const evilServer = await startNode("evil", { tls: tls(certs.evil) });
    const closers: { close(): unknown }[] = [];
    const keep = <T extends { close(): unknown }>(c: T) => (closers.push(c), c);
    try {
      await t.step("a client without a certificate", async () => {
        const creds = grpc.credentials.createSsl(Buffer.from(certs.ca), null, null, {
          checkServerIdentity: () => undefined,
        });
        const raw = keep(
          new grpc.Client(b.address, creds, {
            "grpc.ssl_target_name_override": MESH_TLS_NAME,
            "grpc.default_authority": MESH_TLS_NAME,
          }),
        );
        assert.equal(await rawUnary(raw, encodePing(ping("raw"))), grpc.status.UNAVAILABLE);
      });
      await t.step("a client with a self-signed certificate", async () => {
        const evil = keep(new GrpcTransport({ tls: tls(certs.evil), clock: systemClock }));
        assert.equal((await ask(evil, b.address, ping("evil"))).err?.code, "unreachable");
      });
      await t.step("a server with a self-signed certificate", async () => {
        const a = keep(new GrpcTransport({ tls: tls(certs.a), clock: systemClock }));
        assert.equal((await ask(a, evilServer.address, ping("a"))).err?.code, "unreachable");
      });
      await t.step("a plaintext client", async () => {
        const plain = keep(new GrpcTransport({ clock: systemClock }));
        assert.equal((await ask(plain, b.address, ping("a"))).err?.code, "unreachable");
      });
      await t.step("while a signed client still gets in", async () => {
        const a = keep(new GrpcTransport({ tls: tls(certs.a), clock: systemClock }));
        assert.equal((await ask(a, b.address, ping("a"))).err, null);
      });
      assert.equal(b.requests.length, 1);
      assert.equal(evilServer.requests.length, 0);
    } finally {
      for (const c of closers) await c.close();
      await b.t.close();
      await evilServer.t.close();
    }
  },
});
