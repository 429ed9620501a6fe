/**
 * The generated conversation trace: a valid Mooncake trace, the same for a seed, with turns that
 * extend an earlier turn's full blocks and sessions that share a system prompt's.
 */

import assert from "node:assert/strict";
import { conversationTrace } from "./conversation_trace.ts";
import { parseTrace, TRACE_BLOCK_TOKENS } from "./trace.ts";

Deno.test("conversation trace: valid, seeded, turns extend earlier turns", () => {
  const lines = conversationTrace({ requests: 300 });
  assert.equal(lines.length, 300);
  const text = lines.map((l) => JSON.stringify(l)).join("\n");
  const parsed = parseTrace(text);
  assert.equal(parsed.length, 300);
  assert.deepEqual(conversationTrace({ requests: 300 }), lines, "seeded");
  assert.notDeepEqual(conversationTrace({ requests: 300, seed: 1 }), lines);
  let continued = 0;
  let shared = 0;
  const firsts = new Map<number, number>();
  for (const [i, l] of lines.entries()) {
    assert.equal(l.hash_ids.length, Math.ceil(l.input_length / TRACE_BLOCK_TOKENS));
    if (l.hash_ids.length > 1) firsts.set(l.hash_ids[0], (firsts.get(l.hash_ids[0]) ?? 0) + 1);
    // A later turn of the same session holds this one's full blocks as its prefix.
    const full = l.hash_ids.slice(0, Math.floor(l.input_length / TRACE_BLOCK_TOKENS));
    if (full.length === 0) continue;
    const next = lines.slice(i + 1).find((m) => full.every((id, k) => m.hash_ids[k] === id));
    if (next && next.input_length > l.input_length) continued++;
  }
  for (const n of firsts.values()) if (n > 1) shared += n;
  assert.ok(continued > 100, `turns continued by a later turn: ${continued}`);
  assert.ok(shared > 50, `requests starting with a block others start with too: ${shared}`);
});
