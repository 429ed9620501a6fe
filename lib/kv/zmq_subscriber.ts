/**
 * One worker's KV-event stream over ZeroMQ. In: the engine's PUB endpoint (and its replay
 * ROUTER, when configured); out: decoded batches in sequence order and status changes,
 * through a `KvEventSink`.
 *
 * A SUB socket receives `[topic, seq as 8-byte big-endian, msgpack payload]`. A batch past the
 * next number is a gap: the missed ones are asked of the replay endpoint from the last applied
 * number + 1 and applied before it (`gap_recovered`), or reported lost
 * (`gap_unrecoverable`). A number at or below the last means a new publisher
 * (`publisher_restarted`). A lost connection is retried with doubling delays; with heartbeats on,
 * a PING goes out every interval and a connection silent past the timeout counts as lost (a
 * publisher whose host vanished sends no FIN). All timers run on the injected `Clock`; `close()`
 * (or the `signal`) stops the loop and resolves once it has ended.
 */

import { type Clock, every, sleep } from "../core/clock.ts";
import { type Logger, silentLogger } from "../core/log.ts";
import { parseZmqEndpoint } from "./endpoint.ts";
import { decodeEngineBatch } from "./engine_events.ts";
import { type Dial, type KvSocket, requestReplay } from "./replay.ts";
import { classifySeq, reconnectDelay } from "./sequence.ts";
import type { KvEventSink, KvStreamStatus } from "./sink.ts";
import { type Message, ZmtpSocket } from "./zmtp.ts";

/** Where and how to subscribe. */
export interface ZmqSubscriberOptions {
  /** The engine's PUB endpoint, `tcp://host:port` (required). */
  endpoint: string;
  /** Its replay ROUTER endpoint; null reports gaps instead of recovering them (default null). */
  replayEndpoint?: string | null;
  /** Topic prefix to subscribe to (default "": every topic). */
  topic?: string;
  /** First reconnection delay in ms, doubling per failed try (default 100). */
  reconnectInitialMs?: number;
  /** Longest reconnection delay in ms (default 5000). */
  reconnectMaxMs?: number;
  /** Deadline of a connection's handshake in ms (default 5000). */
  handshakeTimeoutMs?: number;
  /** Deadline of a replay (connect and answer) in ms (default 5000). */
  replayTimeoutMs?: number;
  /** PING interval in ms; 0 turns heartbeats off (default 5000). */
  heartbeatIntervalMs?: number;
  /** Silence after which a connection counts as lost, in ms (default 15000). */
  heartbeatTimeoutMs?: number;
  /** Largest message accepted, in bytes (default 16 MiB). */
  maxMessageBytes?: number;
  /** Clock of every timer. */
  clock: Clock;
  /** Opens sockets (default: ZMTP over TCP). */
  dial?: Dial;
  /** Where a throwing sink is reported (default silent). */
  logger?: Logger;
  /** Stops the subscriber, like `close()`. */
  signal?: AbortSignal;
}

/** The real sockets: ZMTP over TCP. */
export const dialZmtp: Dial = (type, endpoint, opts) => ZmtpSocket.connect(type, endpoint, opts);

/** Subscribes to one engine's KV events until closed. */
export class ZmqSubscriber {
  readonly #opts: Required<Omit<ZmqSubscriberOptions, "signal" | "replayEndpoint">>;
  readonly #replayEndpoint: string | null;
  readonly #sink: KvEventSink;
  readonly #abort = new AbortController();
  readonly #signal?: AbortSignal;
  #loop: Promise<void> | null = null;
  #lastSeq: number | null = null;
  #connected = false;

