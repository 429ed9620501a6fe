/**
 * The gRPC mesh transport over real loopback sockets: requests, timeouts, sync streams with
 * backpressure and close from either side, hostile input (garbage bytes, bad protobuf,
 * oversized messages, floods), gzip from peers, mutual TLS, bind conflicts, and the
 * environment variables grpc-js needs permission to read. Refused connections are tested in
 * `grpc_unreachable_test.ts`, without the op sanitizer (see there).
 */

import { MeshCertificates } from "../../../lib/mesh/transport/certificates.ts";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import { FakeClock, systemClock } from "../../../lib/core/clock.ts";
import { encodePing } from "../../../lib/mesh/transport/codec.ts";
import { GRPC_ENV_VARS, GrpcTransport } from "../../../lib/mesh/transport/grpc.ts";
import { MAX_MESSAGE_BYTES, type MeshRequest, type StreamFrame } from "../../../lib/mesh/wire.ts";
import {
  ackFor,
  ask,
  countingProxy,
  listen,
  makeCerts,
  ping,
  rawClient,
  rawStream,
  rawUnary,
  startNode,
} from "./grpc_support.ts";

const frame = (from: string, seq: number, payload = new Uint8Array([seq])): StreamFrame => ({
  from,
  seq,
  body: { kind: "envelope", type: "crdt_batch", payload },
});

Deno.test("grpc: a ping round trip carries updates both ways", async () => {
  const b = await startNode("b", {}, (req, respond) =>
    respond({
      ...ackFor(req, "b"),
      fullState: true,
      updates: [{ name: "b", address: "x:1", status: "ALIVE", incarnation: 3, from: "" }],
    }));
  const a = new GrpcTransport({ clock: systemClock });
  try {
    const req: MeshRequest = {
      kind: "ping",
      seq: 42,
      from: "a",
      fromAddress: "127.0.0.1:1",
      to: "b",
      updates: [{ name: "c", address: "c:1", status: "SUSPECTED", incarnation: 7, from: "a" }],
      fullState: true,
    };
    const { err, reply } = await ask(a, b.address, req);
    assert.equal(err, null);
    assert.deepEqual(b.requests, [req]);
    assert.deepEqual(reply, {
      seq: 42,
      from: "b",
      nack: false,
      fullState: true,
      error: "",
      updates: [{ name: "b", address: "x:1", status: "ALIVE", incarnation: 3, from: "" }],
    });
  } finally {
    await a.close();
    await b.t.close();
  }
});

Deno.test("grpc: a ping-req arrives as one and its nack comes back", async () => {
  const b = await startNode(
    "b",
    {},
    (req, respond) => respond({ ...ackFor(req, "b"), nack: true }),
  );
  const a = new GrpcTransport({ clock: systemClock });
  try {
    const req: MeshRequest = {
      kind: "pingReq",
      seq: 9,
      from: "a",
      target: { name: "c", address: "10.0.0.3:7946" },
      updates: [],
    };
    const { err, reply } = await ask(a, b.address, req);
    assert.equal(err, null);
    assert.deepEqual(b.requests, [req]);
    assert.equal(reply?.nack, true);
    assert.equal(reply?.seq, 9);
  } finally {
    await a.close();
    await b.t.close();
  }
});

Deno.test("grpc: a peer that never answers times out", async () => {
  const b = await startNode("b", {}, () => {});
  const a = new GrpcTransport({ clock: systemClock });
  try {
    const { err, reply } = await ask(a, b.address, ping("a"), 100);
    assert.equal(reply, null);
    assert.equal(err?.code, "timeout");
  } finally {
    await a.close();
    await b.t.close();
  }
});

Deno.test("grpc: a stream carries frames both ways; a client close fires onClose once", async () => {
  const b = await startNode("b");
  const a = new GrpcTransport({ clock: systemClock });
  try {
    const client = a.openStream(b.address);
    const mine = listen(client);
    client.send({ from: "a", seq: 1, body: { kind: "hello", to: "b" } });
    const server = await b.nextStream();
    const theirs = listen(server);
    assert.deepEqual(await theirs.frames.next(), {
      from: "a",
      seq: 1,
      body: { kind: "hello", to: "b" },
    });
    server.send(frame("b", 2, new Uint8Array([1, 2, 3])));
    server.send({ from: "b", seq: 3, body: { kind: "heartbeat" } });
    assert.deepEqual(await mine.frames.next(), frame("b", 2, new Uint8Array([1, 2, 3])));
    assert.deepEqual(await mine.frames.next(), { from: "b", seq: 3, body: { kind: "heartbeat" } });
    assert.match(server.remote, /^127\.0\.0\.1:\d+$/);
    assert.match(client.remote, /127\.0\.0\.1:\d+/);

    client.close();
    await mine.closed;
    await theirs.closed;
    client.close();
    // A later round trip lets any duplicate close event arrive before counting.
    assert.equal((await ask(a, b.address, ping("a"))).err, null);
    assert.equal(mine.closes(), 1);
    assert.equal(theirs.closes(), 1);
    assert.equal(client.send(frame("a", 4)), false);
  } finally {
    await a.close();
    await b.t.close();
  }
});

