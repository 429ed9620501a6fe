/**
 * Drawing fuzz inputs from a seeded `Random`: picks, integers, strings with awkward characters,
 * and byte-level mutations of a valid message (flip, insert, delete, duplicate, truncate). Pure
 * functions of the generator, so a run replays exactly.
 */

import type { Random } from "../../lib/core/clock.ts";

/** An integer in [lo, hi]. */
export function int(r: Random, lo: number, hi: number): number {
  return lo + Math.floor(r() * (hi - lo + 1));
}

/** True with probability `p`. */
export function chance(r: Random, p: number): boolean {
  return r() < p;
}

/** One element of `xs`. */
export function pick<T>(r: Random, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)];
}

/** One of `table`'s entries, chosen with probability proportional to its weight. */
export function weighted<T>(r: Random, table: readonly (readonly [number, T])[]): T {
  let total = 0;
  for (const [w] of table) total += w;
  let x = r() * total;
  for (const [w, v] of table) {
    if ((x -= w) < 0) return v;
  }
  return table[table.length - 1][1];
}

/** Strings that break lenient parsers: empties, controls, non-ASCII, lone surrogates, long. */
export const AWKWARD_STRINGS: readonly string[] = [
  "",
  " ",
  "\t",
  "\0",
  "\r\n",
  "\n",
  "\u0085",
  "\u2028",
  "é",
  "日本語",
  "🙂",
  "\ud800",
  "\udfff",
  "%00",
  "%zz",
  "%",
  "../../etc/passwd",
  "null",
  "__proto__",
  "constructor",
  "toString",
  "-1",
  "1e309",
  "x".repeat(300),
];

/** Numbers that break lenient validators (JSON text, so `1e999` parses as Infinity). */
export const AWKWARD_NUMBERS: readonly string[] = [
  "0",
  "-0",
  "-1",
  "1.5",
  "2147483648",
  "4294967296",
  "9007199254740993",
  "1e308",
  "1e999",
  "-1e999",
  "1e-400",
  "123456789012345678901234567890",
];

/** A random string of `n` characters drawn from printable ASCII, controls and non-ASCII. */
export function randomText(r: Random, n: number): string {
  let s = "";
  for (let i = 0; i < n; i++) {
    const k = r();
    s += k < 0.7
      ? String.fromCharCode(int(r, 32, 126))
      : k < 0.85
      ? String.fromCharCode(int(r, 0, 31))
      : String.fromCharCode(int(r, 128, 0xffff));
  }
  return s;
}

/** Bytes that matter to HTTP/1.1 and protobuf parsers, for inserts and overwrites. */
const SPECIAL_BYTES = [0, 9, 10, 13, 32, 34, 44, 58, 59, 0x7f, 0x80, 0xff, 0x30, 0x46];

/** One random byte-level mutation of `b` (a new array; `b` is left alone). */
export function mutateBytes(r: Random, b: Uint8Array): Uint8Array {
  const n = b.length;
  const at = int(r, 0, Math.max(0, n - 1));
  const byte = () => (chance(r, 0.5) ? pick(r, SPECIAL_BYTES) : int(r, 0, 255));
  switch (int(r, 0, 6)) {
    case 0: { // flip a bit
      const out = b.slice();
      if (n > 0) out[at] ^= 1 << int(r, 0, 7);
      return out;
    }
    case 1: { // overwrite a byte
      const out = b.slice();
      if (n > 0) out[at] = byte();
      return out;
    }
    case 2: { // insert bytes
      const ins = Uint8Array.from({ length: int(r, 1, 4) }, byte);
      return concatBytes(b.subarray(0, at), ins, b.subarray(at));
    }
    case 3: { // delete a run
      const len = int(r, 1, Math.min(8, Math.max(1, n - at)));
      return concatBytes(b.subarray(0, at), b.subarray(at + len));
    }
    case 4: { // duplicate a run
      const len = int(r, 1, Math.min(32, Math.max(1, n - at)));
      return concatBytes(b.subarray(0, at + len), b.subarray(at, at + len), b.subarray(at + len));
    }
    case 5: // truncate
      return b.slice(0, at);
    default: { // swap two bytes
      const out = b.slice();
      const other = int(r, 0, Math.max(0, n - 1));
      if (n > 0) [out[at], out[other]] = [out[other], out[at]];
      return out;
    }
  }
}

/** Concatenates byte arrays. */
export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
