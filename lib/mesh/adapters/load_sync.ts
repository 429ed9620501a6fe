/**
 * Load sync: every router's own load on each worker, told to the others, so that each router
 * balances against the cluster's load instead of its own share of it. Behind a load balancer
 * that spreads requests over N routers, each sees about 1/N of the requests in flight and of the
 * prefill backlog: cache_aware, least_load and power_of_two then rank workers on a picture a
 * third as deep and noisier, and three meshed routers measured 1.45× one router's mean TTFT on
 * the Mooncake trace with the same cache hits (`bench:virtual`, BENCHMARKS.md).
 *
 * At most every `intervalMs` (`--mesh-load-sync-ms`, 50), when its in-flight requests or prefill
 * backlog changed since it last did, a router sends every open stream a `WORKER_LOADS` envelope:
 * its own in-flight requests, prefill backlog and recent work (uncached tokens sent, decayed over
 * 30 s: how fast the worker's cache turns over) on each worker it has any on (by URL, as worker
 * sync names them). A peer whose stream opened since gets it even unchanged. A receiver keeps
 * each peer's last report and sets each worker's peer load (`Worker.peerInFlight`,
 * `peerPrefillTokens`, `peerRecentWork`, the last decayed from its arrival) to their sum; a peer
 * whose stream closes is forgotten. What policies read as a worker's load is then its own plus
 * that (`WorkerView.inFlight`, `prefillTokens`, `recentWork`), at most one interval and one
 * stream hop stale.
 */

import protobuf from "protobufjs";
import type { Clock } from "../../core/clock.ts";
import { decayed } from "../../core/recent_work.ts";
import type { Logger } from "../../core/log.ts";
import type { StreamPort } from "../streams.ts";
import { decode, type Decoded, safe } from "../store/store_codec.ts";
import { MESH_PROTO } from "../transport/codec.ts";
import type { EnvelopeType } from "../wire.ts";

/** One router's load on one worker. */
export interface Load {
  inFlight: number;
  prefillTokens: number;
  /** Its recent work on the worker (`Worker.ownRecentWork`) when it sent the report. */
  recentWork: number;
}

/** What load sync reads and writes of a worker. */
export interface LoadedWorker {
  readonly url: string;
  readonly ownInFlight: number;
  readonly ownPrefillTokens: number;
  ownRecentWork(now: number): number;
  peerInFlight: number;
  peerPrefillTokens: number;
  peerRecentWork: number;
  peerRecentWorkAt: number;
}

/** What load sync counts. */
export type LoadCounter = "sent" | "received" | "bytes_sent" | "refused";

/** What load sync works with. */
export interface LoadSyncOptions {
  /** This router's workers (the registry's). */
  workers: () => Iterable<LoadedWorker>;
  /** Timers. */
  clock: Clock;
  /** The longest a change waits before it is sent, ms (> 0). */
  intervalMs: number;
  /** Logger. */
  log: Logger;
  /** Hears each counted event with its amount. */
  count?: (what: LoadCounter, n: number) => void;
}

const LoadsT = protobuf.parse(MESH_PROTO, { keepCase: true }).root.lookupType(
  "smg.mesh.v1.WorkerLoads",
);

/** Most workers a report may name (more is refused). */
const MAX_WORKERS = 100_000;

/** Encodes a report: each worker's load, by URL. */
export function encodeLoads(loads: ReadonlyMap<string, Load>): Uint8Array {
  const workers = [...loads.keys()];
  return LoadsT.encode({
    workers,
    in_flight: workers.map((u) => loads.get(u)!.inFlight),
    prefill_tokens: workers.map((u) => Math.round(loads.get(u)!.prefillTokens)),
    recent_work: workers.map((u) => Math.round(loads.get(u)!.recentWork)),
  }).finish();
}

/** Decodes a report, or says why it was refused. */
export function decodeLoads(bytes: Uint8Array): Decoded<Map<string, Load>> {
  return decode(LoadsT, bytes, (o: {
    workers: string[];
    in_flight: number[];
    prefill_tokens: string[];
    recent_work: string[];
  }) => {
    const { workers } = o;
    const work = o.recent_work.length === 0 ? null : o.recent_work;
    if (
      workers.length !== o.in_flight.length || workers.length !== o.prefill_tokens.length ||
      (work !== null && work.length !== workers.length)
    ) {
      throw new Error("workers and loads differ in length");
    }
    if (workers.length > MAX_WORKERS) throw new Error(`more than ${MAX_WORKERS} workers`);
    return new Map(workers.map((url, i) => [url, {
      inFlight: o.in_flight[i],
      prefillTokens: safe(o.prefill_tokens[i]),
      recentWork: work === null ? 0 : safe(work[i]),
    }]));
  });
}

