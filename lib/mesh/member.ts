/**
 * Membership vocabulary shared by the SWIM core, the transports and the shells: a member's
 * status (INIT, ALIVE, SUSPECTED, DOWN, LEAVING), its record as gossiped, and name order for
 * choosing which router of a pair opens the sync stream.
 */

/** A member's status. INIT: this router has not joined yet (only ever its own record). */
export type MemberStatus = "INIT" | "ALIVE" | "SUSPECTED" | "DOWN" | "LEAVING";

/** Every status, in the order the status gauge lists them. */
export const MEMBER_STATUSES: readonly MemberStatus[] = [
  "INIT",
  "ALIVE",
  "SUSPECTED",
  "DOWN",
  "LEAVING",
];

/** One member as it travels in gossip: who, where, what we believe, and since which incarnation. */
export interface MemberUpdate {
  /** Unique router name (`--mesh-server-name`). */
  name: string;
  /** Advertised mesh address, `host:port`. */
  address: string;
  /** Believed status. */
  status: MemberStatus;
  /** Incarnation: only the member itself raises it, to refute a suspicion or to rejoin. */
  incarnation: number;
  /** Who made a SUSPECTED or DOWN claim (counts as an independent confirmation); else "". */
  from: string;
}

const utf8 = new TextEncoder();

/**
 * Byte order of the UTF-8 names, as SMG compares them (JS string order differs from it for
 * characters outside the BMP). Negative when `a` sorts first.
 */
export function compareNames(a: string, b: string): number {
  if (isAscii(a) && isAscii(b)) return a < b ? -1 : a > b ? 1 : 0;
  const x = utf8.encode(a);
  const y = utf8.encode(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

function isAscii(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return false;
  return true;
}

/** Whether a member in this status is probed and counted as a peer. */
export function isLive(status: MemberStatus): boolean {
  return status === "ALIVE" || status === "SUSPECTED";
}
