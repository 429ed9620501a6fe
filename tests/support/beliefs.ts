/**
 * What a cache-aware policy believes a worker holds of a prompt, read from what it would send a
 * peer in a repair (`SharedTrees.exportTree`): the deepest of its radix paths for the worker that
 * share the prompt's start, and of its placements naming the worker on the prompt's block
 * boundaries.
 */

import { blockUnits, pathHashes } from "../../lib/policies/cache_aware/shared_paths.ts";
import type { SharedTrees } from "../../lib/policies/replicas.ts";

/** Characters of `text` that `trees` believe `worker` holds for `model` (block size 16). */
export function believed(trees: SharedTrees, model: string, text: string, worker: string): number {
  const block = blockUnits("string", 16);
  const hashes = pathHashes(text, block);
  let depth = 0;
  for (const e of trees.exportTree(model, "string")) {
    if (!e.tenants.includes(worker)) continue;
    if ("path" in e) depth = Math.max(depth, lcp(e.path, text));
    else if ("hash" in e) {
      const i = hashes.indexOf(e.hash);
      if (i >= 0) depth = Math.max(depth, (i + 1) * block);
    }
  }
  return depth;
}

function lcp(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
