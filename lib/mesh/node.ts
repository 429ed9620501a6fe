/**
 * A mesh router: the thin shell around the SWIM reducer. It feeds the reducer transport
 * events and timer wake-ups one at a time (events raised while effects run are queued, so
 * the reducer never re-enters), performs its effects (requests, answers, logs, metrics),
 * keeps the sync streams in step with membership, and exposes status and membership changes.
 */

import type { Logger } from "../core/log.ts";
import { MEMBER_STATUSES, type MemberStatus } from "./member.ts";
import type { MeshMetrics } from "./mesh_metrics.ts";
import type { Clock } from "../core/clock.ts";
import { type StreamConfig, StreamManager } from "./streams.ts";
import { step } from "./swim.ts";
import type { SwimConfig } from "./swim_config.ts";
import {
  createSwimState,
  type MemberRecord,
  peers,
  selfRecord,
  type SwimEffect,
  type SwimEvent,
  type SwimState,
} from "./swim_state.ts";
import type { MeshTransport } from "./transport/transport.ts";
import type { AckMessage } from "./wire.ts";

/** What a router needs. */
export interface MeshNodeOptions {
  /** This router's unique name. */
  name: string;
  /** Its advertised mesh address, `host:port`. */
  address: string;
  /** Seed addresses to join through (`--mesh-peer-urls`). */
  seeds: string[];
  /** SWIM timing. */
  swim: SwimConfig;
  /** Stream timing. */
  streams: Omit<StreamConfig, "roundMs">;
  /** Network. */
  transport: MeshTransport;
  /** Time (real or fake). */
  clock: Clock;
  /** Logger. */
  log: Logger;
  /** Metrics. */
  metrics: MeshMetrics;
  /** Seed of the SWIM core's randomness. */
  randomSeed: number;
  /** Log the `Status:` line at least this often (30 s); it is also logged on every change. */
  statusLogMs?: number;
}

/** One member in `/mesh/status`. */
export interface MemberStatusView {
  /** Name. */
  name: string;
  /** Advertised address. */
  address: string;
  /** Status. */
  status: MemberStatus;
  /** Incarnation. */
  incarnation: number;
  /** Whether a sync stream with it is open. */
  stream: boolean;
}

/** A membership change. */
export type MemberListener = (m: MemberRecord, previous: MemberStatus | null | "forgotten") => void;

/** One router in the mesh. */
export class MeshNode {
  /** Sync streams (store sync and tree sync send their envelopes through them). */
  readonly streams: StreamManager;
  readonly #o: MeshNodeOptions;
  readonly #state: SwimState;
  readonly #queue: SwimEvent[] = [];
  #busy = false;
  #cancelWake: () => void = () => {};
  #wakeAt = Infinity;
  #requestId = 0;
  readonly #responders = new Map<number, (ack: AckMessage) => void>();
  readonly #listeners: MemberListener[] = [];
  /** Seqs of the LEAVING announcements not yet answered (null before `leave()`). */
  #leaveWait: Set<number> | null = null;
  #leaveDone: (() => void) | null = null;
  #stopped = false;
  #changed = true;
  #lastStatusLog = -Infinity;
  #statusTimer: (() => void) | null = null;

