/**
 * Whole answers read before the client sees them (`lib/proxy/http/whole.ts`): a body read to its
 * end comes back whole, a break rejects, and past the cap what was read and the rest are
 * relayed in order.
 */

import assert from "node:assert/strict";
import { readWhole } from "../../../lib/proxy/http/whole.ts";
import { readAll, type UpstreamBody } from "../../../lib/upstream/types.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A body giving `chunks` one read at a time, then breaking if `breaks`. */
function body(chunks: string[], breaks = false): UpstreamBody & { cancelled: boolean } {
  const queue = chunks.map((c) => enc.encode(c));
  return {
    whole: null,
    cancelled: false,
    read() {
      const next = queue.shift();
      if (next) return Promise.resolve(next);
      return breaks ? Promise.reject(new Error("reset")) : Promise.resolve(null);
    },
    cancel() {
      this.cancelled = true;
    },
  };
}

Deno.test("readWhole: a body read to its end comes back whole, once", async () => {
  const b = await readWhole(body(['{"a":', " 1}"]), 1024);
  assert.equal(dec.decode(b.whole!), '{"a": 1}');
  assert.equal(dec.decode((await b.read())!), '{"a": 1}');
  assert.equal(await b.read(), null);
});

Deno.test("readWhole: a body that breaks before its end rejects", async () => {
  await assert.rejects(readWhole(body(['{"a":'], true), 1024), /reset/);
});

Deno.test("readWhole: past the cap, what was read then the rest, in order", async () => {
  const source = body(["aaaa", "bbbb", "cccc", "dd"]);
  const b = await readWhole(source, 6);
  assert.equal(b.whole, null, "not whole: the rest is still to come");
  assert.equal(dec.decode(await readAll(b)), "aaaabbbbccccdd");
  const c = body(["aaaa", "bbbb", "cc"]);
  (await readWhole(c, 6)).cancel();
  assert.ok(c.cancelled, "cancelling it cancels the worker's body");
});

Deno.test("readWhole: a body already whole is returned as it is", async () => {
  const whole = { ...body([]), whole: enc.encode("x") };
  assert.equal(await readWhole(whole, 0), whole);
});
