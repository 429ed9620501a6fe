/**
 * `ref:affinity`'s conversation keys on a hand-made trace: conversations that share system blocks
 * and then branch get keys of their own, every turn of a conversation keeps its key, a partial
 * last block is no branch, and a request with no branch on its path is keyed by its first block.
 */

import assert from "node:assert/strict";
import type { TraceRequest } from "./trace.ts";
import { conversationKeys, fullBlocks } from "./trace_keys.ts";

/** A request of `full` full blocks (`ids`), with a partial last block when `partial` is given. */
const req = (ids: number[], partial?: number): TraceRequest => ({
  timestampMs: 0,
  inputLength: partial === undefined ? ids.length * 512 : (ids.length - 1) * 512 + partial,
  outputLength: 4,
  hashIds: ids,
});

Deno.test("conversation keys: shared system blocks, then branches, then multi-turn extensions", () => {
  // System prompt [1, 2] shared by conversations A and B; conversation C has its own prompt [7].
  const trace = [
    req([1, 2, 10]), // A, turn 1
    req([1, 2, 20, 21]), // B, turn 1
    req([1, 2, 10, 11, 12]), // A, turn 2: extends turn 1
    req([7, 8]), // C, turn 1
    req([1, 2, 20, 21, 22]), // B, turn 2
    req([1, 2, 10, 11, 12, 13, 14]), // A, turn 3
    req([7, 8, 9]), // C, turn 2
  ];
  assert.deepEqual(conversationKeys(trace), ["b10", "b20", "b10", "b7", "b20", "b10", "b7"]);
});

Deno.test("conversation keys: a conversation that forks later splits at the deepest branch", () => {
  const trace = [
    req([1, 2, 10]),
    req([1, 2, 20]),
    req([1, 2, 10, 11, 30]), // after turn [1,2,10,11] the conversation forks into 30 and 40
    req([1, 2, 10, 11, 40]),
    req([1, 2, 10, 11]), // ends at the fork: its deepest branch with a next block is at [1, 2]
  ];
  assert.deepEqual(conversationKeys(trace), ["b10", "b20", "b30", "b40", "b10"]);
});

Deno.test("conversation keys: partial last blocks are no branches (each names its own tail)", () => {
  // One document [5, 6] asked three different questions, each ending in a partial block: one
  // conversation. Counted, the partial blocks 70, 71, 72 would make [5, 6] a branch point.
  const trace = [req([5, 6, 70], 100), req([5, 6, 71], 300), req([5, 6, 72], 1), req([9], 20)];
  assert.deepEqual(conversationKeys(trace), ["b5", "b5", "b5", "b9"]);
  assert.deepEqual(trace.map(fullBlocks), [2, 2, 2, 0]);
  // A full last block counts: [5, 6] branches into 70 and 71.
  assert.deepEqual(conversationKeys([req([5, 6, 70]), req([5, 6, 71])]), ["b70", "b71"]);
});

Deno.test("conversation keys: no branch on the path keys by the first block", () => {
  assert.deepEqual(conversationKeys([req([3, 4, 5]), req([3, 4, 5, 6])]), ["b3", "b3"]);
  assert.deepEqual(conversationKeys([req([3], 10)]), ["b3"]);
});
