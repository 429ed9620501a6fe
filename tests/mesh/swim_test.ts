import assert from "node:assert/strict";
import type { MemberStatus } from "../../lib/mesh/member.ts";
import { step } from "../../lib/mesh/swim.ts";
import { defaultSwimConfig } from "../../lib/mesh/swim_config.ts";
import { createSwimState, type SwimEffect, type SwimState } from "../../lib/mesh/swim_state.ts";
import type { AckMessage, MeshRequest, PingMessage } from "../../lib/mesh/wire.ts";

/** A joined router "a" that knows `others` (name → status) at incarnation 1. */
function world(others: Record<string, MemberStatus>, now = 0): SwimState {
  const s = createSwimState({
    config: defaultSwimConfig(),
    name: "a",
    address: "a:1",
    seeds: [],
    seed: 1,
    now,
  });
  s.nextReapAt = now; // members added by hand: let the first step find the due times
  for (const [name, status] of Object.entries(others)) {
    s.members.set(name, {
      name,
      address: `${name}:1`,
      status,
      incarnation: 1,
      from: "",
      changedAt: now,
    });
  }
  return s;
}

const sends = (fx: SwimEffect[]) =>
  fx.filter((e): e is Extract<SwimEffect, { type: "send" }> => e.type === "send");
const status = (s: SwimState, n: string) => s.members.get(n)?.status ?? null;
const ack = (seq: number, from: string, extra: Partial<AckMessage> = {}): AckMessage => ({
  seq,
  from,
  nack: false,
  updates: [],
  fullState: false,
  error: "",
  ...extra,
});
const gossip = (from: string, updates: MeshRequest["updates"]): PingMessage => ({
  kind: "ping",
  seq: 9,
  from,
  fromAddress: `${from}:1`,
  to: "a",
  updates,
  fullState: false,
});

/** Runs ticks until the scheduled probe starts; returns its direct ping. */
function probe(s: SwimState, now: number) {
  const fx = step(s, { type: "tick" }, now).effects;
  const ping = sends(fx).find((e) => e.req.kind === "ping" && !e.req.fullState);
  assert.ok(ping, "a probe started");
  return ping;
}

Deno.test("swim: an acked probe lowers the local-health score and suspects nobody", () => {
  const s = world({ b: "ALIVE" });
  s.awareness = 2;
  const ping = probe(s, 1000);
  assert.equal(ping.to, "b:1");
  const fx =
    step(s, { type: "reply", seq: ping.req.seq, ack: ack(ping.req.seq, "b") }, 1003).effects;
  assert.ok(fx.some((e) => e.type === "probed" && e.ok && e.rttMs === 3));
  assert.equal(s.awareness, 1);
  assert.equal(status(s, "b"), "ALIVE");
});

Deno.test("swim: a missed ack sends ping-reqs after the probe timeout; an indirect ack rescues", () => {
  const s = world({ b: "ALIVE", c: "ALIVE", d: "ALIVE", e: "ALIVE" });
  const ping = probe(s, 1000);
  const target = ping.req.kind === "ping" ? ping.req.to : "";
  assert.equal(sends(step(s, { type: "tick" }, 1499).effects).length, 0, "not before the timeout");
  const reqs = sends(step(s, { type: "tick" }, 1500).effects);
  assert.equal(reqs.length, 3, "three intermediaries");
  assert.ok(reqs.every((r) => r.req.kind === "pingReq" && r.req.target.name === target));
  assert.ok(reqs.every((r) => r.to !== ping.to), "never the target itself");
  const fx = step(s, { type: "reply", seq: reqs[0].req.seq, ack: ack(reqs[0].req.seq, "x") }, 1600)
    .effects;
  assert.ok(fx.some((e) => e.type === "probed" && e.ok && e.indirect));
  assert.equal(status(s, target), "ALIVE");
  assert.equal(step(s, { type: "tick" }, 2100).effects.some((e) => e.type === "member"), false);
});

