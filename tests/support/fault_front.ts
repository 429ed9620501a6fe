/**
 * A worker that breaks streams mid-way: a loopback HTTP front relaying to a real (simulated)
 * worker, which cuts each stream it is told to after a number of events — its connection dropped
 * without the body's end (`die`), held open with nothing more (`stall`), or ended cleanly but
 * without `data: [DONE]` (`truncate`). Counts what it saw, with an event on each change.
 */

/** What the front does to the streams it relays. */
export interface Fault {
  kind: "die" | "stall" | "truncate";
  /** Events relayed before the fault. */
  afterEvents: number;
}

const enc = new TextEncoder();

/** A running front. */
export class FaultFront {
  /** The fault applied to each stream from now on (null: relay whole). */
  fault: Fault | null;
  readonly seen = { requests: 0, faulted: 0, cancelled: 0, bodies: [] as unknown[] };
  readonly #server: Deno.HttpServer<Deno.NetAddr>;
  readonly #target: string;
  readonly #listeners = new Set<() => void>();
  readonly #held = new Set<() => void>();

  constructor(target: string, fault: Fault | null) {
    this.#target = target;
    this.fault = fault;
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      (req) => this.#handle(req),
    );
  }

  get url(): string {
    return `http://127.0.0.1:${this.#server.addr.port}`;
  }

  subscribe(l: () => void): () => void {
    this.#listeners.add(l);
    return () => this.#listeners.delete(l);
  }

  #changed(): void {
    for (const l of this.#listeners) l();
  }

  async close(): Promise<void> {
    for (const release of this.#held) release();
    await this.#server.shutdown();
  }

  async #handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const body = req.method === "POST" ? await req.text() : undefined;
    const upstream = await fetch(this.#target + url.pathname, {
      method: req.method,
      headers: req.headers,
      body,
    });
    const fault = this.fault;
    const stream = upstream.headers.get("content-type")?.includes("text/event-stream");
    if (!stream || fault === null || body === undefined) return upstream;
    this.seen.requests++;
    this.seen.bodies.push(JSON.parse(body));
    this.#changed();
    const reader = upstream.body!.getReader();
    const dec = new TextDecoder();
    let buffered = "";
    let events = 0;
    const queue: string[] = [];
    return new Response(
      new ReadableStream<Uint8Array>({
        pull: async (c) => {
          while (queue.length === 0) {
            const { value, done } = await reader.read();
            if (done) {
              c.close();
              return;
            }
            buffered += dec.decode(value, { stream: true });
            const parts = buffered.split("\n\n");
            buffered = parts.pop()!;
            queue.push(...parts.map((p) => p + "\n\n"));
          }
          if (events < fault.afterEvents) {
            events++;
            c.enqueue(enc.encode(queue.shift()!));
            return;
          }
          reader.cancel().catch(() => {});
          this.seen.faulted++;
          this.#changed();
          if (fault.kind === "die") c.error(new Error("worker died mid-stream"));
          else if (fault.kind === "truncate") c.close();
          else {
            await new Promise<void>((resolve) => {
              this.#held.add(resolve);
              req.signal.addEventListener("abort", () => resolve(), { once: true });
            });
          }
        },
        cancel: () => {
          this.seen.cancelled++;
          this.#changed();
          reader.cancel().catch(() => {});
        },
      }),
      { status: upstream.status, headers: upstream.headers },
    );
  }
}
