/**
 * A listening ZMTP server socket (PUB or ROUTER) over TCP: accepts connections, completes each
 * one's handshake within its deadline (a connection that fails it is closed and forgotten), and
 * hands each peer to a serve function that owns it until it returns; the peer is then closed.
 * A serve function that rejects (a peer out of protocol) loses only its peer. `close` stops
 * listening, closes every connection and resolves once every serve function and
 * writer loop has ended. What a PUB or a ROUTER does with its peers lives in `zmq_pub.ts` and
 * `zmq_replay_server.ts`.
 */

import { closeQuietly } from "./zmtp_io.ts";
import { type ServerSocketType, ZmtpPeer, type ZmtpPeerOptions } from "./zmtp_peer.ts";

/** Where a server socket listens, and its connections' options. */
export interface ZmtpServerOptions extends ZmtpPeerOptions {
  /** Address to listen on (default 127.0.0.1). */
  hostname?: string;
  /** Port to listen on; 0 picks a free one (default 0). */
  port?: number;
}

/** Serves one peer until it returns (or rejects: the peer is closed either way). */
export type ServePeer = (peer: ZmtpPeer) => Promise<void>;

/** A listening PUB or ROUTER. */
export class ZmtpServer {
  /** PUB or ROUTER. */
  readonly type: ServerSocketType;
  readonly #listener: Deno.Listener;
  readonly #opts: ZmtpServerOptions;
  readonly #serve: ServePeer;
  /** Connections still in their handshake. */
  readonly #pending = new Set<Deno.Conn>();
  readonly #peers = new Set<ZmtpPeer>();
  readonly #tasks = new Set<Promise<void>>();
  readonly #accepting: Promise<void>;
  #closed = false;

  /** Listens at once (throws `Deno.errors.AddrInUse` and the like) and starts accepting. */
  constructor(type: ServerSocketType, opts: ZmtpServerOptions, serve: ServePeer) {
    this.type = type;
    this.#opts = opts;
    this.#serve = serve;
    this.#listener = Deno.listen({ hostname: opts.hostname ?? "127.0.0.1", port: opts.port ?? 0 });
    this.#accepting = this.#accept();
  }

  /** The port listened on. */
  get port(): number {
    return (this.#listener.addr as Deno.NetAddr).port;
  }

  /** `tcp://host:port` of the listening address (a wildcard host as 127.0.0.1). */
  get endpoint(): string {
    const host = (this.#listener.addr as Deno.NetAddr).hostname;
    const h = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
    return `tcp://${h.includes(":") ? `[${h}]` : h}:${this.port}`;
  }

  /** The peers connected now (handshake done). */
  get peers(): ReadonlySet<ZmtpPeer> {
    return this.#peers;
  }

  /** Stops listening and closes every connection; resolves once all their work has ended. */
  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      try {
        this.#listener.close();
      } catch { /* already closed */ }
      for (const c of this.#pending) closeQuietly(c);
      for (const p of this.#peers) p.close();
    }
    await this.#accepting;
    while (this.#tasks.size > 0) await Promise.all(this.#tasks);
  }

  /** Accepts until closed; a listener that fails otherwise than a reset connection stops. */
  async #accept(): Promise<void> {
    while (!this.#closed) {
      let conn: Deno.Conn;
      try {
        conn = await this.#listener.accept();
      } catch (e) {
        if (e instanceof Deno.errors.ConnectionAborted && !this.#closed) continue;
        return;
      }
      if (this.#closed) {
        closeQuietly(conn);
        return;
      }
      const task: Promise<void> = this.#handle(conn).finally(() => this.#tasks.delete(task));
      this.#tasks.add(task);
    }
  }

  /** Handshakes `conn` and serves the peer; never rejects. */
  async #handle(conn: Deno.Conn): Promise<void> {
    this.#pending.add(conn);
    let peer: ZmtpPeer;
    try {
      peer = await ZmtpPeer.accept(conn, this.type, this.#opts);
    } catch {
      return; // Not a peer we serve (or gone): nothing to keep.
    } finally {
      this.#pending.delete(conn);
    }
    if (this.#closed) peer.close();
    this.#peers.add(peer);
    try {
      await this.#serve(peer);
    } catch {
      // A peer out of protocol: its connection goes, the server goes on.
    } finally {
      peer.close();
      this.#peers.delete(peer);
      await peer.settled();
    }
  }
}
