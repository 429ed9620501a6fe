/**
 * The `Upstream` interface over a `fetch` function: for tests that script worker replies as
 * `Response`s, and for workers `Http1Client` does not speak (HTTP/2). `fetch` decodes
 * compressed bodies, so `content-encoding` and `content-length` are left out of the headers.
 */

import {
  type HeaderList,
  type Upstream,
  type UpstreamBody,
  UpstreamError,
  type UpstreamRequest,
  type UpstreamResponse,
} from "./types.ts";

/** A `fetch`-shaped function. */
export type FetchFn = (url: string, init: RequestInit) => Promise<Response>;

class FetchBody implements UpstreamBody {
  readonly whole = null;
  readonly #reader: ReadableStreamDefaultReader<Uint8Array<ArrayBuffer>> | null;

  constructor(body: ReadableStream<Uint8Array<ArrayBuffer>> | null) {
    this.#reader = body ? body.getReader() : null;
  }

  async read(): Promise<Uint8Array<ArrayBuffer> | null> {
    if (!this.#reader) return null;
    try {
      const r = await this.#reader.read();
      return r.done ? null : r.value;
    } catch (e) {
      throw new UpstreamError("closed", `worker body broke off: ${(e as Error)?.message ?? e}`, {
        cause: e,
      });
    }
  }

  cancel(): void {
    this.#reader?.cancel().catch(() => {});
  }
}

/** `Upstream` over `fetchFn`; `close` runs `onClose`. */
export class FetchUpstream implements Upstream {
  readonly #fetch: FetchFn;
  readonly #onClose: () => void;

  /** Over `fetchFn` (default: the global `fetch`). */
  constructor(fetchFn: FetchFn = fetch, onClose: () => void = () => {}) {
    this.#fetch = fetchFn;
    this.#onClose = onClose;
  }

  async send(req: UpstreamRequest): Promise<UpstreamResponse> {
    let res: Response;
    try {
      res = await this.#fetch(req.base + req.path, {
        method: req.method,
        headers: req.headers,
        body: req.body as Uint8Array<ArrayBuffer> | null,
        signal: req.cancel.signal(),
      });
    } catch (e) {
      if (req.cancel.aborted) {
        throw new UpstreamError("aborted", "worker request cancelled", { cause: e });
      }
      throw new UpstreamError("connect", (e as Error)?.message ?? String(e), { cause: e });
    }
    const headers: HeaderList = [];
    for (const [k, v] of res.headers) {
      if (k !== "content-encoding" && k !== "content-length") headers.push([k, v]);
    }
    return { status: res.status, headers, body: new FetchBody(res.body) };
  }

  close(): void {
    this.#onClose();
  }
}
