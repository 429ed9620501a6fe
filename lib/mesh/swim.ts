/**
 * The SWIM core as a reducer: `step(state, event, now)` updates the state it is given (in place,
 * for speed at hundreds of members) and returns the effects to perform and when to be woken. It
 * does no I/O, reads no clock and draws randomness only from the state, so a state and an
 * event sequence reproduce a run exactly. Shells (`node.ts`) perform the effects.
 *
 * Beyond memberlist: a broken sync stream triggers an immediate probe of its peer (a crashed
 * router is suspected within milliseconds, not in turn), and an isolated router keeps retrying
 * its seeds so a restarted or partitioned one finds its way back.
 */

import { isLive } from "./member.ts";
import {
  applyUpdate,
  broadcast,
  expireSuspicions,
  setStatus,
  startSuspicion,
} from "./swim_merge.ts";
import {
  absorbLag,
  advanceProbes,
  answerRelay,
  directFailed,
  expireRelays,
  finishProbe,
  indirectAnswered,
  scheduleProbes,
  startProbe,
} from "./swim_probe.ts";
import {
  liveCount,
  MAX_FORGOTTEN,
  peers,
  pick,
  piggyback,
  type Purpose,
  selfRecord,
  sendRequest,
  type SwimEffect,
  type SwimEvent,
  type SwimOutput,
  type SwimState,
  toUpdate,
} from "./swim_state.ts";
import type { AckMessage, MeshRequest, PingMessage } from "./wire.ts";

/** Applies one event at time `now`. */
export function step(s: SwimState, ev: SwimEvent, now: number): SwimOutput {
  const out: SwimEffect[] = [];
  switch (ev.type) {
    case "request":
      onRequest(s, out, ev.id, ev.req, now);
      break;
    case "reply":
      onReply(s, out, ev.seq, ev.ack, now);
      break;
    case "failed":
      onFailed(s, out, ev.seq, now);
      break;
    case "leave":
      leave(s, out, now);
      break;
    case "streamLost": {
      const m = s.members.get(ev.name);
      if (m && m.name !== s.self && isLive(m.status) && !s.probes.has(m.name) && !s.leaving) {
        startProbe(s, out, m.name, now, true);
      }
      break;
    }
    case "lagged":
      absorbLag(s, ev.ms);
      break;
    case "discovered":
      discovered(s, out, ev.name, ev.address, ev.state, now);
      break;
    case "tick":
      break;
  }
  advance(s, out, now);
  return { effects: out, wakeAt: wakeAt(s) };
}

/** A router pod's state from Kubernetes discovery (see `SwimEvent`). */
function discovered(
  s: SwimState,
  out: SwimEffect[],
  name: string,
  address: string,
  state: "ready" | "not_ready" | "gone",
  now: number,
): void {
  if (name === s.self || s.leaving) return;
  const m = s.members.get(name);
  if (state === "ready") {
    // Kept as a seed while the pod lives, so an isolated router keeps finding it; a pod that
    // moved (a new IP) leaves its old address behind, so seeds stay one per router pod.
    if (m && m.address !== address) s.seeds = s.seeds.filter((x) => x !== m.address);
    if (!s.seeds.includes(address)) s.seeds.push(address);
    if (m && m.status === "ALIVE" && m.address === address) return;
    sendFullState(s, out, address, "", { kind: "join", address });
    s.joinInFlight++;
    return;
  }
  s.seeds = s.seeds.filter((a) => a !== address);
  // Only about the member at that address: a stale event for an earlier pod of the same name
  // (the router moved and rejoined meanwhile) must not suspect or down its new life.
  if (!m || address === "" || m.address !== address) return;
  if (state === "not_ready") {
    if (m.status !== "ALIVE") return;
    setStatus(s, out, m, "SUSPECTED", m.incarnation, s.self, now);
    startSuspicion(s, m, s.self, now);
    out.push({
      type: "log",
      level: "info",
      msg: "mesh member suspected: its pod is not ready",
      fields: { peer: name },
    });
    broadcast(s, out, toUpdate(m));
    return;
  }
  if (m.status === "DOWN" || m.status === "LEAVING") return;
  setStatus(s, out, m, "DOWN", m.incarnation, s.self, now);
  out.push({
    type: "log",
    level: "info",
    msg: "mesh member down: its pod is gone",
    fields: { peer: name },
  });
  broadcast(s, out, toUpdate(m));
}

