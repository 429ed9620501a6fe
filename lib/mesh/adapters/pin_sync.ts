/**
 * Pin sync, beyond SMG (whose sticky-session and `manual` assignments are per router): every
 * change of a routing key's workers in a pin map (`PolicyReplicas.pinSink`) is written to the
 * replicated store under `pins/<scope>:<model-scoped key>` as the workers' URLs (JSON), and
 * every peer's write replaces the local entry of the maps of that scope. Conflicts (two
 * routers pinning one key at once) resolve as every store key does: the write with the higher
 * Lamport clock, then the higher replica id, wins on every router, so a key converges to one
 * worker everywhere; the losing router's next request for it goes to the winner.
 *
 * Expiry: each map forgets a key idle for `--max-idle-secs` on its own. The store keeps a pin
 * alive while some router uses it: a use rewrites the pin (same workers, new clock) once its
 * stored copy is older than half the idle time; and a pin whose stored copy is older than the
 * idle time and that no local map holds any more is removed from the store (any router may; a
 * concurrent refresh wins by clock), so the pins namespace holds about the keys in use.
 */

import type { Logger } from "../../core/log.ts";
import { isPinScope, type PinScope, type PolicyReplicas } from "../../policies/replicas.ts";
import { modelOfMapKey } from "../../policies/sticky_map.ts";
import type { Clock } from "../../core/clock.ts";
import type { LwwStore } from "../store/lww_store.ts";

/** The store namespace of pins. */
export const PINS_NS = "pins";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** What the adapter works with. */
export interface PinSyncDeps {
  /** The policies' pin maps. */
  replicas: PolicyReplicas;
  /** The replicated store. */
  store: LwwStore;
  /** Time for store writes. */
  clock: Clock;
  /** Logger. */
  log: Logger;
  /** `--max-idle-secs` in ms (0: pins never expire). */
  maxIdleMs: number;
}

/** Keeps the pin maps of one router in step with its peers'. */
export class PinSync {
  readonly #d: PinSyncDeps;
  #refused = 0;
  #cancel: () => void = () => {};
  #stopped = false;

  /** Connects the pin maps and the store; peers' pins already stored are applied at once. */
  constructor(d: PinSyncDeps) {
    this.#d = d;
    d.replicas.pinSink = (scope, key, urls) => this.#publish(scope, key, urls);
    if (d.maxIdleMs > 0) d.replicas.pinUsed = (scope, key, urls) => this.#used(scope, key, urls);
    d.store.onChange((e, origin) => {
      if (origin === "remote" && e.ns === PINS_NS && e.value !== null) this.#apply(e.key, e.value);
    });
    for (const [key, value] of d.store.live(PINS_NS)) this.#apply(key, value);
  }

  /** Pin writes the store refused (too many keys, too large). */
  get refused(): number {
    return this.#refused;
  }

  /** Starts expiring idle pins from the store (every quarter of the idle time, at most 60 s). */
  start(): void {
    if (this.#d.maxIdleMs <= 0 || this.#stopped) return;
    this.#cancel = this.#d.clock.after(Math.min(60_000, this.#d.maxIdleMs / 4), () => {
      this.expire();
      this.start();
    });
  }

  /** Detaches from the pin maps and stops expiring. */
  stop(): void {
    this.#stopped = true;
    this.#cancel();
    this.#d.replicas.pinSink = null;
    this.#d.replicas.pinUsed = null;
  }

  /** Removes from the store the pins stored longer ago than the idle time that no map holds. */
  expire(): number {
    const d = this.#d;
    const now = d.clock.now();
    const stale: string[] = [];
    for (const e of d.store.all()) {
      if (e.ns !== PINS_NS || e.value === null || now - e.storedAt < d.maxIdleMs) continue;
      const at = e.key.indexOf(":");
      const key = e.key.slice(at + 1);
      if (!d.replicas.pins(e.key.slice(0, at)).some((p) => p.holds(key))) stale.push(e.key);
    }
    for (const k of stale) d.store.write(PINS_NS, k, null, now);
    return stale.length;
  }

  /** A pinned key was used: refresh its stored copy once it is half the idle time old. */
  #used(scope: PinScope, key: string, urls: readonly string[]): void {
    const e = this.#d.store.entry(PINS_NS, `${scope}:${key}`);
    if (e && e.value !== null && this.#d.clock.now() - e.storedAt < this.#d.maxIdleMs / 2) {
      return;
    }
    this.#publish(scope, key, urls);
  }

  #publish(scope: PinScope, key: string, urls: readonly string[]): void {
    const r = this.#d.store.write(
      PINS_NS,
      `${scope}:${key}`,
      enc.encode(JSON.stringify(urls)),
      this.#d.clock.now(),
    );
    if (typeof r === "string" && r !== "stale") {
      if (this.#refused++ === 0) this.#d.log.warn("pin not replicated", { reason: r, scope });
    }
  }

  #apply(storeKey: string, value: Uint8Array): void {
    const at = storeKey.indexOf(":");
    const scope = storeKey.slice(0, at);
    const key = storeKey.slice(at + 1);
    const model = modelOfMapKey(key);
    if (at < 0 || !isPinScope(scope) || model === null) return;
    let urls: unknown;
    try {
      urls = JSON.parse(dec.decode(value));
    } catch {
      return;
    }
    if (!Array.isArray(urls) || !urls.every((u) => typeof u === "string")) return;
    for (const pins of this.#d.replicas.pinsFor(scope, model)) pins.applyPin(key, urls);
  }
}
