/**
 * Fuzz family `http`: raw HTTP/1.1 inputs (`http_requests.ts`) against the gateway's own front,
 * over TCP, in front of a recording worker. Per connection the client writes its bytes, then
 * reads answers until the front closes; after `QUIET_MS` of silence with nothing outstanding
 * it half-closes (the front must then answer or close within `HANG_MS`).
 *
 * Oracles:
 * - no hang: every connection ends (answers, then a close) within `HANG_MS` of going quiet;
 * - no 5xx for client input, but 501 and 505 (RFC 9112's answers to an unknown transfer coding
 *   and version); no malformed response;
 * - no smuggling: every request the worker received while its client was still listening was
 *   answered to that client (`x-request-id` echoed), counted over the whole run; the client does
 *   not go quiet while a request of its own is at the worker unanswered;
 * - the gateway still answers `/health` after the run.
 */

import type { Random } from "../../lib/core/clock.ts";
import { startGateway } from "../gateway.ts";
import type { FuzzFamily, FuzzTarget, Outcome } from "./driver.ts";
import { tagOf } from "./http_request.ts";
import { framingInput } from "./http_requests.ts";
import { RecordingWorker } from "./recording_worker.ts";
import { ResponseReader } from "./response_reader.ts";

/** Silence after which a client with nothing outstanding half-closes. */
const QUIET_MS = 60;
/** Longest a connection may stay open once its client stopped waiting on the worker. */
const HANG_MS = 5000;

/** Statuses the front may answer to bad client input. */
const ALLOWED_5XX = new Set([501, 505]);

/** What the run knows of one input while it runs. */
interface Conn {
  /** The client stopped listening (half-closed, closed, or the front closed). */
  done: boolean;
  /** Requests the worker received for it while it listened. */
  atWorker: string[];
  /** `x-request-id`s of its answers. */
  answered: string[];
}

/** Where a framing target sends its inputs, and how long it lets a connection hang. */
export interface FramingOptions {
  /** The front's port on 127.0.0.1. */
  port: number;
  /** Stops the front, letting open connections finish (after it, nothing reaches a worker). */
  shutdown(): Promise<void>;
  /** Stops the rest (the worker). */
  close(): Promise<void>;
  /** Longest a connection may stay open once its client stopped waiting (default 5000 ms). */
  hangMs?: number;
}

/** The framing fuzzer's target; `received` must hear every request its worker gets. */
export class FramingTarget implements FuzzTarget {
  readonly #o: FramingOptions;
  readonly #port: number;
  readonly #hangMs: number;
  readonly #conns = new Map<number, Conn>();
  /** Requests that must have been answered: the worker got them while their client listened. */
  readonly #mustAnswer: string[] = [];
  /** Every `x-request-id` some client was answered with, counted. */
  readonly #answered = new Map<string, number>();
  /** Requests the worker got that no intact tag traces to a connection. */
  untraced = 0;
  #closed = false;

  constructor(o: FramingOptions) {
    this.#o = o;
    this.#port = o.port;
    this.#hangMs = o.hangMs ?? HANG_MS;
  }

  /** The worker got a request: whose, and was its client still listening. */
  received(requestId: string, body: string): void {
    const index = tagOf(requestId) >= 0 ? tagOf(requestId) : tagOf(body);
    const c = this.#conns.get(index);
    if (index < 0) this.untraced++;
    if (c && !c.done) {
      c.atWorker.push(requestId);
      this.#mustAnswer.push(requestId);
    }
  }

  async run(index: number, r: Random): Promise<Outcome> {
    const input = framingInput(r, index);
    const c: Conn = { done: false, atWorker: [], answered: [] };
    this.#conns.set(index, c);
    const violations: string[] = [];
    const labels: string[] = [];
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: this.#port });
    const reader = new ResponseReader(conn);
    try {
      try {
        for (const s of input.segments) await conn.write(s);
      } catch { /* the front closed first: read what it said */ }
      if (input.earlyClose) {
        c.done = true;
        return { labels: ["early-close"], violations, input: input.describe };
      }
      let quietSince = -1;
      let halfClosed = false;
      for (;;) {
        const ev = await reader.next(QUIET_MS);
        if (ev.kind === "response") {
          quietSince = -1;
          const { status, requestId } = ev.response;
          c.answered.push(requestId);
          this.#answered.set(requestId, (this.#answered.get(requestId) ?? 0) + 1);
          labels.push(String(status));
          if (status >= 500 && !ALLOWED_5XX.has(status)) violations.push(`answered ${status}`);
          continue;
        }
        if (ev.kind === "malformed") {
          violations.push(`malformed response: ${ev.detail}`);
          break;
        }
        if (ev.kind === "closed") break;
        // Quiet: wait while a request of ours is at the worker unanswered, else stop listening.
        const now = performance.now();
        if (quietSince < 0) quietSince = now;
        if (now - quietSince > this.#hangMs) {
          violations.push(
            halfClosed
              ? `no close ${this.#hangMs} ms after the client half-closed`
              : `no answer ${this.#hangMs} ms after the worker got ${unanswered(c).join(",")}`,
          );
          break;
        }
        if (!halfClosed && unanswered(c).length === 0) {
          c.done = true;
          halfClosed = true;
          quietSince = now;
          try {
            await conn.closeWrite();
          } catch { /* the front closed meanwhile */ }
        }
      }
      if (labels.length === 0) labels.push(halfClosed ? "closed-after-half-close" : "closed");
      return { labels, violations, input: input.describe };
    } finally {
      c.done = true;
      conn.close();
      await reader.settle();
    }
  }

  async finish(): Promise<string[]> {
    const out: string[] = [];
    const health = await fetch(`http://127.0.0.1:${this.#port}/health`);
    await health.body?.cancel();
    if (health.status !== 200) out.push(`/health answered ${health.status} after the run`);
    // Every connection has closed: nothing more reaches the worker once the front drained.
    await this.#shutdown();
    const left = new Map(this.#answered);
    for (const id of this.#mustAnswer) {
      const n = left.get(id) ?? 0;
      if (n === 0) {
        out.push(`request ${JSON.stringify(id)} reached the worker but its client got no answer`);
      } else left.set(id, n - 1);
    }
    return out;
  }

  async #shutdown(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#o.shutdown();
  }

  async close(): Promise<void> {
    await this.#shutdown();
    await this.#o.close();
  }
}

/** The requests of `c` at the worker that it has no answer for yet. */
function unanswered(c: Conn): string[] {
  const left = [...c.answered];
  return c.atWorker.filter((id) => {
    const i = left.indexOf(id);
    if (i < 0) return true;
    left.splice(i, 1);
    return false;
  });
}

/** The raw HTTP/1.1 framing family. */
export const httpFraming: FuzzFamily = {
  name: "http",
  concurrency: 24,
  async start(seed) {
    let target: FramingTarget | null = null;
    const worker = new RecordingWorker((q) => target?.received(q.requestId, q.body));
    const gw = await startGateway([worker.url], {
      maxPayloadSize: 64 * 1024,
      randomSeed: seed,
    }).catch(async (e) => {
      await worker.close();
      throw e;
    });
    target = new FramingTarget({
      port: gw.serving.addr.port,
      shutdown: () => gw.close(),
      close: () => worker.close(),
    });
    return target;
  },
};
