/**
 * Pin sync, beyond SMG (whose sticky-session and `manual` assignments are per router): every
 * change of a routing key's workers in a pin map (`PolicyReplicas.pinSink`) is written to the
 * replicated store under `pins/<scope>:<model-scoped key>` as the workers' URLs (JSON), and
 * every peer's write replaces the local entry of the maps of that scope. Conflicts (two
 * routers pinning one key at once) resolve as every store key does: the write with the higher
 * Lamport clock, then the higher replica id, wins on every router, so a key converges to one
 * worker everywhere; the losing router's next request for it goes to the winner. Mere uses of
 * a key write nothing: idle expiry stays local, and a key idle everywhere is forgotten by each
 * map on its own (the store keeps the last assignment, within its key limit).
 */

import type { Logger } from "../../core/log.ts";
import type { PinScope, PolicyReplicas } from "../../policies/replicas.ts";
import type { Scheduler } from "../scheduler.ts";
import type { LwwStore } from "../store/lww_store.ts";

/** The store namespace of pins. */
export const PINS_NS = "pins";

const SCOPES: readonly PinScope[] = ["sticky", "manual"];
const enc = new TextEncoder();
const dec = new TextDecoder();

/** What the adapter works with. */
export interface PinSyncDeps {
  /** The policies' pin maps. */
  replicas: PolicyReplicas;
  /** The replicated store. */
  store: LwwStore;
  /** Time for store writes. */
  scheduler: Scheduler;
  /** Logger. */
  log: Logger;
}

/** Keeps the pin maps of one router in step with its peers'. */
export class PinSync {
  readonly #d: PinSyncDeps;
  #refused = 0;

  /** Connects the pin maps and the store; peers' pins already stored are applied at once. */
  constructor(d: PinSyncDeps) {
    this.#d = d;
    d.replicas.pinSink = (scope, key, urls) => this.#publish(scope, key, urls);
    d.store.onChange((e, origin) => {
      if (origin === "remote" && e.ns === PINS_NS && e.value !== null) this.#apply(e.key, e.value);
    });
    for (const [key, value] of d.store.live(PINS_NS)) this.#apply(key, value);
  }

  /** Pin writes the store refused (too many keys, too large). */
  get refused(): number {
    return this.#refused;
  }

  /** Detaches from the pin maps. */
  stop(): void {
    this.#d.replicas.pinSink = null;
  }

  #publish(scope: PinScope, key: string, urls: readonly string[]): void {
    const r = this.#d.store.write(
      PINS_NS,
      `${scope}:${key}`,
      enc.encode(JSON.stringify(urls)),
      this.#d.scheduler.now(),
    );
    if (typeof r === "string" && r !== "stale") {
      if (this.#refused++ === 0) this.#d.log.warn("pin not replicated", { reason: r, scope });
    }
  }

  #apply(storeKey: string, value: Uint8Array): void {
    const at = storeKey.indexOf(":");
    const scope = storeKey.slice(0, at) as PinScope;
    if (at < 0 || !SCOPES.includes(scope)) return;
    let urls: unknown;
    try {
      urls = JSON.parse(dec.decode(value));
    } catch {
      return;
    }
    if (!Array.isArray(urls) || !urls.every((u) => typeof u === "string")) return;
    const key = storeKey.slice(at + 1);
    for (const pins of this.#d.replicas.pins(scope)) pins.applyPin(key, urls);
  }
}
