/**
 * The `--chars-per-token` tokenizer: its mean on benchmark-like text is the target within 5 %,
 * pieces vary and span spaces, a common prefix gives common pieces, ChatML markers stay one
 * token, the counter agrees with `tokenize`, and generated text sent back in the next turn
 * re-tokenizes to the generated ids.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../../lib/core/clock.ts";
import { renderChat } from "../../lib/sim/chat_template.ts";
import { pieceShape } from "../../lib/sim/piece_cutter.ts";
import { RatioTokenizer } from "../../lib/sim/ratio_tokenizer.ts";
import { pieceId, VOCAB_SIZE } from "../../lib/sim/tokenizer.ts";

/** The routing benchmark's syllables (`bench/routing/workload.ts`). */
const SYLLABLES = "ka lo mi ren tas vo qui zen dar pel sor nu fi gha bel tor ix mon ea stu"
  .split(" ");

/** `count` seeded words of 1-3 syllables between single spaces, as the benchmark writes. */
function words(seed: number, count: number): string {
  const random = seededRandom(seed);
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    let w = "";
    const n = 1 + Math.floor(random() * 3);
    for (let j = 0; j < n; j++) w += SYLLABLES[Math.floor(random() * SYLLABLES.length)];
    out.push(w);
  }
  return out.join(" ");
}

Deno.test("RatioTokenizer: the mean is N characters per token within 5 %, pieces vary", () => {
  const text = words(1, 40_000);
  for (const n of [2, 4, 8, 16]) {
    const { pieces } = new RatioTokenizer(n).tokenizeWithPieces(text);
    const mean = text.length / pieces.length;
    assert.ok(Math.abs(mean / n - 1) < 0.05, `N=${n}: ${mean.toFixed(2)} characters per token`);
    const lengths = new Set(pieces.map((p) => p.length));
    assert.ok(lengths.size >= Math.min(5, n), `N=${n}: ${lengths.size} distinct lengths`);
    const shape = pieceShape(n);
    assert.ok(pieces.slice(0, -1).every((p) => p.length >= shape.min && p.length <= shape.cap));
    if (n >= 8) assert.ok(pieces.some((p) => / \S/.test(p.slice(1))), "pieces span spaces");
  }
});

Deno.test("RatioTokenizer: pieces cover the text, ids are pieceId and in range", () => {
  const tok = new RatioTokenizer(4);
  const text = "Résumé: 10 < 20 && <|im_end|>\n\n  naïve 😀 code(){return;}" + words(2, 50);
  const { pieces, ids } = tok.tokenizeWithPieces(text);
  assert.equal(pieces.join(""), text);
  assert.deepEqual(ids, pieces.map(pieceId));
  assert.ok(ids.every((id) => Number.isInteger(id) && id >= 0 && id < VOCAB_SIZE));
  assert.deepEqual(tok.tokenize(text), ids);
  assert.deepEqual(tok.tokenize(""), []);
});

Deno.test("RatioTokenizer: two texts with a common prefix share every piece ending inside it", () => {
  for (const n of [2, 8, 16]) {
    const tok = new RatioTokenizer(n);
    for (let k = 0; k < 20; k++) {
      const common = words(100 + k, 50 + 13 * k);
      const a = tok.tokenizeWithPieces(common + " " + words(200 + k, 30));
      const b = tok.tokenizeWithPieces(common + "x" + words(300 + k, 30));
      let covered = 0;
      let shared = 0;
      while (covered + a.pieces[shared].length <= common.length) {
        covered += a.pieces[shared++].length;
      }
      assert.deepEqual(b.ids.slice(0, shared), a.ids.slice(0, shared), `N=${n}, text ${k}`);
      // Only the piece open where they part is not shared.
      assert.ok(common.length - covered < pieceShape(n).cap, `N=${n}: ${covered} chars shared`);
    }
  }
});

Deno.test("RatioTokenizer: ChatML markers are one token each, and a newline ends a piece", () => {
  const tok = new RatioTokenizer(16);
  const text = renderChat([
    { role: "system", content: words(5, 40) },
    { role: "user", content: "hi" },
  ]);
  const { pieces } = tok.tokenizeWithPieces(text);
  const markers = pieces.filter((p) => p.startsWith("<|"));
  assert.deepEqual(markers, [
    "<|im_start|>",
    "<|im_end|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|im_start|>",
  ]);
  assert.ok(
    pieces.every((p) => p.startsWith("<|") ? /^<\|[a-z_]+\|>$/.test(p) : !p.includes("<|")),
  );
  assert.ok(pieces.every((p) => !p.slice(0, -1).includes("\n")), "a newline only ends a piece");
  assert.deepEqual(pieces.slice(-2), ["<|im_start|>", "assistant\n"]);
});

Deno.test("RatioTokenizer: the counter, fed in parts, counts as tokenize does", () => {
  const tok = new RatioTokenizer(8);
  const random = seededRandom(9);
  const text = words(6, 3000);
  const counter = tok.counter();
  let fed = 0;
  while (fed < text.length) {
    const part = text.slice(fed, fed + 1 + Math.floor(random() * 40));
    counter.add(part);
    fed += part.length;
    if (random() < 0.1) assert.equal(counter.tokens, tok.tokenize(text.slice(0, fed)).length);
  }
  assert.equal(counter.tokens, tok.tokenize(text).length);
});

Deno.test("RatioTokenizer: a reply sent back as the next turn re-tokenizes to the generated ids", () => {
  for (const n of [2, 8, 16]) {
    const tok = new RatioTokenizer(n);
    const next = tok.generator([42]);
    const out = Array.from({ length: 60 }, () => next());
    const reply = out.map((t) => t.piece).join("");
    assert.ok(Math.abs(reply.length / out.length / n - 1) < 0.35, `N=${n}: ${reply.length} chars`);
    assert.match(reply, /^[a-z]+( [a-z]+)* ?$/);
    const turn1 = [{ role: "user", content: words(7, 30) }];
    const turn2 = [...turn1, { role: "assistant", content: reply }, {
      role: "user",
      content: "ok",
    }];
    const t1 = tok.tokenize(renderChat(turn1));
    const t2 = tok.tokenize(renderChat(turn2));
    assert.deepEqual(t2.slice(0, t1.length + out.length), [...t1, ...out.map((t) => t.id)]);
    const again = tok.generator([42]);
    assert.deepEqual(out.map(() => again().id), out.map((t) => t.id), "a context repeats");
    const other = tok.generator([43]);
    assert.notDeepEqual(out.map(() => other().id), out.map((t) => t.id));
  }
});
