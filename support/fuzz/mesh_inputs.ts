/**
 * Inputs for the mesh fuzzer (`mesh_peer.ts`), as a peer connected to the gateway's mesh port
 * sends them: pings and ping-reqs, and sync-stream frames (hello, heartbeat, and envelopes of
 * every type: store batches, acks and digests, tree deltas, repair requests and pages), each
 * built valid by the codecs, then bent: fields given awkward values, payload and frame bytes
 * mutated, the hello left out or sent from another name; and raw bytes that are not gRPC at all.
 *
 * What a bent message still says when it decodes is checked here, so the fuzzer never makes the
 * gateway reach beyond this run: a ping whose members live elsewhere than the peer's or the
 * gateway's address, or a store batch publishing a worker elsewhere than the run's, is replaced
 * by bytes that do not decode. The store keys named by batches and acks that decode are
 * returned (`excused`): the gateway may rightly change them.
 */

import type { Random } from "../../lib/core/clock.ts";
import * as tree from "../../lib/mesh/adapters/tree_codec.ts";
import { decodePublished } from "../../lib/mesh/adapters/worker_sync.ts";
import { keyId } from "../../lib/mesh/store/anti_entropy.ts";
import type { Op } from "../../lib/mesh/store/lww_store.ts";
import * as store from "../../lib/mesh/store/store_codec.ts";
import * as codec from "../../lib/mesh/transport/codec.ts";
import type { MemberStatus, MemberUpdate } from "../../lib/mesh/member.ts";
import { ENVELOPE_TYPES, type EnvelopeType, type StreamFrame } from "../../lib/mesh/wire.ts";
import { AWKWARD_STRINGS, chance, int, mutateBytes, pick, weighted } from "./mutate.ts";

/** Who is who in a mesh run. */
export interface MeshWorld {
  /** The fake peer's name and address. */
  peer: string;
  peerAddress: string;
  /** The gateway's mesh name and address. */
  gw: string;
  gwAddress: string;
  /** Worker URLs a store batch may publish (the gateway's own, and a dead port). */
  workerUrls: readonly string[];
  /** Keys the gateway's store holds, `[ns, key]`. */
  keys: () => [string, string][];
}

/** One input. */
export type MeshInput =
  | { kind: "ping" | "pingReq"; bytes: Uint8Array; describe: string }
  | { kind: "stream"; frames: Uint8Array[]; excused: string[]; describe: string }
  | { kind: "raw"; bytes: Uint8Array; describe: string };

/** Bytes no mesh decoder accepts (a string field whose length runs past the end). */
const UNDECODABLE = Uint8Array.of(0x12, 0x7f, 0x61);

const enc = new TextEncoder();
const STATUSES: MemberStatus[] = ["INIT", "ALIVE", "SUSPECTED", "DOWN", "LEAVING"];
const CLOCKS = [0, 1, 7, 2 ** 31, 2 ** 50, 2 ** 50 + 1, Number.MAX_SAFE_INTEGER];

function member(r: Random, w: MeshWorld): MemberUpdate {
  return {
    name: pick(r, [w.peer, w.peer, w.gw, `${w.peer}-2`, "", ...AWKWARD_STRINGS.slice(0, 12)]),
    address: pick(r, [w.peerAddress, w.gwAddress]),
    status: pick(r, STATUSES),
    incarnation: pick(r, [0, 1, 2, 1000, 2 ** 40]),
    from: pick(r, ["", w.gw, w.peer]),
  };
}

/** A ping or ping-req from the peer, bent. */
function unary(r: Random, w: MeshWorld): MeshInput {
  const updates = Array.from({ length: int(r, 0, 3) }, () => member(r, w));
  const seq = pick(r, [1, 2, 0, 2 ** 32, Number.MAX_SAFE_INTEGER]);
  const isPing = chance(r, 0.75);
  let bytes: Uint8Array = isPing
    ? codec.encodePing({
      kind: "ping",
      seq,
      from: pick(r, [w.peer, w.peer, w.gw, ""]),
      fromAddress: pick(r, [w.peerAddress, w.gwAddress]),
      to: pick(r, [w.gw, "", "someone-else"]),
      updates,
      fullState: chance(r, 0.3),
    })
    : codec.encodePingReq({
      kind: "pingReq",
      seq,
      from: w.peer,
      target: {
        name: pick(r, [w.peer, w.gw, "ghost"]),
        address: pick(r, [w.peerAddress, w.gwAddress]),
      },
      updates,
    });
  const muts = weighted(r, [[2, 0], [3, 1], [2, 2], [1, 5]] as const);
  for (let i = 0; i < muts; i++) bytes = mutateBytes(r, bytes);
  if (!unarySafe(bytes, isPing, w)) bytes = UNDECODABLE;
  return {
    kind: isPing ? "ping" : "pingReq",
    bytes,
    describe: `${isPing ? "ping" : "pingReq"} +${muts} mutations`,
  };
}