/** Everything driven by time. */
function advance(s: SwimState, out: SwimEffect[], now: number): void {
  advanceProbes(s, out, now);
  expireRelays(s, out, now);
  expireSuspicions(s, out, now);
  scheduleProbes(s, out, now);
  join(s, out, now);
  if (s.leaving) return;
  exchange(s, out, now);
  reap(s, out, now);
}

/** The earliest deadline in the state. */
function wakeAt(s: SwimState): number {
  let t = s.leaving ? Infinity : Math.min(s.nextProbeAt, s.nextPushPullAt, s.nextReconnectAt);
  if (needsJoin(s) && s.joinInFlight === 0) t = Math.min(t, s.nextJoinAt);
  for (const p of s.probes.values()) {
    t = Math.min(t, p.indirectStarted ? p.endDeadline : p.directDeadline);
  }
  for (const r of s.relays.values()) t = Math.min(t, r.nackAt);
  for (const sp of s.suspicions.values()) t = Math.min(t, sp.deadline);
  return s.leaving ? t : Math.min(t, s.nextReapAt);
}

function needsJoin(s: SwimState): boolean {
  if (s.seeds.length === 0 || s.leaving) return false;
  return !s.joined || liveCount(s) <= 1;
}

/** Contacts every seed with a full-state exchange, backing off while none answers. */
function join(s: SwimState, out: SwimEffect[], now: number): void {
  if (!needsJoin(s) || s.joinInFlight > 0 || now < s.nextJoinAt) return;
  const c = s.config;
  const backoff = Math.min(c.joinMaxBackoffMs, c.joinBackoffMs * 2 ** Math.min(s.joinAttempt, 30));
  s.joinAttempt++;
  s.nextJoinAt = now + backoff;
  for (const address of s.seeds) {
    sendFullState(s, out, address, "", { kind: "join", address });
    s.joinInFlight++;
  }
}

/**
 * Push-pull with a random live peer; and a reconnect attempt to one random address that may
 * hold the other half of a partition: a DOWN member, a forgotten member's address (until the
 * reconnect timeout), or a seed no live member answers at.
 */
function exchange(s: SwimState, out: SwimEffect[], now: number): void {
  const c = s.config;
  if (c.pushPullIntervalMs > 0 && now >= s.nextPushPullAt) {
    s.nextPushPullAt = now + c.pushPullIntervalMs;
    const [p] = pick(s, peers(s, ["ALIVE"]), 1);
    if (p) sendFullState(s, out, p.address, p.name, { kind: "pushPull", name: p.name });
  }
  if (c.reconnectIntervalMs > 0 && now >= s.nextReconnectAt) {
    s.nextReconnectAt = now + c.reconnectIntervalMs;
    const [target] = pick(s, reconnectTargets(s, now), 1);
    if (target) {
      sendFullState(s, out, target.address, target.name, { kind: "pushPull", name: target.name });
    }
  }
}

function reconnectTargets(s: SwimState, now: number): { name: string; address: string }[] {
  const out: { name: string; address: string }[] = peers(s, ["DOWN"]);
  const live = new Set<string>();
  for (const m of s.members.values()) if (isLive(m.status)) live.add(m.address);
  for (const [address, at] of s.forgotten) {
    if (now - at > s.config.reconnectTimeoutMs) s.forgotten.delete(address);
    else if (!live.has(address)) out.push({ name: "", address });
  }
  for (const address of s.seeds) {
    if (!live.has(address) && !s.forgotten.has(address)) out.push({ name: "", address });
  }
  return out;
}

function sendFullState(
  s: SwimState,
  out: SwimEffect[],
  address: string,
  to: string,
  purpose: { kind: "join"; address: string } | { kind: "pushPull"; name: string },
): void {
  const self = selfRecord(s);
  sendRequest(
    s,
    out,
    address,
    (seq) => ({
      kind: "ping",
      seq,
      from: s.self,
      fromAddress: self.address,
      to,
      updates: fullTable(s),
      fullState: true,
    }),
    s.config.broadcastTimeoutMs,
    purpose,
  );
}

/** The whole table as gossip; this router's INIT record goes out as ALIVE. */
function fullTable(s: SwimState) {
  return [...s.members.values()].map((m) => {
    const u = toUpdate(m);
    if (u.status === "INIT") u.status = "ALIVE";
    return u;
  });
}

