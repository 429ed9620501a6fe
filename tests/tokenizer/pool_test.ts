/**
 * The tokenizer pool: ids from its threads equal the tokenizer's own, part by part; a thread
 * that cannot start, or with no thread at all, the same ids come from this thread.
 */

import assert from "node:assert/strict";
import { FakeClock, systemClock } from "../../lib/core/clock.ts";
import { GatewayError } from "../../lib/core/errors.ts";
import { TokenizerPool } from "../../lib/tokenizer/pool.ts";
import type { GatewayTokenizer } from "../../lib/tokenizer/tokenizer.ts";
import { qwen3 } from "../../support/qwen3.ts";

const TEXTS = [
  "Hello, world!",
  "<|im_start|>user\nWhat is a gateway?<|im_end|>\n<|im_start|>assistant\n",
  "日本語のテキストと emoji 🎉 mixed",
  "x".repeat(5000),
];

Deno.test("tokenizer pool: a thread's ids equal the tokenizer's own, each part on its own", async () => {
  const tok = qwen3();
  const pool = new TokenizerPool(tok, 1, { clock: systemClock });
  try {
    assert.equal(pool.threads, 1);
    for (const addSpecial of [false, true]) {
      const got = await pool.encodeMany(TEXTS, addSpecial);
      assert.deepEqual(got, TEXTS.map((t) => tok.encode(t, addSpecial)));
    }
    // Many at once: every answer reaches its own request.
    const many = await Promise.all(TEXTS.map((t, i) => pool.encodeMany([t, `${i}`], false)));
    assert.equal(pool.threads, 1, "no thread dropped: the ids came from it");
    many.forEach((ids, i) =>
      assert.deepEqual(ids, [tok.encode(TEXTS[i], false), tok.encode(`${i}`, false)])
    );
  } finally {
    pool.close();
  }
});

Deno.test("tokenizer pool: a thread that cannot start is dropped and its requests encoded here", async () => {
  const tok = qwen3();
  const down: string[] = [];
  const dir = await Deno.makeTempDir({ prefix: "smg-pool-" });
  await Deno.writeTextFile(`${dir}/broken.js`, 'throw new Error("this thread cannot start");\n');
  const entry = new URL(`file://${dir}/broken.js`).href;
  const pool = new TokenizerPool(tok, 1, {
    entry,
    onThreadDown: (r) => down.push(r),
    clock: systemClock,
  });
  try {
    const got = await pool.encodeMany(TEXTS, true);
    assert.deepEqual(got, TEXTS.map((t) => tok.encode(t, true)));
    assert.equal(down.length, 1, "told once");
    assert.match(down[0], /this thread cannot start/);
    assert.equal(pool.threads, 0);
    assert.deepEqual(await pool.encodeMany(["after"], false), [tok.encode("after", false)]);
  } finally {
    pool.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("tokenizer pool: with no thread, everything is encoded here", async () => {
  const tok = qwen3();
  const pool = new TokenizerPool(tok, 0, { clock: systemClock });
  assert.equal(pool.threads, 0);
  assert.deepEqual(await pool.encodeMany(TEXTS, false), TEXTS.map((t) => tok.encode(t, false)));
  pool.close();
});

Deno.test("tokenizer pool: a thread whose tokenizer cannot be built fails, and its requests are encoded here", async () => {
  const tok = qwen3();
  // The thread is told to load from a path that does not exist; this thread encodes with qwen3.
  const unloadable = {
    init: { path: "/nonexistent/tokenizer" },
    encode: (text: string, addSpecial: boolean) => tok.encode(text, addSpecial),
  } as unknown as GatewayTokenizer;
  const down: string[] = [];
  const pool = new TokenizerPool(unloadable, 1, {
    onThreadDown: (r) => down.push(r),
    clock: systemClock,
  });
  try {
    const both = await Promise.all([
      pool.encodeMany([TEXTS[0]], false),
      pool.encodeMany([TEXTS[1]], false),
    ]);
    assert.deepEqual(both, [[tok.encode(TEXTS[0], false)], [tok.encode(TEXTS[1], false)]]);
    assert.equal(down.length, 1);
    assert.match(down[0], /cannot be read/);
  } finally {
    pool.close();
  }
});

Deno.test("tokenizer pool: a thread silent past the timeout is dropped, its requests fail 503, and one that had worked is replaced", async () => {
  const tok = qwen3();
  const dir = await Deno.makeTempDir({ prefix: "smg-pool-" });
  // Never answers; and answers its first request (ids [7] a part), then never again.
  await Deno.writeTextFile(`${dir}/silent.js`, "self.onmessage = () => {};\n");
  await Deno.writeTextFile(
    `${dir}/once.js`,
    `let n = 0;
self.onmessage = (e) => {
  if ("init" in e.data || n++ > 0) return;
  self.postMessage({ id: e.data.id, ids: e.data.parts.map(() => new Uint32Array([7])) });
};
`,
  );
  const clock = new FakeClock();
  const start = (name: string, down: string[]) =>
    new TokenizerPool(tok, 1, {
      entry: new URL(`file://${dir}/${name}`).href,
      onThreadDown: (r) => down.push(r),
      clock,
      answerTimeoutMs: 1000,
    });
  const timedOut = (e: unknown) =>
    e instanceof GatewayError && e.status === 503 && e.code === "tokenizer_timeout";
  const silentDown: string[] = [];
  const silent = start("silent.js", silentDown);
  const onceDown: string[] = [];
  const once = start("once.js", onceDown);
  try {
    const answer = silent.encodeMany(TEXTS, true);
    clock.advance(999);
    assert.deepEqual(silentDown, [], "not before the timeout");
    clock.advance(1);
    await assert.rejects(answer, timedOut);
    assert.deepEqual(silentDown, ["no answer within 1000 ms"]);
    assert.equal(silent.threads, 0, "a thread that never answered is not started again");

    assert.deepEqual(await once.encodeMany(["a"], false), [[7]]);
    const hung = once.encodeMany(["b"], false);
    clock.advance(1000);
    await assert.rejects(hung, timedOut);
    assert.equal(once.threads, 1, "replaced");
    assert.deepEqual(await once.encodeMany(["c"], false), [[7]], "the new thread answers");
    assert.deepEqual(onceDown, ["no answer within 1000 ms"]);
  } finally {
    silent.close();
    once.close();
    await Deno.remove(dir, { recursive: true });
  }
});
