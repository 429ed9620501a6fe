/**
 * Fuzz family `mesh`: a fake peer joined to a gateway's mesh (it answers the gateway's probes
 * over a real `GrpcTransport`) sends it bent pings, ping-reqs and sync-stream frames
 * (`mesh_inputs.ts`) through a raw grpc-js client, and raw non-gRPC bytes to its port, one input
 * at a time. The gateway holds a worker and a pin (cache-aware routing with sticky sessions) in
 * its replicated store. A stream input ends with a fence, a digest asking for a reply: the
 * gateway's answer shows every envelope before it was handled (or the gateway closed the
 * stream). The peer rejoins whenever an input got it declared dead.
 *
 * Oracles: every call and stream ends within `ANSWER_MS`, with a gRPC status that is not
 * INTERNAL or UNKNOWN, and an OK ping gets an ack that decodes; the store changes from remote
 * only at keys some well-formed batch or ack named, and the gateway's own entries hold their
 * values to the end; its worker stays registered; `/mesh/status` answers 200 with the gateway
 * ALIVE.
 */

import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import { defaultConfig } from "../../lib/config/config.ts";
import { type Random, systemClock } from "../../lib/core/clock.ts";
import { keyId } from "../../lib/mesh/store/anti_entropy.ts";
import * as store from "../../lib/mesh/store/store_codec.ts";
import * as codec from "../../lib/mesh/transport/codec.ts";
import { GrpcTransport } from "../../lib/mesh/transport/grpc.ts";
import type { MemberUpdate } from "../../lib/mesh/member.ts";
import { type AckMessage, MAX_MESSAGE_BYTES, type MeshRequest } from "../../lib/mesh/wire.ts";
import { startGateway, type TestGateway } from "../gateway.ts";
import { freePort } from "../../lib/core/free_port.ts";
import { Waiters } from "../wait.ts";
import type { FuzzFamily, FuzzTarget, Outcome } from "./driver.ts";
import { type MeshInput, meshInput, type MeshWorld } from "./mesh_inputs.ts";
import { RecordingWorker } from "./recording_worker.ts";

/** Longest a call, a stream or a raw connection may take to end. */
const ANSWER_MS = 5000;
const PEER = "a-fuzz-peer";
const GW = "gw-fuzz";
const NAMESPACES = ["workers", "pins"];
const identity = (b: Buffer) => b;

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

class MeshTarget implements FuzzTarget {
  readonly #gw: TestGateway;
  readonly #worker: RecordingWorker;
  readonly #peer: GrpcTransport;
  readonly #client: grpc.Client;
  readonly #world: MeshWorld;
  readonly #waiters = new Waiters();
  /** Store keys a well-formed message named: the gateway may change them. */
  readonly #excused = new Set<string>();
  /** Remote changes of keys no well-formed message named, since the last input. */
  #unexcused: string[] = [];
  /** Remote changes since the last input. */
  #changes = 0;
  /** The gateway's own entries at the start, by key id. */
  readonly #baseline = new Map<string, string>();
  #incarnation = 1;
  readonly #excuse: boolean;