/** Whether a unary message names only the run's addresses (or does not decode). */
function unarySafe(bytes: Uint8Array, isPing: boolean, w: MeshWorld): boolean {
  const ok = (a: string) => a === w.peerAddress || a === w.gwAddress;
  if (isPing) {
    const d = codec.decodePing(bytes);
    return !d.ok || (ok(d.value.fromAddress) && d.value.updates.every((u) => ok(u.address)));
  }
  const d = codec.decodePingReq(bytes);
  return !d.ok || (ok(d.value.target.address) && d.value.updates.every((u) => ok(u.address)));
}

function publishedWorker(r: Random, w: MeshWorld): Uint8Array {
  return enc.encode(JSON.stringify({
    url: pick(r, w.workerUrls),
    models: pick(r, [null, ["fuzz-model"], [""], [1]]),
    worker_type: pick(r, ["regular", "prefill", "bogus"]),
    labels: pick(r, [{}, { a: "b" }, { a: 1 }, []]),
    priority: pick(r, [50, -1, 1e308]),
    cost: 1,
    bootstrap_port: pick(r, [null, 0, 99999]),
    disable_health_check: true,
    healthy: chance(r, 0.5),
    owner: pick(r, [w.peer, w.gw, ""]),
  }));
}

function op(r: Random, w: MeshWorld): Op {
  const known = w.keys();
  const [ns, key] = known.length > 0 && chance(r, 0.4) ? pick(r, known) : [
    pick(r, ["workers", "pins", "rate_limit", "other", ""]),
    pick(r, ["k", "", "x".repeat(2000), ...AWKWARD_STRINGS.slice(8, 14)]),
  ];
  const value = weighted(
    r,
    [
      [
        3,
        () => (ns === "workers"
          ? publishedWorker(r, w)
          : enc.encode(JSON.stringify(["http://127.0.0.1:0"]))),
      ],
      [1, (): Uint8Array | null => null],
      [1, () => Uint8Array.of(0xff, 0, 0x7b)],
      [1, () => new Uint8Array(0)],
    ] as const,
  )();
  return {
    ns,
    key,
    value,
    clock: pick(r, CLOCKS),
    replica: pick(r, ["r1", "", `${w.peer}#1`, "z".repeat(300)]),
  };
}

function version(r: Random, w: MeshWorld): store.KeyVersion {
  const { ns, key, clock, replica } = op(r, w);
  return { ns, key, clock, replica };
}

/** An envelope payload of `type`, valid before mutation. */
function payload(r: Random, type: EnvelopeType, w: MeshWorld): Uint8Array {
  const few = <T>(f: () => T) => Array.from({ length: int(r, 0, 3) }, f);
  switch (type) {
    case "crdt_batch":
      return store.encodeBatch(few(() => op(r, w)));
    case "crdt_ack":
      return store.encodeAck({
        versions: few(() => version(r, w)),
        collected: few(() => version(r, w)),
        belowHorizon: few(() => version(r, w)),
        clock: pick(r, CLOCKS),
      });
    case "digest":
      return store.encodeDigest(
        chance(r, 0.5)
          ? {
            buckets: Array.from({ length: pick(r, [64, 0, 1, 65]) }, () => int(r, 0, 2 ** 32 - 1)),
            versions: [],
            versionBuckets: [],
            reply: chance(r, 0.5),
          }
          : {
            buckets: [],
            versions: few(() => version(r, w)),
            versionBuckets: few(() => int(r, 0, 70)),
            reply: chance(r, 0.5),
          },
      );
    case "tree_deltas":
      return tree.withRound(
        tree.encodeDeltas(few(() => ({
          role: pick(r, ["main", "prefill", "decode"] as const),
          model: pick(r, ["fuzz-model", "", "other"]),
          kind: pick(r, ["string", "token"] as const),
          deltas: few(() => ({
            hash: pick(r, [0, 1, 2 ** 53 - 1]),
            worker: pick(r, w.workerUrls),
          })),
          corrections: [],
        }))),
        pick(r, [1, 2, 0, 1000]),
      );
    case "tree_repair_request":
      return tree.encodeRequest({
        session: pick(r, ["s1", ""]),
        role: pick(r, ["main", "prefill"] as const),
        model: pick(r, ["fuzz-model", "none"]),
        kind: pick(r, ["string", "token"] as const),
        cursor: pick(r, [0, 5, 2 ** 40]),
      });
    default:
      return tree.encodePage({
        session: pick(r, ["s1", ""]),
        role: "main",
        model: "fuzz-model",
        kind: pick(r, ["string", "token"] as const),
        index: pick(r, [0, 1, 7]),
        entries: few(() =>
          pick(r, [
            { path: "hello", tenants: [pick(r, w.workerUrls)] },
            { tokens: [1, 2, 3], tenants: [pick(r, w.workerUrls)] },
            { hash: 12345, tenants: [] },
          ])
        ),
        nextCursor: pick(r, [0, 3, 2 ** 50]),
        last: chance(r, 0.5),
        corrections: [],
      });
  }
}

