/**
 * IP literals and CIDR blocks: IPv4, IPv6 (`::`, embedded quads, brackets), IPv4-mapped IPv6
 * matching IPv4 blocks, block edges, and what is refused.
 */

import assert from "node:assert/strict";
import { cidrContains, formatIp, parseCidr, parseIp } from "../../lib/core/ip.ts";

Deno.test("parseIp: IPv4 and IPv6 literals in canonical form; anything else is null", () => {
  const cases: [string, string | null][] = [
    ["127.0.0.1", "127.0.0.1"],
    ["::1", "::1"],
    ["[fe80::1]", "fe80::1"],
    ["::ffff:169.254.169.254", "169.254.169.254"], // IPv4-mapped is the IPv4 address
    ["::ffff:a9fe:a9fe", "169.254.169.254"],
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"], // the longest zero run is compressed
    ["1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"],
    ["::", "::"],
    ["fd00:ec2::254", "fd00:ec2::254"],
    ["01.2.3.4", null], // leading zeros read as octal by some resolvers: refused
    ["256.1.1.1", null],
    ["1.2.3", null],
    ["1:2:3:4:5:6:7:8:9", null],
    ["1::2::3", null],
    ["fe80::1%eth0", null], // zones are not addresses
    ["example.com", null],
    ["", null],
  ];
  for (const [raw, want] of cases) {
    const ip = parseIp(raw);
    assert.equal(ip === null ? null : formatIp(ip), want, raw);
  }
});

Deno.test("parseCidr: blocks of both families; host bits set or a bad length is refused", () => {
  assert.equal(parseCidr("10.0.0.0/8")?.text, "10.0.0.0/8");
  assert.equal(parseCidr("10.1.2.3")?.text, "10.1.2.3/32");
  assert.equal(parseCidr("fd00::/8")?.text, "fd00::/8");
  assert.equal(parseCidr("[::1]")?.text, "::1/128");
  assert.equal(parseCidr("0.0.0.0/0")?.text, "0.0.0.0/0");
  for (const bad of ["10.0.0.1/8", "10.0.0.0/33", "fd00::/129", "10.0.0.0/", "10.0.0.0/a", "x/8"]) {
    assert.equal(parseCidr(bad), null, bad);
  }
});

Deno.test("cidrContains: edges of IPv4 and IPv6 blocks, and mapped addresses", () => {
  const cases: [string, string, boolean][] = [
    ["10.0.0.0/8", "10.0.0.0", true],
    ["10.0.0.0/8", "10.255.255.255", true],
    ["10.0.0.0/8", "11.0.0.0", false],
    ["10.0.0.0/8", "9.255.255.255", false],
    ["192.168.4.0/22", "192.168.7.255", true],
    ["192.168.4.0/22", "192.168.8.0", false],
    ["169.254.0.0/16", "169.254.169.254", true],
    ["169.254.0.0/16", "::ffff:169.254.169.254", true],
    ["fe80::/10", "fe80::1", true],
    ["fe80::/10", "febf:ffff::1", true],
    ["fe80::/10", "fec0::1", false],
    ["fd00::/8", "fdff::1", true],
    ["fd00::/8", "fe00::1", false],
    // An IPv4 block holds IPv4 addresses only; ::/0 holds everything.
    ["0.0.0.0/0", "::1", false],
    ["0.0.0.0/0", "8.8.8.8", true],
    ["::/0", "8.8.8.8", true],
    ["10.0.0.5/32", "10.0.0.5", true],
    ["10.0.0.5/32", "10.0.0.6", false],
  ];
  for (const [block, addr, want] of cases) {
    assert.equal(cidrContains(parseCidr(block)!, parseIp(addr)!), want, `${addr} in ${block}`);
  }
});
