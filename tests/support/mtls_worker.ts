/**
 * An `https://` worker that requires a client certificate, for the gateway's worker mTLS: a
 * `node:tls` server (Deno.serve cannot ask for client certificates) that verifies the client's
 * certificate against a CA and pipes each accepted connection to a plaintext test worker. It
 * records the subject CN of every client it let in and counts the handshakes it refused, with an
 * event on each (`waiters`).
 */

import net from "node:net";
import tls from "node:tls";
import { Waiters } from "../../support/wait.ts";

/** A TLS front requiring client certificates, in front of `127.0.0.1:targetPort`. */
export class MtlsWorker {
  readonly #server: tls.Server;
  readonly #sockets = new Set<net.Socket>();
  /** Subject CNs of the clients let in, in order. */
  readonly accepted: string[] = [];
  /** Handshakes refused (no certificate, or one the CA did not sign). */
  refused = 0;
  /** Poked on every handshake, accepted or refused. */
  readonly waiters = new Waiters();
  port = 0;

  private constructor(targetPort: number, o: { cert: string; key: string; ca: string }) {
    this.#server = tls.createServer({
      cert: o.cert,
      key: o.key,
      ca: o.ca,
      requestCert: true,
      rejectUnauthorized: true,
    }, (s) => {
      const cn = s.getPeerCertificate()?.subject?.CN;
      this.accepted.push(Array.isArray(cn) ? cn.join(",") : cn ?? "");
      this.waiters.poke();
      const inner = net.connect({ host: "127.0.0.1", port: targetPort });
      s.pipe(inner);
      inner.pipe(s);
      const gone = () => {
        s.destroy();
        inner.destroy();
      };
      s.on("error", gone);
      inner.on("error", gone);
      s.on("close", gone);
      inner.on("close", gone);
    });
    this.#server.on("connection", (raw: net.Socket) => {
      this.#sockets.add(raw);
      raw.once("close", () => this.#sockets.delete(raw));
    });
    this.#server.on("tlsClientError", () => {
      this.refused++;
      this.waiters.poke();
    });
  }

  /** Listens on a free loopback port. */
  static async start(
    targetPort: number,
    o: { cert: string; key: string; ca: string },
  ): Promise<MtlsWorker> {
    const w = new MtlsWorker(targetPort, o);
    await new Promise<void>((resolve) => w.#server.listen(0, "127.0.0.1", resolve));
    w.port = (w.#server.address() as net.AddressInfo).port;
    return w;
  }

  /** Its `https://` URL. */
  get url(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /** Stops listening and cuts every connection. */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const s of this.#sockets) s.destroy();
    await closed;
  }
}
