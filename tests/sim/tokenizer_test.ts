/**
 * The tokenizer stand-in: the split rules, FNV-1a ids (checked against a byte-level reference),
 * and the output vocabulary's round trip that multi-turn caching depends on.
 */

import assert from "node:assert/strict";
import {
  detokenize,
  fnv1a32,
  type GeneratedToken,
  OUTPUT_VOCAB_SIZE,
  pieceId,
  pieceOf,
  tokenize,
  tokenizeWithPieces,
  VOCAB_SIZE,
  WORD_TOKENIZER,
} from "../../lib/sim/tokenizer.ts";

/** `n` tokens generated after `context`. */
function generate(context: readonly number[], n: number, seed?: number): GeneratedToken[] {
  const next = WORD_TOKENIZER.generator(context, seed);
  return Array.from({ length: n }, next);
}

const PROMPT = tokenize("<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n");

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
  const pieces = generate(PROMPT, 400).map((t) => t.piece);
  pieces.forEach((p, i) => assert.match(p, i % 2 === 1 ? /^ $/ : /^[a-z]{1,4}$/));
  const lengths = new Set(pieces.filter((p) => p !== " ").map((p) => p.length));
  assert.deepEqual([...lengths].sort(), [1, 2, 3, 4]);
  assert.ok(OUTPUT_VOCAB_SIZE >= 1000);
});

Deno.test("output tokens: re-tokenizing the generated text gives the generated ids", () => {
  for (const seed of [undefined, 0, 1, 42, 0xffffffff]) {
    const tokens = generate(PROMPT, 301, seed);
    const ids = tokens.map((t) => t.id);
    const text = detokenize(ids);
    assert.equal(text, tokens.map((t) => t.piece).join(""));
    assert.deepEqual(tokenize(text), ids);
    tokens.forEach((t) => {
      assert.equal(pieceOf(t.id), t.piece);
      assert.equal(pieceId(t.piece), t.id);
    });
  }
});

Deno.test("output tokens: the same context repeats; another context or seed differs", () => {
  const ids = (context: number[], seed?: number) => generate(context, 50, seed).map((t) => t.id);
  assert.deepEqual(ids(PROMPT), ids(PROMPT));
  assert.notDeepEqual(ids(PROMPT), ids(tokenize("<|im_start|>user\nhi<|im_end|>\n")));
  assert.notDeepEqual(ids(PROMPT, 3), ids(PROMPT, 4));
});

Deno.test("output tokens: each is a function of every token before it, so a continuation from any cut is the same text", () => {
  const whole = generate(PROMPT, 120);
  for (const cut of [0, 1, 2, 7, 64, 119]) {
    const sent = whole.slice(0, cut);
    // The prompt plus the text sent so far, tokenized again: as a continued request arrives.
    const context = tokenize(
      "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n" +
        sent.map((t) => t.piece).join(""),
    );
    assert.deepEqual(context, [...PROMPT, ...sent.map((t) => t.id)]);
    assert.deepEqual(generate(context, 120 - cut), whole.slice(cut), `cut at ${cut}`);
  }
});

Deno.test("pieceOf, detokenize: an id outside the output vocabulary is an error", () => {
  for (const marker of ["<|im_start|>", "<|im_end|>", "\n"]) {
    const id = tokenize(marker)[0];
    assert.throws(() => pieceOf(id), RangeError, marker);
    assert.throws(() => detokenize([generate(PROMPT, 1)[0].id, id]), /is not a generated token/);
  }
});
