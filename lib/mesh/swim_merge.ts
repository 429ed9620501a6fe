/**
 * How gossip changes the membership table (memberlist's aliveNode / suspectNode / deadNode,
 * with SWIM's incarnation rules): a claim about a member wins only with a newer incarnation, or
 * the same one and a worse status; a claim about this router that it is suspected, down or
 * leaving is refuted by raising its incarnation; a second name at another address is refused.
 * Originated status changes are broadcast to every ALIVE peer; all changes also ride the
 * piggyback queue.
 */

import { applyAwareness } from "./awareness.ts";
import type { MemberStatus, MemberUpdate } from "./member.ts";
import { parseHostPort } from "../core/host_port.ts";
import {
  liveCount,
  MAX_INCARNATION,
  type MemberRecord,
  peers,
  selfRecord,
  sendRequest,
  type SwimEffect,
  type SwimState,
  toUpdate,
} from "./swim_state.ts";
import { suspicionBounds, suspicionTimeout } from "./suspicion.ts";

/** Changes a record's status, clearing a suspicion it leaves, and reports it. */
export function setStatus(
  s: SwimState,
  out: SwimEffect[],
  m: MemberRecord,
  status: MemberStatus,
  incarnation: number,
  from: string,
  now: number,
): void {
  const previous = m.status;
  m.incarnation = incarnation;
  m.from = status === "SUSPECTED" || status === "DOWN" ? from : "";
  if (previous === status) return;
  m.status = status;
  m.changedAt = now;
  s.version++;
  if (status === "DOWN" || status === "LEAVING") {
    s.nextReapAt = Math.min(s.nextReapAt, now + s.config.reapMs);
  }
  if (status !== "SUSPECTED") s.suspicions.delete(m.name);
  if (status === "SUSPECTED") out.push({ type: "count", what: "suspicion" });
  out.push({ type: "member", member: m, previous });
}

/**
 * Tells every ALIVE peer (and the member itself when it is the one accused, so it can refute)
 * about `u` at once, and queues it for piggybacking.
 */
export function broadcast(s: SwimState, out: SwimEffect[], u: MemberUpdate): void {
  s.queue.push(u);
  const self = selfRecord(s);
  const targets = peers(s, ["ALIVE"]);
  const accused = s.members.get(u.name);
  if (accused && accused.name !== s.self && accused.status !== "ALIVE" && u.status !== "LEAVING") {
    targets.push(accused);
  }
  for (const p of targets) {
    sendRequest(
      s,
      out,
      p.address,
      (seq) => ({
        kind: "ping",
        seq,
        from: s.self,
        fromAddress: self.address,
        to: p.name,
        updates: [u],
        fullState: false,
      }),
      s.config.broadcastTimeoutMs,
      { kind: "broadcast" },
    );
  }
}

/** Raises this router's incarnation past `seen` and tells everyone it is ALIVE. */
export function refute(s: SwimState, out: SwimEffect[], seen: number, now: number): void {
  const self = selfRecord(s);
  if (seen >= MAX_INCARNATION) return; // wellFormed keeps claims below; never overflow
  setStatus(s, out, self, "ALIVE", Math.max(self.incarnation, seen) + 1, "", now);
  broadcast(s, out, toUpdate(self));
}

/** Starts suspecting `m` (already SUSPECTED at `incarnation`), `from` being the first suspector. */
export function startSuspicion(s: SwimState, m: MemberRecord, from: string, now: number): void {
  const c = s.config;
  const bounds = suspicionBounds(
    liveCount(s),
    c.probeIntervalMs,
    c.suspicionMult,
    c.suspicionMaxTimeoutMult,
  );
  s.suspicions.set(m.name, {
    incarnation: m.incarnation,
    startedAt: now,
    bounds,
    confirmers: new Set([from]),
    deadline: now + suspicionTimeout(bounds, 0),
  });
}

/** Counts `from` as a confirmation of the suspicion of `name`; returns whether it was new. */
export function confirmSuspicion(s: SwimState, name: string, from: string): boolean {
  const sp = s.suspicions.get(name);
  if (!sp || sp.confirmers.has(from)) return false;
  sp.confirmers.add(from);
  sp.deadline = sp.startedAt + suspicionTimeout(sp.bounds, sp.confirmers.size - 1);
  return true;
}

/** Declares DOWN every suspect whose timeout passed without a refutation. */
export function expireSuspicions(s: SwimState, out: SwimEffect[], now: number): void {
  for (const [name, sp] of s.suspicions) {
    if (sp.deadline > now) continue;
    s.suspicions.delete(name);
    const m = s.members.get(name);
    if (!m || m.status !== "SUSPECTED" || m.incarnation !== sp.incarnation) continue;
    setStatus(s, out, m, "DOWN", m.incarnation, s.self, now);
    out.push({
      type: "log",
      level: "warn",
      msg: "mesh member down",
      fields: { peer: name, after_ms: now - sp.startedAt, confirmations: sp.confirmers.size - 1 },
    });
    broadcast(s, out, toUpdate(m));
  }
}

