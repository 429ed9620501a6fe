/**
 * Prefill/decode disaggregation between simulated workers, the way sglang pairs them: the
 * gateway sends the same request to a prefill and a decode worker with `bootstrap_host`,
 * `bootstrap_port` and `bootstrap_room`; the prefill worker computes the prompt's KV and marks
 * the room ready on its bootstrap port; the decode worker waits for that room before decoding
 * (its KV "arrives", so it does no prefill of its own).
 *
 * The bootstrap protocol here is ours (sglang's transfer engines are not simulated):
 * `GET /rooms/{room}?wait_ms=N` answers 200 once the room is ready, 404 if it is not within N ms.
 */

/** How long a ready room is remembered. */
const ROOM_TTL_MS = 120_000;

/** The bootstrap fields of a PD request, when present and well formed. */
export interface Bootstrap {
  /** Host of the prefill worker's bootstrap server. */
  host: string;
  /** Its port. */
  port: number;
  /** The room the two legs share. */
  room: string;
}

/** Reads `bootstrap_host/port/room` from a body (the first element of batched arrays). */
export function bootstrapOf(body: Record<string, unknown>): Bootstrap | null {
  const first = (v: unknown) => (Array.isArray(v) ? v[0] : v);
  const host = first(body.bootstrap_host);
  const port = first(body.bootstrap_port);
  const room = first(body.bootstrap_room);
  if (room === undefined || room === null) return null;
  return {
    host: typeof host === "string" ? host : "127.0.0.1",
    port: typeof port === "number" ? port : 0,
    room: String(room),
  };
}

/** The prefill side: rooms whose KV is ready, served on the bootstrap port. */
export class BootstrapRooms {
  readonly #ready = new Map<string, number>();
  readonly #waiters = new Map<string, Set<() => void>>();
  readonly #server: Deno.HttpServer<Deno.NetAddr>;
  readonly #now: () => number;

  /** Listens on `host:port` (0 picks a port). */
  constructor(host: string, port: number, now: () => number = () => performance.now()) {
    this.#now = now;
    this.#server = Deno.serve(
      { hostname: host, port, onListen: () => {} },
      (req) => this.#handle(req),
    );
  }

  /** The port it listens on. */
  get port(): number {
    return this.#server.addr.port;
  }

  /** Marks `room` ready and wakes whoever waits for it. */
  markReady(room: string): void {
    const now = this.#now();
    for (const [r, at] of this.#ready) if (now - at > ROOM_TTL_MS) this.#ready.delete(r);
    this.#ready.set(room, now);
    for (const wake of this.#waiters.get(room) ?? []) wake();
    this.#waiters.delete(room);
  }

  /** Stops serving; pending waits answer 404. */
  async close(): Promise<void> {
    for (const set of this.#waiters.values()) for (const wake of set) wake();
    await this.#server.shutdown();
  }

  async #handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const m = /^\/rooms\/([^/]+)$/.exec(url.pathname);
    if (!m || req.method !== "GET") return new Response("not found", { status: 404 });
    const room = decodeURIComponent(m[1]);
    const waitMs = Math.min(Number(url.searchParams.get("wait_ms") ?? 0) || 0, 60_000);
    if (!this.#ready.has(room) && waitMs > 0) {
      await new Promise<void>((resolve) => {
        const set = this.#waiters.get(room) ?? new Set();
        this.#waiters.set(room, set);
        const done = () => {
          clearTimeout(timer);
          set.delete(done);
          req.signal.removeEventListener("abort", done);
          resolve();
        };
        const timer = setTimeout(done, waitMs);
        set.add(done);
        req.signal.addEventListener("abort", done, { once: true });
      });
    }
    return this.#ready.has(room)
      ? new Response("ready")
      : new Response("not ready", { status: 404 });
  }
}

/** The decode side: waits until the prefill partner's room is ready; false on timeout or error. */
export async function awaitRoom(
  b: Bootstrap,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<boolean> {
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), timeoutMs + 1000);
  const onAbort = () => stop.abort();
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const host = b.host.includes(":") && !b.host.startsWith("[") ? `[${b.host}]` : b.host;
    const url = `http://${host}:${b.port}/rooms/${encodeURIComponent(b.room)}?wait_ms=${timeoutMs}`;
    const r = await fetch(url, { signal: stop.signal });
    await r.body?.cancel();
    return r.status === 200;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}
