/**
 * The fault matrix's steady load: an open loop (requests start on schedule, not on answers) of
 * streams and whole answers mixed, bounded in count (`rate × secs`), in flight (`maxInFlight`)
 * and in time (each request has a deadline: the gateway's request timeout plus a margin). Each
 * request ends in one `Outcome`; `hung` is one with no complete answer by its deadline.
 *
 * Streams go through the routing benchmark's client (`bench/routing/stream.ts`), whole answers
 * through `fetch`, to `/v1/chat/completions` or `/v1/completions`; which request streams and
 * which endpoint a whole answer takes are drawn from a seeded generator (a fixed pattern would
 * line up with round robin and give one worker only one kind). Each run has its own HTTP client,
 * closed at its end and closing idle connections after 2 s, so the gateway's descriptors after
 * a row (or in a soak) are not the client's idle pool.
 */

import { seededRandom } from "../../lib/core/clock.ts";
import { streamChat } from "../routing/stream.ts";

/**
 * How one request ended: `ok` (2xx, a whole JSON answer or a stream to `[DONE]`), `sse-error`
 * (a stream ended by an `error` event: the clean end of a broken stream), `cut` (a 2xx body that
 * broke without one), `net` (no status: the connection failed), `hung` (nothing complete by the
 * deadline), or the status of a non-2xx answer.
 */
export type Outcome = "ok" | "sse-error" | "cut" | "net" | "hung" | `${number}`;

/** One request as recorded. */
export interface Sent {
  /** ms after the load started that it was sent. */
  atMs: number;
  /** ms it took to end. */
  ms: number;
  stream: boolean;
  outcome: Outcome;
  /** What went wrong, or null. */
  error: string | null;
}

/** What the load sends. */
export interface LoadOptions {
  /** Base URL of the gateway (or HAProxy). */
  url: string;
  /** Requests per second. */
  rate: number;
  /** Seconds of sending. */
  secs: number;
  /** Share of requests that stream (0..1). */
  streamShare: number;
  /** ms a request may take before it counts as hung. */
  deadlineMs: number;
  /** Requests in flight at most; a request due beyond it is not sent (counted in `skipped`). */
  maxInFlight: number;
  /** Extra request headers. */
  headers?: Record<string, string>;
  /** Stops sending and aborts what is in flight (SIGINT). */
  signal: AbortSignal;
  /** Seed of the stream and endpoint draws (default 1). */
  seed?: number;
}

/** A finished load. */
export interface LoadResult {
  records: Sent[];
  /** Requests due while `maxInFlight` were in flight, not sent. */
  skipped: number;
}

/** Sends one whole (non-streamed) request; never throws. */
async function plain(
  url: string,
  chat: boolean,
  o: LoadOptions,
  signal: AbortSignal,
  client: Deno.HttpClient,
) {
  const path = chat ? "/v1/chat/completions" : "/v1/completions";
  const body = chat
    ? { model: "sim-model", messages: [{ role: "user", content: "hi" }], max_tokens: 4 }
    : { model: "sim-model", prompt: "hi", max_tokens: 4 };
  try {
    const res = await fetch(`${url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...o.headers },
      body: JSON.stringify(body),
      signal,
      client,
    });
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      return { status: res.status, cut: true, error: String(e).slice(0, 160) };
    }
    if (res.status < 200 || res.status > 299) {
      return { status: res.status, cut: false, error: text.slice(0, 160) };
    }
    try {
      JSON.parse(text);
      return { status: res.status, cut: false, error: null };
    } catch {
      return { status: res.status, cut: true, error: `not JSON: ${text.slice(0, 120)}` };
    }
  } catch (e) {
    return { status: 0, cut: false, error: String(e).slice(0, 160) };
  }
}

/** Sends one request and classifies its end. */
export async function oneRequest(
  o: LoadOptions,
  stream: boolean,
  chat: boolean,
  t0: number,
  client: Deno.HttpClient,
): Promise<Sent> {
  const start = performance.now();
  const deadline = AbortSignal.timeout(o.deadlineMs);
  const signal = AbortSignal.any([deadline, o.signal]);
  let outcome: Outcome;
  let error: string | null;
  if (stream) {
    const r = await streamChat({
      baseUrl: o.url,
      model: "sim-model",
      messages: [{ role: "user", content: "hi" }],
      maxTokens: 8,
      headers: o.headers ?? {},
      signal,
      client,
    });
    error = r.error;
    if (r.ok) outcome = "ok";
    else if (deadline.aborted) outcome = "hung";
    else if (r.status === 0) outcome = "net";
    else if (r.status !== 200) outcome = `${r.status}`;
    else outcome = r.error?.startsWith("error event") ? "sse-error" : "cut";
  } else {
    const r = await plain(o.url, chat, o, signal, client);
    error = r.error;
    if (deadline.aborted && (r.error !== null || r.cut)) outcome = "hung";
    else if (r.status === 0) outcome = "net";
    else if (r.cut) outcome = "cut";
    else outcome = r.status >= 200 && r.status < 300 ? "ok" : `${r.status}`;
  }
  return { atMs: start - t0, ms: performance.now() - start, stream, outcome, error };
}

/** Runs the load to its end: every request sent has ended (answered, failed or hung). */
export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const total = Math.round(o.rate * o.secs);
  const t0 = performance.now();
  const running: Promise<Sent>[] = [];
  const random = seededRandom(o.seed ?? 1);
  // Idle connections close after 2 s: the gateway's descriptors then follow its own state, not
  // the client's pool grown by a burst or a fault.
  const client = Deno.createHttpClient({ poolIdleTimeout: 2000 });
  let inFlight = 0;
  let skipped = 0;
  for (let i = 0; i < total && !o.signal.aborted; i++) {
    const wait = t0 + (i * 1000) / o.rate - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    if (inFlight >= o.maxInFlight) {
      skipped++;
      continue;
    }
    inFlight++;
    const stream = random() < o.streamShare;
    const chat = random() < 0.5;
    running.push(oneRequest(o, stream, chat, t0, client).finally(() => inFlight--));
  }
  try {
    return { records: await Promise.all(running), skipped };
  } finally {
    client.close();
  }
}

/** Counts of each outcome. */
export function tally(records: readonly { outcome: Outcome }[]): Map<Outcome, number> {
  const m = new Map<Outcome, number>();
  for (const r of records) m.set(r.outcome, (m.get(r.outcome) ?? 0) + 1);
  return m;
}