Deno.test("swim: a refused ping and three nacks suspect at once and tell every ALIVE peer", () => {
  const s = world({ b: "ALIVE", c: "ALIVE", d: "ALIVE", e: "ALIVE" });
  const ping = probe(s, 1000);
  const target = ping.req.kind === "ping" ? ping.req.to : "";
  const reqs = sends(
    step(s, { type: "failed", seq: ping.req.seq, code: "unreachable" }, 1002).effects,
  );
  assert.equal(reqs.length, 3, "ping-reqs at once, without waiting for the timeout");
  step(
    s,
    { type: "reply", seq: reqs[0].req.seq, ack: ack(reqs[0].req.seq, "x", { nack: true }) },
    1005,
  );
  step(
    s,
    { type: "reply", seq: reqs[1].req.seq, ack: ack(reqs[1].req.seq, "y", { nack: true }) },
    1005,
  );
  const fx = step(
    s,
    { type: "reply", seq: reqs[2].req.seq, ack: ack(reqs[2].req.seq, "z", { nack: true }) },
    1006,
  )
    .effects;
  assert.equal(status(s, target), "SUSPECTED");
  assert.equal(s.awareness, 0, "every intermediary answered: the fault is not ours");
  const told = sends(fx).filter((e) =>
    e.req.kind === "ping" && e.req.updates[0]?.status === "SUSPECTED"
  );
  // Three ALIVE peers and the suspect itself (so it can refute).
  assert.equal(told.length, 4);
});

Deno.test("swim: without nacks the failure raises local health, which stretches the next timeouts", () => {
  const s = world({ b: "ALIVE", c: "ALIVE", d: "ALIVE", e: "ALIVE" });
  probe(s, 1000);
  step(s, { type: "tick" }, 1500);
  // At 2 s the probe fails and the next one starts in the same step.
  const next = sends(step(s, { type: "tick" }, 2000).effects).find((e) =>
    s.outstanding.get(e.req.seq)?.kind === "probe"
  );
  assert.equal(s.awareness, 3, "three missing nacks");
  assert.equal(next?.timeoutMs, 4000, "interval × (score + 1)");
});

function suspectOf(s: SwimState, name: string, from: string, now: number, inc = 1) {
  return step(s, {
    type: "request",
    id: 1,
    req: gossip(from, [{
      name,
      address: `${name}:1`,
      status: "SUSPECTED",
      incarnation: inc,
      from,
    }]),
  }, now).effects;
}

Deno.test("swim: a lone suspicion lasts the long timeout; confirmations shorten it", () => {
  // N = 5: min = 4 × log10(5) → 4 s (at least 1 ×), max = 24 s, k = 2.
  const lone = world({ b: "ALIVE", c: "ALIVE", d: "ALIVE", e: "ALIVE" });
  suspectOf(lone, "b", "c", 0);
  assert.equal(status(lone, "b"), "SUSPECTED");
  step(lone, { type: "tick" }, 23_999);
  assert.equal(status(lone, "b"), "SUSPECTED");
  step(lone, { type: "tick" }, 24_000);
  assert.equal(status(lone, "b"), "DOWN");

  const confirmed = world({ b: "ALIVE", c: "ALIVE", d: "ALIVE", e: "ALIVE" });
  suspectOf(confirmed, "b", "c", 0);
  suspectOf(confirmed, "b", "d", 100);
  suspectOf(confirmed, "b", "d", 150); // the same suspector twice is one confirmation
  step(confirmed, { type: "tick" }, 9_000);
  assert.equal(status(confirmed, "b"), "SUSPECTED", "one confirmation: about 11.4 s");
  const fx = suspectOf(confirmed, "b", "e", 9_100);
  assert.equal(status(confirmed, "b"), "DOWN", "two confirmations: the 4 s minimum has passed");
  assert.ok(sends(fx).some((e) => e.req.updates[0]?.status === "DOWN"), "DOWN is broadcast");
});

