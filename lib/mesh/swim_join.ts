/**
 * Joining and staying joined: full-state exchanges (the whole member table each way) with every
 * seed until one answers, backing off while none does; periodic push-pull with a random live
 * peer; a reconnect attempt to an address that may hold the other half of a partition; router
 * pods reported by Kubernetes discovery (a ready pod becomes a seed and is contacted, a pod not
 * ready is suspected, a pod gone is down). In: the state, `now`; out: requests and gossip as
 * `SwimEffect`s. Part of the reducer (`swim.ts`).
 */

import { isLive } from "./member.ts";
import { broadcast, setStatus, startSuspicion } from "./swim_merge.ts";
import {
  liveCount,
  peers,
  pick,
  selfRecord,
  sendRequest,
  type SwimEffect,
  type SwimState,
  toUpdate,
} from "./swim_state.ts";

/** A router pod's state from Kubernetes discovery (see `SwimEvent`). */
export function discovered(
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

/** Whether this router should contact its seeds: it never joined, or it is alone. */
export function needsJoin(s: SwimState): boolean {
  if (s.seeds.length === 0 || s.leaving) return false;
  return !s.joined || liveCount(s) <= 1;
}

/** Contacts every seed with a full-state exchange, backing off while none answers. */
export function join(s: SwimState, out: SwimEffect[], now: number): void {
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
export function exchange(s: SwimState, out: SwimEffect[], now: number): void {
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
export function fullTable(s: SwimState) {
  return [...s.members.values()].map((m) => {
    const u = toUpdate(m);
    if (u.status === "INIT") u.status = "ALIVE";
    return u;
  });
}

/**
 * The first contact with a peer makes a joining router ALIVE; it then announces itself to
 * every member it learned of, so the whole mesh knows it within one round trip.
 */
export function markJoined(s: SwimState, out: SwimEffect[], now: number): void {
  const first = !s.joined || selfRecord(s).status === "INIT";
  s.joined = true;
  s.joinAttempt = 0;
  if (!first) return;
  const self = selfRecord(s);
  if (self.status === "INIT") setStatus(s, out, self, "ALIVE", self.incarnation, "", now);
  broadcast(s, out, toUpdate(self));
}
