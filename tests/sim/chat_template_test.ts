/**
 * The ChatML rendering: exact text, content parts, and the property prefix caching relies on:
 * turn N+1 renders (and tokenizes) as turn N plus the reply plus more.
 */

import assert from "node:assert/strict";
import { contentText, renderChat } from "../../lib/sim/chat_template.ts";
import { detokenize, tokenize, WORD_TOKENIZER } from "../../lib/sim/tokenizer.ts";

Deno.test("renderChat: one ChatML block per message, then the assistant prompt", () => {
  assert.equal(
    renderChat([{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }]),
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n" +
      "<|im_start|>assistant\n",
  );
  assert.equal(renderChat([]), "<|im_start|>assistant\n");
});

Deno.test("contentText: strings, text parts joined, other parts and null ignored", () => {
  assert.equal(contentText("plain"), "plain");
  assert.equal(
    contentText([
      { type: "text", text: "look " },
      { type: "image_url" },
      { type: "text", text: "here" },
    ]),
    "look here",
  );
  assert.equal(contentText(null), "");
  assert.equal(contentText(undefined), "");
  assert.equal(
    renderChat([{ role: "assistant", content: null }]),
    "<|im_start|>assistant\n<|im_end|>\n<|im_start|>assistant\n",
  );
});

Deno.test("renderChat: the next turn extends this turn's rendering and tokens with the reply", () => {
  const turn1 = [{ role: "user", content: "Tell me a story about a fox." }];
  const next = WORD_TOKENIZER.generator(tokenize(renderChat(turn1)));
  const replyIds = Array.from({ length: 25 }, () => next().id);
  const reply = detokenize(replyIds);
  const turn2 = [...turn1, { role: "assistant", content: reply }, {
    role: "user",
    content: "Go on.",
  }];
  const r1 = renderChat(turn1);
  const r2 = renderChat(turn2);
  assert.ok(r2.startsWith(r1 + reply + "<|im_end|>"));
  const t1 = tokenize(r1);
  assert.deepEqual(tokenize(r2).slice(0, t1.length + replyIds.length), [...t1, ...replyIds]);
});

Deno.test("renderChat: continue_final_message leaves the last message open; add_generation_prompt false ends after it", () => {
  const messages = [{ role: "user", content: "hi" }, { role: "assistant", content: "word wo" }];
  assert.equal(
    renderChat(messages, { continueFinalMessage: true, addGenerationPrompt: false }),
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nword wo",
  );
  assert.equal(
    renderChat(messages.slice(0, 1), { addGenerationPrompt: false }),
    "<|im_start|>user\nhi<|im_end|>\n",
  );
  assert.equal(
    renderChat(messages.slice(0, 1)) + "word wo",
    renderChat(messages, { continueFinalMessage: true, addGenerationPrompt: false }),
    "a continued chat renders as its unbroken prompt plus the text so far",
  );
  assert.throws(
    () => renderChat(messages, { continueFinalMessage: true, addGenerationPrompt: true }),
    /cannot both be true/,
  );
});