  /** Builds the router; nothing runs until `start()`. */
  constructor(o: MeshNodeOptions) {
    this.#o = o;
    this.#state = createSwimState({
      config: o.swim,
      name: o.name,
      address: o.address,
      seeds: o.seeds,
      seed: o.randomSeed,
      now: o.clock.now(),
    });
    this.streams = new StreamManager({
      self: o.name,
      transport: o.transport,
      clock: o.clock,
      log: o.log,
      metrics: o.metrics,
      config: { ...o.streams, roundMs: o.swim.probeIntervalMs },
      alivePeers: () => peers(this.#state, ["ALIVE"]),
      isLive: (name) => {
        const st = this.#state.members.get(name)?.status;
        return st === "ALIVE" || st === "SUSPECTED";
      },
      onLost: (peer) => this.#dispatch({ type: "streamLost", name: peer }),
      onChange: () => {
        this.#changed = true;
        if (!this.#busy) this.#statusLog();
      },
    });
  }

  /** This router's name. */
  get name(): string {
    return this.#o.name;
  }

  /** Serves the mesh port and starts gossiping; rejects when the port cannot be bound. */
  async start(): Promise<void> {
    await this.#o.transport.serve({
      onRequest: (req, respond) => {
        const id = ++this.#requestId;
        this.#responders.set(id, respond);
        this.#dispatch({ type: "request", id, req });
      },
      onStream: (conn) => this.streams.accept(conn),
      onRejected: (reason, detail) => {
        this.#o.metrics.rejected.with(reason).inc();
        this.#o.log.warn("refused mesh input", { reason, detail });
      },
    });
    this.streams.start();
    this.#dispatch({ type: "tick" });
  }

  /** Subscribes to membership changes. */
  onMember(fn: MemberListener): void {
    this.#listeners.push(fn);
  }

  /** Every member, this router included, sorted by name. */
  members(): MemberStatusView[] {
    return [...this.#state.members.values()]
      .map((m) => ({
        name: m.name,
        address: m.address,
        status: m.status,
        incarnation: m.incarnation,
        stream: this.streams.isOpen(m.name),
      }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** What this router believes about `name` (null when unknown); cheap, for polling. */
  statusOf(name: string): MemberStatus | null {
    return this.#state.members.get(name)?.status ?? null;
  }

  /** This router's own status. */
  get status(): MemberStatus {
    return selfRecord(this.#state).status;
  }

  /** The Lifeguard local-health score. */
  get localHealth(): number {
    return this.#state.awareness;
  }

  /**
   * Announces LEAVING to every ALIVE peer and waits for their acks (at most the broadcast
   * timeout), then closes the streams. Call before the gateway drains.
   */
  async leave(): Promise<void> {
    if (this.#stopped || this.#leaveWait) return;
    const done = new Promise<void>((resolve) => (this.#leaveDone = resolve));
    this.#leaveWait = new Set();
    this.#dispatch({ type: "leave" });
    const cap = this.#o.clock.after(this.#o.swim.broadcastTimeoutMs, () => this.#leaveDone?.());
    if (this.#leaveWait.size === 0) this.#leaveDone?.();
    await done;
    cap();
    this.streams.closeAll();
  }

  /** A router pod's state from Kubernetes discovery (`--router-selector`). */
  discovered(name: string, address: string, state: "ready" | "not_ready" | "gone"): void {
    if (this.#stopped) return;
    this.#dispatch({ type: "discovered", name, address, state });
  }

  /** Stops timers, streams and the transport. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#cancelWake();
    this.#statusTimer?.();
    this.streams.closeAll();
    for (const [, respond] of this.#responders) {
      respond({
        seq: 0,
        from: this.#o.name,
        nack: true,
        updates: [],
        fullState: false,
        error: "leaving",
      });
    }
    this.#responders.clear();
    await this.#o.transport.close();
  }

  #dispatch(ev: SwimEvent): void {
    if (this.#stopped) return;
    this.#queue.push(ev);
    if (this.#busy) return;
    this.#busy = true;
    try {
      while (this.#queue.length > 0 && !this.#stopped) {
        const next = this.#queue.shift()!;
        const out = step(this.#state, next, this.#o.clock.now());
        for (const e of out.effects) {
          // One failing effect (a throwing listener) must not lose the rest, nor the timer.
          try {
            this.#perform(e, next.type === "leave");
          } catch (err) {
            this.#o.log.error("mesh effect failed", { effect: e.type, err: String(err) });
          }
        }
        this.#schedule(out.wakeAt);
      }
    } finally {
      this.#busy = false;
    }
    this.#statusLog();
  }

  #schedule(at: number): void {
    if (at === this.#wakeAt || this.#stopped) return;
    this.#cancelWake();
    this.#wakeAt = at;
    if (!Number.isFinite(at)) return;
    const now = this.#o.clock.now();
    const due = Math.max(at, now);
    this.#cancelWake = this.#o.clock.after(due - now, () => {
      this.#wakeAt = Infinity;
      // A wake-up far past its time means this process was paused or starved: deadlines move
      // back first, so replies waiting in the sockets are not taken for silence.
      const late = this.#o.clock.now() - due;
      if (late > this.#o.swim.probeTimeoutMs) {
        this.#o.log.warn("mesh timers ran late; this router was stalled", {
          late_ms: Math.round(late),
        });
        this.#dispatch({ type: "lagged", ms: late });
      }
      this.#dispatch({ type: "tick" });
    });
  }

  #perform(e: SwimEffect, leaving: boolean): void {
    const o = this.#o;
    switch (e.type) {
      case "send": {
        const seq = e.req.seq;
        if (leaving) this.#leaveWait?.add(seq);
        o.transport.request(e.to, e.req, e.timeoutMs, (err, reply) => {
          if (err) this.#dispatch({ type: "failed", seq, code: err.code });
          else this.#dispatch({ type: "reply", seq, ack: reply! });
          if (this.#leaveWait?.delete(seq) && this.#leaveWait.size === 0) this.#leaveDone?.();
        });
        return;
      }
      case "respond": {
        const respond = this.#responders.get(e.id);
        this.#responders.delete(e.id);
        respond?.(e.ack);
        return;
      }
      case "member":
        this.#changed = true;
        if (
          e.member.name !== o.name && (e.member.status === "DOWN" || e.member.status === "LEAVING")
        ) {
          this.streams.drop(e.member.name, e.member.status);
        }
        if (e.member.status === "ALIVE" && (e.previous === "DOWN" || e.previous === "LEAVING")) {
          // Back from the dead (restarted): a connection to its old life may sit in reconnect
          // backoff and fail every request at once; start afresh.
          o.transport.forget(e.member.address);
        }
        this.#notify(e.member, e.previous);
        return;
      case "forget":
        this.#changed = true;
        this.streams.drop(e.member.name, "forgotten");
        o.transport.forget(e.member.address);
        this.#notify(e.member, "forgotten");
        return;
      case "probed": {
        o.metrics.probes.with(e.ok ? (e.indirect ? "indirect_ack" : "ack") : "failed").inc();
        if (e.rttMs !== null) o.metrics.probeRtt.with().observe(e.rttMs / 1000);
        const m = this.#state.members.get(e.name);
        if (e.ok && !e.indirect && m?.status === "ALIVE") this.streams.ensure(m.name, m.address);
        return;
      }
      case "count":
        if (e.what === "ping_req_sent") o.metrics.pingReqs.with("sent").inc();
        else if (e.what === "ping_req_served") o.metrics.pingReqs.with("served").inc();
        else if (e.what === "suspicion") o.metrics.suspicions.with().inc();
        else if (e.what === "refutation") o.metrics.refutations.with().inc();
        else o.metrics.rejected.with(e.what).inc();
        return;
      case "log":
        o.log[e.level](e.msg, e.fields as Record<string, unknown>);
        return;
    }
  }

  #notify(m: MemberRecord, previous: MemberStatus | null | "forgotten"): void {
    for (const l of this.#listeners) {
      try {
        l(m, previous);
      } catch (err) {
        this.#o.log.error("mesh member listener failed", { member: m.name, err: String(err) });
      }
    }
  }

  /**
   * The `Status:` line: soon after every change (at most once a second, so a churning mesh
   * of hundreds does not flood the log), and every `statusLogMs` regardless.
   */
  #statusLog(): void {
    if (this.#stopped) return;
    const now = this.#o.clock.now();
    const every = this.#o.statusLogMs ?? 30_000;
    const since = now - this.#lastStatusLog;
    if (!this.#changed && since < every) return;
    if (since < 1000) {
      if (!this.#statusTimer) {
        this.#statusTimer = this.#o.clock.after(1000 - since, () => {
          this.#statusTimer = null;
          this.#statusLog();
        });
      }
      return;
    }
    this.#changed = false;
    this.#lastStatusLog = now;
    const counts = new Map<MemberStatus, number>(MEMBER_STATUSES.map((s) => [s, 0]));
    const parts: string[] = [];
    for (const m of this.members()) {
      counts.set(m.status, counts.get(m.status)! + 1);
      parts.push(`${m.name}=${m.status}#${m.incarnation}${m.stream ? "+stream" : ""}`);
    }
    for (const [s, n] of counts) this.#o.metrics.members.with(s).set(n);
    this.#o.metrics.localHealth.with().set(this.#state.awareness);
    this.#o.log.info(`Status: ${parts.join(" ")}`, { name: this.#o.name });
  }
}
