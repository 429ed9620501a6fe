/**
 * Sync streams: one per pair of live members, opened by the member whose name sorts first
 * (byte order) after it probed the other, kept alive with heartbeats when idle, closed after
 * the idle timeout or when the peer goes DOWN or LEAVING, and reopened with backoff after a
 * failure. Each direction has a bounded queue that drops (and counts) on overflow; the payload
 * is typed envelopes, which store sync and tree sync fill. A stream that breaks on its own is
 * reported (`onLost`), so the SWIM core probes that peer at once.
 */

import type { Logger } from "../core/log.ts";
import { compareNames } from "./member.ts";
import type { MeshMetrics } from "./mesh_metrics.ts";
import type { Clock } from "../core/clock.ts";
import type { FrameConn, MeshTransport } from "./transport/transport.ts";
import type { EnvelopeType, FrameBody, StreamFrame } from "./wire.ts";

/** Stream timing and bounds. */
export interface StreamConfig {
  /** Send a heartbeat after this long without sending (`--mesh-heartbeat-secs`, 15). */
  heartbeatMs: number;
  /** Close after this long without receiving (`--mesh-stream-idle-timeout-secs`, 60). */
  idleTimeoutMs: number;
  /** Frames each direction may hold while the other side is slow (`--mesh-stream-queue-size`, 128). */
  queueSize: number;
  /** How often heartbeats, idle timeouts and reopens are checked (the probe interval). */
  roundMs: number;
  /** First reopen delay after a failure, doubling to 30 s (1000). */
  reopenBackoffMs: number;
}

/** Accepted streams that have not said who they are yet, at most. */
const MAX_UNBOUND = 64;

/** A received envelope. */
export type EnvelopeHandler = (peer: string, type: EnvelopeType, payload: Uint8Array) => void;

/** What store sync and tree sync need from the sync streams; `StreamManager` provides it. */
export interface StreamPort {
  /** Queues an envelope; false when there is no stream or its queue is full. */
  send(peer: string, type: EnvelopeType, payload: Uint8Array): boolean;
  /** Peers with an open stream. */
  openPeers(): string[];
  /** Frames waiting to go to `peer` (a sender of bulk data waits while it is high). */
  queued?(peer: string): number;
}

interface Stream {
  peer: string;
  role: "opener" | "acceptor";
  conn: FrameConn;
  out: StreamFrame[];
  blocked: boolean;
  inbox: { type: EnvelopeType; payload: Uint8Array }[];
  draining: boolean;
  lastIn: number;
  lastOut: number;
  seq: number;
  closed: boolean;
  ownClose: boolean;
  /** The peer answered (an opened stream is open only then). */
  confirmed: boolean;
}

/** What the manager needs from its owner. */
export interface StreamDeps {
  /** This router's name. */
  self: string;
  /** Transport to open streams on. */
  transport: MeshTransport;
  /** Time. */
  clock: Clock;
  /** Logger (module mesh). */
  log: Logger;
  /** Metrics. */
  metrics: MeshMetrics;
  /** Timing and bounds. */
  config: StreamConfig;
  /** ALIVE peers (name, address) this router should hold streams with. */
  alivePeers(): { name: string; address: string }[];
  /** Whether `name` is a live member (only those may bind an accepted stream). */
  isLive(name: string): boolean;
  /** A stream broke without anyone closing it. */
  onLost(peer: string): void;
  /** A stream opened (confirmed by the peer) or closed. */
  onChange(): void;
}

/** Owns every sync stream of one router. */
export class StreamManager implements StreamPort {
  readonly #d: StreamDeps;
  readonly #byPeer = new Map<string, Stream>();
  readonly #unbound = new Set<Stream>();
  readonly #backoff = new Map<string, { attempt: number; nextAt: number }>();
  #handlers: EnvelopeHandler[] = [];
  #peerListeners: ((peer: string, open: boolean) => void)[] = [];
  #cancelRound: () => void = () => {};
  #stopped = false;

  /** Builds the manager; `start()` starts its round timer. */
  constructor(deps: StreamDeps) {
    this.#d = deps;
  }

