/**
 * Failure detection (SWIM's probe cycle with memberlist's and Lifeguard's refinements): one
 * scheduled probe per interval, targets in a shuffled round-robin so every member is probed
 * within N − 1 rounds; a direct ping, then ping-req through up to `indirectChecks` ALIVE peers
 * once the probe timeout passes or the ping fails outright; the probe fails when the interval
 * ends, or earlier once the ping failed and every intermediary has answered. Timeouts stretch
 * with the local-health score. Also: answering others' ping-reqs (nack at 80 % of the timeout).
 */

import { applyAwareness, failedProbeDelta, scaleTimeout } from "./awareness.ts";
import { isLive } from "./member.ts";
import { broadcast, confirmSuspicion, setStatus, startSuspicion } from "./swim_merge.ts";
import {
  peers,
  pick,
  piggyback,
  type ProbeRun,
  rand,
  selfRecord,
  sendRequest,
  type SwimEffect,
  type SwimState,
  toUpdate,
} from "./swim_state.ts";
import type { MemberUpdate } from "./member.ts";

/** The next target of the scheduled probe, reshuffling the order when it runs out. */
function nextTarget(s: SwimState): string | null {
  for (let pass = 0; pass < 2; pass++) {
    while (s.probeIndex < s.probeOrder.length) {
      const name = s.probeOrder[s.probeIndex++];
      const m = s.members.get(name);
      if (m && name !== s.self && isLive(m.status) && !s.probes.has(name)) return name;
    }
    const names = [...s.members.keys()].filter((n) => n !== s.self);
    for (let i = names.length - 1; i > 0; i--) {
      const j = Math.floor(rand(s) * (i + 1));
      [names[i], names[j]] = [names[j], names[i]];
    }
    s.probeOrder = names;
    s.probeIndex = 0;
  }
  return null;
}

/** Starts the scheduled probe when it is due. */
export function scheduleProbes(s: SwimState, out: SwimEffect[], now: number): void {
  if (s.leaving || now < s.nextProbeAt) return;
  const interval = scaleTimeout(s.config.probeIntervalMs, s.awareness);
  s.nextProbeAt = now + interval;
  const target = nextTarget(s);
  if (target) startProbe(s, out, target, now, false);
}

/** Pings `target` directly; the ping carries its suspicion when it is suspected (buddy system). */
export function startProbe(
  s: SwimState,
  out: SwimEffect[],
  target: string,
  now: number,
  urgent: boolean,
): void {
  const m = s.members.get(target)!;
  const c = s.config;
  const interval = scaleTimeout(c.probeIntervalMs, s.awareness);
  const updates: MemberUpdate[] = piggyback(s);
  if (m.status === "SUSPECTED" && !updates.some((u) => u.name === target)) {
    updates.push(toUpdate(m));
  }
  const self = selfRecord(s);
  const seq = sendRequest(
    s,
    out,
    m.address,
    (seq) => ({
      kind: "ping",
      seq,
      from: s.self,
      fromAddress: self.address,
      to: target,
      updates,
      fullState: false,
    }),
    interval,
    { kind: "probe", target },
  );
  const run: ProbeRun = {
    target,
    seq,
    startedAt: now,
    directDeadline: now + scaleTimeout(c.probeTimeoutMs, s.awareness),
    endDeadline: now + interval,
    direct: "pending",
    indirectStarted: false,
    indirectSent: 0,
    indirectPending: 0,
    nacks: 0,
    urgent,
  };
  s.probes.set(target, run);
}

/** Asks up to `indirectChecks` random ALIVE peers to ping the target for us. */
function startIndirect(s: SwimState, out: SwimEffect[], run: ProbeRun, now: number): void {
  run.indirectStarted = true;
  const target = s.members.get(run.target);
  if (!target) return;
  const helpers = pick(
    s,
    peers(s, ["ALIVE"]).filter((p) => p.name !== run.target),
    s.config.indirectChecks,
  );
  for (const h of helpers) {
    sendRequest(
      s,
      out,
      h.address,
      (seq) => ({
        kind: "pingReq",
        seq,
        from: s.self,
        target: { name: target.name, address: target.address },
        updates: piggyback(s),
      }),
      run.endDeadline - now,
      { kind: "indirect", target: run.target, probeSeq: run.seq },
    );
    out.push({ type: "count", what: "ping_req_sent" });
  }
  run.indirectSent = helpers.length;
  run.indirectPending = helpers.length;
}

