/**
 * The mesh codec: every message survives a round trip, the proto's enums line up with wire.ts,
 * bytes this version cannot interpret are refused (or, for a frame body, ignored), and the
 * bundle carries the proto text so nothing is read from `proto/` at run time.
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import protobuf from "protobufjs";
import { MEMBER_STATUSES } from "../../../lib/mesh/member.ts";
import {
  decodeAck,
  decodeFrame,
  decodePing,
  decodePingReq,
  encodeAck,
  encodeFrame,
  encodePing,
  encodePingReq,
  GOSSIP_PATHS,
  MESH_PROTO,
} from "../../../lib/mesh/transport/codec.ts";
import {
  type AckMessage,
  ENVELOPE_TYPES,
  type PingMessage,
  type PingReqMessage,
  type StreamFrame,
} from "../../../lib/mesh/wire.ts";

/** A protobuf varint. */
function varint(n: bigint): number[] {
  const out: number[] = [];
  do {
    const low = Number(n & 0x7fn);
    n >>= 7n;
    out.push(n > 0n ? low | 0x80 : low);
  } while (n > 0n);
  return out;
}

/** Field `field` as a varint, or as length-delimited `bytes`. */
const vfield = (field: number, n: bigint) => [field << 3, ...varint(n)];
const lfield = (
  field: number,
  bytes: number[],
) => [(field << 3) | 2, ...varint(BigInt(bytes.length)), ...bytes];

const updates = MEMBER_STATUSES.map((status, i) => ({
  name: `r${i}`,
  address: `10.0.0.${i}:7946`,
  status,
  incarnation: 2 ** 53 - 1 - i,
  from: i % 2 ? "r0" : "",
}));

Deno.test("codec: requests and acks survive a round trip", () => {
  const ping: PingMessage = {
    kind: "ping",
    seq: 2 ** 40,
    from: "a",
    fromAddress: "10.0.0.1:7946",
    to: "ünïcode-b",
    updates,
    fullState: true,
  };
  assert.deepEqual(decodePing(encodePing(ping)), { ok: true, value: ping });
  const pingReq: PingReqMessage = {
    kind: "pingReq",
    seq: 0,
    from: "a",
    target: { name: "c", address: "[::1]:7946" },
    updates: updates.slice(0, 1),
  };
  assert.deepEqual(decodePingReq(encodePingReq(pingReq)), { ok: true, value: pingReq });
  for (const error of ["", "name_conflict", "wrong_node", "leaving"] as const) {
    const ack: AckMessage = { seq: 5, from: "b", nack: true, updates, fullState: false, error };
    assert.deepEqual(decodeAck(encodeAck(ack)), { ok: true, value: ack });
  }
});

Deno.test("codec: every frame body survives a round trip", () => {
  const frames: StreamFrame[] = [
    { from: "a", seq: 1, body: { kind: "hello", to: "b" } },
    { from: "a", seq: 2, body: { kind: "heartbeat" } },
    ...ENVELOPE_TYPES.map((type, i): StreamFrame => ({
      from: "a",
      seq: 3 + i,
      body: { kind: "envelope", type, payload: new Uint8Array([i, 255, 0]) },
    })),
    { from: "a", seq: 9, body: { kind: "envelope", type: "digest", payload: new Uint8Array() } },
    { from: "a", seq: 10, body: { kind: "unknown" } },
  ];
  for (const f of frames) assert.deepEqual(decodeFrame(encodeFrame(f)), { ok: true, value: f });
});

Deno.test("codec: the proto's enums and service match wire.ts and member.ts", () => {
  const root = protobuf.parse(MESH_PROTO, { keepCase: true }).root;
  assert.deepEqual(root.lookupEnum("smg.mesh.v1.MemberStatus").values, {
    INIT: 0,
    ALIVE: 1,
    SUSPECTED: 2,
    DOWN: 3,
    LEAVING: 4,
  });
  assert.deepEqual(MEMBER_STATUSES, ["INIT", "ALIVE", "SUSPECTED", "DOWN", "LEAVING"]);
  const envelope = root.lookupEnum("smg.mesh.v1.EnvelopeType").values;
  assert.equal(envelope.ENVELOPE_TYPE_UNSPECIFIED, 0);
  ENVELOPE_TYPES.forEach((t, i) => assert.equal(envelope[t.toUpperCase()], i + 1, t));
  assert.equal(Object.keys(envelope).length, ENVELOPE_TYPES.length + 1);
  assert.deepEqual(GOSSIP_PATHS, {
    ping: "/smg.mesh.v1.Gossip/Ping",
    pingReq: "/smg.mesh.v1.Gossip/PingReq",
    syncStream: "/smg.mesh.v1.Gossip/SyncStream",
  });
  assert.equal(
    MESH_PROTO,
    Deno.readTextFileSync(new URL("../../../proto/mesh.proto", import.meta.url)),
  );
});