  /** Starts heartbeats, idle checks and reopens. */
  start(): void {
    if (!this.#stopped) this.#scheduleRound();
  }

  /** Whether a stream with `peer` is open (either role) and the other side has answered. */
  isOpen(peer: string): boolean {
    return this.#byPeer.get(peer)?.confirmed ?? false;
  }

  /** Peers with an open stream. */
  openPeers(): string[] {
    return [...this.#byPeer.values()].filter((s) => s.confirmed).map((s) => s.peer);
  }

  /**
   * Subscribes to streams opening (the peer answered) and closing, by peer: a replication
   * layer starts its anti-entropy exchange on open.
   */
  onPeer(fn: (peer: string, open: boolean) => void): void {
    this.#peerListeners.push(fn);
  }

  /** Subscribes to envelopes from every peer. */
  onEnvelope(h: EnvelopeHandler): void {
    this.#handlers.push(h);
  }

  /** After a successful probe of `peer`: open the pair's stream if it is ours to open. */
  ensure(peer: string, address: string): void {
    if (this.#stopped || this.#byPeer.has(peer) || compareNames(this.#d.self, peer) >= 0) return;
    const b = this.#backoff.get(peer);
    if (b && this.#d.clock.now() < b.nextAt) return;
    this.#open(peer, address);
  }

  /** A peer opened a stream to us; it is bound to a name by its hello frame. */
  accept(conn: FrameConn): void {
    if (this.#stopped) return conn.close();
    if (this.#unbound.size >= MAX_UNBOUND) {
      this.#d.metrics.rejected.with("stream_limit").inc();
      return conn.close();
    }
    const s = this.#stream("", "acceptor", conn);
    this.#unbound.add(s);
    this.#d.metrics.peerConnections.with("").set(1);
  }

  /** Closes the stream with `peer` on purpose (it went DOWN, LEAVING or was forgotten). */
  drop(peer: string, reason: string): void {
    const s = this.#byPeer.get(peer);
    this.#backoff.delete(peer);
    if (!s) return;
    this.#d.log.info("closing mesh sync stream", { peer, reason });
    this.#close(s, true);
  }

  /** Queues an envelope for `peer`; false when there is no stream or its queue is full. */
  send(peer: string, type: EnvelopeType, payload: Uint8Array): boolean {
    const s = this.#byPeer.get(peer);
    return !!s && this.#send(s, { kind: "envelope", type, payload });
  }

  /** Frames waiting in the queue to `peer` (plus one while its connection is blocked). */
  queued(peer: string): number {
    const s = this.#byPeer.get(peer);
    return s ? s.out.length + (s.blocked ? 1 : 0) : 0;
  }

  /** Closes every stream and stops the timer. */
  closeAll(): void {
    this.#stopped = true;
    this.#cancelRound();
    for (const s of [...this.#byPeer.values(), ...this.#unbound]) this.#close(s, true);
  }

  #open(peer: string, address: string): void {
    const conn = this.#d.transport.openStream(address);
    const s = this.#stream(peer, "opener", conn);
    this.#byPeer.set(peer, s);
    this.#send(s, { kind: "hello", to: peer });
    this.#d.log.debug("opened mesh sync stream", { peer, address });
  }

  #stream(peer: string, role: Stream["role"], conn: FrameConn): Stream {
    const now = this.#d.clock.now();
    const s: Stream = {
      peer,
      role,
      conn,
      out: [],
      blocked: false,
      inbox: [],
      draining: false,
      lastIn: now,
      lastOut: now,
      seq: 0,
      closed: false,
      ownClose: false,
      confirmed: false,
    };
    conn.listen({
      onFrame: (f) => this.#onFrame(s, f),
      onDrain: () => this.#onDrain(s),
      onClose: (reason) => this.#onClosed(s, reason),
    });
    return s;
  }

  #send(s: Stream, body: FrameBody): boolean {
    if (s.closed) return false;
    const frame: StreamFrame = { from: this.#d.self, seq: ++s.seq, body };
    if (s.blocked || s.out.length > 0) {
      if (s.out.length >= this.#d.config.queueSize) {
        this.#d.metrics.droppedFrames.with(s.peer, "out").inc();
        return false;
      }
      s.out.push(frame);
      return true;
    }
    s.lastOut = this.#d.clock.now();
    if (!s.conn.send(frame)) s.blocked = true;
    return true;
  }

  #onDrain(s: Stream): void {
    s.blocked = false;
    while (s.out.length > 0 && !s.blocked && !s.closed) {
      s.lastOut = this.#d.clock.now();
      if (!s.conn.send(s.out.shift()!)) s.blocked = true;
    }
  }

  #onFrame(s: Stream, f: StreamFrame): void {
    if (s.closed) return;
    s.lastIn = this.#d.clock.now();
    if (s.peer === "") return this.#bind(s, f);
    if (f.from !== s.peer) return this.#reject(s, "identity", `frame from '${f.from}'`);
    if (!s.confirmed) {
      s.confirmed = true;
      this.#backoff.delete(s.peer);
      this.#d.onChange();
      this.#peerEvent(s.peer, true);
    }
    switch (f.body.kind) {
      case "envelope":
        return this.#enqueue(s, f.body.type, f.body.payload);
      case "unknown":
        this.#d.metrics.rejected.with("unknown_frame").inc();
        return;
      case "heartbeat":
      case "hello":
        return;
    }
  }

  /** Binds an accepted stream to the name in its first frame. */
  #bind(s: Stream, f: StreamFrame): void {
    this.#unbound.delete(s);
    if (f.body.kind !== "hello" || f.from === "" || f.body.to !== this.#d.self) {
      return this.#reject(s, "identity", `first frame ${f.body.kind} from '${f.from}'`);
    }
    if (f.from === this.#d.self) return this.#reject(s, "name_conflict", "peer uses our name");
    // Unknown names would also grow the per-peer metric series without bound.
    if (!this.#d.isLive(f.from)) {
      return this.#reject(s, "identity", `'${f.from}' is not a live member`);
    }
    const old = this.#byPeer.get(f.from);
    if (old) this.#close(old, true);
    s.peer = f.from;
    s.confirmed = true;
    this.#byPeer.set(s.peer, s);
    this.#d.metrics.peerConnections.with(s.peer).set(1);
    this.#send(s, { kind: "heartbeat" });
    this.#d.onChange();
    this.#peerEvent(s.peer, true);
    this.#d.log.debug("accepted mesh sync stream", { peer: s.peer, remote: s.conn.remote });
  }

  #peerEvent(peer: string, open: boolean): void {
    for (const fn of this.#peerListeners) {
      try {
        fn(peer, open);
      } catch (err) {
        this.#d.log.error("mesh stream listener failed", { peer, err: String(err) });
      }
    }
  }

  #reject(s: Stream, reason: string, detail: string): void {
    this.#d.metrics.rejected.with(reason).inc();
    this.#d.log.warn("closing mesh sync stream: bad peer identity", {
      peer: s.peer,
      remote: s.conn.remote,
      reason,
      detail,
    });
    this.#close(s, true);
  }

  #enqueue(s: Stream, type: EnvelopeType, payload: Uint8Array): void {
    if (s.inbox.length >= this.#d.config.queueSize) {
      this.#d.metrics.droppedFrames.with(s.peer, "in").inc();
      return;
    }
    s.inbox.push({ type, payload });
    if (s.draining) return;
    s.draining = true;
    this.#d.clock.after(0, () => {
      s.draining = false;
      const batch = s.inbox.splice(0);
      if (s.closed) return;
      for (const e of batch) {
        for (const h of this.#handlers) {
          try {
            h(s.peer, e.type, e.payload);
          } catch (err) {
            this.#d.log.error("mesh envelope handler failed", { peer: s.peer, err: String(err) });
          }
        }
      }
    });
  }

  #close(s: Stream, own: boolean): void {
    if (s.closed) return;
    s.ownClose = own;
    s.conn.close();
    this.#onClosed(s, own ? "closed by this router" : "closed");
  }

  #onClosed(s: Stream, reason: string): void {
    if (s.closed) return;
    s.closed = true;
    this.#unbound.delete(s);
    if (s.peer !== "" && this.#byPeer.get(s.peer) === s) this.#byPeer.delete(s.peer);
    if (s.role === "acceptor" && s.peer !== "") {
      this.#d.metrics.peerConnections.with(s.peer).set(0);
      this.#d.metrics.peerReconnects.with(s.peer).inc();
    }
    if (s.confirmed && !this.#stopped) {
      this.#d.onChange();
      this.#peerEvent(s.peer, false);
    }
    if (s.ownClose || s.peer === "" || this.#stopped) return;
    if (s.role === "opener") {
      const b = this.#backoff.get(s.peer) ?? { attempt: 0, nextAt: 0 };
      const delay = Math.min(30_000, this.#d.config.reopenBackoffMs * 2 ** b.attempt);
      this.#backoff.set(s.peer, {
        attempt: b.attempt + 1,
        nextAt: this.#d.clock.now() + delay,
      });
    }
    this.#d.log.info("mesh sync stream lost", { peer: s.peer, role: s.role, reason });
    this.#d.onLost(s.peer);
  }

  #scheduleRound(): void {
    this.#cancelRound = this.#d.clock.after(this.#d.config.roundMs, () => {
      this.#round();
      if (!this.#stopped) this.#scheduleRound();
    });
  }

  /** Heartbeats, idle timeouts and reopens, once per round. */
  #round(): void {
    const c = this.#d.config;
    const now = this.#d.clock.now();
    for (const s of [...this.#byPeer.values()]) {
      const t0 = this.#d.clock.now();
      if (now - s.lastIn >= c.idleTimeoutMs) {
        this.#d.log.info("mesh sync stream idle; closing", { peer: s.peer });
        s.conn.close();
        this.#onClosed(s, "idle timeout");
        continue;
      }
      // A blocked stream has frames waiting already; a heartbeat would only take their room.
      if (now - s.lastOut >= c.heartbeatMs && !s.blocked && s.out.length === 0) {
        this.#send(s, { kind: "heartbeat" });
      }
      if (s.role === "opener") {
        this.#d.metrics.syncRound.with(s.peer).observe((this.#d.clock.now() - t0) / 1000);
      }
    }
    for (const s of [...this.#unbound]) {
      if (now - s.lastIn >= c.idleTimeoutMs) this.#close(s, true);
    }
    for (const p of this.#d.alivePeers()) this.ensure(p.name, p.address);
  }
}