Deno.test("grpc: a server close ends the client's stream; both fire onClose once", async () => {
  const b = await startNode("b");
  const a = new GrpcTransport({ clock: systemClock });
  try {
    const client = a.openStream(b.address);
    const mine = listen(client);
    client.send(frame("a", 1));
    const server = await b.nextStream();
    const theirs = listen(server);
    await theirs.frames.next();
    server.close();
    assert.equal(await theirs.closed, "closed locally");
    await mine.closed;
    assert.equal((await ask(a, b.address, ping("a"))).err, null);
    assert.equal(mine.closes(), 1);
    assert.equal(theirs.closes(), 1);
  } finally {
    await a.close();
    await b.t.close();
  }
});

Deno.test("grpc: send reports backpressure on large frames, then drain fires", async () => {
  const b = await startNode("b");
  const a = new GrpcTransport({ clock: systemClock });
  try {
    const client = a.openStream(b.address);
    const mine = listen(client);
    const big = new Uint8Array(1024 * 1024).fill(7);
    let sent = 0;
    while (client.send(frame("a", sent, big))) {
      sent++;
      assert.ok(sent < 1000, "send never reported a full buffer");
    }
    sent++;
    await mine.drains.next();
    const theirs = listen(await b.nextStream());
    for (let i = 0; i < sent; i++) assert.equal((await theirs.frames.next()).seq, i);
    client.close();
    await theirs.closed;
  } finally {
    await a.close();
    await b.t.close();
  }
});

Deno.test("grpc: closing the transport closes its streams and the peer sees it", async () => {
  const b = await startNode("b");
  const a = new GrpcTransport({ clock: systemClock });
  const client = a.openStream(b.address);
  const mine = listen(client);
  client.send(frame("a", 1));
  const theirs = listen(await b.nextStream());
  await theirs.frames.next();
  await a.close();
  await mine.closed;
  await theirs.closed;
  await b.t.close();
  const late = listen(a.openStream(b.address));
  assert.equal(await late.closed, "transport closed");
});

Deno.test("grpc: garbage bytes on the port do not stop the server", async () => {
  const b = await startNode("b");
  const a = new GrpcTransport({ clock: systemClock });
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: b.t.port });
    const junk = new Uint8Array(4096);
    crypto.getRandomValues(junk);
    await conn.write(junk);
    // The server answers an invalid HTTP/2 preface by closing the connection.
    const buf = new Uint8Array(1024);
    try {
      while (await conn.read(buf) !== null) { /* drain until the server hangs up */ }
    } catch { /* reset by peer is fine too */ }
    conn.close();
    assert.equal((await ask(a, b.address, ping("a"))).err, null);
  } finally {
    await a.close();
    await b.t.close();
  }
});