  constructor(
    gw: TestGateway,
    worker: RecordingWorker,
    peer: GrpcTransport,
    gwAddress: string,
    excuse: boolean,
  ) {
    this.#excuse = excuse;
    this.#gw = gw;
    this.#worker = worker;
    this.#peer = peer;
    this.#client = new grpc.Client(gwAddress, grpc.credentials.createInsecure(), {
      "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
      "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
      "grpc.enable_http_proxy": 0,
      "grpc.enable_retries": 0,
      "grpc.use_local_subchannel_pool": 1,
    });
    const mesh = gw.gw.mesh!;
    this.#world = {
      peer: PEER,
      peerAddress: `127.0.0.1:${peer.port}`,
      gw: GW,
      gwAddress,
      workerUrls: [worker.url, "http://127.0.0.1:0"],
      keys: () => [...mesh.store.all()].map((e) => [e.ns, e.key]),
    };
    mesh.node.onMember(this.#waiters.poke);
    mesh.store.onChange((e, origin) => {
      this.#waiters.poke();
      if (origin === "remote") this.#changes++;
      if (origin === "remote" && !this.#excused.has(keyId(e))) {
        this.#unexcused.push(`remote change of ${JSON.stringify(keyId(e))} no valid message named`);
      }
    });
  }

  /** The peer's ack to anything the gateway asks: alive, at its current incarnation. */
  answer(req: MeshRequest): AckMessage {
    return {
      seq: req.seq,
      from: PEER,
      nack: false,
      updates: [this.#self()],
      fullState: req.kind === "ping" && req.fullState,
      error: "",
    };
  }

  #self(): MemberUpdate {
    const w = this.#world;
    return {
      name: PEER,
      address: w.peerAddress,
      status: "ALIVE",
      incarnation: this.#incarnation,
      from: "",
    };
  }

  /** Joins (again, at a higher incarnation when the gateway holds it dead) and waits for ALIVE. */
  async join(): Promise<void> {
    const node = this.#gw.gw.mesh!.node;
    const known = node.members().find((m) => m.name === PEER)?.incarnation ?? 0;
    this.#incarnation = Math.max(this.#incarnation, known) + 1;
    const alive = this.#waiters.wait(
      () => node.statusOf(PEER) === "ALIVE",
      "the peer ALIVE",
      ANSWER_MS,
    );
    for (let seq = 1; node.statusOf(PEER) !== "ALIVE"; seq++) {
      await new Promise<void>((resolve) =>
        this.#peer.request(
          this.#world.gwAddress,
          {
            kind: "ping",
            seq,
            from: PEER,
            fromAddress: this.#world.peerAddress,
            to: GW,
            updates: [this.#self()],
            fullState: true,
          },
          ANSWER_MS,
          () => resolve(),
        )
      );
      if (seq > 50) break;
    }
    await alive;
  }

  /** The gateway's own entries now: key id → value. */
  snapshot(): Map<string, string> {
    const out = new Map<string, string>();
    for (const e of this.#gw.gw.mesh!.store.all()) {
      if (NAMESPACES.includes(e.ns)) out.set(keyId(e), e.value === null ? "removed" : hex(e.value));
    }
    return out;
  }

  /** Records the baseline once the store holds a worker and a pin. */
  async baseline(): Promise<void> {
    const holds = () =>
      NAMESPACES.every((ns) =>
        [...this.snapshot().keys()].some((k) => k.startsWith(`${ns}\u0000`))
      );
    await this.#waiters.wait(holds, "a worker and a pin in the store");
    for (const [k, v] of this.snapshot()) this.#baseline.set(k, v);
  }

  async run(_index: number, r: Random): Promise<Outcome> {
    const input = meshInput(r, this.#world);
    const violations: string[] = [];
    let label: string;
    if (input.kind === "stream") {
      if (this.#gw.gw.mesh!.node.statusOf(PEER) !== "ALIVE") {
        await this.join().catch((e) => violations.push(`the peer could not rejoin: ${e.message}`));
      }
      if (this.#excuse) { for (const k of input.excused) this.#excused.add(k); }
      label = await this.#stream(input.frames, violations);
    } else if (input.kind === "raw") label = await this.#raw(input.bytes, violations);
    else label = await this.#unary(input, violations);
    violations.push(...this.#unexcused.splice(0));
    const labels = [label];
    if (this.#changes > 0) labels.push("store changed by a valid op");
    this.#changes = 0;
    return { labels, violations, input: input.describe };
  }

  #unary(
    input: Extract<MeshInput, { kind: "ping" | "pingReq" }>,
    violations: string[],
  ): Promise<string> {
    const path = input.kind === "ping" ? codec.GOSSIP_PATHS.ping : codec.GOSSIP_PATHS.pingReq;
    return new Promise((resolve) => {
      this.#client.makeUnaryRequest(
        path,
        identity,
        identity,
        Buffer.from(input.bytes),
        { deadline: Date.now() + ANSWER_MS },
        (err, res) => {
          const status = err ? grpc.status[err.code] : "OK";
          if (err && badStatus(err.code)) {
            violations.push(`${input.kind} ended ${status}: ${err.details}`);
          }
          if (!err && !(res && codec.decodeAck(res).ok)) {
            violations.push(`${input.kind} got an ack that does not decode`);
          }
          resolve(`${input.kind} ${status}`);
        },
      );
    });
  }

  /** Sends `frames` and a fence on a fresh stream; waits for the fence's answer, then ends it. */
  async #stream(frames: Uint8Array[], violations: string[]): Promise<string> {
    const call = this.#client.makeBidiStreamRequest<Buffer, Buffer>(
      codec.GOSSIP_PATHS.syncStream,
      identity,
      identity,
    );
    const fenced = Promise.withResolvers<void>();
    const ended = Promise.withResolvers<string>();
    call.on("data", (b: Buffer) => {
      const f = codec.decodeFrame(b);
      if (!f.ok) violations.push(`the gateway sent a frame that does not decode: ${f.detail}`);
      else if (f.value.body.kind === "envelope" && f.value.body.type === "digest") {
        const d = store.decodeDigest(f.value.body.payload);
        if (d.ok && d.value.buckets.length > 0 && !d.value.reply) fenced.resolve();
      }
    });
    call.on("status", (s: grpc.StatusObject) => ended.resolve(grpc.status[s.code]));
    call.on("error", (e: grpc.ServiceError) => ended.resolve(grpc.status[e.code]));
    for (const f of frames) call.write(Buffer.from(f));
    const fence = store.encodeDigest({
      buckets: new Array(64).fill(0),
      versions: [],
      versionBuckets: [],
      reply: true,
    });
    call.write(
      codec.encodeFrame({
        from: PEER,
        seq: 1000,
        body: { kind: "envelope", type: "digest", payload: fence },
      }),
    );
    const first = await within(
      Promise.race([fenced.promise.then(() => "fenced"), ended.promise]),
      ANSWER_MS,
    );
    if (first === null) violations.push("the stream got no answer and was not closed");
    call.end();
    const status = await within(ended.promise, ANSWER_MS);
    if (status === null) {
      violations.push("the stream was not closed after the peer ended it");
      call.cancel();
    } else if (badStatus(grpc.status[status as keyof typeof grpc.status] as number)) {
      violations.push(`the stream ended ${status}`);
    }
    return `stream ${first === "fenced" ? "fenced" : "closed-by-gateway"} ${status ?? "hung"}`;
  }

  /** Writes non-gRPC bytes to the mesh port; the gateway must close the connection. */
  async #raw(bytes: Uint8Array, violations: string[]): Promise<string> {
    const conn = await Deno.connect({
      hostname: "127.0.0.1",
      port: Number(this.#world.gwAddress.split(":")[1]),
    });
    try {
      try {
        await conn.write(bytes);
        await conn.closeWrite();
      } catch { /* closed already */ }
      const buf = new Uint8Array(4096);
      const drained = (async () => {
        try {
          while ((await conn.read(buf)) !== null) { /* what the server says is not checked */ }
        } catch { /* reset */ }
        return "closed";
      })();
      const how = await within(drained, ANSWER_MS);
      if (how === null) {
        violations.push("a raw connection stayed open after the client half-closed");
      }
      return "raw closed";
    } finally {
      conn.close();
    }
  }

  async finish(): Promise<string[]> {
    const out: string[] = [];
    const res = await fetch(`${this.#gw.url}/mesh/status`);
    const body = await res.json().catch(() => null);
    if (res.status !== 200 || body?.name !== GW || body?.status !== "ALIVE") {
      out.push(`/mesh/status answered ${res.status} ${JSON.stringify(body)?.slice(0, 200)}`);
    }
    const now = this.snapshot();
    for (const [k, v] of this.#baseline) {
      if (!this.#excused.has(k) && now.get(k) !== v) {
        out.push(`own entry ${JSON.stringify(k)} changed: ${v} → ${now.get(k)}`);
      }
    }
    const w = this.#gw.gw.registry.byUrl(this.#worker.url);
    if (!w || w.origin === "mesh") out.push("the gateway's own worker is gone");
    return out;
  }

  async close(): Promise<void> {
    // The gateway first: it leaves while the peer still answers, so no dial of it fails.
    this.#client.close();
    await this.#gw.close();
    await this.#peer.close();
    await this.#worker.close();
  }
}

