/**
 * The tokenizer stand-in: the split rules, FNV-1a ids (checked against a byte-level reference),
 * and the output vocabulary's round trip that multi-turn caching depends on.
 */

import assert from "node:assert/strict";
import {
  detokenize,
  fnv1a32,
  OUTPUT_VOCAB_SIZE,
  outputPiece,
  outputToken,
  pieceId,
  pieceOf,
  tokenize,
  tokenizeWithPieces,
  VOCAB_SIZE,
} from "../../lib/sim/tokenizer.ts";

/** FNV-1a over TextEncoder's UTF-8 bytes: the reference the fast hash must equal. */
function referenceFnv(text: string): number {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(text)) h = Math.imul(h ^ b, 0x01000193);
  return h >>> 0;
}

Deno.test("fnv1a32: published vectors and UTF-8 bytes", () => {
  assert.equal(fnv1a32(""), 0x811c9dc5);
  assert.equal(fnv1a32("a"), 0xe40c292c);
  assert.equal(fnv1a32("foobar"), 0xbf9cf968);
  for (const s of ["é", "日本", "😀x", "a\u0300", "ß∑€"]) {
    assert.equal(fnv1a32(s), referenceFnv(s), s);
  }
});

Deno.test("tokenize: markers, whitespace runs and chunks of at most 4 characters", () => {
  const { pieces, ids } = tokenizeWithPieces("<|im_start|>user\nhello world<|im_end|>\n");
  assert.deepEqual(pieces, [
    "<|im_start|>",
    "user",
    "\n",
    "hell",
    "o",
    " ",
    "worl",
    "d",
    "<|im_end|>",
    "\n",
  ]);
  assert.deepEqual(ids, pieces.map((p) => fnv1a32(p) % VOCAB_SIZE));
  assert.deepEqual(tokenizeWithPieces("a \n\t b").pieces, ["a", " \n\t ", "b"]);
  assert.deepEqual(tokenizeWithPieces("x<y <|Bad|>").pieces, [
    "x",
    "<",
    "y",
    " ",
    "<",
    "|Bad",
    "|>",
  ]);
  assert.deepEqual(tokenize(""), []);
});

Deno.test("tokenize: pieces cover the text exactly and ids stay in range", () => {
  const text = "Résumé: 10 < 20 && <|im_end|>\n\n  naïve 😀 code(){return;}";
  const { pieces, ids } = tokenizeWithPieces(text);
  assert.equal(pieces.join(""), text);
  assert.ok(ids.every((id) => Number.isInteger(id) && id >= 0 && id < VOCAB_SIZE));
  assert.deepEqual(tokenize(text), ids);
});

Deno.test("output vocabulary: lowercase words of 1-4 letters between single spaces", () => {
  const pieces = Array.from({ length: 400 }, (_, i) => outputPiece(i, 7));
  pieces.forEach((p, i) => assert.match(p, i % 2 === 1 ? /^ $/ : /^[a-z]{1,4}$/));
  const lengths = new Set(pieces.filter((p) => p !== " ").map((p) => p.length));
  assert.deepEqual([...lengths].sort(), [1, 2, 3, 4]);
  assert.ok(OUTPUT_VOCAB_SIZE >= 1000);
});

Deno.test("output tokens: re-tokenizing the generated text gives the generated ids", () => {
  for (const seed of [0, 1, 42, 0xffffffff]) {
    const ids = Array.from({ length: 301 }, (_, i) => outputToken(i, seed));
    const text = detokenize(ids);
    assert.equal(text, ids.map((_, i) => outputPiece(i, seed)).join(""));
    assert.deepEqual(tokenize(text), ids);
    ids.forEach((id, i) => {
      assert.equal(pieceOf(id), outputPiece(i, seed));
      assert.equal(pieceId(outputPiece(i, seed)), id);
    });
  }
});

Deno.test("output tokens: the same seed repeats, another seed differs", () => {
  const run = (seed: number) => Array.from({ length: 50 }, (_, i) => outputToken(i, seed));
  assert.deepEqual(run(3), run(3));
  assert.notDeepEqual(run(3), run(4));
});

Deno.test("pieceOf, detokenize: an id outside the output vocabulary is an error", () => {
  for (const marker of ["<|im_start|>", "<|im_end|>", "\n"]) {
    const id = tokenize(marker)[0];
    assert.throws(() => pieceOf(id), RangeError, marker);
    assert.throws(() => detokenize([outputToken(0, 1), id]), /is not a generated token/);
  }
});