Deno.test("swim: a suspected router refutes with a higher incarnation and counts it", () => {
  const s = world({ b: "ALIVE", c: "ALIVE" });
  const fx = suspectOf(s, "a", "b", 0);
  const self = s.members.get("a")!;
  assert.equal(self.status, "ALIVE");
  assert.equal(self.incarnation, 2);
  assert.equal(s.awareness, 1, "having to refute raises local health");
  assert.ok(fx.some((e) => e.type === "count" && e.what === "refutation"));
  const told = sends(fx).filter((e) => e.req.updates[0]?.name === "a");
  assert.equal(told.length, 2);
  assert.ok(
    told.every((e) => e.req.updates[0].status === "ALIVE" && e.req.updates[0].incarnation === 2),
  );
  // A stale claim (older incarnation) is ignored.
  suspectOf(s, "a", "c", 10, 1);
  assert.equal(self.incarnation, 2);
});

Deno.test("swim: incarnation rules", () => {
  const s = world({ b: "ALIVE" });
  const apply = (u: Partial<MeshRequest["updates"][0]>, now: number) =>
    step(s, {
      type: "request",
      id: 1,
      req: gossip("c", [{
        name: "b",
        address: "b:1",
        status: "ALIVE",
        incarnation: 1,
        from: "c",
        ...u,
      }]),
    }, now);
  apply({ status: "SUSPECTED", incarnation: 1 }, 0);
  assert.equal(status(s, "b"), "SUSPECTED");
  apply({ status: "ALIVE", incarnation: 1 }, 10);
  assert.equal(status(s, "b"), "SUSPECTED", "the same incarnation does not clear a suspicion");
  apply({ status: "ALIVE", incarnation: 2 }, 20);
  assert.equal(status(s, "b"), "ALIVE", "a refutation does");
  assert.equal(s.suspicions.size, 0);
  apply({ status: "SUSPECTED", incarnation: 1 }, 30);
  assert.equal(status(s, "b"), "ALIVE", "an older suspicion is ignored");
  apply({ status: "DOWN", incarnation: 2 }, 40);
  assert.equal(status(s, "b"), "DOWN");
  apply({ status: "ALIVE", incarnation: 2 }, 50);
  assert.equal(status(s, "b"), "DOWN", "DOWN needs a newer incarnation to come back");
  apply({ status: "ALIVE", incarnation: 3 }, 60);
  assert.equal(status(s, "b"), "ALIVE", "rejoin after restart and refutation");
});

Deno.test("swim: full-state exchanges take DOWN as a suspicion", () => {
  const s = world({ b: "ALIVE" });
  step(s, {
    type: "request",
    id: 1,
    req: {
      ...gossip("c", [
        { name: "c", address: "c:1", status: "ALIVE", incarnation: 1, from: "" },
        { name: "b", address: "b:1", status: "DOWN", incarnation: 1, from: "c" },
      ]),
      fullState: true,
      to: "",
    },
  }, 0);
  assert.equal(status(s, "b"), "SUSPECTED");
  assert.equal(status(s, "c"), "ALIVE");
});

Deno.test("swim: leave announces LEAVING with a higher incarnation and stops probing", () => {
  const s = world({ b: "ALIVE", c: "ALIVE" });
  const fx = step(s, { type: "leave" }, 0).effects;
  const self = s.members.get("a")!;
  assert.equal(self.status, "LEAVING");
  assert.equal(self.incarnation, 2);
  assert.equal(sends(fx).filter((e) => e.req.updates[0]?.status === "LEAVING").length, 2);
  assert.equal(sends(step(s, { type: "tick" }, 5000).effects).length, 0, "no probes");
  const answer = step(s, { type: "request", id: 3, req: gossip("b", []) }, 5001).effects;
  assert.ok(answer.some((e) => e.type === "respond" && e.ack.error === "leaving"));
  // A LEAVING peer is not probed and its suspicion is not started.
  const t = world({ b: "ALIVE" });
  step(t, {
    type: "request",
    id: 1,
    req: gossip("b", [{ name: "b", address: "b:1", status: "LEAVING", incarnation: 2, from: "" }]),
  }, 0);
  assert.equal(status(t, "b"), "LEAVING");
  assert.equal(sends(step(t, { type: "tick" }, 1000).effects).length, 0);
});

