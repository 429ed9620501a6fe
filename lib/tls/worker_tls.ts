/**
 * What the gateway trusts and presents toward workers, as it is now: read at start
 * (`loadTls`), and changed when the client certificate is reloaded (`--client-cert-path`,
 * `--client-key-path`: a change of their files, or SIGHUP). Every client toward workers reads it
 * when it opens a connection (the HTTP/1.1 client, the control `fetch`, the gRPC channels), so a
 * renewed certificate is presented from the next connection on; open ones keep theirs. The CA
 * files (`--ca-cert-paths`) are read once.
 */

import type { CertifiedKey, WorkerTls } from "./pem.ts";

/** The workers' TLS material, current and as it changes. */
export class WorkerTlsSource {
  #current: WorkerTls;
  readonly #listeners = new Set<(tls: WorkerTls) => void>();

  /** Starts from `initial`. */
  constructor(initial: WorkerTls) {
    this.#current = initial;
  }

  /** The material to open a connection with now. */
  get current(): WorkerTls {
    return this.#current;
  }

  /** Presents `client` from now on, and tells the listeners. */
  update(client: CertifiedKey): void {
    this.#current = { ...this.#current, client };
    for (const l of this.#listeners) l(this.#current);
  }

  /** Hears every change; returns the unsubscribe function. */
  onChange(listener: (tls: WorkerTls) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
