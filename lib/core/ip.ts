/**
 * IP addresses and CIDR blocks for the egress allow-list: IPv4 dotted quads and IPv6 (with `::`,
 * an embedded dotted quad, optional brackets and no zone) as 16 bytes, IPv4 kept in the
 * IPv4-mapped form `::ffff:a.b.c.d` so one comparison serves both families, and a mapped IPv6
 * address matches the IPv4 block it maps. Host names are not addresses here: the WHATWG URL
 * parser turns the odd IPv4 spellings (`0x7f.1`, `2130706433`) into dotted quads first.
 */

/** An address: 16 bytes, IPv4 as `::ffff:a.b.c.d`. */
export interface IpAddress {
  /** The 16 bytes. */
  bytes: Uint8Array;
  /** Whether it was written as IPv4 (or is IPv4-mapped). */
  v4: boolean;
}

/** A CIDR block: the address and how many leading bits must match (of 128). */
export interface Cidr {
  /** The block's first address (host bits cleared). */
  base: IpAddress;
  /** Leading bits that must match, over the 128-bit form (IPv4 /n is 96 + n). */
  bits: number;
  /** The block as written back (`10.0.0.0/8`, `fd00::/8`). */
  text: string;
}

const MAPPED_PREFIX = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

function parseV4(s: string): number[] | null {
  const parts = s.split(".");
  if (parts.length !== 4) return null;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^(0|[1-9]\d{0,2})$/.test(p)) return null;
    const n = Number(p);
    if (n > 255) return null;
    out.push(n);
  }
  return out;
}

function parseV6(s: string): number[] | null {
  if (!/^[0-9a-f:.]+$/i.test(s) || s.includes(":::")) return null;
  let tail: number[] = [];
  let text = s;
  const lastColon = s.lastIndexOf(":");
  if (s.includes(".", lastColon)) {
    const v4 = parseV4(s.slice(lastColon + 1));
    if (!v4) return null;
    tail = v4;
    text = s.slice(0, lastColon + 1) + "0:0"; // a placeholder pair, replaced below
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const groups = (h: string) => (h === "" ? [] : h.split(":"));
  const head = groups(halves[0]);
  const rest = halves.length === 2 ? groups(halves[1]) : [];
  if ([...head, ...rest].some((g) => !/^[0-9a-f]{1,4}$/i.test(g))) return null;
  const missing = 8 - head.length - rest.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const all = [...head, ...Array(halves.length === 2 ? missing : 0).fill("0"), ...rest];
  const bytes = all.flatMap((g) => {
    const n = parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
  if (tail.length) bytes.splice(12, 4, ...tail);
  return bytes;
}

/** Parses an IPv4 or IPv6 literal (brackets allowed, no zone id); null for anything else. */
export function parseIp(raw: string): IpAddress | null {
  const s = raw.trim().replace(/^\[(.*)\]$/, "$1");
  const v4 = parseV4(s);
  if (v4) return { bytes: Uint8Array.from([...MAPPED_PREFIX, ...v4]), v4: true };
  const v6 = parseV6(s);
  if (!v6) return null;
  const bytes = Uint8Array.from(v6);
  return { bytes, v4: MAPPED_PREFIX.every((b, i) => bytes[i] === b) };
}

/** Whether the first `bits` bits of `a` and `b` agree. */
function samePrefix(a: Uint8Array, b: Uint8Array, bits: number): boolean {
  const whole = bits >> 3;
  for (let i = 0; i < whole; i++) if (a[i] !== b[i]) return false;
  const rest = bits & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (a[whole] & mask) === (b[whole] & mask);
}

/**
 * Parses `a.b.c.d/n` (n 0..32) or `v6/n` (n 0..128); a bare address is a /32 or /128. Host bits
 * set in the address are refused (`10.0.0.1/8` is most likely a typo for a host or a block).
 */
export function parseCidr(raw: string): Cidr | null {
  const s = raw.trim();
  const slash = s.indexOf("/");
  const addr = parseIp(slash < 0 ? s : s.slice(0, slash));
  if (!addr) return null;
  const width = addr.v4 ? 32 : 128;
  let n = width;
  if (slash >= 0) {
    const len = s.slice(slash + 1);
    if (!/^\d{1,3}$/.test(len) || Number(len) > width) return null;
    n = Number(len);
  }
  const bits = addr.v4 ? 96 + n : n;
  const cleared = addr.bytes.slice();
  for (let i = 0; i < 128; i++) {
    if (i >= bits) cleared[i >> 3] &= ~(0x80 >> (i & 7));
  }
  if (!samePrefix(cleared, addr.bytes, 128)) return null;
  return { base: { bytes: cleared, v4: addr.v4 }, bits, text: `${formatIp(addr)}/${n}` };
}

/** Whether `addr` lies in `block`. */
export function cidrContains(block: Cidr, addr: IpAddress): boolean {
  return samePrefix(block.base.bytes, addr.bytes, block.bits);
}

/** The canonical text of an address: dotted quad, or IPv6 with the longest zero run as `::`. */
export function formatIp(a: IpAddress): string {
  const b = a.bytes;
  if (a.v4) return `${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
  const groups = Array.from({ length: 8 }, (_, i) => (b[2 * i] << 8) | b[2 * i + 1]);
  let best = -1, bestLen = 1, run = -1;
  for (let i = 0; i <= 8; i++) {
    if (i < 8 && groups[i] === 0) {
      if (run < 0) run = i;
      continue;
    }
    if (run >= 0 && i - run > bestLen) [best, bestLen] = [run, i - run];
    run = -1;
  }
  const hex = (g: number[]) => g.map((x) => x.toString(16)).join(":");
  if (best < 0) return hex(groups);
  return `${hex(groups.slice(0, best))}::${hex(groups.slice(best + bestLen))}`;
}

/** The link-local blocks (169.254.0.0/16, fe80::/10): no worker lives there, metadata does. */
export const LINK_LOCAL: readonly Cidr[] = ["169.254.0.0/16", "fe80::/10"].map((s) =>
  parseCidr(s)!
);

/** Cloud metadata services outside link-local (AWS's IPv6 endpoint). */
export const METADATA: readonly Cidr[] = ["fd00:ec2::254/128"].map((s) => parseCidr(s)!);

/** Loopback (127.0.0.0/8, ::1) and the unspecified addresses (0.0.0.0, ::), all this host. */
export const THIS_HOST: readonly Cidr[] = ["127.0.0.0/8", "::1/128", "0.0.0.0/32", "::/128"].map(
  (s) => parseCidr(s)!,
);

/** Whether `addr` is in any of `blocks`. */
export function inAny(blocks: readonly Cidr[], addr: IpAddress): boolean {
  return blocks.some((b) => cidrContains(b, addr));
}