/** Tells the mesh this router's load on the workers and keeps its peers'. */
export class LoadSync {
  readonly #o: LoadSyncOptions;
  #port: StreamPort | null = null;
  /** Each open peer's last report, and when it arrived (the clock's ms). */
  readonly #told = new Map<string, { loads: Map<string, Load>; at: number }>();
  /** Peers whose stream opened since the last report went out. */
  readonly #fresh = new Set<string>();
  /** The in-flight requests and backlog last sent, as a key (unchanged, they are not sent again). */
  #last: string | null = null;
  #cancel: () => void = () => {};
  #stopped = false;

  /** Sync over `o.workers`; nothing is sent until `attach`. */
  constructor(o: LoadSyncOptions) {
    this.#o = o;
  }

  /** Starts sending over `port`. */
  attach(port: StreamPort): void {
    this.#port = port;
    this.#schedule();
  }

  /** A stream to `peer` opened (it is told this router's load) or closed (its load is dropped). */
  peerChanged(peer: string, open: boolean): void {
    if (open) {
      this.#fresh.add(peer);
      return;
    }
    this.#fresh.delete(peer);
    if (this.#told.delete(peer)) this.#apply();
  }

  /** An envelope from `peer`: a load report is kept and applied; other types are not ours. */
  onEnvelope(peer: string, type: EnvelopeType, payload: Uint8Array): void {
    if (type !== "worker_loads") return;
    const d = decodeLoads(payload);
    if (!d.ok) {
      this.#o.count?.("refused", 1);
      this.#o.log.warn("refused a load report", { peer, detail: d.detail });
      return;
    }
    this.#o.count?.("received", 1);
    this.#told.set(peer, { loads: d.value, at: this.#o.clock.now() });
    this.#apply();
  }

  /** Stops sending and forgets the peers' load (their workers' peer load returns to 0). */
  stop(): void {
    this.#stopped = true;
    this.#cancel();
    this.#told.clear();
    this.#apply();
  }

  /**
   * Sets each worker's peer load to the sum of the peers' last reports, their recent work
   * decayed from each report's arrival to now.
   */
  #apply(): void {
    const now = this.#o.clock.now();
    const sums = new Map<string, Load>();
    for (const { loads, at } of this.#told.values()) {
      for (const [url, l] of loads) {
        const s = sums.get(url) ?? { inFlight: 0, prefillTokens: 0, recentWork: 0 };
        s.inFlight += l.inFlight;
        s.prefillTokens += l.prefillTokens;
        s.recentWork += decayed(l.recentWork, now - at);
        sums.set(url, s);
      }
    }
    for (const w of this.#o.workers()) {
      const s = sums.get(w.url);
      w.peerInFlight = s?.inFlight ?? 0;
      w.peerPrefillTokens = s?.prefillTokens ?? 0;
      w.peerRecentWork = s?.recentWork ?? 0;
      w.peerRecentWorkAt = now;
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#cancel = this.#o.clock.after(this.#o.intervalMs, () => {
      this.#report();
      this.#schedule();
    });
  }

  /** Sends this router's load to every open peer if it changed, else to the fresh ones only. */
  #report(): void {
    const port = this.#port;
    if (port === null) return;
    const now = this.#o.clock.now();
    const own = new Map<string, Load>();
    let key = "";
    for (const w of this.#o.workers()) {
      const recentWork = w.ownRecentWork(now);
      // Recent work alone below a token is none: it decays for ever and need not be sent.
      if (w.ownInFlight > 0 || w.ownPrefillTokens > 0 || recentWork >= 1) {
        own.set(w.url, { inFlight: w.ownInFlight, prefillTokens: w.ownPrefillTokens, recentWork });
        if (w.ownInFlight > 0 || w.ownPrefillTokens > 0) {
          key += `${w.url} ${w.ownInFlight} ${Math.round(w.ownPrefillTokens)}\n`;
        }
      }
    }
    // Recent work decays on its own (the receiver decays it too); only new work, which always
    // comes with a change of backlog, makes a report worth sending.
    const changed = key !== this.#last;
    const to = changed ? port.openPeers() : port.openPeers().filter((p) => this.#fresh.has(p));
    this.#fresh.clear();
    this.#last = key;
    if (to.length === 0) return;
    const bytes = encodeLoads(own);
    for (const peer of to) {
      // A full queue: this peer is told on the next round, changed or not.
      if (!port.send(peer, "worker_loads", bytes)) {
        this.#fresh.add(peer);
        continue;
      }
      this.#o.count?.("sent", 1);
      this.#o.count?.("bytes_sent", bytes.length);
    }
  }
}
