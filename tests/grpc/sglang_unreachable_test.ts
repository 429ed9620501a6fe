/**
 * A gRPC worker nobody listens for: every call fails with a retryable status, soon.
 *
 * Without Deno's op and resource sanitizers, on purpose (as `tests/mesh/transport/
 * grpc_unreachable_test.ts`): when grpc-js 1.14 fails to connect, its subchannel keeps a
 * reconnect-backoff timer (unref'd, bounded) that no public call cancels, and the sanitizers
 * would blame it on whichever test runs next; a module of its own gets its own isolate.
 */

import assert from "node:assert/strict";
import { GrpcCallError, retryableStatus, SglangClient } from "../../lib/grpc/sglang_client.ts";

/** Health and generation on `url` both fail with a retryable status (and nothing hangs). */
async function failsRetryably(url: string): Promise<void> {
  const client = new SglangClient(url);
  try {
    await assert.rejects(client.healthCheck(2000), (e: unknown) => {
      assert.ok(e instanceof GrpcCallError);
      assert.ok(retryableStatus(e.code), e.statusName);
      return true;
    });
    const s = client.generate({
      request_id: "r",
      tokenized: { original_text: "", input_ids: [1, 2, 3] },
    } as never);
    await assert.rejects(
      s.next(),
      (e: unknown) => e instanceof GrpcCallError && retryableStatus(e.code),
    );
  } finally {
    await client.close();
  }
}

Deno.test({
  name: "grpc: an unreachable worker fails health and generation with a retryable status",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () => failsRetryably("grpc://127.0.0.1:1"),
});

Deno.test({
  name: "grpc: a worker that speaks HTTP/1.1 at a grpc:// URL fails soon with a retryable status",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const http = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      () => new Response("not grpc"),
    );
    try {
      await failsRetryably(`grpc://127.0.0.1:${http.addr.port}`);
    } finally {
      await http.shutdown();
    }
  },
});