Deno.test("grpc: an undecodable request is refused as malformed and the server still serves", async () => {
  const b = await startNode("b");
  const client = rawClient(b.address);
  const a = new GrpcTransport({ clock: systemClock });
  try {
    // Field 1 as a length-delimited record whose length runs past the end.
    assert.equal(
      await rawUnary(client, Buffer.from([0x0a, 0x7f, 0x01])),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.equal((await b.nextRejection())[0], "malformed");
    // A member status this version does not know (7).
    const bad = Buffer.from([0x2a, 0x02, 0x18, 0x07]); // updates { status: 7 }
    assert.equal(await rawUnary(client, bad), grpc.status.INVALID_ARGUMENT);
    assert.match((await b.nextRejection())[1], /unknown member status 7/);
    assert.equal(b.requests.length, 0);
    assert.equal((await ask(a, b.address, ping("a"))).err, null);
  } finally {
    client.close();
    await a.close();
    await b.t.close();
  }
});

Deno.test("grpc: an undecodable frame is reported and closes only that stream", async () => {
  const b = await startNode("b");
  const client = rawClient(b.address);
  try {
    const call = rawStream(client);
    const status = new Promise<number>((resolve) => call.on("status", (s) => resolve(s.code)));
    call.on("error", () => {});
    call.on("data", () => {});
    call.write(Buffer.from([0x0a, 0x7f]));
    const conn = await b.nextStream();
    const theirs = listen(conn);
    assert.equal((await b.nextRejection())[0], "malformed");
    assert.match(await theirs.closed, /malformed frame/);
    assert.equal(await status, grpc.status.INVALID_ARGUMENT);
    assert.equal(await rawUnary(client, encodePing(ping("raw"))), grpc.status.OK);
  } finally {
    client.close();
    await b.t.close();
  }
});

Deno.test("grpc: a message over 10 MiB is refused and the server still serves", async () => {
  const b = await startNode("b");
  const client = rawClient(b.address, { "grpc.max_send_message_length": -1 });
  const a = new GrpcTransport({ clock: systemClock });
  try {
    const huge = Buffer.alloc(MAX_MESSAGE_BYTES + 1);
    assert.equal(await rawUnary(client, huge), grpc.status.RESOURCE_EXHAUSTED);
    // Our own client refuses to send one at all.
    const updates = [{
      name: "x".repeat(MAX_MESSAGE_BYTES),
      address: "",
      status: "ALIVE" as const,
      incarnation: 0,
      from: "",
    }];
    const { err } = await ask(a, b.address, { ...ping("a"), updates });
    assert.equal(err?.code, "unreachable");
    assert.match(err?.message ?? "", /RESOURCE_EXHAUSTED/);
    assert.equal(b.requests.length, 0);
    assert.equal((await ask(a, b.address, ping("a"))).err, null);
  } finally {
    client.close();
    await a.close();
    await b.t.close();
  }
});

Deno.test("grpc: a gzip-compressed request is accepted; our own requests are not compressed", async () => {
  const b = await startNode("b");
  const proxy = countingProxy(b.t.port);
  const gzip = rawClient(proxy.address, { "grpc.default_compression_algorithm": 2 });
  const a = new GrpcTransport({ clock: systemClock });
  try {
    const big = { ...ping("a"), from: "a".repeat(1024 * 1024) };
    assert.equal(await rawUnary(gzip, encodePing(big)), grpc.status.OK);
    assert.equal((b.requests[0] as { from: string }).from.length, 1024 * 1024);
    const compressed = proxy.upstreamBytes();
    assert.ok(compressed < 64 * 1024, `gzip request took ${compressed} bytes`);
    assert.equal((await ask(a, proxy.address, big)).err, null);
    assert.ok(proxy.upstreamBytes() - compressed > 1024 * 1024, "our request was compressed");
  } finally {
    gzip.close();
    await a.close();
    await b.t.close();
    await proxy.close();
  }
});

Deno.test("grpc: requests over the burst are refused as a flood until tokens refill", async () => {
  const clock = new FakeClock();
  const b = await startNode("b", { requestsPerSecond: 1, requestBurst: 3, clock });
  const a = new GrpcTransport({ clock: systemClock });
  try {
    const results = await Promise.all(
      [1, 2, 3, 4, 5].map((seq) => ask(a, b.address, ping("a", seq))),
    );
    const refused = results.filter((r) => r.err !== null);
    assert.equal(refused.length, 2);
    for (const r of refused) assert.match(r.err!.message, /RESOURCE_EXHAUSTED/);
    assert.deepEqual(b.rejected.map(([reason]) => reason), ["flood", "flood"]);
    assert.equal(b.requests.length, 3);
    clock.advance(1000);
    assert.equal((await ask(a, b.address, ping("a"))).err, null);
    assert.notEqual((await ask(a, b.address, ping("a"))).err, null);
  } finally {
    await a.close();
    await b.t.close();
  }
});

Deno.test("grpc: serve rejects when the port is taken", async () => {
  const b = await startNode("b");
  const clash = new GrpcTransport({ host: "127.0.0.1", port: b.t.port, clock: systemClock });
  try {
    await assert.rejects(
      clash.serve({ onRequest: () => {}, onStream: () => {}, onRejected: () => {} }),
      /cannot bind/,
    );
  } finally {
    await clash.close();
    await b.t.close();
  }
});

Deno.test("grpc: over mTLS, routers with CA-signed certificates talk by IP", async () => {
  const certs = await makeCerts();
  const b = await startNode("b", {
    tls: new MeshCertificates(certs.ca, certs.b.cert, certs.b.key),
  });
  const a = new GrpcTransport({
    tls: new MeshCertificates(certs.ca, certs.a.cert, certs.a.key),
    clock: systemClock,
  });
  try {
    assert.equal((await ask(a, b.address, ping("a"))).err, null);
    const conn = a.openStream(b.address);
    const mine = listen(conn);
    conn.send(frame("a", 1));
    const theirs = listen(await b.nextStream());
    assert.equal((await theirs.frames.next()).seq, 1);
    conn.close();
    await mine.closed;
    await theirs.closed;
  } finally {
    await a.close();
    await b.t.close();
  }
});

/** The subject CN a mesh port at `port` presents to a TLS client holding `client`'s pair. */
async function presented(
  port: number,
  ca: string,
  client: { cert: string; key: string },
): Promise<string> {
  const tls = await import("node:tls");
  const socket = tls.connect({
    host: "127.0.0.1",
    port,
    ca,
    cert: client.cert,
    key: client.key,
    servername: "smg-mesh",
    ALPNProtocols: ["h2"],
    checkServerIdentity: () => undefined,
  });
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once("secureConnect", () => resolve());
      socket.once("error", reject);
    });
    return String(socket.getPeerCertificate().subject.CN);
  } finally {
    socket.destroy();
  }
}

