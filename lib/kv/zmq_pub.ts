/**
 * A ZeroMQ PUB socket that binds (what an engine's `--kv-events-config` publisher is): SUB
 * peers connect, subscribe to topic prefixes, and get each published message whose first frame
 * starts with one of theirs. In: multipart messages to publish; out: the same on every matching
 * subscriber's connection.
 *
 * As libzmq's PUB: a subscription is the SUB's message 1 + prefix (or ZMTP 3.1's SUBSCRIBE), a
 * cancellation 0 + prefix (CANCEL) removes one of equal prefix, and the empty prefix matches
 * everything; a peer gets nothing before its subscription arrives; `publish` never waits, and a
 * subscriber with `sendHighWaterMark` messages unwritten loses the next ones (counted in
 * `dropped`) instead of growing a queue, so one slow reader neither stalls the publisher nor
 * the other subscribers. A departed subscriber's subscriptions go with it.
 */

import { encodeMessage, parseSubscription } from "./zmtp_codec.ts";
import type { ZmtpPeer } from "./zmtp_peer.ts";
import { ZmtpServer, type ZmtpServerOptions } from "./zmtp_server.ts";

/** A bound PUB socket. */
export class ZmqPub {
  readonly #server: ZmtpServer;
  /** Each connected peer's subscribed prefixes (a multiset: one entry per subscription). */
  readonly #subs = new Map<ZmtpPeer, Uint8Array[]>();
  readonly #watchers = new Set<() => void>();
  #dropped = 0;

  /** Binds at once (`opts.port` 0 picks a free port) and accepts subscribers. */
  constructor(opts: ZmtpServerOptions) {
    this.#server = new ZmtpServer("PUB", opts, (peer) => this.#serve(peer));
  }

  /** The bound port. */
  get port(): number {
    return this.#server.port;
  }

  /** `tcp://host:port` of the bound address. */
  get endpoint(): string {
    return this.#server.endpoint;
  }

  /** Connected peers with at least one subscription. */
  get subscribers(): number {
    let n = 0;
    for (const prefixes of this.#subs.values()) if (prefixes.length > 0) n++;
    return n;
  }

  /** Messages not queued to a subscriber because it had `sendHighWaterMark` waiting. */
  get dropped(): number {
    return this.#dropped;
  }

  /** Calls `listener` whenever a peer subscribes, cancels or leaves; returns its removal. */
  watch(listener: () => void): () => void {
    this.#watchers.add(listener);
    return () => this.#watchers.delete(listener);
  }

  /**
   * Queues `parts` to every subscriber whose subscriptions match its first frame; the number it
   * was queued to (subscribers at their high-water mark excluded). Never waits.
   */
  publish(parts: readonly Uint8Array[]): number {
    if (parts.length === 0) throw new TypeError("a message needs at least one frame");
    let bytes: Uint8Array | null = null;
    let sent = 0;
    for (const [peer, prefixes] of this.#subs) {
      if (!prefixes.some((p) => startsWith(parts[0], p))) continue;
      bytes ??= encodeMessage(parts);
      if (peer.offer(bytes)) sent++;
      else if (!peer.closed) this.#dropped++;
    }
    return sent;
  }

  /** Stops listening and disconnects every subscriber; resolves once all is closed. */
  close(): Promise<void> {
    return this.#server.close();
  }

  /** Reads `peer`'s subscription changes until it leaves. */
  async #serve(peer: ZmtpPeer): Promise<void> {
    const prefixes: Uint8Array[] = [];
    this.#subs.set(peer, prefixes);
    try {
      for (;;) {
        const msg = await peer.receive();
        if (msg === null) return;
        const change = parseSubscription(msg);
        if (change === null) continue; // A SUB sends nothing else; libzmq ignores it too.
        if (change.subscribe) prefixes.push(change.prefix.slice());
        else {
          const i = prefixes.findIndex((p) => equal(p, change.prefix));
          if (i >= 0) prefixes.splice(i, 1);
        }
        this.#changed();
      }
    } finally {
      this.#subs.delete(peer);
      this.#changed();
    }
  }

  #changed(): void {
    for (const w of this.#watchers) w();
  }
}

function startsWith(topic: Uint8Array, prefix: Uint8Array): boolean {
  if (prefix.length > topic.length) return false;
  for (let i = 0; i < prefix.length; i++) if (topic[i] !== prefix[i]) return false;
  return true;
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && startsWith(a, b);
}
