/**
 * Relays a worker's SSE body to the client as it arrives, with backpressure (one read from the
 * worker per chunk the client takes; a read returns everything queued, so events that arrived
 * together leave in one write). The first chunk was already
 * read by the caller (so a worker that dies before its first byte can still be retried
 * elsewhere). If the worker's stream breaks, the client gets an SSE `error` event and a clean
 * end instead of a cut connection; if the client leaves, the worker's body is cancelled, which
 * closes that connection so the engine aborts the request. `bodyStream` is the same without the
 * SSE error event, for non-streaming bodies that did not arrive whole.
 */

import type { UpstreamBody } from "../upstream/types.ts";

/** What a relay reads: the worker's body (`UpstreamBody` satisfies it). */
export type ChunkSource = Pick<UpstreamBody, "read" | "cancel">;

/** How a relayed stream ended. */
export type RelayEnd = "done" | "error" | "cancelled";

const encoder = new TextEncoder();

/** The SSE event sent when the worker's stream breaks mid-way. */
export function sseErrorEvent(message: string, code: string, needsBoundary: boolean): Uint8Array {
  const payload = JSON.stringify({
    error: { message, type: "Bad Gateway", code, param: null },
  });
  return encoder.encode(`${needsBoundary ? "\n\n" : ""}event: error\ndata: ${payload}\n\n`);
}

/** Whether `chunk` ends an SSE event: a blank line (`\n\n`, `\r\r` or `\r\n\r\n`). */
function endsWithBlankLine(chunk: Uint8Array): boolean {
  const n = chunk.byteLength;
  const at = (i: number) => chunk[n - i];
  if (n >= 4 && at(4) === 13 && at(3) === 10 && at(2) === 13 && at(1) === 10) return true;
  return n >= 2 && at(1) === at(2) && (at(1) === 10 || at(1) === 13);
}

/**
 * A client-facing stream: `first`, then the rest of `source`. `onEnd` runs once, with the
 * error when the worker's stream broke.
 */
export function relaySse(
  first: Uint8Array,
  source: ChunkSource,
  workerUrl: string,
  onEnd: (how: RelayEnd, err?: unknown) => void,
): ReadableStream<Uint8Array> {
  let pending: Uint8Array | null = first;
  let last: Uint8Array = first;
  let ended = false;
  const end = (how: RelayEnd, err?: unknown) => {
    if (ended) return;
    ended = true;
    onEnd(how, err);
  };
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      if (pending) {
        ctrl.enqueue(pending);
        pending = null;
        return;
      }
      try {
        const chunk = await source.read();
        if (chunk === null) {
          ctrl.close();
          end("done");
          return;
        }
        last = chunk;
        ctrl.enqueue(chunk);
      } catch (err) {
        if (ended) return;
        const msg = `worker ${workerUrl} stream broke: ${(err as Error)?.message ?? String(err)}`;
        ctrl.enqueue(sseErrorEvent(msg, "upstream_stream_error", !endsWithBlankLine(last)));
        ctrl.close();
        end("error", err);
      }
    },
    cancel() {
      end("cancelled");
      source.cancel();
    },
  }, { highWaterMark: 0 });
}

/** A client-facing stream of `source` as it is read; a break errors the stream. */
export function bodyStream(source: ChunkSource): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      const chunk = await source.read();
      if (chunk === null) ctrl.close();
      else ctrl.enqueue(chunk);
    },
    cancel() {
      source.cancel();
    },
  }, { highWaterMark: 0 });
}
