/**
 * Prefill/decode disaggregation, the way sglang pairs workers: per attempt the prefill policy
 * picks a prefill worker and the decode policy a decode worker (each leg with its own instance
 * and state); the body gets `bootstrap_host`, `bootstrap_port` and `bootstrap_room` (arrays, one
 * fresh room per element, for batched requests) and goes to both at once; the client gets the
 * decode response, streamed or whole, while the prefill response is drained in the background
 * (cancelling it could abort the prefill the decode waits for).
 *
 * A failure on either leg frees the other and fails the attempt; the pair is re-selected
 * without the worker that failed (retryable: connect errors, 5xx, 408, 429, a stream dying before
 * its first byte). A leg's own error status is passed through as the worker sent it. No usable
 * pair: 503 `server_selection_failed`.
 */

import { sleep } from "../core/clock.ts";
import { GatewayError } from "../core/errors.ts";
import type { Worker } from "../workers/worker.ts";
import {
  type Attempt,
  type CallContext,
  Calls,
  CLIENT_CLOSED,
  type Failure,
  finalResponse,
  type Sent,
  timeoutError,
} from "./attempt.ts";
import type { PdPolicies, ProxyDeps } from "./proxy.ts";
import { backoffMs, isRetryableStatus, maxAttempts } from "./retry.ts";
import { noCandidates, selectWorker } from "./select.ts";

const encoder = new TextEncoder();

/** How many sequences a body carries when batched (null: one, not batched). */
export function batchSize(body: Record<string, unknown>): number | null {
  const many = (v: unknown) =>
    Array.isArray(v) && (v.length === 0 || typeof v[0] !== "number") ? v.length : null;
  const n = many(body.text) ?? many(body.input_ids) ?? many(body.prompt);
  if (n !== null) return n;
  return typeof body.n === "number" && body.n > 1 ? body.n : null;
}

/** The body with the bootstrap fields for `prefill` (fresh rooms from `random`). */
export function withBootstrap(
  body: Record<string, unknown>,
  prefill: Worker,
  random: () => number,
): Uint8Array<ArrayBuffer> {
  const host = new URL(prefill.url).hostname.replace(/^\[|\]$/g, "");
  const port = prefill.bootstrapPort;
  const room = () => Math.floor(random() * 2 ** 53);
  const n = batchSize(body);
  const fields = n === null
    ? { bootstrap_host: host, bootstrap_port: port, bootstrap_room: room() }
    : {
      bootstrap_host: Array(n).fill(host),
      bootstrap_port: Array(n).fill(port),
      bootstrap_room: Array.from({ length: n }, room),
    };
  return encoder.encode(JSON.stringify({ ...body, ...fields }));
}

/** Routes requests to prefill/decode pairs. */
export class PdDispatch {
  readonly #d: ProxyDeps;
  readonly #calls: Calls;
  readonly #legs: PdPolicies;
  readonly #timeoutMs: number;

  /** Over the proxy's dependencies and attempt machinery. */
  constructor(d: ProxyDeps, calls: Calls, legs: PdPolicies, timeoutMs: number) {
    this.#d = d;
    this.#calls = calls;
    this.#legs = legs;
    this.#timeoutMs = timeoutMs;
  }

