/**
 * The SWIM core's state and effect types, and the small helpers every part of the reducer
 * shares: seeded randomness kept inside the state (so a state and an event fully determine the
 * result), sequence numbers, outgoing requests and member lookups.
 */

import { BroadcastQueue } from "./broadcast_queue.ts";
import { isLive, type MemberStatus, type MemberUpdate } from "./member.ts";
import type { SwimConfig } from "./swim_config.ts";
import type { SuspicionBounds } from "./suspicion.ts";
import { retransmitLimit } from "./suspicion.ts";
import type { TransportErrorCode } from "./transport/transport.ts";
import type { AckMessage, MeshRequest } from "./wire.ts";

/** One member as this router sees it. */
export interface MemberRecord extends MemberUpdate {
  /** When its status last changed (this router's clock). */
  changedAt: number;
}

/** A running suspicion of one member. */
export interface Suspicion {
  /** Incarnation suspected. */
  incarnation: number;
  /** When it started. */
  startedAt: number;
  /** Timeout bounds fixed at the start. */
  bounds: SuspicionBounds;
  /** Distinct suspectors seen, the first included. */
  confirmers: Set<string>;
  /** When the member is declared DOWN unless it refutes first. */
  deadline: number;
}

/** A probe of one member in progress. */
export interface ProbeRun {
  /** Target name. */
  target: string;
  /** Seq of the direct ping. */
  seq: number;
  /** Start time. */
  startedAt: number;
  /** After this, ask others (ping-req). */
  directDeadline: number;
  /** After this, the probe has failed. */
  endDeadline: number;
  /** The direct ping's fate. */
  direct: "pending" | "failed";
  /** Whether the ping-reqs went out. */
  indirectStarted: boolean;
  /** Ping-reqs sent. */
  indirectSent: number;
  /** Ping-reqs not yet answered. */
  indirectPending: number;
  /** Nacks received. */
  nacks: number;
  /** Started because the member's sync stream broke, outside the probe schedule. */
  urgent: boolean;
}

/** What an outgoing request was for. */
export type Purpose =
  | { kind: "probe"; target: string }
  | { kind: "indirect"; target: string; probeSeq: number }
  | { kind: "relay"; relaySeq: number }
  | { kind: "broadcast" }
  | { kind: "join"; address: string }
  | { kind: "pushPull"; name: string };

/** A ping this router sends for another's ping-req. */
export interface Relay {
  /** The shell's id of the ping-req to answer. */
  requestId: number;
  /** The requester's seq, echoed in the answer. */
  requesterSeq: number;
  /** Answer nack at this time if the target has not acked. */
  nackAt: number;
}

/** A metric the shell counts. */
export type SwimCount =
  | "ping_req_sent"
  | "ping_req_served"
  | "suspicion"
  | "refutation"
  | "name_conflict"
  | "wrong_node"
  /** An update with a bad name, address or incarnation, ignored. */
  | "malformed"
  /** A new member ignored because the table is full (`maxMembers`). */
  | "member_limit";

/** Something the shell must do. */
export type SwimEffect =
  /** Send a request; report its fate as a `reply` or `failed` event with `req.seq`. */
  | { type: "send"; to: string; req: MeshRequest; timeoutMs: number }
  /** Answer request `id` (from a `request` event). */
  | { type: "respond"; id: number; ack: AckMessage }
  /** A member appeared or changed status (`previous` null when new). */
  | { type: "member"; member: MemberRecord; previous: MemberStatus | null }
  /** A member was forgotten (reaped). */
  | { type: "forget"; member: MemberRecord }
  /** A probe finished. */
  | { type: "probed"; name: string; ok: boolean; rttMs: number | null; indirect: boolean }
  /** Count one event. */
  | { type: "count"; what: SwimCount }
  /** A log line. */
  | { type: "log"; level: "debug" | "info" | "warn" | "error"; msg: string; fields: object };

