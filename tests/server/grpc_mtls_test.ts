/**
 * Worker mTLS toward a `grpcs://` worker: a simulated sglang scheduler on TLS that requires a
 * client certificate signed by its CA, dialled by IP. The gateway's gRPC client without a client
 * certificate is refused (UNAVAILABLE); with one it is served, and a gateway given
 * `--client-cert-path` answers the `openai` client's chat through the worker.
 *
 * Without Deno's op and resource sanitizers, on purpose (as `tests/grpc/
 * sglang_unreachable_test.ts`): after a refused handshake grpc-js keeps a reconnect-backoff timer
 * (unref'd, bounded) that no public call cancels.
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import OpenAI from "openai";
import { defaultConfig } from "../../lib/config/config.ts";
import { GrpcCallError, SglangClient } from "../../lib/grpc/sglang_client.ts";

import { NO_OPENSSL, OPENSSL, type Pki, withPki } from "../../support/certs.ts";
import { startGateway } from "../../support/gateway.ts";
import { qwen3 } from "../../support/qwen3.ts";
import { grpcSim } from "../support/grpc_sim.ts";

/** A simulated scheduler on `grpcs://127.0.0.1:PORT` requiring a client certificate. */
async function mtlsWorker(pki: Pki) {
  const creds = grpc.ServerCredentials.createSsl(Buffer.from(pki.caPem), [
    { cert_chain: Buffer.from(pki.server.certPem), private_key: Buffer.from(pki.server.keyPem) },
  ], true);
  return await grpcSim({}, 0.2, creds);
}

Deno.test({
  name: "grpc mtls: a grpcs:// worker requiring a client certificate serves only a gateway " +
    "that presents one" + NO_OPENSSL,
  ignore: !OPENSSL,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withPki(async (pki) => {
      const w = await mtlsWorker(pki);
      try {
        // The client of the gateway's gRPC workers: refused without a certificate, served with.
        const bare = new SglangClient(w.url, { caCerts: [pki.caPem], client: null });
        try {
          await assert.rejects(bare.healthCheck(5000), (e: unknown) => {
            assert.ok(e instanceof GrpcCallError, String(e));
            assert.equal(e.statusName, "UNAVAILABLE");
            return true;
          });
        } finally {
          await bare.close();
        }
        const withCert = new SglangClient(w.url, {
          caCerts: [pki.caPem],
          client: { cert: pki.client.certPem, key: pki.client.keyPem },
        });
        try {
          assert.equal((await withCert.healthCheck(5000)).healthy, true);
        } finally {
          await withCert.close();
        }

        const g = await startGateway([w.url], {
          modelPath: "qwen3",
          tls: {
            ...defaultConfig().tls,
            clientCertPath: pki.client.cert,
            clientKeyPath: pki.client.key,
            caCertPaths: [pki.ca],
          },
        }, {
          grpc: { tokenizer: qwen3(), client: (url, t) => new SglangClient(url, t) },
        });
        try {
          const openai = new OpenAI({ baseURL: `${g.url}/v1`, apiKey: "unused", maxRetries: 0 });
          const c = await openai.chat.completions.create({
            model: "qwen3-sim",
            messages: [{ role: "user", content: "hi" }],
          });
          assert.ok((c.choices[0].message.content ?? "").length > 0);
          assert.ok((c.usage?.completion_tokens ?? 0) > 0);
        } finally {
          await g.close();
        }
      } finally {
        await w.close();
      }
    }),
});