Deno.test("swim: DOWN and LEAVING members are forgotten after the reap interval", () => {
  const s = world({ b: "DOWN", c: "LEAVING", d: "ALIVE" });
  step(s, { type: "tick" }, 299_999);
  assert.equal(s.members.size, 4);
  const fx = step(s, { type: "tick" }, 300_000).effects;
  assert.deepEqual(
    fx.filter((e) => e.type === "forget").map((e) => e.type === "forget" && e.member.name).sort(),
    ["b", "c"],
  );
  assert.equal(status(s, "d"), "ALIVE");
});

Deno.test("swim: a join from a live member's name at another address is refused", () => {
  const s = world({ b: "ALIVE" });
  const fx = step(s, {
    type: "request",
    id: 7,
    req: {
      ...gossip("b", [{ name: "b", address: "evil:1", status: "ALIVE", incarnation: 5, from: "" }]),
      fromAddress: "evil:1",
      fullState: true,
      to: "",
    },
  }, 0).effects;
  assert.ok(fx.some((e) => e.type === "respond" && e.id === 7 && e.ack.error === "name_conflict"));
  assert.equal(s.members.get("b")!.address, "b:1");
  // ...and a peer using this router's own name is refused too.
  const own = step(s, { type: "request", id: 8, req: gossip("a", []) }, 1).effects;
  assert.ok(own.some((e) => e.type === "respond" && e.ack.error === "name_conflict"));
  // A restarted DOWN member may come back at a new address.
  const t = world({ b: "DOWN" });
  step(t, {
    type: "request",
    id: 1,
    req: gossip("c", [{ name: "b", address: "b:2", status: "ALIVE", incarnation: 1, from: "" }]),
  }, 0);
  assert.equal(status(t, "b"), "ALIVE");
  assert.equal(t.members.get("b")!.address, "b:2");
});

Deno.test("swim: serving a ping-req pings the target and answers ack, or nack at 80 % of the timeout", () => {
  const s = world({ b: "ALIVE", c: "ALIVE" });
  const req: MeshRequest = {
    kind: "pingReq",
    seq: 5,
    from: "b",
    target: { name: "c", address: "c:1" },
    updates: [],
  };
  const fx = step(s, { type: "request", id: 11, req }, 0).effects;
  const relay = sends(fx)[0];
  assert.equal(relay.to, "c:1");
  const answered =
    step(s, { type: "reply", seq: relay.req.seq, ack: ack(relay.req.seq, "c") }, 3).effects;
  assert.ok(
    answered.some((e) => e.type === "respond" && e.id === 11 && !e.ack.nack && e.ack.seq === 5),
  );

  const fx2 = step(s, { type: "request", id: 12, req }, 10).effects;
  const relay2 = sends(fx2)[0];
  assert.equal(step(s, { type: "tick" }, 409).effects.some((e) => e.type === "respond"), false);
  const nacked = step(s, { type: "tick" }, 410).effects;
  assert.ok(nacked.some((e) => e.type === "respond" && e.id === 12 && e.ack.nack));
  // A late ack is not answered twice.
  const late =
    step(s, { type: "reply", seq: relay2.req.seq, ack: ack(relay2.req.seq, "c") }, 500).effects;
  assert.equal(late.some((e) => e.type === "respond"), false);
});

