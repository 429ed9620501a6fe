/**
 * Characters per token over the mesh: each router publishes, every `intervalMs`, its own estimate
 * per model (`TextRatios.own`: from its answers) in the replicated store, namespace `cpt`, key
 * `{model}:{router}`, value 12 bytes (the ratio as a float64, the samples behind it as a uint32,
 * both big-endian), written again only when it moved by more than 1 % or its samples doubled; and
 * takes its peers' as they arrive: a model's peer figure is their samples-weighted mean, which the
 * router routes with until it has answers of its own (`TextRatios.applyPeer`). So a router that
 * joins, restarts or rarely sees a model cuts text into tokens as the cluster does, and every
 * router's prefix_hash and hash-index keys, cut at the same steady step, agree.
 */

import type { Clock } from "../../core/clock.ts";
import type { Logger } from "../../core/log.ts";
import type { TextRatios } from "../../workers/text_ratios.ts";
import type { LwwStore } from "../store/lww_store.ts";

/** The store namespace of the estimates. */
export const RATIO_NS = "cpt";

/** A published estimate. */
export interface SharedRatio {
  /** Characters per token. */
  charsPerToken: number;
  /** Answers behind it. */
  samples: number;
}

/** An estimate's 12 bytes. */
export function encodeRatio(r: SharedRatio): Uint8Array {
  const b = new Uint8Array(12);
  const v = new DataView(b.buffer);
  v.setFloat64(0, r.charsPerToken);
  v.setUint32(8, Math.max(0, Math.min(2 ** 32 - 1, Math.round(r.samples))));
  return b;
}

/** An estimate from its 12 bytes, or null if malformed. */
export function decodeRatio(b: Uint8Array): SharedRatio | null {
  if (b.length !== 12) return null;
  const v = new DataView(b.buffer, b.byteOffset, 12);
  const charsPerToken = v.getFloat64(0);
  if (!(charsPerToken > 0) || !Number.isFinite(charsPerToken)) return null;
  return { charsPerToken, samples: v.getUint32(8) };
}

/** What the sync works with. */
export interface RatioSyncDeps {
  /** This router's estimates. */
  ratios: TextRatios;
  /** The replicated store. */
  store: LwwStore;
  /** This router's mesh name (no `:`). */
  router: string;
  /** Timers and store times. */
  clock: Clock;
  /** Publish interval, ms. */
  intervalMs: number;
  /** Logger. */
  log: Logger;
}

/** Shares one router's estimates and takes its peers'. */
export class RatioSync {
  readonly #d: RatioSyncDeps;
  /** What this router last published, by model. */
  readonly #published = new Map<string, SharedRatio>();
  /** Peers' estimates by model, then router. */
  readonly #peers = new Map<string, Map<string, SharedRatio>>();
  #cancel: () => void = () => {};
  #stopped = false;

  /** Hooks the store's changes (peers' estimates). */
  constructor(d: RatioSyncDeps) {
    this.#d = d;
    d.store.onChange((e, origin) => {
      if (origin !== "remote" || e.ns !== RATIO_NS || e.value === null) return;
      this.#apply(e.key, e.value);
    });
  }

  /** Publishes every `intervalMs` until stopped. */
  start(): void {
    if (this.#stopped) return;
    this.#cancel = this.#d.clock.after(this.#d.intervalMs, () => {
      this.flush();
      this.start();
    });
  }

  /** Stops publishing. */
  stop(): void {
    this.#stopped = true;
    this.#cancel();
  }

  /** Writes every model's estimate that moved since it was last published. */
  flush(): void {
    const d = this.#d;
    for (const { model } of d.ratios.models()) {
      const own = d.ratios.own(model);
      if (own === null) continue;
      const last = this.#published.get(model);
      if (
        last && Math.abs(own.charsPerToken / last.charsPerToken - 1) <= 0.01 &&
        own.samples < 2 * last.samples
      ) continue;
      const r = d.store.write(RATIO_NS, `${model}:${d.router}`, encodeRatio(own), d.clock.now());
      if (typeof r === "string" && r !== "stale") {
        d.log.warn("characters per token not replicated", { reason: r, model });
        continue;
      }
      this.#published.set(model, own);
    }
  }

  /** A peer's estimate. */
  #apply(key: string, value: Uint8Array): void {
    const at = key.lastIndexOf(":");
    if (at <= 0) return;
    const model = key.slice(0, at);
    const router = key.slice(at + 1);
    const r = decodeRatio(value);
    if (r === null || router === this.#d.router) return;
    let byRouter = this.#peers.get(model);
    if (!byRouter) this.#peers.set(model, byRouter = new Map());
    byRouter.set(router, r);
    let weighted = 0;
    let samples = 0;
    for (const x of byRouter.values()) {
      weighted += x.charsPerToken * Math.max(1, x.samples);
      samples += Math.max(1, x.samples);
    }
    this.#d.ratios.applyPeer(model, weighted / samples);
  }
}
