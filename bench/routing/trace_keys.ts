/**
 * `ref:affinity`'s conversation keys (`references.ts`): for every request of a trace, the block
 * where its conversation separated from the others. In the prefix trie of the trace's block ids
 * (`trace_trie.ts`) a branch point is a node with two or more children; a request's key is the
 * block that follows the deepest branch point on its own path (a request whose path has no branch
 * is keyed by its first block). Requests that share a system prompt and then diverge get
 * different keys; the turns of one conversation, each extending the last, keep the key of the
 * branch they all pass through, since an extension adds depth below it but no branch.
 *
 * The trie holds full blocks only: a request's partial last block (`input_length` not a multiple
 * of 512) is left out. Such a block's id names its exact partial content, so the next turn, which
 * fills that block, gives it another id; counted, it would make every turn's tail a branch of its
 * own and scatter a conversation's turns. On the Mooncake synthetic trace, where 99.9 % of the
 * requests end in a partial block, counting them gives 3,780 keys to 3,993 requests (hardly more
 * affinity than round robin); without them, 2,628.
 */

import { TRACE_BLOCK_TOKENS, type TraceRequest } from "./trace.ts";
import { insertPath, type TrieNode } from "./trace_trie.ts";

/** Full blocks of `r`: all its blocks but a partial last one. */
export function fullBlocks(r: TraceRequest): number {
  return Math.floor(r.inputLength / TRACE_BLOCK_TOKENS);
}

/** The conversation key of every request of `trace`, in order (`b` + the key block's id). */
export function conversationKeys(trace: readonly TraceRequest[]): string[] {
  const root: TrieNode = new Map();
  for (const r of trace) insertPath(root, r.hashIds, fullBlocks(r));
  return trace.map((r) => {
    let node = root;
    let key = r.hashIds[0];
    for (let i = 0; i < fullBlocks(r); i++) {
      if (node.size >= 2) key = r.hashIds[i];
      node = node.get(r.hashIds[i])!;
    }
    return `b${key}`;
  });
}