/** Forgets members DOWN or LEAVING for longer than the reap interval. */
function reap(s: SwimState, out: SwimEffect[], now: number): void {
  if (now < s.nextReapAt) return;
  s.nextReapAt = Infinity;
  for (const m of [...s.members.values()]) {
    if (m.name === s.self || (m.status !== "DOWN" && m.status !== "LEAVING")) continue;
    const due = m.changedAt + s.config.reapMs;
    if (now < due) {
      s.nextReapAt = Math.min(s.nextReapAt, due);
      continue;
    }
    s.members.delete(m.name);
    s.suspicions.delete(m.name);
    s.queue.remove(m.name);
    s.version++;
    if (m.status === "DOWN") remember(s, m.address, now);
    out.push({ type: "forget", member: m });
  }
}

/** Keeps a forgotten member's address for reconnection, the oldest dropped past the bound. */
function remember(s: SwimState, address: string, now: number): void {
  s.forgotten.delete(address);
  s.forgotten.set(address, now);
  if (s.forgotten.size > MAX_FORGOTTEN) s.forgotten.delete(s.forgotten.keys().next().value!);
}

/** Announces LEAVING to every ALIVE peer and stops probing. */
function leave(s: SwimState, out: SwimEffect[], now: number): void {
  if (s.leaving) return;
  const self = selfRecord(s);
  setStatus(s, out, self, "LEAVING", self.incarnation + 1, "", now);
  s.leaving = true;
  broadcast(s, out, toUpdate(self));
}

/**
 * The first contact with a peer makes a joining router ALIVE; it then announces itself to
 * every member it learned of, so the whole mesh knows it within one round trip.
 */
function markJoined(s: SwimState, out: SwimEffect[], now: number): void {
  const first = !s.joined || selfRecord(s).status === "INIT";
  s.joined = true;
  s.joinAttempt = 0;
  if (!first) return;
  const self = selfRecord(s);
  if (self.status === "INIT") setStatus(s, out, self, "ALIVE", self.incarnation, "", now);
  broadcast(s, out, toUpdate(self));
}

function ack(s: SwimState, seq: number, extra: Partial<AckMessage> = {}): AckMessage {
  return { seq, from: s.self, nack: false, updates: [], fullState: false, error: "", ...extra };
}

function onRequest(s: SwimState, out: SwimEffect[], id: number, req: MeshRequest, now: number) {
  const respond = (a: AckMessage) => out.push({ type: "respond", id, ack: a });
  const self = selfRecord(s);
  if (s.leaving) return respond(ack(s, req.seq, { error: "leaving", updates: [toUpdate(self)] }));
  if (req.from === s.self) {
    // This router reached itself through a seed: answer, but it is no conflict.
    const itself = req.kind === "ping" && req.fromAddress === self.address;
    if (itself) return respond(ack(s, req.seq, { error: "name_conflict" }));
    out.push({ type: "count", what: "name_conflict" });
    out.push({
      type: "log",
      level: "warn",
      msg: "refused a mesh peer that uses this router's name",
      fields: { name: req.from },
    });
    return respond(ack(s, req.seq, { error: "name_conflict" }));
  }
  if (req.kind === "ping" && req.to !== "" && req.to !== s.self) {
    out.push({ type: "count", what: "wrong_node" });
    return respond(ack(s, req.seq, { error: "wrong_node" }));
  }
  if (req.kind === "ping" && conflicts(s, req)) {
    out.push({ type: "count", what: "name_conflict" });
    out.push({
      type: "log",
      level: "warn",
      msg: "refused a mesh join: the name belongs to a live member at another address",
      fields: { name: req.from, address: req.fromAddress },
    });
    return respond(ack(s, req.seq, { error: "name_conflict" }));
  }
  const fullState = req.kind === "ping" && req.fullState;
  for (const u of capped(s, req.updates, fullState)) applyUpdate(s, out, u, now, fullState);
  markJoined(s, out, now);
  if (req.kind === "pingReq") {
    out.push({ type: "count", what: "ping_req_served" });
    // Only members this router knows at that address: a peer cannot make it dial anywhere.
    const t = s.members.get(req.target.name);
    if (!t || t.address !== req.target.address) {
      return respond(ack(s, req.seq, { nack: true, updates: piggyback(s) }));
    }
    const relaySeq = sendRequest(
      s,
      out,
      req.target.address,
      (seq) => ({
        kind: "ping",
        seq,
        from: s.self,
        fromAddress: self.address,
        to: req.target.name,
        updates: [],
        fullState: false,
      }),
      s.config.probeTimeoutMs,
      { kind: "relay", relaySeq: 0 },
    );
    s.outstanding.set(relaySeq, { kind: "relay", relaySeq });
    s.relays.set(relaySeq, {
      requestId: id,
      requesterSeq: req.seq,
      nackAt: now + 0.8 * s.config.probeTimeoutMs,
    });
    return;
  }
  if (fullState) return respond(ack(s, req.seq, { updates: fullTable(s), fullState: true }));
  const updates = piggyback(s);
  if (s.selfStale) {
    s.selfStale = false;
    if (!updates.some((u) => u.name === s.self)) updates.push(toUpdate(self));
  }
  // A sender we hold as suspected or down is told so, and can refute.
  const sender = s.members.get(req.from);
  if (sender && !updates.some((u) => u.name === sender.name) && sender.status !== "ALIVE") {
    updates.push(toUpdate(sender));
  }
  respond(ack(s, req.seq, { updates }));
}