const TYPES = ENVELOPE_TYPES;

/** A stream's frames: usually a hello, then bent frames. */
function stream(r: Random, w: MeshWorld): MeshInput {
  const frames: Uint8Array[] = [];
  const names: string[] = [];
  let seq = 1;
  const frame = (f: Omit<StreamFrame, "seq">) => codec.encodeFrame({ ...f, seq: seq++ });
  const hello = weighted(r, [[8, "ok"], [1, "none"], [1, "bent"]] as const);
  if (hello !== "none") {
    const to = hello === "ok" ? w.gw : pick(r, ["", "someone", w.peer]);
    const from = hello === "ok" ? w.peer : pick(r, ["", w.gw, "stranger"]);
    frames.push(frame({ from, body: { kind: "hello", to } }));
    names.push(`hello:${hello}`);
  }
  const excused: string[] = [];
  for (let i = int(r, 1, 4); i > 0; i--) {
    const kind = weighted(r, [[8, "envelope"], [1, "heartbeat"], [1, "unknown"]] as const);
    const from = chance(r, 0.95) ? w.peer : pick(r, [w.gw, "", "stranger"]);
    let bytes: Uint8Array;
    if (kind === "envelope") {
      const type = pick(r, TYPES);
      let p = payload(r, type, w);
      const pm = weighted(r, [[3, 0], [3, 1], [1, 3]] as const);
      for (let m = 0; m < pm; m++) p = mutateBytes(r, p);
      bytes = frame({ from, body: { kind: "envelope", type, payload: p } });
      names.push(`${type}+${pm}`);
    } else {
      bytes = frame({
        from,
        body: kind === "heartbeat" ? { kind: "heartbeat" } : { kind: "unknown" },
      });
      names.push(kind);
    }
    if (chance(r, 0.2)) {
      for (let m = int(r, 1, 3); m > 0; m--) bytes = mutateBytes(r, bytes);
      names.push("frame-bytes");
    }
    const keys = streamSafe(bytes, w);
    if (keys === null) {
      bytes = UNDECODABLE;
      names.push("(replaced)");
    } else excused.push(...keys);
    frames.push(bytes);
  }
  return { kind: "stream", frames, excused, describe: names.join(" ") };
}

/**
 * The store keys a frame may rightly change (those its decoded batch or ack names), or null
 * when it would publish a worker outside the run.
 */
function streamSafe(bytes: Uint8Array, w: MeshWorld): string[] | null {
  const f = codec.decodeFrame(bytes);
  if (!f.ok || f.value.body.kind !== "envelope") return [];
  const { type, payload: p } = f.value.body;
  if (type === "crdt_batch") {
    const b = store.decodeBatch(p);
    if (!b.ok) return [];
    for (const o of b.value) {
      if (o.ns !== "workers" || o.value === null) continue;
      const pw = decodePublished(o.value);
      if (pw && !w.workerUrls.includes(pw.url)) return null;
    }
    return b.value.map(keyId);
  }
  if (type === "crdt_ack") {
    const a = store.decodeAck(p);
    return a.ok
      ? [...a.value.versions, ...a.value.collected, ...a.value.belowHorizon].map(keyId)
      : [];
  }
  return [];
}

/** Bytes on the mesh port that are not gRPC: HTTP/1.1, a bare HTTP/2 preface, noise. */
function raw(r: Random): MeshInput {
  const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  const choices = [
    "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    preface,
    preface + "\x00\x00\x04\x08\x00\x00\x00\x00\x00",
    preface + "\xff".repeat(64),
    "\x16\x03\x01\x00\x05hello",
    "",
  ];
  const text = pick(r, choices);
  let bytes: Uint8Array = Uint8Array.from(text, (c) => c.charCodeAt(0) & 0xff);
  if (chance(r, 0.5)) bytes = mutateBytes(r, bytes);
  return { kind: "raw", bytes, describe: `raw ${JSON.stringify(text.slice(0, 24))}` };
}

/** One mesh input. */
export function meshInput(r: Random, w: MeshWorld): MeshInput {
  return weighted(
    r,
    [[3, () => unary(r, w)], [6, () => stream(r, w)], [1, () => raw(r)]] as const,
  )();
}
