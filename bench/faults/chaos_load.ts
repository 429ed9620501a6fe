/**
 * The chaos benchmark's clients (`chaos_streams.ts`): the load — `streams` clients, each sending
 * one streamed chat request after another through the gateway for the run's length — and the
 * reference answers, each request asked again straight from a healthy worker.
 */

import { chatBody, streamOnce, type StreamRecord } from "./chaos_client.ts";
import type { Reference } from "./chaos_report.ts";

const CHAT = "/v1/chat/completions";
/** A client's pause after a request answered with anything but 200. */
const BACKOFF_MS = 100;

/** The load's shape. */
export interface LoadOptions {
  /** How long clients start new streams, s. */
  durationSecs: number;
  /** Concurrent clients. */
  streams: number;
  /** Workers behind the gateway (for the expected pace). */
  workers: number;
  /** Every request's `max_tokens`. */
  maxTokens: number;
  /** The workers' `--time-scale` (for the expected pace). */
  timeScale: number;
  /** How long streams still open after the load may take before they are aborted, s. */
  drainSecs: number;
}

/**
 * How long one stream should take with the load spread evenly (the simulated engine's default
 * decode step: 6 ms plus 0.35 ms a running sequence, times `--time-scale`), at least a second:
 * the clients' first streams are spread over it, so that streams (all of one length, so that
 * their durations compare) end at different times instead of in waves.
 */
export function streamMs(o: LoadOptions): number {
  const stepMs = (6 + 0.35 * Math.ceil(o.streams / o.workers)) * o.timeScale;
  return Math.max(1000, o.maxTokens * stepMs);
}

/**
 * `o.streams` clients, each sending one stream after another until `o.durationSecs` have passed
 * (the first ones spread over one stream's expected length); what is still open `o.drainSecs`
 * later is aborted.
 */
export async function load(
  url: string,
  o: LoadOptions,
  t0: number,
  signal: AbortSignal,
): Promise<StreamRecord[]> {
  const records: StreamRecord[] = [];
  const endAt = t0 + o.durationSecs * 1000;
  const drained = new AbortController();
  const timer = setTimeout(
    () => drained.abort(new Error(`still open ${o.drainSecs} s after the load`)),
    (o.durationSecs + o.drainSecs) * 1000,
  );
  const hard = AbortSignal.any([signal, drained.signal]);
  const maxPerClient = o.durationSecs * 100; // a bound: no stream is shorter than 10 ms
  const spreadMs = streamMs(o);
  let next = 0;
  const client = async (i: number) => {
    await new Promise((r) => setTimeout(r, (i * spreadMs) / o.streams));
    for (let k = 0; k < maxPerClient && performance.now() < endAt && !signal.aborted; k++) {
      const n = next++;
      const r = await streamOnce(url + CHAT, chatBody(n, o.maxTokens), n, t0, hard);
      records.push(r);
      // A refused request comes back at once: a client backs off instead of spinning.
      if (r.status !== 200) await new Promise((res) => setTimeout(res, BACKOFF_MS));
    }
  };
  const progress = setInterval(() => {
    const secs = ((performance.now() - t0) / 1000).toFixed(0);
    console.error(`  ${secs} s: ${records.length} streams ended, ${next - records.length} open`);
  }, 10_000);
  try {
    await Promise.all(Array.from({ length: o.streams }, (_, i) => client(i)));
  } finally {
    clearTimeout(timer);
    clearInterval(progress);
  }
  return records.sort((a, b) => a.n - b.n);
}

/** The request of each record answered 200 asked again straight from `worker`, 32 at a time. */
export async function references(
  worker: string,
  records: StreamRecord[],
  o: LoadOptions,
  signal: AbortSignal,
): Promise<Map<number, Reference>> {
  const refs = new Map<number, Reference>();
  const todo = records.filter((r) => r.status === 200);
  let next = 0;
  const one = async () => {
    while (next < todo.length && !signal.aborted) {
      const n = todo[next++].n;
      const r = await streamOnce(
        worker + CHAT,
        chatBody(n, o.maxTokens),
        n,
        0,
        signal,
      );
      if (r.status !== 200 || !r.done || r.failure !== null) {
        throw new Error(`reference of stream ${n}: ${r.status} ${r.failure ?? "no [DONE]"}`);
      }
      refs.set(n, { text: r.text, completionTokens: r.usage?.completion_tokens ?? null });
    }
  };
  await Promise.all(Array.from({ length: 32 }, one));
  return refs;
}
