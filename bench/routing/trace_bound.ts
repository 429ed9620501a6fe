/**
 * The infinite-cache bound of a trace replay, computed offline: over the measured requests, the
 * share of prompt tokens in leading blocks that an earlier request of the trace already had as a
 * prefix (`ids[0..k]` seen before, warm-up requests counted as history). No routing over any
 * number of workers hits more: one cache that never evicts holds every prefix any worker could.
 * A block counts 512 tokens, the last one `input_length` − 512 × (blocks − 1).
 *
 * Known gap: the simulated workers cache in blocks of 16 tokens and never serve a prompt's last
 * token from cache (as sglang), and count the chat template's few tokens as prompt, so a worker's
 * own hit rate on the same requests comes out a little lower.
 */

import { TRACE_BLOCK_TOKENS, type TraceRequest } from "./trace.ts";
import { insertPath, type TrieNode } from "./trace_trie.ts";

/** Prompt tokens of the measured requests, and of those the ones a perfect cache holds. */
export interface CacheBound {
  /** Σ input_length over requests `from` to `to` − 1. */
  promptTokens: number;
  /** Σ tokens of their leading blocks seen in an earlier request. */
  hitTokens: number;
  /** hitTokens ÷ promptTokens (null with no tokens). */
  rate: number | null;
}

/** The bound over requests `from` to `to` − 1 of `trace`, all earlier ones counted as history. */
export function infiniteCacheBound(
  trace: readonly TraceRequest[],
  from: number,
  to: number,
): CacheBound {
  const root: TrieNode = new Map();
  let promptTokens = 0;
  let hitTokens = 0;
  for (let i = 0; i < Math.min(to, trace.length); i++) {
    const r = trace[i];
    const seen = insertPath(root, r.hashIds);
    if (i < from) continue;
    const n = r.hashIds.length;
    promptTokens += r.inputLength;
    // Every block but the last is full.
    hitTokens += seen === n ? r.inputLength : seen * TRACE_BLOCK_TOKENS;
  }
  return { promptTokens, hitTokens, rate: promptTokens > 0 ? hitTokens / promptTokens : null };
}
