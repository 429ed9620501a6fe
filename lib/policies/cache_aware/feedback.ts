/**
 * Tree feedback (`--tree-feedback on`): what cache_aware does with the chosen worker's report of
 * a prompt (`SelectionNote.onReport`). Where the worker held clearly less of the prompt than the
 * tree's believed depth for it (by more than a block and 5 % of the prompt), it lost the rest to
 * eviction, and with it every branch of its below that point that it was sent before this
 * request: the tree forgets them (`ModelTreeSet.correct`), and with the mesh on, the peers are
 * told. On text, the reported tokens count as the same share of the characters.
 */

import type { NewCorrection } from "../replicas.ts";
import type { ModelTrees, ModelTreeSet } from "./model_trees.ts";
import type { TreeKind } from "./shared_paths.ts";

/** What a corrector reaches beyond the request. */
export interface FeedbackDeps {
  trees: ModelTreeSet;
  now: () => number;
  /** The mesh's way to publish a correction of a model's tree, read when the report arrives. */
  publisher: (model: string, kind: TreeKind) => ((c: NewCorrection) => string) | null;
  /** Told how many units of a model's tree were forgotten, when any were. */
  forgot: (model: string, kind: TreeKind, units: number) => void;
}

/**
 * The report handler for a request of `model` and `units` routed at `routedAt` to `url`, which
 * the tree `t` believed held `believed` units of it; `block` is an engine block in units.
 */
export function corrector(
  deps: FeedbackDeps,
  model: string,
  t: ModelTrees,
  units: string | readonly number[],
  url: string,
  believed: number,
  block: number,
  routedAt: number,
): (reported: { prompt: number; cached: number }) => void {
  const kind: TreeKind = typeof units === "string" ? "string" : "token";
  const stamp = kind === "string" ? t.text.stamp : t.tokens.stamp;
  const slack = Math.max(block, Math.ceil(0.05 * units.length));
  return ({ prompt, cached }) => {
    if (prompt <= 0) return;
    const held = kind === "token"
      ? cached
      : Math.floor(Math.min(1, cached / prompt) * units.length);
    if (believed - held <= slack) return;
    const age = deps.now() - routedAt;
    const publish = deps.publisher(model, kind);
    const forgotten = deps.trees.correct(t, units, url, held, stamp, age, publish);
    if (forgotten > 0) deps.forgot(model, kind, forgotten);
  };
}
