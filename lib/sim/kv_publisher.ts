/**
 * The simulated engine's KV events over ZeroMQ, as vLLM and SGLang publish theirs with
 * `--kv-events-config '{"publisher": "zmq", "endpoint": "tcp://*:5557", "replay_endpoint":
 * "tcp://*:5558"}'`. In: the engine's `KvEventLog`; out: each batch on a PUB as `[topic, seq as
 * 8 bytes big-endian, msgpack payload]`, and the last `bufferSteps` batches on a replay ROUTER.
 *
 * The payload is msgspec's array layout of a `KVEventBatch`, `[ts, events]` (ts in seconds, no
 * data-parallel rank, as msgspec omits a None): `["BlockStored", block_hashes,
 * parent_block_hash, token_ids, block_size, lora_id, medium]`, `["BlockRemoved", block_hashes,
 * medium]`, `["AllBlocksCleared"]`, with the engine's block keys as hashes (integers below 2^53),
 * no LoRA and medium "GPU". Sequence numbers are the log's (from 1). The log records from the
 * moment the publisher starts; a subscriber that connects later gets what follows, and the
 * ROUTER what is still buffered.
 */

import { encode } from "@msgpack/msgpack";
import type { Clock } from "../core/clock.ts";
import { ZmqPub } from "../kv/zmq_pub.ts";
import { seqFrame, ZmqReplayServer } from "../kv/zmq_replay_server.ts";
import type { KvBatch, KvEventLog } from "./kv_events.ts";

/** Where and how the events are published. */
export interface SimKvPublisherOptions {
  /** Address both sockets bind (the worker's `--host`). */
  host: string;
  /** PUB port (`--kv-events-port`; 0 picks one). */
  port: number;
  /** Replay ROUTER port (`--kv-events-replay-port`; 0 picks one), or null for none. */
  replayPort: number | null;
  /** Tokens per block (the engine's `blockSize`). */
  blockSize: number;
  /** Topic of every message (default "", vLLM's and SGLang's default). */
  topic?: string;
  /** Batches kept for replay (default 1000). */
  bufferSteps?: number;
  /** Messages a subscriber may have unwritten before it loses the next (default 100000, vLLM's). */
  sendHighWaterMark?: number;
  /** Clock of the sockets' handshake deadlines. */
  clock: Clock;
}

/** The engine-layout msgpack payload of `batch`. */
export function encodeEngineBatch(batch: KvBatch, blockSize: number): Uint8Array {
  const events = batch.events.map((e) => {
    if (e.type === "stored") {
      return ["BlockStored", e.keys, e.parent, e.tokens, blockSize, null, "GPU"];
    }
    if (e.type === "removed") return ["BlockRemoved", e.keys, "GPU"];
    return ["AllBlocksCleared"];
  });
  return encode([batch.ts / 1000, events]);
}

/** An engine's KV-event PUB and replay ROUTER, publishing its log. */
export class SimKvPublisher {
  readonly #pub: ZmqPub;
  readonly #replay: ZmqReplayServer | null;
  readonly #buffer: [number, Uint8Array][] = [];
  readonly #off: () => void;

  /** Binds both sockets (throws `Deno.errors.AddrInUse` and the like) and starts publishing. */
  constructor(log: KvEventLog, o: SimKvPublisherOptions) {
    const topic = new TextEncoder().encode(o.topic ?? "");
    const keep = o.bufferSteps ?? 1000;
    const hwm = o.sendHighWaterMark ?? 100_000;
    this.#pub = new ZmqPub({
      hostname: o.host,
      port: o.port,
      sendHighWaterMark: hwm,
      clock: o.clock,
    });
    try {
      this.#replay = o.replayPort === null ? null : new ZmqReplayServer(
        { hostname: o.host, port: o.replayPort, clock: o.clock },
        (from) => this.#buffer.filter(([seq]) => seq >= from),
      );
    } catch (e) {
      // Nobody can have connected yet: closing its listener is all there is to wait for.
      void this.#pub.close();
      throw e;
    }
    this.#off = log.subscribe(0, (b) => {
      const payload = encodeEngineBatch(b, o.blockSize);
      this.#buffer.push([b.seq, payload]);
      if (this.#buffer.length > keep) this.#buffer.shift();
      this.#pub.publish([topic, seqFrame(b.seq), payload]);
    });
  }

  /** The PUB's `tcp://host:port` (the worker label `kv_events`). */
  get endpoint(): string {
    return this.#pub.endpoint;
  }

  /** The replay ROUTER's `tcp://host:port` (the label `kv_events_replay`), or null. */
  get replayEndpoint(): string | null {
    return this.#replay?.endpoint ?? null;
  }

  /** The PUB (tests wait on its subscriptions). */
  get pub(): ZmqPub {
    return this.#pub;
  }

  /** Stops publishing and closes both sockets. */
  async close(): Promise<void> {
    this.#off();
    await Promise.all([this.#pub.close(), this.#replay?.close()]);
  }
}