/** Ends a probe: an ack lowers the local-health score, a failure raises it and suspects. */
export function finishProbe(
  s: SwimState,
  out: SwimEffect[],
  run: ProbeRun,
  ok: boolean,
  indirect: boolean,
  now: number,
): void {
  s.probes.delete(run.target);
  const c = s.config;
  out.push({
    type: "probed",
    name: run.target,
    ok,
    rttMs: ok && !indirect ? now - run.startedAt : null,
    indirect,
  });
  if (ok) {
    s.awareness = applyAwareness(s.awareness, -1, c.awarenessMaxMultiplier);
    return;
  }
  s.awareness = applyAwareness(
    s.awareness,
    failedProbeDelta(run.indirectSent, run.nacks),
    c.awarenessMaxMultiplier,
  );
  const m = s.members.get(run.target);
  if (!m || !isLive(m.status) || s.leaving) return;
  if (m.status === "SUSPECTED") {
    // An independent failure of ours confirms the suspicion; say so to everyone.
    if (confirmSuspicion(s, m.name, s.self)) broadcast(s, out, { ...toUpdate(m), from: s.self });
    return;
  }
  setStatus(s, out, m, "SUSPECTED", m.incarnation, s.self, now);
  startSuspicion(s, m, s.self, now);
  out.push({
    type: "log",
    level: "info",
    msg: "mesh member suspected",
    fields: { peer: m.name, nacks: run.nacks, asked: run.indirectSent },
  });
  broadcast(s, out, toUpdate(m));
}

/** Moves probes past their deadlines. */
export function advanceProbes(s: SwimState, out: SwimEffect[], now: number): void {
  for (const run of [...s.probes.values()]) {
    if (!run.indirectStarted && now >= run.directDeadline) startIndirect(s, out, run, now);
    if (now >= run.endDeadline) finishProbe(s, out, run, false, false, now);
  }
}

/** The direct ping failed outright (refused, reset): ask others now instead of waiting. */
export function directFailed(s: SwimState, out: SwimEffect[], target: string, now: number): void {
  const run = s.probes.get(target);
  if (!run) return;
  run.direct = "failed";
  if (!run.indirectStarted) startIndirect(s, out, run, now);
  if (run.indirectPending === 0) finishProbe(s, out, run, false, false, now);
}

/** An intermediary answered ping-req `probeSeq` (`ack`: the target acked through it). */
export function indirectAnswered(
  s: SwimState,
  out: SwimEffect[],
  target: string,
  probeSeq: number,
  result: "ack" | "nack" | "none",
  now: number,
): void {
  const run = s.probes.get(target);
  // An answer about an earlier probe of the same member says nothing about this one.
  if (!run || run.seq !== probeSeq) return;
  if (result === "ack") return finishProbe(s, out, run, true, true, now);
  run.indirectPending = Math.max(0, run.indirectPending - 1);
  if (result === "nack") run.nacks++;
  if (run.direct === "failed" && run.indirectPending === 0) {
    finishProbe(s, out, run, false, false, now);
  }
}

/**
 * After a stall of `ms` (a paused or starved process), every deadline moves back by as much:
 * replies that sat in the sockets meanwhile are read before anyone is accused. The stall also
 * costs a point of local health.
 */
export function absorbLag(s: SwimState, ms: number): void {
  for (const run of s.probes.values()) {
    run.directDeadline += ms;
    run.endDeadline += ms;
  }
  for (const r of s.relays.values()) r.nackAt += ms;
  for (const sp of s.suspicions.values()) sp.deadline += ms;
  s.awareness = applyAwareness(s.awareness, 1, s.config.awarenessMaxMultiplier);
}

/** Answers nack for relays whose target did not ack within 80 % of the probe timeout. */
export function expireRelays(s: SwimState, out: SwimEffect[], now: number): void {
  for (const [seq, r] of s.relays) {
    if (r.nackAt > now) continue;
    answerRelay(s, out, seq, false);
  }
}

/** Answers the ping-req behind relay `seq` with an ack or a nack, once. */
export function answerRelay(s: SwimState, out: SwimEffect[], seq: number, acked: boolean): void {
  const r = s.relays.get(seq);
  if (!r) return;
  s.relays.delete(seq);
  out.push({
    type: "respond",
    id: r.requestId,
    ack: {
      seq: r.requesterSeq,
      from: s.self,
      nack: !acked,
      updates: piggyback(s),
      fullState: false,
      error: "",
    },
  });
}