/** A peer's updates, at most a whole table's worth for a full state, else a few piggybacks. */
function capped<T>(s: SwimState, updates: T[], fullState: boolean): T[] {
  const max = fullState ? s.config.maxMembers : 4 * s.config.maxPiggyback;
  return updates.length > max ? updates.slice(0, max) : updates;
}

/** A request from a name held by a live member at another address. */
function conflicts(s: SwimState, req: PingMessage): boolean {
  const m = s.members.get(req.from);
  return !!m && isLive(m.status) && m.address !== req.fromAddress;
}

function onReply(s: SwimState, out: SwimEffect[], seq: number, a: AckMessage, now: number) {
  const purpose = s.outstanding.get(seq);
  if (!purpose) return;
  s.outstanding.delete(seq);
  if (purpose.kind === "join" && a.from === s.self) {
    // The seed is this router under another spelling (a host name, another interface).
    s.joinInFlight--;
    s.seeds = s.seeds.filter((x) => x !== purpose.address);
    out.push({
      type: "log",
      level: "info",
      msg: "a mesh seed is this router itself; not joining through it",
      fields: { seed: purpose.address },
    });
    if (s.seeds.length === 0) markJoined(s, out, now);
    return;
  }
  if (a.error === "name_conflict") {
    out.push({ type: "count", what: "name_conflict" });
    out.push({
      type: "log",
      level: "error",
      msg: "a mesh peer refused this router's name: another live router uses it",
      fields: { name: s.self, peer: a.from },
    });
  } else {
    for (const u of capped(s, a.updates, a.fullState)) applyUpdate(s, out, u, now, a.fullState);
  }
  const good = a.error === "";
  if (good) markJoined(s, out, now);
  settle(s, out, seq, purpose, good && !a.nack ? "ack" : "refused", now);
}

function onFailed(s: SwimState, out: SwimEffect[], seq: number, now: number) {
  const purpose = s.outstanding.get(seq);
  if (!purpose) return;
  s.outstanding.delete(seq);
  settle(s, out, seq, purpose, "none", now);
}

/**
 * What a request's end means for what it was sent for: `ack` (a good answer), `refused` (an
 * error or a nack came back) or `none` (no answer).
 */
function settle(
  s: SwimState,
  out: SwimEffect[],
  seq: number,
  purpose: Purpose,
  answer: "ack" | "refused" | "none",
  now: number,
) {
  switch (purpose.kind) {
    case "probe": {
      const run = s.probes.get(purpose.target);
      if (!run || run.seq !== seq) return;
      if (answer === "ack") return finishProbe(s, out, run, true, false, now);
      const m = s.members.get(purpose.target);
      if (!m || !isLive(m.status)) return void s.probes.delete(purpose.target);
      return directFailed(s, out, purpose.target, now);
    }
    case "indirect": {
      const result = answer === "refused" ? "nack" : answer;
      return indirectAnswered(s, out, purpose.target, purpose.probeSeq, result, now);
    }
    case "relay":
      return answerRelay(s, out, purpose.relaySeq, answer === "ack");
    case "join":
      s.joinInFlight--;
      return;
    case "broadcast":
    case "pushPull":
      return;
  }
}
