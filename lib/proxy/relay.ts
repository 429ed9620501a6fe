/**
 * Relays a worker's SSE body to the client chunk by chunk, as it arrives, with backpressure
 * (one chunk is read from the worker per chunk the client takes). The first chunk was already
 * read by the caller (so a worker that dies before its first byte can still be retried
 * elsewhere). If the worker's stream breaks, the client gets an SSE `error` event and a clean
 * end instead of a cut connection; if the client leaves, the worker's body is cancelled, which
 * closes that connection so the engine aborts the request.
 */

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
 * A client-facing stream: `first`, then the rest of `reader`. `onEnd` runs once, with the
 * error when the worker's stream broke.
 */
export function relaySse(
  first: Uint8Array,
  reader: ReadableStreamDefaultReader<Uint8Array>,
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
        const r = await reader.read();
        if (r.done) {
          ctrl.close();
          end("done");
          return;
        }
        last = r.value;
        ctrl.enqueue(r.value);
      } catch (err) {
        if (ended) return;
        const msg = `worker ${workerUrl} stream broke: ${(err as Error)?.message ?? String(err)}`;
        ctrl.enqueue(sseErrorEvent(msg, "upstream_stream_error", !endsWithBlankLine(last)));
        ctrl.close();
        end("error", err);
      }
    },
    cancel(reason) {
      end("cancelled");
      reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}
