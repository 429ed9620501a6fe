/**
 * A simulated worker started from its flags, over HTTP: with `--chars-per-token 8` it tokenizes
 * prompts at about 8 characters a token, and a conversation's second turn finds the first turn's
 * prompt and reply in the cache (`usage.prompt_tokens_details.cached_tokens`), about the shared
 * prefix's length / 8.
 */

import assert from "node:assert/strict";
import { seededRandom } from "../../lib/core/clock.ts";
import { parseSimWorkerArgs } from "../../lib/sim/cli.ts";
import { type SimWorker, startSimWorker } from "../../lib/sim/worker.ts";
import { renderChat } from "../../lib/sim/chat_template.ts";

function start(args: string[]): SimWorker {
  const o = parseSimWorkerArgs(["--port", "0", "--time-scale", "0", ...args]);
  assert.ok(o !== "help");
  return startSimWorker(o);
}

async function chat(w: SimWorker, messages: { role: string; content: string }[], max: number) {
  const r = await fetch(`${w.url}/v1/chat/completions`, {
    method: "POST",
    body: JSON.stringify({ model: "sim-model", messages, max_tokens: max }),
  });
  assert.equal(r.status, 200);
  const j = await r.json();
  return {
    reply: j.choices[0].message.content as string,
    prompt: j.usage.prompt_tokens as number,
    completion: j.usage.completion_tokens as number,
    cached: j.usage.prompt_tokens_details.cached_tokens as number,
  };
}

/** Seeded lowercase words between single spaces, `chars` characters or a little more. */
function prose(seed: number, chars: number): string {
  const random = seededRandom(seed);
  let s = "";
  while (s.length < chars) {
    const n = 2 + Math.floor(random() * 7);
    let w = "";
    for (let i = 0; i < n; i++) w += String.fromCharCode(97 + Math.floor(random() * 26));
    s += (s ? " " : "") + w;
  }
  return s;
}

Deno.test("sim worker --chars-per-token 8: the next turn's cached tokens are the shared prefix / 8", async () => {
  const w = start(["--chars-per-token", "8"]);
  try {
    const turn1 = [
      { role: "system", content: prose(1, 12_000) },
      { role: "user", content: prose(2, 400) },
    ];
    const first = await chat(w, turn1, 40);
    assert.equal(first.cached, 0);
    assert.equal(first.completion, 40);
    const rendered1 = renderChat(turn1);
    const ratio = rendered1.length / first.prompt;
    assert.ok(Math.abs(ratio / 8 - 1) < 0.05, `${ratio.toFixed(2)} characters a token`);
    const turn2 = [...turn1, { role: "assistant", content: first.reply }, {
      role: "user",
      content: prose(3, 300),
    }];
    const second = await chat(w, turn2, 1);
    const shared = rendered1 + first.reply;
    assert.ok(renderChat(turn2).startsWith(shared));
    // The cache holds the first prompt and all but the last reply token, in 16-token blocks: all
    // of it matches, the reply included, since the reply re-tokenizes to the generated ids.
    assert.equal(second.cached, Math.floor((first.prompt + first.completion - 1) / 16) * 16);
    const expected = shared.length / 8;
    assert.ok(
      Math.abs(second.cached / expected - 1) < 0.05,
      `${second.cached} cached, shared prefix / 8 = ${expected.toFixed(0)}`,
    );
  } finally {
    await w.close();
  }
});

Deno.test("sim worker without --chars-per-token: the default word chunks, as before", async () => {
  const w = start([]);
  try {
    const messages = [{ role: "user", content: "hello world" }];
    const r = await chat(w, messages, 3);
    // <|im_start|> user \n hell o ␠ worl d <|im_end|> \n <|im_start|> assi stan t \n
    assert.equal(r.prompt, 15);
    assert.match(r.reply, /^[a-z]{1,4} [a-z]{1,4}$/);
  } finally {
    await w.close();
  }
});