Deno.test("swim: a router with seeds is INIT until one answers, retrying with backoff", () => {
  const s = createSwimState({
    config: defaultSwimConfig(),
    name: "n",
    address: "n:1",
    seeds: ["s1:1", "s2:1", "n:1"],
    seed: 3,
    now: 0,
  });
  assert.equal(s.members.get("n")!.status, "INIT");
  const first = sends(step(s, { type: "tick" }, 0).effects);
  assert.deepEqual(first.map((e) => e.to).sort(), ["s1:1", "s2:1"], "every seed but itself");
  for (const e of first) step(s, { type: "failed", seq: e.req.seq, code: "unreachable" }, 5);
  assert.equal(sends(step(s, { type: "tick" }, 999).effects).length, 0);
  const second = sends(step(s, { type: "tick" }, 1000).effects);
  assert.equal(second.length, 2, "retried after 1 s");
  for (const e of second) step(s, { type: "failed", seq: e.req.seq, code: "unreachable" }, 1005);
  assert.equal(sends(step(s, { type: "tick" }, 2999).effects).length, 0, "then after 2 s");
  const third = sends(step(s, { type: "tick" }, 3000).effects);
  const fx = step(s, {
    type: "reply",
    seq: third[0].req.seq,
    ack: ack(third[0].req.seq, "s1", {
      fullState: true,
      updates: [{ name: "s1", address: "s1:1", status: "ALIVE", incarnation: 1, from: "" }],
    }),
  }, 3002).effects;
  assert.equal(s.members.get("n")!.status, "ALIVE");
  assert.equal(status(s, "s1"), "ALIVE");
  assert.ok(
    sends(fx).some((e) => e.to === "s1:1" && e.req.updates[0]?.name === "n"),
    "announces itself",
  );
});

Deno.test("swim: a lost stream probes its peer at once, outside the schedule", () => {
  const s = world({ b: "ALIVE", c: "ALIVE" });
  const fx = step(s, { type: "streamLost", name: "c" }, 10).effects;
  const ping = sends(fx);
  assert.equal(ping.length, 1);
  assert.equal(ping[0].to, "c:1");
  assert.equal(
    sends(step(s, { type: "streamLost", name: "c" }, 11).effects).length,
    0,
    "one at a time",
  );
});

Deno.test("swim: a seed that turns out to be this router is dropped, not reported as a conflict", () => {
  const s = createSwimState({
    config: defaultSwimConfig(),
    name: "n",
    address: "10.0.0.1:1",
    seeds: ["localhost:1"],
    seed: 3,
    now: 0,
  });
  const [join] = sends(step(s, { type: "tick" }, 0).effects);
  const fx = step(s, {
    type: "reply",
    seq: join.req.seq,
    ack: ack(join.req.seq, "n", { error: "name_conflict" }),
  }, 1).effects;
  assert.deepEqual(s.seeds, []);
  assert.equal(s.members.get("n")!.status, "ALIVE", "no seeds left: a mesh of one");
  assert.equal(fx.some((e) => e.type === "count" && e.what === "name_conflict"), false);
});

Deno.test("swim: while leaving, a due reap does not make the wake time stay in the past", () => {
  const s = world({ b: "ALIVE", c: "DOWN" });
  step(s, { type: "leave" }, 0);
  const out = step(s, { type: "tick" }, 400_000);
  assert.ok(out.wakeAt > 400_000, `wakeAt ${out.wakeAt}`);
});

Deno.test("swim: claims that would overflow a refutation, bad names and bad addresses are ignored", () => {
  const s = world({ b: "ALIVE" });
  const fx = step(s, {
    type: "request",
    id: 1,
    req: gossip("b", [
      { name: "a", address: "a:1", status: "SUSPECTED", incarnation: 2 ** 53 - 1, from: "b" },
      { name: "", address: "x:1", status: "ALIVE", incarnation: 1, from: "" },
      { name: "x:y", address: "x:1", status: "ALIVE", incarnation: 1, from: "" },
      { name: "z", address: "unix:/tmp/sock", status: "ALIVE", incarnation: 1, from: "" },
    ]),
  }, 0).effects;
  assert.equal(s.members.get("a")!.incarnation, 1, "no refutation to 2^53");
  assert.equal(s.members.size, 2);
  assert.equal(fx.filter((e) => e.type === "count" && e.what === "malformed").length, 4);
});