Deno.test("grpc: over mTLS, a new certificate is presented on connections made after update", async () => {
  const certs = await makeCerts();
  const mine = new MeshCertificates(certs.ca, certs.b.cert, certs.b.key);
  const b = await startNode("b", { tls: mine });
  const a = new GrpcTransport({
    tls: new MeshCertificates(certs.ca, certs.a.cert, certs.a.key),
    clock: systemClock,
  });
  try {
    assert.equal(await presented(b.t.port, certs.ca, certs.a), "router-b");
    mine.update(certs.a.cert, certs.a.key);
    assert.equal(await presented(b.t.port, certs.ca, certs.a), "router-a");
    // The routers still talk: the new pair is the CA's too.
    assert.equal((await ask(a, b.address, ping("a"))).err, null);
  } finally {
    await a.close();
    await b.t.close();
  }
});

Deno.test("grpc: plaintext and mTLS run with --allow-env limited to GRPC_ENV_VARS", async () => {
  const certs = await makeCerts();
  const dir = await Deno.makeTempDir({ dir: "/tmp", prefix: "smg-grpc-env-" });
  try {
    const grpcTs = new URL("../../../lib/mesh/transport/grpc.ts", import.meta.url).href;
    const clockTs = new URL("../../../lib/core/clock.ts", import.meta.url).href;
    const certsTs = new URL("../../../lib/mesh/transport/certificates.ts", import.meta.url).href;
    // Deno throws NotCapable on a read of an environment variable it was not granted.
    await Deno.writeTextFile(
      `${dir}/probe.ts`,
      `import { GrpcTransport } from ${JSON.stringify(grpcTs)};
import { systemClock } from ${JSON.stringify(clockTs)};
import { MeshCertificates } from ${JSON.stringify(certsTs)};
const certs = ${JSON.stringify(certs)};
for (const tls of [null, new MeshCertificates(certs.ca, certs.a.cert, certs.a.key)]) {
  const b = new GrpcTransport({ host: "127.0.0.1", tls, clock: systemClock });
  await b.serve({
    onRequest: (r, respond) => respond({ seq: r.seq, from: "b", nack: false, updates: [], fullState: false, error: "" }),
    onStream: () => {},
    onRejected: () => {},
  });
  const a = new GrpcTransport({ tls, clock: systemClock });
  const ping = { kind: "ping", seq: 1, from: "a", fromAddress: "", to: "", updates: [], fullState: false } as const;
  const err = await new Promise((resolve) => a.request("127.0.0.1:" + b.port, ping, 5000, resolve));
  await a.close();
  await b.close();
  if (err) throw new Error(JSON.stringify(err));
}
`,
    );
    const config = new URL("../../../deno.json", import.meta.url).pathname;
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--config",
        config,
        `--allow-env=RUST_LOG,SMG_LOG,${GRPC_ENV_VARS.join(",")}`,
        "--allow-net=127.0.0.1,0.0.0.0",
        `${dir}/probe.ts`,
      ],
      // A proxy variable must not be read (nor used).
      env: { http_proxy: "http://127.0.0.1:9", NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
