/**
 * A pod list-and-watch loop that survives what API servers and networks do: list (paged), then
 * watch from the list's resourceVersion with bookmarks; on each event or bookmark remember the
 * newest resourceVersion; when a watch ends (the server's timeout) watch again from there; when
 * it breaks (reset, refused, a stall longer than `idleMs` with not even a bookmark) retry with
 * backoff from there; when the server answers 410 Gone (as the HTTP status or as an `ERROR`
 * event) list again, and the new list replaces everything known, so pods that vanished while
 * the watch was down are forgotten. The API server unreachable at start or later is logged and
 * retried; the last known state stays in force meanwhile.
 *
 * The watch request goes over `fetch` (given by the caller, with its authentication): under
 * Deno 2.9.3, `@kubernetes/client-node`'s `Watch` does not notice a watch connection the server
 * resets, while a `fetch` body read fails at once. How lists are made is the caller's
 * (`kube.ts` uses client-node).
 */

import { type Clock, pause } from "../core/clock.ts";
import type { Logger } from "../core/log.ts";
import type { Pod } from "./pods.ts";

/** One page of a pod list. */
export interface PodPage {
  items: Pod[];
  /** The list's resourceVersion (set on the last page). */
  resourceVersion: string;
  /** Token of the next page, or null. */
  continueToken: string | null;
}

/** A list call failed with this HTTP status (410: the continue token or version expired). */
export class ApiStatusError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** An error with `status`. */
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** What the loop calls. */
export interface WatchSource {
  /** One page of the list (`continueToken` null: the first). */
  list(continueToken: string | null): Promise<PodPage>;
  /** Opens a watch from `resourceVersion` (bookmarks on); `signal` aborts it. */
  watch(resourceVersion: string, signal: AbortSignal): Promise<Response>;
}

/** What the loop reports. */
export interface WatchHandlers {
  /** Every matching pod, now: replaces what was known. */
  onList(pods: Pod[]): void;
  /** One change. */
  onEvent(type: "ADDED" | "MODIFIED" | "DELETED", pod: Pod): void;
  /** A list or watch failed (already logged); for metrics. */
  onError?(what: "list" | "watch", err: string): void;
  /** A bookmark moved the resume point to `resourceVersion`. */
  onBookmark?(resourceVersion: string): void;
}

/** Options of the loop. */
export interface WatchOptions {
  /** What is watched, for logs (e.g. `worker pods`). */
  name: string;
  source: WatchSource;
  handlers: WatchHandlers;
  log: Logger;
  /** The gateway's clock: backoff, the stall timer, "at once". */
  clock: Clock;
  /** A watch that delivers nothing (not even a bookmark) this long is dropped (330 s). */
  idleMs?: number;
  /** First retry delay, doubling (500 ms). */
  backoffMs?: number;
  /** Longest retry delay (30 s). */
  maxBackoffMs?: number;
}

type WatchEnd = "ended" | "gone";

/** The loop; `start` runs it until `stop`. */
export class PodWatch {
  readonly #o: Required<WatchOptions>;
  readonly #stop = new AbortController();
  #done: Promise<void> | null = null;
  #lists = 0;

  /** A loop not started yet. */
  constructor(o: WatchOptions) {
    this.#o = { idleMs: 330_000, backoffMs: 500, maxBackoffMs: 30_000, ...o };
  }

  /** Full lists made so far (the first, and one after each 410). */
  get lists(): number {
    return this.#lists;
  }

  /** Starts the loop (once). */
  start(): void {
    this.#done ??= this.#run();
  }