  /** Serves one request with a prefill/decode pair. */
  async dispatch(c: CallContext, body: Record<string, unknown>): Promise<Response> {
    const d = this.#d;
    const prefills = d.registry.forModel(c.rr.model, "prefill");
    const decodes = d.registry.forModel(c.rr.model, "decode");
    if (prefills.length === 0 && decodes.length === 0) throw noCandidates(d, c.rr);
    if (prefills.length === 0 || decodes.length === 0) {
      throw new GatewayError(
        503,
        "server_selection_failed",
        `No available servers: no ${
          prefills.length === 0 ? "prefill" : "decode"
        } worker serves model '${c.rr.model ?? "any"}'`,
        { retryAfter: 1 },
      );
    }
    const attempts = maxAttempts(d.config.retry);
    const failedP = new Set<string>();
    const failedD = new Set<string>();
    let last: Failure | null = null;
    for (let attempt = 0; attempt < attempts; attempt++) {
      if (attempt > 0) {
        d.metrics.retries.with("pd", c.series.labels[4]).inc();
        try {
          await sleep(backoffMs(attempt - 1, d.config.retry, d.random), c.signal);
        } catch {
          break;
        }
      }
      const retrying = last !== null;
      const code = "server_selection_failed";
      const p = selectWorker(d, prefills, failedP, c.rr, retrying, this.#legs.prefill, code);
      const w = p && selectWorker(d, decodes, failedD, c.rr, retrying, this.#legs.decode, code);
      if (!p || !w) break;
      c.series.selection.inc();
      const result = await this.#attempt(c, body, p, w);
      if ("response" in result) return result.response;
      last = result.failure;
      if (result.failed === "prefill") failedP.add(p.id);
      else failedD.add(w.id);
      if (!last.retryable) break;
      d.log.warn("PD attempt failed; retrying with another pair", {
        request_id: c.ctx.requestId,
        leg: result.failed,
        prefill: p.url,
        decode: w.url,
        attempt: attempt + 1,
      });
    }
    if (c.req.signal.aborted) return new Response(null, { status: CLIENT_CLOSED });
    if (c.timedOut() && (!last || last.retryable)) {
      last = { retryable: false, error: timeoutError(this.#timeoutMs) };
    }
    if (!last) {
      throw new GatewayError(
        503,
        "server_selection_failed",
        "No available servers: no usable prefill/decode pair",
        {
          retryAfter: 1,
        },
      );
    }
    return finalResponse(last, c.ctx.requestId);
  }

  async #attempt(
    c: CallContext,
    body: Record<string, unknown>,
    p: Worker,
    w: Worker,
  ): Promise<{ response: Response } | { failure: Failure; failed: "prefill" | "decode" }> {
    const calls = this.#calls;
    const bytes = withBootstrap(body, p, this.#d.random);
    const [ps, ds] = await Promise.all([calls.send(c, p, bytes), calls.send(c, w, bytes)]);
    const dropIfSent = (s: Sent | Attempt) => {
      if (!("res" in s)) return;
      s.res.body?.cancel().catch(() => {});
      s.release();
    };
    if (!("res" in ps) || !("res" in ds)) {
      dropIfSent(ps);
      dropIfSent(ds);
      const bad = !("res" in ps) ? ps : ds as Attempt;
      if ("response" in bad) return bad;
      return { failure: pdFailure(bad.failure), failed: !("res" in ps) ? "prefill" : "decode" };
    }
    if (ps.res.status >= 300) {
      dropIfSent(ds);
      return this.#legError(c, p, ps, "prefill");
    }
    this.#drain(c, p, ps);
    if (ds.res.status >= 300) return this.#legError(c, w, ds, "decode");
    const answer = await calls.respond(c, w, ds);
    return "response" in answer ? answer : { failure: answer.failure, failed: "decode" };
  }

  /** A leg answered with an error status: retried elsewhere if retryable, else passed through. */
  async #legError(
    c: CallContext,
    worker: Worker,
    sent: Sent,
    leg: "prefill" | "decode",
  ): Promise<{ response: Response } | { failure: Failure; failed: "prefill" | "decode" }> {
    if (isRetryableStatus(sent.res.status)) {
      const r = await this.#calls.retryableStatus(worker, sent);
      return "response" in r ? r : { failure: r.failure, failed: leg };
    }
    const r = await this.#calls.respond(c, worker, sent);
    return "response" in r ? r : { failure: r.failure, failed: leg };
  }

  /** Reads the prefill's response to its end without holding up the client. */
  #drain(c: CallContext, p: Worker, ps: Sent): void {
    c.holds.add(ps.release);
    const body = ps.res.body;
    // Bounded by the request's deadline and client (the fetch's signal); never rejects.
    (async () => {
      try {
        if (body) { for await (const _ of body) { /* discard */ } }
        this.#calls.record(p, "success");
      } catch {
        if (!c.req.signal.aborted && !c.timedOut()) this.#calls.record(p, "failure");
      } finally {
        ps.release();
      }
    })();
  }
}

function pdFailure(f: Failure): Failure {
  if (!f.error) return f;
  const e = f.error;
  return {
    ...f,
    error: new GatewayError(e.status, e.code, `PD disaggregation request failed: ${e.message}`),
  };
}