Deno.test("swim: a message's updates and the member table are bounded", () => {
  const many = Array.from({ length: 10_000 }, (_, i) => ({
    name: `fake${i}`,
    address: `10.9.${i >> 8}.${i & 255}:1`,
    status: "ALIVE" as const,
    incarnation: 1,
    from: "",
  }));
  const s = world({ b: "ALIVE" });
  step(s, { type: "request", id: 1, req: gossip("b", many) }, 0);
  assert.equal(s.members.size, 2 + 4 * s.config.maxPiggyback, "a plain ping: 4 × piggyback");
  const t = world({ b: "ALIVE" });
  t.config = { ...t.config, maxMembers: 50 };
  const fx = step(t, { type: "request", id: 2, req: { ...gossip("b", many), fullState: true } }, 1)
    .effects;
  assert.equal(t.members.size, 50, "never past maxMembers");
  assert.ok(fx.some((e) => e.type === "count" && e.what === "member_limit"));
});

Deno.test("swim: a peer that missed our refutation gets our record in the answer", () => {
  const s = world({ b: "ALIVE" });
  suspectOf(s, "a", "b", 0); // refuted: incarnation 2
  const fx = step(s, {
    type: "request",
    id: 5,
    req: gossip("b", [{
      name: "a",
      address: "a:1",
      status: "SUSPECTED",
      incarnation: 1,
      from: "b",
    }]),
  }, 10).effects;
  const answer = fx.find((e) => e.type === "respond" && e.id === 5);
  assert.ok(answer && answer.type === "respond");
  assert.ok(
    answer.ack.updates.some((u) => u.name === "a" && u.status === "ALIVE" && u.incarnation === 2),
  );
});

Deno.test("swim: a ping-req answer from an earlier probe of the same member is not this probe's", () => {
  const s = world({ b: "ALIVE", c: "ALIVE", d: "ALIVE", e: "ALIVE" });
  const first = probe(s, 1000);
  const target = first.req.kind === "ping" ? first.req.to : "";
  const reqs = sends(step(s, { type: "tick" }, 1500).effects);
  step(s, { type: "reply", seq: first.req.seq, ack: ack(first.req.seq, target) }, 1600); // late ack: ok
  // The member's stream breaks: a new probe starts, and the old ping-reqs' acks come in.
  const again = sends(step(s, { type: "streamLost", name: target }, 1700).effects)[0];
  step(s, { type: "failed", seq: again.req.seq, code: "unreachable" }, 1701);
  for (const r of reqs) step(s, { type: "reply", seq: r.req.seq, ack: ack(r.req.seq, "x") }, 1702);
  assert.ok(s.probes.has(target), "the new probe was not rescued by old answers");
  assert.equal(s.probes.get(target)!.indirectPending, 3);
});

Deno.test("swim: after a stall, deadlines move back so a reply waiting in the socket counts", () => {
  const s = world({ b: "ALIVE", c: "ALIVE" });
  const ping = probe(s, 1000);
  // Paused for 2 s: the timer fires at 3000, but first the shell reports the lag.
  step(s, { type: "lagged", ms: 2000 }, 3000);
  assert.equal(s.awareness, 1);
  const fx =
    step(s, { type: "reply", seq: ping.req.seq, ack: ack(ping.req.seq, "b") }, 3001).effects;
  assert.ok(fx.some((e) => e.type === "probed" && e.ok));
  assert.equal([...s.members.values()].filter((m) => m.status !== "ALIVE").length, 0);
});

Deno.test("swim: any ping from a live member's name at another address is refused", () => {
  const s = world({ b: "ALIVE" });
  const fx =
    step(s, { type: "request", id: 3, req: { ...gossip("b", []), fromAddress: "evil:1" } }, 0)
      .effects;
  assert.ok(fx.some((e) => e.type === "respond" && e.ack.error === "name_conflict"));
});