/** What the reducer reacts to. */
export type SwimEvent =
  /** Time passed; deadlines are checked on every event anyway. */
  | { type: "tick" }
  /** A peer's request, to be answered with a `respond` effect carrying `id`. */
  | { type: "request"; id: number; req: MeshRequest }
  /** The answer to our request `seq`. */
  | { type: "reply"; seq: number; ack: AckMessage }
  /** Our request `seq` got no answer. */
  | { type: "failed"; seq: number; code: TransportErrorCode }
  /** Announce LEAVING and stop probing. */
  | { type: "leave" }
  /** The sync stream to `name` broke: probe it now rather than in turn. */
  | { type: "streamLost"; name: string }
  /**
   * This router was not running for `ms` (paused, starved): its deadlines are pushed back by
   * that much so replies that waited in its sockets count, and its local health drops.
   */
  | { type: "lagged"; ms: number }
  /**
   * A router pod seen by Kubernetes discovery (`--router-selector`): `ready` at `address`
   * (contacted with a full-state exchange; the member's own answer makes it ALIVE), `not_ready`
   * (a known live member is suspected, at its own incarnation, so it can refute), or `gone`
   * (deleted or terminating: DOWN). A pod event never raises an incarnation or sets ALIVE, so
   * it cannot override a fresher record.
   */
  | { type: "discovered"; name: string; address: string; state: "ready" | "not_ready" | "gone" };

/** The reducer's result. */
export interface SwimOutput {
  /** Effects, in order. */
  effects: SwimEffect[];
  /** The shell should deliver a `tick` at this time (or earlier with another event). */
  wakeAt: number;
}

/** The state of one router's membership; owned and updated in place by the reducer. */
export interface SwimState {
  /** Timing. */
  config: SwimConfig;
  /** This router's name. */
  self: string;
  /** Every known member by name, this router included. */
  members: Map<string, MemberRecord>;
  /** Seeded random state (mulberry32). */
  rng: number;
  /** Last seq used. */
  seq: number;
  /** Lifeguard local-health score. */
  awareness: number;
  /** Probes in progress, by target name. */
  probes: Map<string, ProbeRun>;
  /** Outgoing requests awaiting a reply, by seq. */
  outstanding: Map<number, Purpose>;
  /** Pings sent for others' ping-reqs, by our seq. */
  relays: Map<number, Relay>;
  /** Running suspicions by member name. */
  suspicions: Map<string, Suspicion>;
  /** Updates waiting to be piggybacked. */
  queue: BroadcastQueue;
  /** Shuffled probe order and the position in it. */
  probeOrder: string[];
  /** Next index into `probeOrder`. */
  probeIndex: number;
  /** When the next scheduled probe starts. */
  nextProbeAt: number;
  /** Seed addresses (`--mesh-peer-urls`), this router's own excluded. */
  seeds: string[];
  /** Whether a join exchange ever succeeded (or none was needed). */
  joined: boolean;
  /** Join attempts since the last success. */
  joinAttempt: number;
  /** When to try the seeds again. */
  nextJoinAt: number;
  /** Join requests awaiting answers. */
  joinInFlight: number;
  /** Next full-state exchange with a random peer. */
  nextPushPullAt: number;
  /** Next attempt to reach a DOWN member. */
  nextReconnectAt: number;
  /** LEAVING was announced: no more probes. */
  leaving: boolean;
  /** Bumped on every membership change; keys the cached counts. */
  version: number;
  /** Live members (this router included) at `countedAt`. */
  liveCached: number;
  /** The `version` `liveCached` was computed at. */
  countedAt: number;
  /** Earliest time a DOWN or LEAVING member is due to be forgotten. */
  nextReapAt: number;
  /** Addresses of forgotten members, still retried until `reconnectTimeoutMs` (bounded). */
  forgotten: Map<string, number>;
  /** A peer holds an outdated claim about this router: put our own record in the next answer. */
  selfStale: boolean;
}

/** Highest incarnation accepted or reached by refuting; above it a claim is ignored. */
export const MAX_INCARNATION = 2 ** 31 - 1;

