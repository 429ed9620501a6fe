/**
 * The `Continuer` of one stream (`relay.ts`): keeps what the client was sent, and when the
 * worker's stream breaks, reads the text so far back, asks another worker for the rest
 * (`CallContext.resume`, up to `--stream-migration-limit` times a request) and hands the relay a
 * source of that worker's events rewritten into the client's stream (`continuation.ts`).
 */

import { type ChunkSource, type Reply, replyHeader } from "../../core/http.ts";
import type { Endpoint } from "../../core/types.ts";
import type { Resume } from "../types.ts";
import { budgetSpent, continuationBody, Rewriter, type SoFar, Transcript } from "./continuation.ts";
import type { Continuer } from "./relay.ts";

const encoder = new TextEncoder();
const DONE = encoder.encode("data: [DONE]\n\n");

/** How one break of a stream was answered (`smg_stream_continuations_total{result}`). */
export type ContinuationResult =
  | "continued" // another worker goes on
  | "completed" // nothing was left to generate: the stream ends cleanly
  | "blocked" // what was sent cannot be continued (tool calls, logprobs, …)
  | "limit" // the request's continuations are used up
  | "failed"; // no worker took the rest

/** What a continuer is told and tells. */
export interface ContinuerInit {
  endpoint: Endpoint;
  /** The client's request body. */
  body: Record<string, unknown>;
  /** The id of the worker serving the stream now. */
  worker: string;
  /** Continuations allowed for the request. */
  limit: number;
  resume: Resume;
  /** Each break's result, with what was sent so far and why it stopped if it did. */
  outcome: (result: ContinuationResult, s: SoFar | null, why?: string) => void;
}

function isSource(body: Reply["body"]): body is ChunkSource {
  return body !== null && typeof (body as ChunkSource).read === "function";
}

/** Continues one stream on other workers (see the module comment). */
export class StreamContinuer implements Continuer {
  readonly #o: ContinuerInit;
  readonly #transcript: Transcript;
  readonly #failed: Set<string>;
  #left: number;

  constructor(o: ContinuerInit) {
    this.#o = o;
    this.#transcript = new Transcript(o.endpoint);
    this.#failed = new Set([o.worker]);
    this.#left = o.limit;
  }

  sent(chunk: Uint8Array): void {
    this.#transcript.add(chunk);
  }

  async next(_err: unknown): Promise<ChunkSource | Uint8Array | null> {
    const o = this.#o;
    if (this.#left <= 0) {
      o.outcome("limit", null);
      return null;
    }
    this.#left--;
    const s = this.#transcript.read();
    if (s.blocked !== null) {
      o.outcome("blocked", s, s.blocked);
      return null;
    }
    if (s.finished) {
      o.outcome("completed", s);
      return DONE;
    }
    const body = continuationBody(o.endpoint, o.body, s);
    if (body === null) {
      o.outcome("completed", s, "token budget spent");
      return budgetSpent(o.endpoint, s);
    }
    let reply: Reply;
    try {
      reply = await o.resume({ body }, this.#failed, s.pieces);
    } catch (e) {
      o.outcome("failed", s, (e as Error)?.message ?? String(e));
      return null;
    }
    const src = reply.body;
    if (reply.status !== 200 || !isSource(src)) {
      if (isSource(src)) src.cancel();
      o.outcome("failed", s, `status ${reply.status}`);
      return null;
    }
    const worker = replyHeader(reply.headers, "x-smg-routed-worker-id");
    if (worker) this.#failed.add(worker);
    o.outcome("continued", s);
    const rewriter = new Rewriter(s, o.endpoint);
    return {
      async read() {
        for (;;) {
          const chunk = await src.read();
          if (chunk === null) return null;
          const out = rewriter.push(chunk);
          if (out.byteLength > 0) return out;
        }
      },
      cancel: () => src.cancel(),
    };
  }
}
