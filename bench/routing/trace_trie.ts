/**
 * A prefix trie over a trace's block ids (`trace.ts`): a node is reached by a list of leading ids,
 * so two requests that share leading blocks share the nodes of those blocks. Shared by the
 * conversation keys (`trace_keys.ts`) and the infinite-cache bound (`trace_bound.ts`).
 */

/** A trie node: its children by block id. The root stands for the empty prefix. */
export type TrieNode = Map<number, TrieNode>;

/**
 * Walks the first `count` of `ids` down from `root`, adding the nodes that are missing, and
 * returns how many leading ids were there before (the length of the prefix seen earlier).
 */
export function insertPath(root: TrieNode, ids: readonly number[], count = ids.length): number {
  let node = root;
  let seen = 0;
  let fresh = false;
  for (let i = 0; i < count; i++) {
    let child = node.get(ids[i]);
    if (child === undefined) {
      child = new Map();
      node.set(ids[i], child);
      fresh = true;
    } else if (!fresh) {
      seen++;
    }
    node = child;
  }
  return seen;
}
