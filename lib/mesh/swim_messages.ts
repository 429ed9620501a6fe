/**
 * What the SWIM core does with messages: a peer's request (ping, full-state exchange or
 * ping-req) is checked (name conflicts, wrong target), its gossip merged and an ack returned, or,
 * for a ping-req, relayed to its target; the end of one of this router's own requests (a reply,
 * or none) settles what it was sent for: a probe, an indirect probe, a relayed ping, a join.
 * In: the state, the message, `now`; out: `SwimEffect`s. Part of the reducer (`swim.ts`).
 */

import { isLive } from "./member.ts";
import { applyUpdate } from "./swim_merge.ts";
import { fullTable, markJoined } from "./swim_join.ts";
import { answerRelay, directFailed, finishProbe, indirectAnswered } from "./swim_probe.ts";
import {
  piggyback,
  type Purpose,
  selfRecord,
  sendRequest,
  type SwimEffect,
  type SwimState,
  toUpdate,
} from "./swim_state.ts";
import type { AckMessage, MeshRequest, PingMessage } from "./wire.ts";

function ack(s: SwimState, seq: number, extra: Partial<AckMessage> = {}): AckMessage {
  return { seq, from: s.self, nack: false, updates: [], fullState: false, error: "", ...extra };
}

/** A request from a peer (`id` names it for the response). */
export function onRequest(
  s: SwimState,
  out: SwimEffect[],
  id: number,
  req: MeshRequest,
  now: number,
) {
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

/** The reply to this router's request `seq`. */
export function onReply(s: SwimState, out: SwimEffect[], seq: number, a: AckMessage, now: number) {
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

/** This router's request `seq` got no reply. */
export function onFailed(s: SwimState, out: SwimEffect[], seq: number, now: number) {
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
