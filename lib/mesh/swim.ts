/**
 * The SWIM core as a reducer: `step(state, event, now)` updates the state it is given (in place,
 * for speed at hundreds of members) and returns the effects to perform and when to be woken. It
 * does no I/O, reads no clock and draws randomness only from the state, so a state and an
 * event sequence reproduce a run exactly. Shells (`node.ts`) perform the effects. Here: the
 * dispatch of events, everything driven by time, leaving and reaping; messages are handled in
 * `swim_messages.ts`, joining and staying joined in `swim_join.ts`, probing in `swim_probe.ts`,
 * gossip merged in `swim_merge.ts`.
 *
 * Beyond memberlist: a broken sync stream triggers an immediate probe of its peer (a crashed
 * router is suspected within milliseconds, not in turn), and an isolated router keeps retrying
 * its seeds so a restarted or partitioned one finds its way back.
 */

import { isLive } from "./member.ts";
import { broadcast, expireSuspicions, setStatus } from "./swim_merge.ts";
import { discovered, exchange, join, needsJoin } from "./swim_join.ts";
import { onFailed, onReply, onRequest } from "./swim_messages.ts";
import {
  absorbLag,
  advanceProbes,
  expireRelays,
  scheduleProbes,
  startProbe,
} from "./swim_probe.ts";
import {
  MAX_FORGOTTEN,
  selfRecord,
  type SwimEffect,
  type SwimEvent,
  type SwimOutput,
  type SwimState,
  toUpdate,
} from "./swim_state.ts";

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