Deno.test("codec: what this version cannot interpret is malformed", () => {
  const cases: [string, ReturnType<typeof decodePing | typeof decodeAck>, RegExp][] = [
    ["truncated string", decodePing(Buffer.from([0x12, 0x7f, 0x61])), /index out of range/],
    ["invalid wire type", decodePing(Buffer.from([0x0f])), /PingRequest/],
    [
      "unknown status",
      decodePing(Buffer.from(lfield(5, vfield(3, 9n)))),
      /unknown member status 9/,
    ],
    ["negative status", decodePing(Buffer.from(lfield(5, vfield(3, 2n ** 64n - 1n)))), /status -1/],
    ["seq above 2^53", decodePing(Buffer.from(vfield(1, 2n ** 53n))), /above 2\^53/],
    [
      "incarnation above 2^53",
      decodePing(Buffer.from(lfield(5, vfield(4, 2n ** 63n)))),
      /above 2\^53/,
    ],
    ["unknown ack error", decodeAck(Buffer.from(lfield(6, [...Buffer.from("busy")]))), /"busy"/],
  ];
  for (const [name, got, detail] of cases) {
    assert.equal(got.ok, false, name);
    if (!got.ok) assert.match(got.detail, detail, name);
  }
  assert.equal(decodeFrame(Buffer.from([0x0a, 0x7f])).ok, false);
  assert.equal(decodePingReq(Buffer.from([0x2a, 0x05, 0x18])).ok, false);
});

Deno.test("codec: a frame body from a later version is ignored, not refused", () => {
  const from = lfield(1, [0x61]);
  const cases = [
    from, // no body at all
    [...from, ...lfield(5, vfield(1, 0n))], // envelope of type UNSPECIFIED
    [...from, ...lfield(5, vfield(1, 42n))], // envelope of a type added later
    [...from, ...lfield(9, [])], // a body field added later
  ];
  for (const bytes of cases) {
    assert.deepEqual(decodeFrame(Buffer.from(bytes)), {
      ok: true,
      value: { from: "a", seq: 0, body: { kind: "unknown" } },
    });
  }
  // Unknown fields elsewhere are skipped too (proto3 rule).
  const ping = decodePing(Buffer.from([...lfield(2, [0x61]), ...vfield(15, 7n)]));
  assert.equal(ping.ok && ping.value.from, "a");
});

Deno.test("codec: the bundle embeds the proto and runs from an empty directory", async () => {
  const dir = await Deno.makeTempDir({ dir: "/tmp", prefix: "smg-codec-bundle-" });
  try {
    const codec = new URL("../../../lib/mesh/transport/codec.ts", import.meta.url).href;
    await Deno.writeTextFile(
      `${dir}/entry.ts`,
      `import { decodePing, encodePing, GOSSIP_PATHS } from ${JSON.stringify(codec)};
const p = { kind: "ping", seq: 3, from: "a", fromAddress: "", to: "", updates: [], fullState: false } as const;
console.log(JSON.stringify([GOSSIP_PATHS.ping, decodePing(encodePing(p))]));`,
    );
    const config = new URL("../../../deno.json", import.meta.url).pathname;
    const run = (args: string[], cwd?: string) =>
      new Deno.Command(Deno.execPath(), { args, cwd, stdout: "piped", stderr: "piped" }).output();
    const bundled = await run([
      "bundle",
      "--config",
      config,
      "--platform",
      "deno",
      "-o",
      `${dir}/out.js`,
      `${dir}/entry.ts`,
    ]);
    assert.equal(bundled.code, 0, new TextDecoder().decode(bundled.stderr));
    await Deno.mkdir(`${dir}/empty`);
    const out = await run(["run", "--no-config", `${dir}/out.js`], `${dir}/empty`);
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    const [path, decoded] = JSON.parse(new TextDecoder().decode(out.stdout));
    assert.equal(path, "/smg.mesh.v1.Gossip/Ping");
    assert.equal(decoded.ok, true);
    assert.equal(decoded.value.seq, 3);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
