/**
 * `Deno.serve`'s side of the gateway's exchange types (`lib/core/http.ts`): a fetch `Request` as
 * an `Inbound`, a `Reply` as a `Response`, and a route handler's `Response` as a `Reply`. Used by
 * `Gateway.handle` (tests, `--http-server deno`) and by the own front for the non-inference
 * routes, whose handlers speak `Request` and `Response`.
 */

import type { Abortable, HeaderMap, Inbound, Reply } from "../core/http.ts";
import { isChunkSource } from "../core/http.ts";
import { readBody } from "../proxy/body.ts";
import { bodyStream } from "../proxy/http/relay.ts";

/** An `AbortSignal` seen as an `Abortable`. */
class SignalAbort implements Abortable {
  readonly #signal: AbortSignal;
  constructor(signal: AbortSignal) {
    this.#signal = signal;
  }
  get aborted(): boolean {
    return this.#signal.aborted;
  }
  get reason(): unknown {
    return this.#signal.reason;
  }
  on(fn: () => void): void {
    if (this.#signal.aborted) fn();
    else this.#signal.addEventListener("abort", fn, { once: true });
  }
  off(fn: () => void): void {
    this.#signal.removeEventListener("abort", fn);
  }
}

/** A fetch `Request` as an `Inbound`. */
export class RequestInbound implements Inbound {
  readonly #req: Request;
  readonly path: string;
  readonly gone: Abortable;
  /** The client's IP address (from `Deno.serve`'s connection info), when given. */
  readonly remote?: string;

  constructor(req: Request, remote?: string) {
    this.#req = req;
    this.remote = remote;
    this.path = pathOf(req.url);
    this.gone = new SignalAbort(req.signal);
  }
  get method(): string {
    return this.#req.method;
  }
  get url(): string {
    return this.#req.url;
  }
  get headers(): HeaderMap {
    return this.#req.headers;
  }
  bytes(max: number): Promise<Uint8Array<ArrayBuffer>> {
    return readBody(this.#req, max);
  }
  request(): Promise<Request> {
    return Promise.resolve(this.#req);
  }
}

/** The path of an absolute request URL, without parsing the whole URL. */
export function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start < 0) return "/";
  const q = url.indexOf("?", start);
  return q < 0 ? url.slice(start) : url.slice(start, q);
}

/** A `Reply` as a `Response`. */
export function toResponse(r: Reply): Response {
  const b = r.body;
  const body = isChunkSource(b) ? bodyStream(b) : b as BodyInit | null;
  return new Response(body, { status: r.status, headers: r.headers });
}

/**
 * A handler's `Response` as a `Reply`: an event stream stays a stream, any other body is read
 * whole, so the front can send its length.
 */
export async function fromResponse(res: Response): Promise<Reply> {
  const headers: [string, string][] = [];
  for (const pair of res.headers) headers.push(pair);
  const sse = res.headers.get("content-type")?.startsWith("text/event-stream");
  const body = res.body === null ? null : sse ? res.body : await res.bytes();
  return { status: res.status, headers, body };
}