  /** Stops the loop and waits for it. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#done;
  }

  async #run(): Promise<void> {
    const o = this.#o;
    let rv: string | null = null;
    let delay = o.backoffMs;
    let failing = false;
    while (!this.#stop.signal.aborted) {
      try {
        if (rv === null) rv = await this.#list();
        const started = o.clock.now();
        let events = 0;
        const end = await this.#watch(rv, (v) => {
          rv = v;
          events++;
        });
        if (end === "gone") {
          // Relist, but never in a tight loop: a server that keeps answering 410 waits too.
          rv = null;
          if (o.clock.now() - started < 1000) throw new Error("watch: 410 Gone at once");
        } else if (events === 0 && o.clock.now() - started < 1000 && !this.#stop.signal.aborted) {
          // A watch that ends at once with nothing (a proxy, a server shutting down): back off.
          throw new Error("watch: ended at once with no events");
        }
        if (failing) o.log.info("kubernetes watch recovered", { watch: o.name });
        failing = false;
        delay = o.backoffMs;
      } catch (e) {
        if (this.#stop.signal.aborted) break;
        const err = e instanceof Error ? e.message : String(e);
        if (e instanceof ApiStatusError && e.status === 410) rv = null; // relist, after the wait
        const what = rv === null ? "list" : "watch";
        o.handlers.onError?.(what, err);
        (failing ? o.log.debug : o.log.warn).call(
          o.log,
          `kubernetes ${what} failed; retrying, serving what is known`,
          { watch: o.name, err, retry_ms: Math.round(delay) },
        );
        failing = true;
        await pause(o.clock, delay * (0.8 + 0.4 * Math.random()), this.#stop.signal).done;
        delay = Math.min(delay * 2, o.maxBackoffMs);
      }
    }
  }

  async #list(): Promise<string> {
    const pods: Pod[] = [];
    let token: string | null = null;
    let rv = "";
    const stopped = new Promise<never>((_, reject) => {
      const fail = () => reject(new Error("stopped"));
      if (this.#stop.signal.aborted) fail();
      else this.#stop.signal.addEventListener("abort", fail, { once: true });
    });
    stopped.catch(() => {});
    do {
      // A list the server never answers must not hold up stop().
      const page: PodPage = await Promise.race([this.#o.source.list(token), stopped]);
      pods.push(...page.items);
      token = page.continueToken;
      rv = page.resourceVersion;
    } while (token);
    this.#lists++;
    this.#o.handlers.onList(pods);
    return rv;
  }

  /** One watch request, read to its end; newer resourceVersions go to `seen`. */
  async #watch(rv: string, seen: (rv: string) => void): Promise<WatchEnd> {
    const o = this.#o;
    const abort = new AbortController();
    const onStop = () => abort.abort();
    if (this.#stop.signal.aborted) return "ended"; // stopped while listing
    this.#stop.signal.addEventListener("abort", onStop, { once: true });
    let cancelIdle = () => {};
    const arm = () => {
      cancelIdle();
      cancelIdle = o.clock.after(o.idleMs, () => abort.abort(new Error("watch stalled")));
    };
    try {
      arm();
      const res = await o.source.watch(rv, abort.signal);
      if (res.status === 410) {
        await res.body?.cancel();
        return "gone";
      }
      if (res.status !== 200 || !res.body) {
        const text = (await res.text().catch(() => "")).slice(0, 200);
        throw new Error(`watch: HTTP ${res.status} ${text}`);
      }
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return "ended";
        arm();
        buf += value;
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line === "") continue;
          if (this.#line(line, seen) === "gone") {
            await reader.cancel().catch(() => {});
            return "gone";
          }
        }
        if (buf.length > 16 << 20) throw new Error("watch: an event line over 16 MiB");
      }
    } catch (e) {
      if (abort.signal.aborted && abort.signal.reason instanceof Error) throw abort.signal.reason;
      throw e;
    } finally {
      cancelIdle();
      this.#stop.signal.removeEventListener("abort", onStop);
      abort.abort();
    }
  }

  #line(line: string, seen: (rv: string) => void): WatchEnd | null {
    let ev: { type?: string; object?: Pod & { code?: number; message?: string } };
    try {
      ev = JSON.parse(line);
    } catch {
      throw new Error("watch: a line that is not JSON");
    }
    const obj = ev.object;
    const rv = obj?.metadata?.resourceVersion;
    switch (ev.type) {
      case "ERROR":
        if (obj?.code === 410) return "gone";
        throw new Error(`watch: error event ${obj?.code ?? "?"} ${obj?.message ?? ""}`);
      case "BOOKMARK":
        if (rv) {
          seen(rv);
          this.#o.handlers.onBookmark?.(rv);
        }
        return null;
      case "ADDED":
      case "MODIFIED":
      case "DELETED":
        if (!obj) return null;
        this.#o.handlers.onEvent(ev.type, obj);
        if (rv) seen(rv);
        return null;
      default:
        return null;
    }
  }
}
