/**
 * The egress policy: link-local and metadata addresses and the gateway's own ports refused with
 * no allow-list at all, however the address is spelled; an allow-list admitting IPs by block and
 * names by name only (never by what they resolve to); label endpoints checked like the URL.
 */

import assert from "node:assert/strict";
import { EgressPolicy, type OwnEndpoint, parseAllowEntry } from "../../lib/core/egress.ts";

const OWN: OwnEndpoint[] = [
  { role: "main", host: "0.0.0.0", port: 30000 },
  { role: "metrics", host: "127.0.0.1", port: 29000 },
  { role: "mesh", host: "10.1.0.7", port: 39527 },
];

function policy(allowlist: string[] = [], local: string[] = ["10.1.0.7", "192.168.5.5"]) {
  return new EgressPolicy({ allowlist, own: OWN, localAddresses: () => local });
}

Deno.test("egress: link-local and cloud metadata are refused without any allow-list", () => {
  const p = policy();
  for (
    const url of [
      "http://169.254.169.254",
      "http://169.254.169.254/latest/meta-data",
      "http://169.254.1.1:8000",
      "http://[fe80::1]:8000",
      "http://[::ffff:169.254.169.254]:80",
      "http://0xa9fea9fe/", // 169.254.169.254 written as one hex number
      "http://2852039166/", // ... and as one decimal number
      "grpc://0xa9.254.169.254:80", // grpc:// hosts are parsed as http's would be
      "http://[fd00:ec2::254]",
    ]
  ) {
    const why = p.refusal(url);
    assert.ok(why, `${url} must be refused`);
    assert.match(why, /link-local|metadata/, url);
  }
  assert.equal(p.refusal("http://10.0.0.1:8000"), null);
  assert.equal(p.refusal("http://worker-0.example:8000"), null);
});

Deno.test("egress: the gateway's own ports on this host are refused; elsewhere they are fine", () => {
  const p = policy();
  const refused: [string, RegExp][] = [
    ["http://127.0.0.1:30000", /own main port/],
    ["http://127.9.9.9:30000", /own main port/], // all of 127/8 is this host
    ["http://localhost:30000", /own main port/],
    ["http://[::1]:29000", /own metrics port/],
    ["http://0.0.0.0:29000", /own metrics port/],
    ["http://10.1.0.7:39527", /own mesh port/], // the mesh's listen address
    ["http://192.168.5.5:30000", /own main port/], // an interface address, main on 0.0.0.0
    ["grpc://127.0.0.1:39527", /own mesh port/],
  ];
  for (const [url, why] of refused) assert.match(p.refusal(url) ?? "", why, url);
  // SGLang's default port is the gateway's: a worker elsewhere on it is a worker.
  assert.equal(p.refusal("http://10.0.0.9:30000"), null);
  assert.equal(p.refusal("http://127.0.0.1:30001"), null);
});

Deno.test("egress: ports bound at start (port 0) are refused once the policy knows them", () => {
  const p = new EgressPolicy({
    allowlist: [],
    own: [{ role: "main", host: "127.0.0.1", port: 0 }],
    localAddresses: () => [],
  });
  assert.equal(p.refusal("http://127.0.0.1:41234"), null);
  p.setOwn([{ role: "main", host: "127.0.0.1", port: 41234 }]);
  assert.match(p.refusal("http://127.0.0.1:41234") ?? "", /own main port/);
});

Deno.test("egress: an allow-list admits IPs in its blocks, IPv4 and IPv6", () => {
  const p = policy(["10.0.0.0/8", "fd00:1::/32", "192.168.1.7", "[2001:db8::5]"]);
  assert.equal(p.restricted, true);
  for (
    const ok of [
      "http://10.2.3.4:8000",
      "grpc://10.0.0.1:30001",
      "http://[fd00:1:2::3]:8000",
      "http://192.168.1.7:8000",
      "http://[2001:db8::5]:8000",
    ]
  ) {
    assert.equal(p.refusal(ok), null, ok);
  }
  for (
    const bad of [
      "http://11.0.0.1:8000",
      "http://192.168.1.8:8000",
      "http://[fd00:2::1]:8000",
      "http://[2001:db8::6]:8000",
    ]
  ) {
    assert.match(p.refusal(bad) ?? "", /is not in --worker-host-allowlist/, bad);
  }
});

