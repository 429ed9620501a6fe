/**
 * Runs a workload against one base URL and records every request. Two arrival modes:
 *
 * - open loop (`rate`): sessions arrive as a Poisson process at `rate / meanTurns` per second,
 *   so that requests arrive at about `rate` per second; each session sends its turns in order,
 *   each after the previous reply plus the turn's think time. Arrivals never wait for replies.
 * - closed loop (`concurrency`): that many users, each running sessions from the plan back to
 *   back with no think time, so exactly `concurrency` requests are in flight.
 *
 * Each turn resends the whole history with the assistant's real reply text. Phases: a warm-up
 * (requests sent in it are not recorded as measured), the measured window, then a drain that
 * waits for requests in flight and aborts what is left at the drain timeout (counted as failed).
 * A failed turn ends its conversation, since there is no reply to resend.
 */

import { streamChat, type StreamResult } from "./stream.ts";
import type { Session, Workload } from "./workload.ts";

/** How load is offered and for how long. */
export interface DriveOptions {
  /** Open loop at this many requests/s, or closed loop with this many users. */
  load: { rate: number } | { concurrency: number };
  /** ms of unrecorded warm-up before the measured window. */
  warmupMs: number;
  /** ms of the measured window (no request is sent after it). */
  durationMs: number;
  /** Stop sending after this many measured requests (null: no cap). */
  maxRequests: number | null;
  /** ms to wait for requests in flight after the window before aborting them. */
  drainMs: number;
  /** Model name sent in every request. */
  model: string;
  /** Headers added to each request of a session, on top of the plan's (`ref:oracle`'s route). */
  extraHeaders?: (s: Session, planned: Record<string, string>) => Record<string, string>;
  /** Called once when the measured window opens (e.g. to snapshot worker counters). */
  onMeasureStart?: () => Promise<void>;
  /** Aborts everything (SIGINT). */
  signal?: AbortSignal;
}

/** One request as recorded. */
export interface RequestRecord extends Omit<StreamResult, "text"> {
  /** Session id. */
  session: string;
  /** 0-based turn within the session. */
  turn: number;
  /** Tenant index. */
  tenant: number;
  /** ms after the run started that it was sent. */
  sentAtMs: number;
  /** Sent inside the measured window. */
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

/** Sends the workload to `baseUrl` as `o` says and returns every request's record. */
export async function drive(baseUrl: string, w: Workload, o: DriveOptions): Promise<DriveResult> {
  const t0 = performance.now();
  const measureAt = t0 + o.warmupMs;
  const stopAt = measureAt + o.durationMs;
  const cutter = new AbortController();
  const signal = o.signal ? AbortSignal.any([o.signal, cutter.signal]) : cutter.signal;
  const records: RequestRecord[] = [];
  const capped = new AbortController();
  /** Fires when sending must stop early: shutdown or the request cap. */
  const stop = AbortSignal.any([signal, capped.signal]);
  let measuredSent = 0;
  let lastEnd = measureAt;
  let nextSession = 0;

  const sending = () =>
    !signal.aborted && performance.now() < stopAt &&
    (o.maxRequests === null || measuredSent < o.maxRequests);

  /** Runs `s` to its end; `think` says whether to honour think times. */
  const runSession = async (s: Session, think: boolean) => {
    const replies: string[] = [];
    const planned = w.headers(s);
    const headers = o.extraHeaders ? { ...planned, ...o.extraHeaders(s, planned) } : planned;
    for (let t = 0; t < s.turns.length; t++) {
      const turn = s.turns[t];
      if (think && turn.thinkMs > 0) {
        await sleepUntil(performance.now() + turn.thinkMs, stopAt, stop);
      }
      if (!sending()) return;
      const sentAt = performance.now();
      const measured = sentAt >= measureAt;
      if (measured && ++measuredSent === o.maxRequests) capped.abort();
      const r = await streamChat({
        baseUrl,
        model: o.model,
        messages: w.messages(s, t, replies),
        maxTokens: turn.maxTokens,
        headers,
        signal,
      });
      const { text, ...rest } = r;
      records.push({
        ...rest,
        session: s.id,
        turn: t,
        tenant: s.tenant,
        sentAtMs: sentAt - t0,
        measured,
      });
      if (measured) lastEnd = Math.max(lastEnd, performance.now());
      if (!r.ok) return;
      replies.push(text);
    }
  };

  // The hook's outcome is kept as a value so that a failure is reported at the end, not as an
  // unhandled rejection while requests are still running.
  let measureHook: Promise<unknown> = Promise.resolve(null);
  const hookTimer = setTimeout(() => {
    measureHook = (o.onMeasureStart?.() ?? Promise.resolve()).then(() => null, (e) => e);
  }, o.warmupMs);
  const running = new Set<Promise<void>>();
  const track = (p: Promise<void>) => {
    running.add(p);
    p.finally(() => running.delete(p)).catch(() => {}); // rejections surface in Promise.all
  };

  if ("rate" in o.load) {
    const gaps = w.poissonGaps(o.load.rate / w.meanTurns());
    let at = t0;
    for (;;) {
      at += gaps.next().value as number;
      if (at >= stopAt) break;
      await sleepUntil(at, stopAt, stop);
      if (!sending()) break;
      track(runSession(w.session(nextSession++), true));
    }
  } else {
    for (let u = 0; u < o.load.concurrency; u++) {
      track((async () => {
        while (sending()) await runSession(w.session(nextSession++), false);
      })());
    }
  }
  // Closed-loop users end by themselves; both modes wait for the window to close (or the cap).
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
