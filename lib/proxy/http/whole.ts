/**
 * A worker's whole (non-streamed) answer read before the client sees any of it, up to a cap:
 * a worker that breaks or stalls mid-body then fails the attempt (a retry on another worker, or
 * the deadline's 504) instead of reaching the client as a 2xx cut short, as SMG, which reads
 * such bodies whole, does. An answer longer than the cap is relayed from there as it comes: what
 * was read, then the rest (a break past the cap still cuts the client's answer).
 */

import { concat } from "../../core/bytes.ts";
import type { UpstreamBody } from "../../upstream/types.ts";

/** Bytes of a whole answer read before replying (8 MiB); answers are rarely a hundredth of it. */
export const WHOLE_ANSWER_MAX_BYTES = 8 * 1024 * 1024;

/** A body already read to its end. */
class ReadBody implements UpstreamBody {
  whole: Uint8Array<ArrayBuffer> | null;

  constructor(bytes: Uint8Array<ArrayBuffer>) {
    this.whole = bytes;
  }

  get done(): boolean {
    return this.whole === null;
  }

  read(): Promise<Uint8Array<ArrayBuffer> | null> {
    const w = this.whole;
    this.whole = null;
    return Promise.resolve(w && w.length ? w : null);
  }

  cancel(): void {
    this.whole = null;
  }
}

/** What was read of a long body, then the rest of it. */
class PrefixedBody implements UpstreamBody {
  readonly whole = null;
  #prefix: Uint8Array<ArrayBuffer> | null;
  readonly #rest: UpstreamBody;

  constructor(prefix: Uint8Array<ArrayBuffer>, rest: UpstreamBody) {
    this.#prefix = prefix;
    this.#rest = rest;
  }

  read(): Promise<Uint8Array<ArrayBuffer> | null> {
    const p = this.#prefix;
    this.#prefix = null;
    return p ? Promise.resolve(p) : this.#rest.read();
  }

  cancel(): void {
    this.#prefix = null;
    this.#rest.cancel();
  }
}

/**
 * `body` read to its end (a body whose `whole` is set), or, past `max` bytes, to be relayed
 * from what was read on. Rejects as `body.read` does when it breaks off or is cancelled.
 */
export async function readWhole(body: UpstreamBody, max: number): Promise<UpstreamBody> {
  if (body.whole) return body;
  const parts: Uint8Array[] = [];
  let size = 0;
  for (let b = await body.read(); b !== null; b = await body.read()) {
    parts.push(b);
    size += b.byteLength;
    if (size > max) return new PrefixedBody(concat(parts, size), body);
  }
  return new ReadBody(concat(parts, size));
}