/** Most forgotten addresses kept for reconnection. */
export const MAX_FORGOTTEN = 256;

/** A fresh state: this router INIT (ALIVE at once when it has no seeds), nobody else known. */
export function createSwimState(opts: {
  config: SwimConfig;
  name: string;
  address: string;
  seeds: string[];
  seed: number;
  now: number;
}): SwimState {
  const seeds = [...new Set(opts.seeds)].filter((s) => s !== opts.address);
  const self: MemberRecord = {
    name: opts.name,
    address: opts.address,
    status: seeds.length === 0 ? "ALIVE" : "INIT",
    incarnation: 1,
    from: "",
    changedAt: opts.now,
  };
  return {
    config: opts.config,
    self: opts.name,
    members: new Map([[opts.name, self]]),
    rng: opts.seed >>> 0,
    seq: 0,
    awareness: 0,
    probes: new Map(),
    outstanding: new Map(),
    relays: new Map(),
    suspicions: new Map(),
    queue: new BroadcastQueue(),
    probeOrder: [],
    probeIndex: 0,
    nextProbeAt: opts.now + opts.config.probeIntervalMs,
    seeds,
    joined: seeds.length === 0,
    joinAttempt: 0,
    nextJoinAt: opts.now,
    joinInFlight: 0,
    nextPushPullAt: opts.now + opts.config.pushPullIntervalMs,
    nextReconnectAt: opts.now + opts.config.reconnectIntervalMs,
    leaving: false,
    version: 0,
    liveCached: 1,
    countedAt: 0,
    nextReapAt: Infinity,
    forgotten: new Map(),
    selfStale: false,
  };
}

/** A uniform number in [0, 1) from the state's own generator. */
export function rand(s: SwimState): number {
  s.rng = (s.rng + 0x6d2b79f5) >>> 0;
  let t = s.rng;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

/** Up to `n` distinct random items of `items` (partial Fisher-Yates on a copy). */
export function pick<T>(s: SwimState, items: readonly T[], n: number): T[] {
  const a = [...items];
  const k = Math.min(n, a.length);
  for (let i = 0; i < k; i++) {
    const j = i + Math.floor(rand(s) * (a.length - i));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a.slice(0, k);
}

/** This router's own record. */
export function selfRecord(s: SwimState): MemberRecord {
  return s.members.get(s.self)!;
}

/** Other members in one of `statuses`. */
export function peers(s: SwimState, statuses: readonly MemberStatus[]): MemberRecord[] {
  const out: MemberRecord[] = [];
  for (const m of s.members.values()) {
    if (m.name !== s.self && statuses.includes(m.status)) out.push(m);
  }
  return out;
}

/** Members counted for timeouts: live ones, this router included (cached per version). */
export function liveCount(s: SwimState): number {
  if (s.countedAt === s.version) return s.liveCached;
  let n = 0;
  for (const m of s.members.values()) if (isLive(m.status) || m.name === s.self) n++;
  s.liveCached = n;
  s.countedAt = s.version;
  return n;
}

/** Updates to piggyback on one outgoing message. */
export function piggyback(s: SwimState): MemberUpdate[] {
  return s.queue.take(
    s.config.maxPiggyback,
    retransmitLimit(liveCount(s), s.config.retransmitMult),
  );
}

/** The gossip form of a record. */
export function toUpdate(m: MemberRecord): MemberUpdate {
  return {
    name: m.name,
    address: m.address,
    status: m.status,
    incarnation: m.incarnation,
    from: m.from,
  };
}

/** Sends a request and remembers what it was for; returns its seq. */
export function sendRequest(
  s: SwimState,
  out: SwimEffect[],
  to: string,
  build: (seq: number) => MeshRequest,
  timeoutMs: number,
  purpose: Purpose,
): number {
  const seq = ++s.seq;
  s.outstanding.set(seq, purpose);
  out.push({ type: "send", to, req: build(seq), timeoutMs: Math.max(1, Math.round(timeoutMs)) });
  return seq;
}
