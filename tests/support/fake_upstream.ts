/**
 * A scripted `Upstream` for proxy unit tests: per worker base URL, a queue of replies (a
 * status with body chunks, optionally breaking after them, or a thrown transport error); every
 * request is recorded, and every body records whether it was read to its end or cancelled.
 */

import {
  type HeaderList,
  type Upstream,
  type UpstreamBody,
  UpstreamError,
  type UpstreamRequest,
  type UpstreamResponse,
} from "../../lib/upstream/types.ts";

const enc = new TextEncoder();

/** One scripted reply. */
export type FakeReply =
  | {
    status: number;
    chunks?: string[];
    headers?: HeaderList;
    /** The body breaks after its chunks. */
    breakAfter?: boolean;
    /** The body never ends after its chunks (a read waits until it is cancelled). */
    hang?: boolean;
  }
  | { error: UpstreamError["kind"] };

/** A body that gives its chunks one read at a time. */
export class FakeBody implements UpstreamBody {
  readonly whole = null;
  readonly #chunks: string[];
  readonly #breakAfter: boolean;
  readonly #hang: boolean;
  #wake: (() => void) | null = null;
  /** Read to its end. */
  ended = false;
  /** Cancelled by the proxy. */
  cancelled = false;

  constructor(chunks: string[], breakAfter: boolean, hang = false) {
    this.#chunks = [...chunks];
    this.#breakAfter = breakAfter;
    this.#hang = hang;
  }

  read(): Promise<Uint8Array<ArrayBuffer> | null> {
    if (this.cancelled) return Promise.resolve(null);
    const next = this.#chunks.shift();
    if (next !== undefined) return Promise.resolve(enc.encode(next));
    if (this.#hang) {
      return new Promise((_, reject) => {
        this.#wake = () => reject(new UpstreamError("closed", "cancelled"));
      });
    }
    if (this.#breakAfter) {
      return Promise.reject(new UpstreamError("closed", "worker body broke off: reset"));
    }
    this.ended = true;
    return Promise.resolve(null);
  }

  cancel(): void {
    this.cancelled = true;
    this.#wake?.();
  }
}

/** A request the fake saw, with the body it answered. */
export interface FakeCall {
  base: string;
  req: UpstreamRequest;
  body: FakeBody | null;
}

/** The scripted upstream. */
export class FakeUpstream implements Upstream {
  readonly calls: FakeCall[] = [];
  readonly #replies: Record<string, FakeReply[]>;

  /** Replies per base URL; the last reply of a queue repeats. */
  constructor(replies: Record<string, FakeReply[]>) {
    this.#replies = replies;
  }

  send(req: UpstreamRequest): Promise<UpstreamResponse> {
    const queue = this.#replies[req.base];
    if (!queue) throw new Error(`no script for ${req.base}`);
    const r = queue.length > 1 ? queue.shift()! : queue[0];
    const call: FakeCall = { base: req.base, req, body: null };
    this.calls.push(call);
    if ("error" in r) return Promise.reject(new UpstreamError(r.error, `scripted ${r.error}`));
    const body = call.body = new FakeBody(r.chunks ?? [], r.breakAfter ?? false, r.hang);
    return Promise.resolve({ status: r.status, headers: r.headers ?? [], body });
  }

  /** The calls to `base`. */
  to(base: string): FakeCall[] {
    return this.calls.filter((c) => c.base === base);
  }

  close(): void {}
}