Deno.test("swim: ping-req for a member this router does not know at that address is nacked at once", () => {
  const s = world({ b: "ALIVE", c: "ALIVE" });
  const fx = step(s, {
    type: "request",
    id: 4,
    req: {
      kind: "pingReq",
      seq: 1,
      from: "b",
      target: { name: "c", address: "10.0.0.99:1" },
      updates: [],
    },
  }, 0).effects;
  assert.equal(sends(fx).length, 0, "nothing dialled");
  assert.ok(fx.some((e) => e.type === "respond" && e.ack.nack));
});

Deno.test("swim: router pods from discovery — ready is contacted, not made ALIVE; not ready suspects; gone is DOWN", () => {
  const s = world({ b: "ALIVE", c: "ALIVE" });
  // A new router's pod: contacted with a full-state exchange, kept as a seed; not ALIVE yet.
  let fx = step(s, { type: "discovered", name: "d", address: "10.0.0.4:39527", state: "ready" }, 10)
    .effects;
  const join = sends(fx).find((e) => e.to === "10.0.0.4:39527");
  assert.ok(join && join.req.kind === "ping" && join.req.fullState, "contacted");
  assert.equal(status(s, "d"), null);
  assert.ok(s.seeds.includes("10.0.0.4:39527"));
  // Its own answer makes it a member, at its own incarnation.
  const seq = join.req.seq;
  step(s, {
    type: "reply",
    seq,
    ack: ack(seq, "d", {
      fullState: true,
      updates: [{
        name: "d",
        address: "10.0.0.4:39527",
        status: "ALIVE",
        incarnation: 7,
        from: "",
      }],
    }),
  }, 12);
  assert.equal(status(s, "d"), "ALIVE");
  assert.equal(s.members.get("d")!.incarnation, 7);
  // Not ready: suspected at its incarnation (it can refute with 8).
  fx = step(s, { type: "discovered", name: "b", address: "b:1", state: "not_ready" }, 20).effects;
  assert.equal(status(s, "b"), "SUSPECTED");
  assert.equal(s.members.get("b")!.incarnation, 1);
  assert.ok(sends(fx).length > 0, "broadcast");
  step(s, {
    type: "request",
    id: 1,
    req: gossip("b", [{ name: "b", address: "b:1", status: "ALIVE", incarnation: 2, from: "" }]),
  }, 21);
  assert.equal(status(s, "b"), "ALIVE", "refuted");
  // Gone: DOWN at its incarnation; a later ready event for the same pod does not revive it.
  step(s, { type: "discovered", name: "c", address: "c:1", state: "gone" }, 30);
  assert.equal(status(s, "c"), "DOWN");
  assert.equal(s.members.get("c")!.incarnation, 1);
  step(s, { type: "discovered", name: "c", address: "c:1", state: "ready" }, 31);
  assert.equal(status(s, "c"), "DOWN", "only its own answer can");
  // A pod that moved replaces its old address among the seeds.
  step(s, { type: "discovered", name: "d", address: "10.0.0.4:39527", state: "ready" }, 34);
  step(s, { type: "discovered", name: "d", address: "10.0.0.9:39527", state: "ready" }, 35);
  assert.deepEqual(s.seeds.filter((x) => x.includes("39527")), ["10.0.0.9:39527"]);
  // An event about another address than the member's (an earlier pod of that name) is stale.
  step(s, { type: "discovered", name: "b", address: "10.9.9.9:1", state: "gone" }, 36);
  step(s, { type: "discovered", name: "b", address: "10.9.9.9:1", state: "not_ready" }, 36);
  assert.equal(status(s, "b"), "ALIVE");
  // Its own pod, and a DOWN member not ready, change nothing.
  step(s, { type: "discovered", name: "a", address: "a:1", state: "gone" }, 32);
  assert.equal(status(s, "a"), "ALIVE");
  step(s, { type: "discovered", name: "c", address: "c:1", state: "not_ready" }, 33);
  assert.equal(status(s, "c"), "DOWN");
});
