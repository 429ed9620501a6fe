/**
 * An in-memory mesh network under a (usually fake) clock, so a cluster of many routers
 * runs in one test process, deterministically. Controls: message loss, delay with jitter,
 * partitions (symmetric, or one direction only), killing and reviving an endpoint, and slow
 * endpoints (every message to or from them is late). Requests to a dead endpoint fail fast as
 * "unreachable" (a refused connection); lost or partitioned requests time out. Streams are
 * reliable like TCP: loss only delays them, a partition silences them, a kill closes them.
 * Counts messages and approximate bytes per endpoint.
 */

import type { Clock } from "../../core/clock.ts";
import type { AckMessage, MeshRequest, StreamFrame } from "../wire.ts";
import type {
  FrameConn,
  FrameHandlers,
  MeshTransport,
  ReplyCallback,
  TransportHandlers,
} from "./transport.ts";

/** Traffic counters of one endpoint. */
export interface EndpointStats {
  /** Messages sent. */
  sent: number;
  /** Messages received. */
  received: number;
  /** Approximate bytes sent (JSON size of each message). */
  bytesSent: number;
  /** Approximate bytes received. */
  bytesReceived: number;
}

/** The network every in-memory transport is attached to. */
export class MemoryNetwork {
  readonly clock: Clock;
  /** Probability that one message is lost (requests and replies; streams only slow down). */
  loss = 0;
  /** One-way delay in ms. */
  delayMs = 1;
  /** Extra uniform random delay in ms. */
  jitterMs = 0;
  readonly #random: () => number;
  readonly #serving = new Map<string, TransportHandlers>();
  readonly #blocked = new Set<string>();
  readonly #slow = new Map<string, number>();
  readonly #conns = new Map<string, Set<MemoryConn>>();
  readonly #stats = new Map<string, EndpointStats>();