/**
 * Applies one gossiped update. `fullState` marks a whole-table exchange, whose DOWN claims are
 * taken as suspicions (memberlist's push-pull rule): a stale table from across a healed
 * partition then costs a refutation, not a false DOWN.
 */
export function applyUpdate(
  s: SwimState,
  out: SwimEffect[],
  u: MemberUpdate,
  now: number,
  fullState: boolean,
): void {
  if (!wellFormed(u)) return void out.push({ type: "count", what: "malformed" });
  if (u.name === s.self) return applySelfClaim(s, out, u, now);
  const status = fullState && u.status === "DOWN" ? "SUSPECTED" : u.status;
  if (status === "ALIVE" || status === "INIT") return applyAlive(s, out, u, now);
  const m = s.members.get(u.name);
  // A claim about another life of the member (another address) says nothing about this one.
  if (!m || u.incarnation < m.incarnation || u.address !== m.address) return;
  if (status === "SUSPECTED") return applySuspect(s, out, m, u, now);
  if (status === "DOWN") {
    if (m.status === "DOWN" || m.status === "LEAVING") return;
    setStatus(s, out, m, "DOWN", u.incarnation, u.from, now);
    s.queue.push(toUpdate(m));
    return;
  }
  if (m.status === "LEAVING") return;
  setStatus(s, out, m, "LEAVING", u.incarnation, "", now);
  s.queue.push(toUpdate(m));
}

/**
 * A name like `--mesh-server-name` allows, a `host:port` address, and an incarnation no
 * refutation can overflow (a peer claiming 2^53 would otherwise lock this router out).
 */
function wellFormed(u: MemberUpdate): boolean {
  return u.name !== "" && u.name.length <= 253 && !u.name.includes(":") &&
    Number.isInteger(u.incarnation) && u.incarnation >= 0 && u.incarnation <= MAX_INCARNATION &&
    parseHostPort(u.address) !== null;
}

function applySelfClaim(s: SwimState, out: SwimEffect[], u: MemberUpdate, now: number): void {
  const self = selfRecord(s);
  if (u.address !== self.address) {
    out.push({ type: "count", what: "name_conflict" });
    out.push({
      type: "log",
      level: "warn",
      msg: "another router claims this router's mesh name",
      fields: { name: u.name, address: u.address, ours: self.address },
    });
    return;
  }
  if (s.leaving) return;
  if (u.status === "ALIVE" || u.status === "INIT") {
    // A newer ALIVE of us: a previous life of this router; outrank it.
    if (u.incarnation > self.incarnation) refute(s, out, u.incarnation, now);
    return;
  }
  if (u.incarnation < self.incarnation) {
    // The claimant missed our refutation: answer it with our record, and piggyback it again.
    s.selfStale = true;
    s.queue.push(toUpdate(self));
    return;
  }
  s.awareness = applyAwareness(s.awareness, 1, s.config.awarenessMaxMultiplier);
  out.push({ type: "count", what: "refutation" });
  out.push({
    type: "log",
    level: "info",
    msg: "refuting a claim about this router",
    fields: { claim: u.status, by: u.from || "?", incarnation: u.incarnation },
  });
  refute(s, out, u.incarnation, now);
}

function applyAlive(s: SwimState, out: SwimEffect[], u: MemberUpdate, now: number): void {
  const m = s.members.get(u.name);
  if (!m) {
    if (s.members.size >= s.config.maxMembers) {
      return void out.push({ type: "count", what: "member_limit" });
    }
    s.forgotten.delete(u.address);
    const rec: MemberRecord = {
      name: u.name,
      address: u.address,
      status: "ALIVE",
      incarnation: u.incarnation,
      from: "",
      changedAt: now,
    };
    s.members.set(u.name, rec);
    s.version++;
    out.push({ type: "member", member: rec, previous: null });
    s.queue.push(toUpdate(rec));
    return;
  }
  const gone = m.status === "DOWN" || m.status === "LEAVING";
  if (m.address !== u.address) {
    if (!gone) {
      out.push({ type: "count", what: "name_conflict" });
      return;
    }
    // Restarted elsewhere (a new pod IP): the old life is over, whatever its incarnation.
    m.address = u.address;
  } else if (u.incarnation <= m.incarnation) return;
  setStatus(s, out, m, "ALIVE", u.incarnation, "", now);
  s.queue.push(toUpdate(m));
}

function applySuspect(
  s: SwimState,
  out: SwimEffect[],
  m: MemberRecord,
  u: MemberUpdate,
  now: number,
): void {
  const from = u.from || "?";
  if (m.status === "SUSPECTED" && u.incarnation === m.incarnation) {
    if (confirmSuspicion(s, m.name, from)) s.queue.push({ ...toUpdate(m), from });
    return;
  }
  const gone = m.status === "DOWN" || m.status === "LEAVING";
  if (gone && u.incarnation === m.incarnation) return;
  setStatus(s, out, m, "SUSPECTED", u.incarnation, from, now);
  startSuspicion(s, m, from, now);
  s.queue.push(toUpdate(m));
}
