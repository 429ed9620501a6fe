/**
 * HTTPS on the main port: one `node:tls` server whose certificate can be replaced while it
 * serves. In: the address, the PEM certificate chain and key, the ALPN protocols offered. Out:
 * client sockets after their handshake, to a callback (`TlsTerminator`, for `Deno.serve`'s pipe)
 * or as the own front's `FrontListener` (`listenTlsFront`, sockets read as `NodeSocketConn`).
 *
 * Why `node:tls` and not `Deno.listenTls`, whose sockets the front reads the same way and whose
 * TLS costs less CPU: a Deno TLS listener keeps the certificate it was opened with, so a new
 * certificate means a new listener, and however the two are switched, connections are lost. A
 * second listener on the port (`reusePort`) splits new connections between the two, and closing
 * the old one resets those the kernel had already queued on it: measured on this machine with
 * plain TCP listeners (the same kernel path), 1,466 of 26,156 connections opened by 16 clients
 * during 200 switches were reset (`bench/tls_swap.ts` measures both ways with TLS;
 * `tests/front/tls_listener_test.ts` checks the in-place swap losing none). `setCertificate` here swaps the server's secure context: the
 * socket that listens never changes, new handshakes use the new certificate, connections already
 * open keep theirs.
 *
 * Shutdown: `close()` stops accepting; a handshake still under way completes and is then closed
 * (as an idle connection would be) or fails within `handshakeTimeoutMs`. `closed()` resolves when
 * the server and every socket it accepted are closed; `destroy()` cuts them all at once.
 */

import type { Socket } from "node:net";
import tls from "node:tls";
import type { FrontListener } from "./server.ts";
import { NodeSocketConn } from "./node_socket.ts";

/** A PEM certificate chain and its private key. */
export interface CertificatePem {
  cert: string;
  key: string;
}

/** Options of `TlsTerminator.listen`. */
export interface TlsListenOptions extends CertificatePem {
  hostname: string;
  /** 0 picks a free port. */
  port: number;
  /** ALPN protocols offered, preferred first (default: `http/1.1` only). */
  alpnProtocols?: string[];
  /** A client that has not finished its handshake after this long is dropped (ms; 10 s). */
  handshakeTimeoutMs?: number;
}

/** One `node:tls` server on the main port; sockets go to `onSocket` after their handshake. */
export class TlsTerminator {
  readonly #server: tls.Server;
  /** Every accepted TCP socket until it closes (a TLS socket destroys its TCP socket too). */
  readonly #sockets = new Set<Socket>();
  readonly #closed: Promise<void>;
  #closing = false;
  /** The listening address, once `listen` resolved. */
  addr: Deno.NetAddr = { transport: "tcp", hostname: "", port: 0 };

  private constructor(o: TlsListenOptions, onSocket: (s: tls.TLSSocket) => void) {
    const server = this.#server = tls.createServer({
      cert: o.cert,
      key: o.key,
      ALPNProtocols: o.alpnProtocols ?? ["http/1.1"],
      handshakeTimeout: o.handshakeTimeoutMs ?? 10_000,
    });
    server.on("connection", (raw: Socket) => {
      if (this.#closing) return void raw.destroy();
      this.#sockets.add(raw);
      raw.once("close", () => this.#sockets.delete(raw));
    });
    server.on("secureConnection", (s: tls.TLSSocket) => {
      if (this.#closing) return void s.destroy();
      onSocket(s);
    });
    // A failed handshake (no shared cipher, a client refusing the certificate) concerns that
    // client only; node destroys its socket.
    server.on("tlsClientError", () => {});
    this.#closed = new Promise((resolve) => server.once("close", () => resolve()));
  }

  /** Listens on `hostname:port`; rejects when the address cannot be bound. */
  static async listen(
    o: TlsListenOptions,
    onSocket: (s: tls.TLSSocket) => void,
  ): Promise<TlsTerminator> {
    const t = new TlsTerminator(o, onSocket);
    await new Promise<void>((resolve, reject) => {
      t.#server.once("error", reject);
      t.#server.listen(o.port, o.hostname, () => {
        t.#server.off("error", reject);
        resolve();
      });
    });
    // Errors after listening (accept failures) are per connection; the server goes on.
    t.#server.on("error", () => {});
    const a = t.#server.address();
    if (a === null || typeof a === "string") throw new Error("TLS listener has no address");
    t.addr = { transport: "tcp", hostname: a.address, port: a.port };
    return t;
  }

  /** Serves `pem` to every handshake from now on; open connections keep their certificate. */
  setCertificate(pem: CertificatePem): void {
    this.#server.setSecureContext({ cert: pem.cert, key: pem.key });
  }

  /** Stops accepting. */
  close(): void {
    if (this.#closing) return;
    this.#closing = true;
    this.#server.close();
  }

  /** Resolves once the server and every socket it accepted are closed. */
  closed(): Promise<void> {
    return this.#closed;
  }

  /** Closes every socket now. */
  destroy(): void {
    this.close();
    for (const s of this.#sockets) s.destroy();
  }
}

/** The own front's HTTPS listener: a `TlsTerminator` whose sockets are accepted one by one. */
export interface TlsFrontListener extends FrontListener {
  readonly addr: Deno.NetAddr;
  /** Serves `pem` to every handshake from now on (see `TlsTerminator.setCertificate`). */
  setCertificate(pem: CertificatePem): void;
}

/** Listens for HTTPS clients of the own HTTP/1.1 front. */
export async function listenTlsFront(o: TlsListenOptions): Promise<TlsFrontListener> {
  const ready: NodeSocketConn[] = [];
  const waiting: PromiseWithResolvers<NodeSocketConn>[] = [];
  let closed = false;
  const t = await TlsTerminator.listen(o, (s) => {
    const conn = new NodeSocketConn(s);
    const w = waiting.shift();
    if (w) w.resolve(conn);
    else ready.push(conn);
  });
  const close = () => {
    if (closed) return;
    closed = true;
    t.close();
    for (const c of ready.splice(0)) c.close();
    for (const w of waiting.splice(0)) w.reject(new Error("listener closed"));
  };
  return {
    addr: t.addr,
    accept() {
      const c = ready.shift();
      if (c) return Promise.resolve(c);
      if (closed) return Promise.reject(new Error("listener closed"));
      const w = Promise.withResolvers<NodeSocketConn>();
      waiting.push(w);
      return w.promise;
    },
    close,
    closed: () => t.closed(),
    destroy: () => {
      close();
      t.destroy();
    },
    setCertificate: (pem) => t.setCertificate(pem),
  };
}
