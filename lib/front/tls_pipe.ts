/**
 * `Deno.serve` behind the TLS terminator (`--http-server deno` with HTTPS): each client's
 * decrypted stream is piped to a plaintext `Deno.serve` on a loopback port, and its answers
 * back. `Deno.serve` cannot change its certificate either, nor serve a socket it did not accept,
 * so the certificate lives in front of it (`tls_listener.ts`). Whatever the client negotiated by
 * ALPN passes through: `Deno.serve` tells HTTP/2 from HTTP/1.1 by the first bytes.
 *
 * Cost: every byte crosses a loopback connection once more, in both directions. Ends: the client
 * leaving destroys the loopback connection at once (`Deno.serve` then cancels its request); the
 * server closing it ends the client's stream after what is queued (`endThenDestroy`).
 */

import net from "node:net";
import type { TLSSocket } from "node:tls";
import { endThenDestroy } from "./node_socket.ts";

/**
 * Pipes the client socket `s` to `host:port` (loopback) and back until either side closes.
 * `clients` maps the loopback connection's local port (the `remoteAddr.port` `Deno.serve` sees)
 * to the client's IP while it is open: every request would otherwise come from 127.0.0.1.
 */
export function pipeToLoopback(
  s: TLSSocket,
  host: string,
  port: number,
  clients: Map<number, string>,
): void {
  const client = s.remoteAddress;
  const inner = net.connect({ host, port });
  // Before any byte is written (writes wait for `connect`), so before Deno.serve sees a request.
  inner.once("connect", () => {
    const local = inner.localPort;
    if (local === undefined || client === undefined) return;
    clients.set(local, client);
    inner.once("close", () => clients.delete(local));
  });
  inner.setNoDelay(true);
  s.setNoDelay(true);
  s.pipe(inner, { end: false });
  inner.pipe(s, { end: false });
  const gone = () => {
    s.destroy();
    inner.destroy();
  };
  s.on("error", gone);
  inner.on("error", gone);
  // The client ended or left: the request it leaves is cancelled.
  s.on("end", () => inner.destroy());
  s.on("close", () => inner.destroy());
  inner.on("end", () => endThenDestroy(s));
}