  /** A network on `clock`, its randomness seeded by `seed`. */
  constructor(clock: Clock, seed = 1) {
    this.clock = clock;
    let a = seed >>> 0;
    this.#random = () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  /** A transport for the endpoint at `address`. */
  transport(address: string): MeshTransport {
    return new MemoryTransport(this, address);
  }

  /** Messages from `from` to `to` vanish (one direction). */
  block(from: string, to: string): void {
    this.#blocked.add(`${from}>${to}`);
  }

  /** Splits the network: nothing passes between a member of `a` and one of `b`. */
  partition(a: string[], b: string[]): void {
    for (const x of a) {
      for (const y of b) {
        this.block(x, y);
        this.block(y, x);
      }
    }
  }

  /** Removes every block. */
  heal(): void {
    this.#blocked.clear();
  }

  /** Every message to or from `address` takes `ms` longer (0 to undo). */
  slow(address: string, ms: number): void {
    if (ms > 0) this.#slow.set(address, ms);
    else this.#slow.delete(address);
  }

  /** Traffic counters of `address`. */
  stats(address: string): EndpointStats {
    let s = this.#stats.get(address);
    if (!s) {
      s = { sent: 0, received: 0, bytesSent: 0, bytesReceived: 0 };
      this.#stats.set(address, s);
    }
    return s;
  }

  /** @internal */
  serve(address: string, h: TransportHandlers): void {
    this.#serving.set(address, h);
  }

  /** @internal Stops serving `address` and closes its streams (a crash). */
  unserve(address: string): void {
    this.#serving.delete(address);
    for (const c of [...(this.#conns.get(address) ?? [])]) c.kill();
  }

  /** @internal */
  handlers(address: string): TransportHandlers | undefined {
    return this.#serving.get(address);
  }

  /** @internal Whether a message from `from` to `to` passes now. */
  passes(from: string, to: string): boolean {
    return !this.#blocked.has(`${from}>${to}`);
  }

  /** @internal A one-way delay for a message from `from` to `to`. */
  delay(from: string, to: string): number {
    return this.delayMs + this.#random() * this.jitterMs + (this.#slow.get(from) ?? 0) +
      (this.#slow.get(to) ?? 0);
  }

  /** @internal Whether a lossy message is lost. */
  lost(): boolean {
    return this.loss > 0 && this.#random() < this.loss;
  }

  /** @internal Counts a message at roughly its protobuf size (fields plus a few bytes each). */
  count(from: string, to: string, msg: MeshRequest | AckMessage | StreamFrame): void {
    let bytes = 24;
    if ("updates" in msg) {
      for (const u of msg.updates) bytes += u.name.length + u.address.length + u.from.length + 10;
    } else if (msg.body.kind === "envelope") bytes += msg.body.payload.length;
    const a = this.stats(from);
    a.sent++;
    a.bytesSent += bytes;
    const b = this.stats(to);
    b.received++;
    b.bytesReceived += bytes;
  }

  /** @internal */
  track(c: MemoryConn, on: boolean): void {
    for (const a of [c.local, c.peerAddress]) {
      let set = this.#conns.get(a);
      if (!set) this.#conns.set(a, set = new Set());
      if (on) set.add(c);
      else set.delete(c);
    }
  }
}

function copyRequest(r: MeshRequest): MeshRequest {
  return { ...r, updates: r.updates.map((u) => ({ ...u })) } as MeshRequest;
}

function copyAck(a: AckMessage): AckMessage {
  return { ...a, updates: a.updates.map((u) => ({ ...u })) };
}

class MemoryTransport implements MeshTransport {
  readonly #net: MemoryNetwork;
  readonly #address: string;
  #closed = false;

  constructor(net: MemoryNetwork, address: string) {
    this.#net = net;
    this.#address = address;
  }

  serve(handlers: TransportHandlers): Promise<void> {
    if (this.#net.handlers(this.#address)) {
      return Promise.reject(new Error(`address in use: ${this.#address}`));
    }
    this.#net.serve(this.#address, handlers);
    return Promise.resolve();
  }

  request(address: string, req: MeshRequest, timeoutMs: number, done: ReplyCallback): void {
    const net = this.#net;
    const clock = net.clock;
    const from = this.#address;
    let finished = false;
    const finish = (err: Parameters<ReplyCallback>[0], reply: AckMessage | null) => {
      if (finished) return;
      finished = true;
      cancelTimeout();
      done(err, reply);
    };
    if (this.#closed) {
      clock.after(0, () => finish({ code: "closed", message: "transport closed" }, null));
      return;
    }
    const cancelTimeout = clock.after(
      timeoutMs,
      () => finish({ code: "timeout", message: `no answer from ${address}` }, null),
    );
    if (!net.passes(from, address) || net.lost()) return;
    const copy = copyRequest(req);
    net.count(from, address, copy);
    clock.after(net.delay(from, address), () => {
      const h = net.handlers(address);
      if (!h) {
        clock.after(net.delay(address, from), () => {
          finish({ code: "unreachable", message: `connection refused: ${address}` }, null);
        });
        return;
      }
      h.onRequest(copy, (ack) => {
        if (!net.passes(address, from) || net.lost()) return;
        const reply = copyAck(ack);
        net.count(address, from, reply);
        clock.after(net.delay(address, from), () => {
          if (!this.#closed) finish(null, reply);
        });
      });
    });
  }

  openStream(address: string): FrameConn {
    const net = this.#net;
    const mine = new MemoryConn(net, this.#address, address);
    const theirs = new MemoryConn(net, address, this.#address);
    mine.other = theirs;
    theirs.other = mine;
    net.clock.after(net.delay(this.#address, address), () => {
      const h = net.handlers(address);
      if (this.#closed || !h || !net.passes(this.#address, address)) {
        mine.kill();
        return;
      }
      net.track(mine, true);
      net.track(theirs, true);
      h.onStream(theirs);
      mine.ready();
      theirs.ready();
    });
    return mine;
  }

  forget(_address: string): void {}

  close(): Promise<void> {
    this.#closed = true;
    this.#net.unserve(this.#address);
    return Promise.resolve();
  }
}

/** One end of an in-memory stream. */
class MemoryConn implements FrameConn {
  other: MemoryConn | null = null;
  readonly local: string;
  readonly peerAddress: string;
  readonly remote: string;
  #net: MemoryNetwork;
  #h: FrameHandlers | null = null;
  #pending: StreamFrame[] = [];
  #open = false;
  #closed = false;

  constructor(net: MemoryNetwork, local: string, peer: string) {
    this.#net = net;
    this.local = local;
    this.peerAddress = peer;
    this.remote = peer;
  }

  listen(h: FrameHandlers): void {
    this.#h = h;
  }

  ready(): void {
    this.#open = true;
    for (const f of this.#pending.splice(0)) this.send(f);
  }

  send(frame: StreamFrame): boolean {
    if (this.#closed) return false;
    if (!this.#open) {
      this.#pending.push(frame);
      return true;
    }
    const net = this.#net;
    const other = this.other!;
    if (!net.passes(this.local, this.peerAddress)) return true;
    net.count(this.local, this.peerAddress, frame);
    // Reliable like TCP: a lost segment is retransmitted, so loss costs a retransmission delay.
    const extra = net.lost() ? 200 : 0;
    net.clock.after(net.delay(this.local, this.peerAddress) + extra, () => {
      if (!other.#closed) other.#h?.onFrame(frame);
    });
    return true;
  }

  close(): void {
    if (this.#closed) return;
    this.kill();
  }

  /** Closes both ends; each end's onClose fires once, the peer's after a delay. */
  kill(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#net.track(this, false);
    this.#h?.onClose("closed");
    const other = this.other;
    if (other && !other.#closed) {
      this.#net.clock.after(this.#net.delay(this.local, this.peerAddress), () => other.kill());
    }
  }
}