Deno.test("egress: names are matched as names, never resolved: a block never admits a name", () => {
  // localhost resolves into 127.0.0.0/8, but a name is admitted only by name: checking what it
  // resolves to at registration would not bind what it resolves to at connect (DNS rebinding).
  const p = policy(["127.0.0.0/8", "worker-0.example", "*.svc.cluster.local"]);
  assert.equal(p.refusal("http://127.0.0.1:8000"), null);
  assert.match(
    p.refusal("http://localhost:8000") ?? "",
    /not in --worker-host-allowlist .*must be listed by name \(names are not resolved/,
  );
  assert.equal(p.refusal("http://worker-0.example:8000"), null);
  assert.equal(p.refusal("http://WORKER-0.example.:8000"), null); // case and the root dot
  assert.match(p.refusal("http://worker-1.example:8000") ?? "", /not in --worker-host-allowlist/);
  assert.equal(p.refusal("http://w.ns.svc.cluster.local:8000"), null);
  assert.equal(p.refusal("http://svc.cluster.local:8000"), null); // as Deno's --allow-net reads it
  assert.match(p.refusal("http://evilsvc.cluster.local:8000") ?? "", /not in/);
  // Listing a name never lifts the default refusals.
  const q = policy(["localhost"]);
  assert.match(q.refusal("http://localhost:30000") ?? "", /own main port/);
  assert.equal(q.refusal("http://localhost:8000"), null);
});

Deno.test("egress: an allow-list entry never admits link-local or metadata addresses", () => {
  const p = policy(["0.0.0.0/0", "::/0"]);
  assert.match(p.refusal("http://169.254.169.254") ?? "", /link-local/);
  assert.match(p.refusal("http://[fe80::1]:80") ?? "", /link-local/);
  assert.equal(p.refusal("http://8.8.8.8:80"), null);
});

Deno.test("egress: KV-event endpoints in a worker's labels are checked like its URL", () => {
  const p = policy(["10.0.0.0/8"]);
  assert.equal(
    p.refusal("http://10.0.0.1:8000", {
      kv_events: "tcp://10.0.0.1:5557",
      kv_events_replay: "tcp://10.0.0.1:5558",
    }),
    null,
  );
  assert.match(
    p.refusal("http://10.0.0.1:8000", { kv_events: "tcp://169.254.169.254:80" }) ?? "",
    /^label kv_events: 169\.254\.169\.254:80 is link-local/,
  );
  assert.match(
    p.refusal("http://10.0.0.1:8000", { kv_events_replay: "tcp://172.16.0.1:5558" }) ?? "",
    /^label kv_events_replay: 172\.16\.0\.1:5558 is not in --worker-host-allowlist/,
  );
});

Deno.test("parseAllowEntry: IPs, blocks, names and *.suffixes; typos refused", () => {
  const kinds = (s: string) => parseAllowEntry(s)?.kind ?? null;
  assert.equal(kinds("10.0.0.0/8"), "cidr");
  assert.equal(kinds("10.0.0.1"), "cidr");
  assert.equal(kinds("fd00::/8"), "cidr");
  assert.equal(kinds("[fd00::1]"), "cidr");
  assert.equal(kinds("worker-0.example"), "name");
  assert.equal(kinds("localhost"), "name");
  assert.equal(kinds("*.svc.cluster.local"), "suffix");
  for (const bad of ["10.0.0.1/8", "10.0.0", "*.com", "*", "a..b", "-a.example", "http://x", ""]) {
    assert.equal(parseAllowEntry(bad), null, bad);
  }
});