  /** Checks the endpoints (a `ZmtpError` for a bad one); `start` begins subscribing. */
  constructor(opts: ZmqSubscriberOptions, sink: KvEventSink) {
    parseZmqEndpoint(opts.endpoint);
    if (opts.replayEndpoint) parseZmqEndpoint(opts.replayEndpoint);
    this.#replayEndpoint = opts.replayEndpoint ?? null;
    this.#sink = sink;
    this.#signal = opts.signal;
    this.#opts = {
      endpoint: opts.endpoint,
      topic: opts.topic ?? "",
      reconnectInitialMs: opts.reconnectInitialMs ?? 100,
      reconnectMaxMs: opts.reconnectMaxMs ?? 5000,
      handshakeTimeoutMs: opts.handshakeTimeoutMs ?? 5000,
      replayTimeoutMs: opts.replayTimeoutMs ?? 5000,
      heartbeatIntervalMs: opts.heartbeatIntervalMs ?? 5000,
      heartbeatTimeoutMs: opts.heartbeatTimeoutMs ?? 15000,
      maxMessageBytes: opts.maxMessageBytes ?? 16 * 1024 * 1024,
      clock: opts.clock,
      dial: opts.dial ?? dialZmtp,
      logger: opts.logger ?? silentLogger,
    };
  }

  /** The last applied sequence number; null before the first batch. */
  get lastSeq(): number | null {
    return this.#lastSeq;
  }

  /** Whether a connection to the publisher is up. */
  get connected(): boolean {
    return this.#connected;
  }

  /** Starts the loop (once). */
  start(): void {
    if (this.#loop) return;
    const stop = () => this.#abort.abort();
    if (this.#signal?.aborted) stop();
    this.#signal?.addEventListener("abort", stop, { once: true });
    this.#loop = this.#run()
      .catch((e) => this.#opts.logger.error("kv subscriber stopped", { error: text(e) }))
      .finally(() => this.#signal?.removeEventListener("abort", stop));
  }

  /** Stops the loop and resolves once it has ended (and its sockets are closed). */
  async close(): Promise<void> {
    this.#abort.abort();
    await this.#loop;
  }

  async #run(): Promise<void> {
    const o = this.#opts;
    const signal = this.#abort.signal;
    let attempt = 0;
    while (!signal.aborted) {
      let sub: KvSocket;
      try {
        sub = await o.dial("SUB", o.endpoint, this.#zmtpOptions());
      } catch (e) {
        if (signal.aborted) break;
        const retryInMs = reconnectDelay(attempt++, o.reconnectInitialMs, o.reconnectMaxMs);
        this.#status({ kind: "connect_failed", endpoint: o.endpoint, reason: text(e), retryInMs });
        await this.#pause(retryInMs);
        continue;
      }
      const reason = await this.#consume(sub);
      this.#connected = false;
      if (signal.aborted) break;
      // A connection that delivered nothing counts as a failed try, so a publisher that
      // accepts and drops at once is retried ever more slowly.
      if (reason.delivered) attempt = 0;
      const retryInMs = reconnectDelay(attempt++, o.reconnectInitialMs, o.reconnectMaxMs);
      this.#status({ kind: "disconnected", endpoint: o.endpoint, reason: reason.text, retryInMs });
      await this.#pause(retryInMs);
    }
  }

  /** Reads `sub` until it ends; says why and whether any message came. */
  async #consume(sub: KvSocket): Promise<{ text: string; delivered: boolean }> {
    const o = this.#opts;
    const closeOnAbort = () => sub.close();
    this.#abort.signal.addEventListener("abort", closeOnAbort, { once: true });
    if (this.#abort.signal.aborted) sub.close(); // closed while the dial was resolving
    let silent = false;
    let delivered = false;
    const stopHeartbeat = o.heartbeatIntervalMs > 0
      ? every(o.clock, o.heartbeatIntervalMs, () => {
        if (o.clock.now() - sub.lastReceivedAt > o.heartbeatTimeoutMs) {
          silent = true;
          sub.close();
        } else sub.ping().catch(() => {}); // A failed write closes the socket: receive ends.
      })
      : () => {};
    try {
      await sub.subscribe(o.topic);
      this.#connected = true;
      this.#status({ kind: "connected", endpoint: o.endpoint });
      for (;;) {
        const msg = await sub.receive();
        if (msg === null) break;
        delivered = true;
        await this.#onMessage(msg);
      }
      return {
        text: silent
          ? `no traffic for ${o.heartbeatTimeoutMs} ms`
          : "the publisher closed the connection",
        delivered,
      };
    } catch (e) {
      return { text: text(e), delivered };
    } finally {
      stopHeartbeat();
      this.#abort.signal.removeEventListener("abort", closeOnAbort);
      sub.close();
    }
  }

  /** One PUB message: checks its framing and sequence, recovers a gap, applies it. */
  async #onMessage(msg: Message): Promise<void> {
    if (msg.length !== 3 || msg[1].length !== 8) {
      const shape = msg.map((f) => f.length).join(", ");
      this.#status({
        kind: "bad_message",
        seq: null,
        reason: `expected [topic, 8-byte seq, payload], got frames of ${shape} bytes`,
      });
      return;
    }
    const wide = new DataView(msg[1].buffer, msg[1].byteOffset, 8).getBigUint64(0);
    if (wide > BigInt(Number.MAX_SAFE_INTEGER)) {
      this.#status({
        kind: "bad_message",
        seq: null,
        reason: `sequence number ${wide} is too large`,
      });
      return;
    }
    const seq = Number(wide);
    const last = this.#lastSeq;
    const step = classifySeq(last, seq);
    if (step === "gap") await this.#recover(last! + 1, seq - 1);
    else if (step === "restart") {
      this.#status({ kind: "publisher_restarted", lastSeq: last!, seq });
    }
    if (this.#abort.signal.aborted) return;
    this.#apply(seq, msg[2]);
  }

  /** Replays `from`..`to` (each applied as it would have been) and reports how it went. */
  async #recover(from: number, to: number): Promise<void> {
    const o = this.#opts;
    const wanted = to - from + 1;
    if (this.#replayEndpoint === null) {
      this.#status({
        kind: "gap_unrecoverable",
        from,
        to,
        missing: wanted,
        reason: "no replay endpoint is configured",
      });
      return;
    }
    let got: [number, Uint8Array][];
    try {
      got = await requestReplay({
        dial: o.dial,
        endpoint: this.#replayEndpoint,
        from,
        to,
        timeoutMs: o.replayTimeoutMs,
        clock: o.clock,
        zmtp: this.#zmtpOptions(),
      });
    } catch (e) {
      if (this.#abort.signal.aborted) return;
      this.#status({ kind: "gap_unrecoverable", from, to, missing: wanted, reason: text(e) });
      return;
    }
    for (const [seq, payload] of got) this.#apply(seq, payload);
    if (got.length === wanted) this.#status({ kind: "gap_recovered", from, to });
    else {
      this.#status({
        kind: "gap_unrecoverable",
        from,
        to,
        missing: wanted - got.length,
        reason: "the publisher's replay buffer no longer holds them",
      });
    }
  }

  /** Decodes and hands over batch `seq`; an undecodable one is reported and passed over. */
  #apply(seq: number, payload: Uint8Array): void {
    this.#lastSeq = seq;
    let batch;
    try {
      batch = decodeEngineBatch(payload, seq);
    } catch (e) {
      this.#status({ kind: "bad_message", seq, reason: text(e) });
      return;
    }
    try {
      this.#sink.onBatch(batch);
    } catch (e) {
      this.#opts.logger.error("kv event sink failed on a batch", { seq, error: text(e) });
    }
  }

  #status(status: KvStreamStatus): void {
    try {
      this.#sink.onStatus(status);
    } catch (e) {
      this.#opts.logger.error("kv event sink failed on a status", {
        status: status.kind,
        error: text(e),
      });
    }
  }

  #zmtpOptions() {
    const o = this.#opts;
    return {
      clock: o.clock,
      handshakeTimeoutMs: o.handshakeTimeoutMs,
      maxFrameBytes: o.maxMessageBytes,
      maxMessageBytes: o.maxMessageBytes,
      signal: this.#abort.signal,
    };
  }

  /** Waits `ms` on the clock, or until closed. */
  async #pause(ms: number): Promise<void> {
    await sleep(this.#opts.clock, ms, this.#abort.signal).catch(() => {});
  }
}

function text(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
