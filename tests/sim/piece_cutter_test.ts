/**
 * The ratio tokenizer's boundary rule: the shape's mean is the target, lengths stay within the
 * minimum and the cap, a newline ends a piece and restarts the window, and the same text cut
 * from two states lines up again (content-defined).
 */

import assert from "node:assert/strict";
import { PieceCutter, pieceShape, WINDOW_CHARS } from "../../lib/sim/piece_cutter.ts";

/** Seeded lowercase text with spaces (a xorshift stream). */
function text(seed: number, length: number): string {
  let x = seed | 1;
  let s = "";
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    const r = (x >>> 0) % 27;
    s += r === 26 ? " " : String.fromCharCode(97 + r);
  }
  return s;
}

/** Lengths of the pieces `cutter` cuts `s` into (the open tail left out). */
function lengths(cutter: PieceCutter, s: string): number[] {
  const out: number[] = [];
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    if (cutter.push(s.charCodeAt(i))) {
      out.push(i + 1 - start);
      start = i + 1;
    }
  }
  return out;
}

Deno.test("pieceShape: the minimum, the cap, and range checks", () => {
  assert.deepEqual(
    [2, 4, 8, 16].map((n) => [pieceShape(n).min, pieceShape(n).cap]),
    [[1, 6], [2, 12], [4, 24], [8, 48]],
  );
  assert.equal(pieceShape(1).threshold, 2 ** 32, "one character per token: every window hits");
  for (const bad of [0, 0.99, 1025, NaN, Infinity]) {
    assert.throws(() => pieceShape(bad), RangeError);
  }
});

Deno.test("PieceCutter: random text is cut at the target mean, lengths between min and cap", () => {
  const s = text(7, 200_000);
  for (const n of [1, 2, 3.5, 8, 16, 40]) {
    const shape = pieceShape(n);
    const ls = lengths(new PieceCutter(shape), s);
    const mean = ls.reduce((a, b) => a + b, 0) / ls.length;
    assert.ok(Math.abs(mean / n - 1) < 0.03, `N=${n}: mean ${mean}`);
    assert.ok(ls.every((l) => l >= shape.min && l <= shape.cap), `N=${n}: within bounds`);
    if (n > 1) assert.ok(new Set(ls).size >= 4, `N=${n}: lengths vary`);
  }
});

Deno.test("PieceCutter: a newline ends the piece and the window starts again after it", () => {
  const shape = pieceShape(16);
  const line = text(3, 40);
  const a = new PieceCutter(shape);
  const b = new PieceCutter(shape);
  assert.deepEqual(lengths(a, "abcdefg"), [], "seven characters, under N=16's minimum of 8");
  assert.equal(a.open, 7);
  assert.equal(a.push(0x0a), true);
  assert.equal(a.open, 0);
  // After the newline, `a` cuts the line exactly as a fresh cutter does.
  assert.deepEqual(lengths(a, line), lengths(b, line));
});

Deno.test("PieceCutter: the same text cut from two states lines up again soon", () => {
  const shape = pieceShape(8);
  const s = text(11, 4000);
  const ends = (skip: number) => {
    const c = new PieceCutter(shape);
    const at = new Set<number>();
    for (let i = skip; i < s.length; i++) if (c.push(s.charCodeAt(i))) at.add(i);
    return at;
  };
  const a = ends(0);
  const b = ends(5); // starts mid-piece, with a different window
  const firstShared = [...b].find((i) => a.has(i))!;
  assert.ok(firstShared < 5 + 8 * shape.cap + WINDOW_CHARS, `in sync by ${firstShared}`);
  assert.ok([...b].filter((i) => i >= firstShared).every((i) => a.has(i)), "and stays in sync");
});
