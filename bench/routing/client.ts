/**
 * The routing benchmark's drive loop: a workload's arrivals (an `Offer`: the synthetic sessions
 * of `sessions.ts` or a trace replay of `replay.ts`) sent to one base URL through the streaming
 * client (`stream.ts`), every request recorded. The loop owns what every workload shares:
 *
 * - phases: a warm-up (requests sent in it are not measured), the measured window (no request
 *   starts after it), then a drain that waits for requests in flight and aborts what is left at
 *   the drain timeout (counted as failed);
 * - the request cap: sending stops after `maxRequests` measured requests;
 * - the hook run when the window opens (worker counters), and shutdown by signal.
 *
 * An offer decides when each request starts and what it sends; it learns through its `Driver`
 * whether it may still send, and says which of its requests are measured when that is not simply
 * "sent once the window is open" (a trace's warm-up is a count of requests).
 */

import { streamChat, type StreamResult } from "./stream.ts";
import type { ChatMessage } from "./workload.ts";

/** How long each phase lasts and what every request carries. */
export interface DriveOptions {
  /** ms of unrecorded warm-up before the measured window. */
  warmupMs: number;
  /** ms of the measured window (no request starts after it). */
  durationMs: number;
  /** Stop sending after this many measured requests (null: no cap). */
  maxRequests: number | null;
  /** ms to wait for requests in flight after the window before aborting them. */
  drainMs: number;
  /** Model name sent in every request. */
  model: string;
  /** Called once when the measured window opens (e.g. to snapshot worker counters). */
  onMeasureStart?: () => Promise<void>;
  /** Aborts everything (SIGINT). */
  signal?: AbortSignal;
}

/** One request an offer sends, and what its record says about it. */
export interface Outgoing {
  /** The conversation so far, ending with the user's message. */
  messages: ChatMessage[];
  /** `max_tokens`. */
  maxTokens: number;
  /** Request headers (routing key, session id, a reference's route). */
  headers: Record<string, string>;
  /** Session id (synthetic) or `r` + line index (trace), for the record. */
  session: string;
  /** 0-based turn within the session. */
  turn: number;
  /** Tenant index, or null when the workload has none (a trace). */
  tenant: number | null;
  /**
   * The conversation it belongs to (the session, or a trace request's conversation key): a
   * request is a follow-up when an earlier one of its conversation was sent.
   */
  conversation?: string;
  /** Measured or warm-up; default: measured when sent once the window is open. */
  measured?: boolean;
}

/** What the drive loop lends an offer. */
export interface Driver {
  /** performance.now() when the run started: offers schedule arrivals from it. */
  readonly t0: number;
  /** Fires when sending must stop early: shutdown or the request cap. */
  readonly stop: AbortSignal;
  /** performance.now() when the measured window closes. */
  readonly stopAt: number;
  /** Whether a request may start now: not stopped and the window not closed. */
  open(): boolean;
  /** Sends `r`, records it and resolves with the result (never rejects). */
  send(r: Outgoing): Promise<StreamResult>;
  /** Counts `p` (an arrival's requests) as in flight: the drain waits for it. */
  track(p: Promise<void>): void;
}

/** A workload's arrivals: starts them through `d`, resolving once no more will start. */
export type Offer = (d: Driver) => Promise<void>;

/** One request as recorded. */
export interface RequestRecord extends Omit<StreamResult, "text"> {
  /** Session id (or trace request id). */
  session: string;
  /** 0-based turn within the session. */
  turn: number;
  /** Tenant index, or null. */
  tenant: number | null;
  /** Its conversation, where the workload names one. */
  conversation?: string;
  /** ms after the run started that it was sent. */
  sentAtMs: number;
  /** Counted in the measured window. */
  measured: boolean;
}

/** A finished drive. */
export interface DriveResult {
  /** Every request sent, warm-up ones included (see `measured`). */
  records: RequestRecord[];
  /** ms from the opening of the measured window to the last measured request's end. */
  measuredSpanMs: number;
  /** ms the measured window lasted (shorter than asked when the request cap ended it). */
  windowMs: number;
  /** Requests aborted at the drain timeout. */
  cut: number;
}

/** Sends `offer`'s requests to `baseUrl` as `o` says and returns every request's record. */
export async function drive(baseUrl: string, offer: Offer, o: DriveOptions): Promise<DriveResult> {
  const t0 = performance.now();
  const measureAt = t0 + o.warmupMs;
  const stopAt = measureAt + o.durationMs;
  const cutter = new AbortController();
  const signal = o.signal ? AbortSignal.any([o.signal, cutter.signal]) : cutter.signal;
  const records: RequestRecord[] = [];
  const capped = new AbortController();
  const stop = AbortSignal.any([signal, capped.signal]);
  let measuredSent = 0;
  let lastEnd = measureAt;

  const driver: Driver = {
    t0,
    stop,
    stopAt,
    open: () => !stop.aborted && performance.now() < stopAt,
    send: async (r) => {
      const sentAt = performance.now();
      const measured = r.measured ?? sentAt >= measureAt;
      if (measured && ++measuredSent === o.maxRequests) capped.abort();
      const result = await streamChat({
        baseUrl,
        model: o.model,
        messages: r.messages,
        maxTokens: r.maxTokens,
        headers: r.headers,
        signal,
      });
      const { text: _, ...rest } = result;
      records.push({
        ...rest,
        session: r.session,
        turn: r.turn,
        tenant: r.tenant,
        conversation: r.conversation,
        sentAtMs: sentAt - t0,
        measured,
      });
      if (measured) lastEnd = Math.max(lastEnd, performance.now());
      return result;
    },
    track: (p) => {
      running.add(p);
      p.finally(() => running.delete(p)).catch(() => {}); // rejections surface in Promise.all
    },
  };

  // The hook's outcome is kept as a value so that a failure is reported at the end, not as an
  // unhandled rejection while requests are still running.
  let measureHook: Promise<unknown> = Promise.resolve(null);
  const hookTimer = setTimeout(() => {
    measureHook = (o.onMeasureStart?.() ?? Promise.resolve()).then(() => null, (e) => e);
  }, o.warmupMs);
  const running = new Set<Promise<void>>();

  // An offer that throws stops the run; the requests it started are aborted and awaited first.
  let offerError: unknown = null;
  await offer(driver).catch((e) => {
    offerError = e ?? new Error("the offer failed");
    cutter.abort();
  });
  // Closed-loop users end by themselves; every offer waits for the window to close (or the cap).
  await sleepUntil(stopAt, stopAt, stop);
  const windowMs = Math.max(0, performance.now() - measureAt);
  const drainEnd = new AbortController();
  const drained = await Promise.race([
    Promise.all(running).then(() => true),
    sleepUntil(performance.now() + o.drainMs, Infinity, AbortSignal.any([signal, drainEnd.signal]))
      .then(() => false),
  ]);
  drainEnd.abort();
  const cut = drained ? 0 : running.size;
  cutter.abort();
  await Promise.all(running);
  clearTimeout(hookTimer);
  if (offerError) throw offerError;
  const hookError = await measureHook;
  if (hookError) throw hookError;
  return { records, measuredSpanMs: lastEnd - measureAt, windowMs, cut };
}

/** Resolves at `at` (performance.now() time) or at `limit`, whichever is first, or on abort. */
export function sleepUntil(at: number, limit: number, signal?: AbortSignal): Promise<void> {
  const ms = Math.min(at, limit) - performance.now();
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