/** A gRPC status that means the server failed rather than refused. */
function badStatus(code: number): boolean {
  return code === grpc.status.INTERNAL || code === grpc.status.UNKNOWN ||
    code === grpc.status.DEADLINE_EXCEEDED;
}

/**
 * `p`'s value, or null after `ms` of real time: the no-hang oracle, against a gateway that runs
 * on the system clock (no fake time reaches it).
 */
async function within<T>(p: Promise<T>, ms: number): Promise<T | null> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<null>((r) => timer = setTimeout(() => r(null), ms));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The mesh-port family. */
export const meshPeer: FuzzFamily = meshFamily();

/**
 * The mesh-port family; with `excuse` false, no well-formed message excuses a store change (the
 * oracle's own test: a valid batch must then be reported).
 */
export function meshFamily(excuse = true): FuzzFamily {
  return { name: "mesh", concurrency: 1, start: (seed) => startMesh(seed, excuse) };
}

async function startMesh(seed: number, excuse: boolean): Promise<MeshTarget> {
  const worker = new RecordingWorker();
  const port = freePort();
  const peer = new GrpcTransport({ host: "127.0.0.1", port: 0, clock: systemClock });
  let target: MeshTarget | null = null;
  let gw: TestGateway | null = null;
  try {
    gw = await startGateway([worker.url], {
      policy: "cache_aware",
      routingKeyOverride: true,
      workerHostAllowlist: ["127.0.0.1"],
      randomSeed: seed,
      mesh: {
        ...defaultConfig().mesh,
        enabled: true,
        serverName: GW,
        host: "127.0.0.1",
        advertiseHost: "127.0.0.1",
        port,
      },
    });
    await peer.serve({
      onRequest: (req, respond) => respond(target!.answer(req)),
      onStream: (conn) => conn.listen({ onFrame() {}, onDrain() {}, onClose() {} }),
      onRejected() {},
    });
    target = new MeshTarget(gw, worker, peer, `127.0.0.1:${port}`, excuse);
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-smg-routing-key": "fuzz-key" },
      body: JSON.stringify({
        model: worker.model,
        messages: [{ role: "user", content: "pin me" }],
      }),
    });
    await res.body?.cancel();
    await target.baseline();
    await target.join();
    return target;
  } catch (e) {
    if (target) await target.close();
    else {
      await peer.close();
      await gw?.close();
      await worker.close();
    }
    throw e;
  }
}
