/**
 * Characters per token per model, and per worker (`Worker.textRatio`), learned from the answers
 * (`lib/core/chars_per_token.ts`): in, one sample per answered request routed on text (its
 * routing text's length, the `prompt_tokens` the worker reported); out, the estimate a request of
 * a model is routed with (`forModel`: its workers' pooled answers, else the mesh peers' figure for
 * it, else `DEFAULT_CHARS_PER_TOKEN`), and every estimate for the metrics, the status page and
 * the mesh.
 */

import { DEFAULT_CHARS_PER_TOKEN, RatioEstimate } from "../core/chars_per_token.ts";
import type { Worker } from "./worker.ts";

/** A model's estimate as it is shown and shared. */
export interface ModelRatio {
  /** The model ("unknown" for requests that named none). */
  model: string;
  /** Characters per token routing uses for it now. */
  charsPerToken: number;
  /** Samples behind it here (0: a peer's figure or the default). */
  samples: number;
  /** Where it comes from. */
  source: "answers" | "peers" | "default";
}

/** Most models the table learns or takes from peers (client-chosen names). */
const MAX_MODELS = 256;

/** The estimates of one gateway. */
export class TextRatios {
  readonly #models = new Map<string, RatioEstimate>();
  readonly #peers = new Map<string, number>();
  readonly #listeners: ((model: string, worker: Worker) => void)[] = [];

  /**
   * One answer of `worker` for `model`: `chars` characters of routing text, `tokens` prompt
   * tokens reported. Returns whether it counted (see `RatioEstimate.observe`).
   */
  observe(model: string, worker: Worker, chars: number, tokens: number): boolean {
    let m = this.#models.get(model);
    if (!m) {
      if (this.#models.size >= MAX_MODELS) return false;
      m = new RatioEstimate();
      this.#models.set(model, m);
    }
    if (!m.observe(chars, tokens)) return false;
    worker.textRatio.observe(chars, tokens);
    for (const l of this.#listeners) l(model, worker);
    return true;
  }

  /** Characters per token for a request of `model` (null: the model named none). */
  forModel(model: string | null): number {
    const key = model ?? "unknown";
    return this.#models.get(key)?.value ?? this.#peers.get(key) ?? DEFAULT_CHARS_PER_TOKEN;
  }

  /** A mesh peer's estimate for `model` (used while this gateway has too few answers of its own). */
  applyPeer(model: string, charsPerToken: number): void {
    if (!(charsPerToken > 0) || !Number.isFinite(charsPerToken)) return;
    if (!this.#peers.has(model) && this.#peers.size >= MAX_MODELS) return;
    this.#peers.set(model, charsPerToken);
  }

  /** This gateway's own estimate for `model` from its answers, or null (for the mesh). */
  own(model: string): { charsPerToken: number; samples: number } | null {
    const m = this.#models.get(model);
    const v = m?.value ?? null;
    return v === null ? null : { charsPerToken: v, samples: m!.samples };
  }

  /** Calls `fn` after each counted answer (metrics). */
  onChange(fn: (model: string, worker: Worker) => void): void {
    this.#listeners.push(fn);
  }

  /** Every model with an estimate of its own or a peer's. */
  models(): ModelRatio[] {
    const out: ModelRatio[] = [];
    const names = new Set([...this.#models.keys(), ...this.#peers.keys()]);
    for (const model of names) {
      const own = this.own(model);
      const peer = this.#peers.get(model);
      out.push({
        model,
        charsPerToken: own?.charsPerToken ?? peer ?? DEFAULT_CHARS_PER_TOKEN,
        samples: own?.samples ?? 0,
        source: own ? "answers" : peer !== undefined ? "peers" : "default",
      });
    }
    return out.sort((a, b) => a.model < b.model ? -1 : a.model > b.model ? 1 : 0);
  }
}
