/**
 * Certificate reload without restart. In: the certificate and key paths, what is served now, and
 * `apply`, which makes the main port (or the mesh) serve a new pair to new connections. Out: `apply` called
 * with each new valid pair, a log line for each reload, failed or done.
 *
 * Two triggers, both on: a change seen in the directories holding the files (and those their
 * symlinks lead to, where Kubernetes swaps its `..data` link when a Secret changes), reloaded
 * once the directory has been quiet for `debounceMs`, so that a cert and a key written one after
 * the other are read as a pair; and `reload()`, which the gateway calls on SIGHUP. A reload reads
 * and checks both files as at start (`pem.ts`); what did not change is ignored, what is invalid
 * (unreadable, not PEM, a key that is not the certificate's) is logged and the current pair kept.
 * Where a directory cannot be watched (read permission only on the files), the files are watched
 * instead, and watched again after each change; where nothing can be watched, SIGHUP alone works
 * (logged at start). Reloads run one at a time.
 */

import type { Clock } from "../core/clock.ts";
import type { Logger } from "../core/log.ts";
import { type CertifiedKey, readCertifiedKey } from "./pem.ts";

/** What one reload did. */
export type ReloadOutcome = "reloaded" | "unchanged" | "failed";

/** Options of `CertificateReloader`. */
export interface ReloaderOptions {
  /** `--tls-cert-path` (or the mesh's `--mesh-tls-cert`). */
  certPath: string;
  /** `--tls-key-path` (or the mesh's `--mesh-tls-key`). */
  keyPath: string;
  /** The flags naming the two files, in errors (default the main port's). */
  flags?: { cert: string; key: string };
  /** The pair served now. */
  current: CertifiedKey;
  /** Serves `next` to new connections from now on. */
  apply(next: CertifiedKey): void;
  log: Logger;
  /** The debounce timer's clock. */
  clock: Clock;
  /** Quiet time after a change before the files are read (ms; default 250). */
  debounceMs?: number;
}

/** Watches the certificate files and reloads them (see the module comment). */
export class CertificateReloader {
  readonly #o: ReloaderOptions;
  #current: CertifiedKey;
  #watcher: Deno.FsWatcher | null = null;
  #watching: Promise<void> = Promise.resolve();
  #cancelTimer: (() => void) | null = null;
  #queue: Promise<unknown> = Promise.resolve();
  #stopped = false;
  /** Called after every reload with its outcome (tests wait on it). */
  onReload: ((outcome: ReloadOutcome) => void) | null = null;

  constructor(o: ReloaderOptions) {
    this.#o = o;
    this.#current = o.current;
  }

  /** The pair served now. */
  get current(): CertifiedKey {
    return this.#current;
  }

  /** Starts watching the files' directories (or the files); logs what it watches. */
  start(): void {
    const { certPath, keyPath } = this.#o;
    const dirs = new Set<string>();
    for (const p of [certPath, keyPath]) {
      dirs.add(dirname(p));
      try {
        dirs.add(dirname(Deno.realPathSync(p)));
      } catch { /* read at start; gone now, or no permission to resolve: the path's own dir */ }
    }
    if (this.#watch([...dirs], false)) return;
    if (this.#watch([certPath, keyPath], true)) return;
    this.#o.log.warn("tls: cannot watch the certificate files; reload them with SIGHUP", {
      cert: certPath,
      key: keyPath,
    });
  }

  /** Watches `paths`; false when they cannot be watched. */
  #watch(paths: string[], files: boolean): boolean {
    let w: Deno.FsWatcher;
    try {
      w = Deno.watchFs(paths, { recursive: false });
    } catch {
      return false;
    }
    this.#watcher = w;
    this.#o.log.debug("tls: watching for certificate changes", { paths: paths.join(",") });
    this.#watching = (async () => {
      try {
        for await (const _ of w) this.#changed(files);
      } catch { /* closed */ }
    })();
    return true;
  }

  /** Something changed in a watched place: reload once it has been quiet for a while. */
  #changed(files: boolean): void {
    if (this.#stopped) return;
    this.#cancelTimer?.();
    this.#cancelTimer = this.#o.clock.after(this.#o.debounceMs ?? 250, () => {
      this.#cancelTimer = null;
      void this.reload("files changed").then(() => {
        // A file replaced by a rename is a new file: watch the new one.
        if (files && !this.#stopped) this.#rewatch();
      });
    });
  }

  #rewatch(): void {
    this.#watcher?.close();
    if (!this.#watch([this.#o.certPath, this.#o.keyPath], true)) {
      this.#o.log.warn("tls: lost the watch on the certificate files; reload them with SIGHUP");
    }
  }

  /** Reads both files and serves them if they changed and are valid; never throws. */
  reload(reason: string): Promise<ReloadOutcome> {
    const run = this.#queue.then(() => this.#reload(reason));
    this.#queue = run;
    return run;
  }

  async #reload(reason: string): Promise<ReloadOutcome> {
    const { certPath, keyPath, log } = this.#o;
    let outcome: ReloadOutcome;
    try {
      const flags = this.#o.flags ?? { cert: "--tls-cert-path", key: "--tls-key-path" };
      const next = await readCertifiedKey(flags.cert, certPath, flags.key, keyPath);
      if (next.cert === this.#current.cert && next.key === this.#current.key) {
        log.debug("tls: certificate files unchanged", { reason });
        outcome = "unchanged";
      } else {
        this.#o.apply(next);
        this.#current = next;
        logCertificate(log, "tls certificate reloaded", next, { reason });
        outcome = "reloaded";
      }
    } catch (e) {
      log.error("tls certificate reload failed; still serving the previous certificate", {
        reason,
        err: (e as Error).message,
      });
      outcome = "failed";
    }
    this.onReload?.(outcome);
    return outcome;
  }

  /** Stops watching; waits for a reload under way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#cancelTimer?.();
    this.#cancelTimer = null;
    this.#watcher?.close();
    this.#watcher = null;
    await this.#watching;
    await this.#queue;
  }
}

/** Logs `msg` with the certificate's subject and expiry; warns when it has expired. */
export function logCertificate(
  log: Logger,
  msg: string,
  ck: CertifiedKey,
  fields: Record<string, unknown> = {},
): void {
  const notAfter = ck.notAfter.toISOString();
  log.info(msg, { ...fields, subject: ck.subject, not_after: notAfter });
  // Wall time: an expiry date is one.
  if (ck.notAfter.getTime() < Date.now()) {
    log.warn("tls certificate has expired; clients will refuse it", { not_after: notAfter });
  }
}

/** The directory of `path` ("." for a bare name). */
function dirname(path: string): string {
  const i = path.replace(/\/+$/, "").lastIndexOf("/");
  return i < 0 ? "." : i === 0 ? "/" : path.slice(0, i);
}
