/**
 * An attempt's progress deadlines, from `--stream-head-timeout-secs` (H) and
 * `--stream-idle-timeout-secs` (I):
 *
 * - a stream's response head within H: engines answer a stream's head before its prefill, so a
 *   worker that holds it is hung;
 * - a whole answer's head within H plus a quarter second per token of its budget (`max_tokens`,
 *   `max_completion_tokens`, sglang's `sampling_params.max_new_tokens`): its head comes with its
 *   last token, and a sequence decoding at 4 tokens a second is on a worker far past sane load;
 *   without a budget, only the request deadline bounds it;
 * - between a stream's pieces (and while a body is read), at most I of silence.
 *
 * The waits before anything came (a whole answer's head, a stream's first piece) cover the queue
 * and prefill too, which grow with load: they are waived, one period at a time, while the worker
 * shows progress elsewhere (something received from it within I), so a busy worker is not taken
 * for a hung one. A worker silent on every attempt is. A miss excludes the worker (`WorkerProgress`)
 * and fails the attempt: retried elsewhere if nothing reached the client.
 */

import { type Clock, every } from "../core/clock.ts";
import type { UpstreamRequest } from "../upstream/types.ts";
import type { Worker } from "../workers/worker.ts";
import type { WorkerRegistry } from "../workers/registry.ts";

/**
 * Whether a worker other than `worker` could take a request of `model` at `now` (a regular
 * worker's request; PD legs are not given up on early).
 */
export function elsewhere(
  registry: WorkerRegistry,
  clock: Clock,
  worker: Worker,
  model: string | null,
): () => boolean {
  if (worker.type !== "regular") return () => false;
  return () => {
    const now = clock.now();
    return registry.forModel(model).some((w) => w !== worker && w.available(now));
  };
}

/** A whole answer's head may take this much longer per token of its budget (ms). */
export const WHOLE_ANSWER_MS_PER_TOKEN = 250;

/** The request's token budget, or null when it sets none. */
export function tokenBudget(body: unknown): number | null {
  if (typeof body !== "object" || body === null) return null;
  const b = body as Record<string, unknown>;
  const sp = b.sampling_params;
  const raw = b.max_completion_tokens ?? b.max_tokens ??
    (typeof sp === "object" && sp !== null
      ? (sp as Record<string, unknown>).max_new_tokens
      : undefined);
  return typeof raw === "number" && Number.isFinite(raw) && raw >= 0 ? raw : null;
}

/** The deadline fields of one attempt's `UpstreamRequest`. */
export type ProgressDeadlines = Pick<
  UpstreamRequest,
  "headTimeoutMs" | "idleTimeoutMs" | "excused" | "doomed"
>;

/**
 * The deadlines of an attempt on `worker`: `headSecs` and `idleSecs` are H and I (0: none);
 * `firstPiece()` tells whether a stream's first piece has come; `elsewhere()` whether another
 * worker could take the request now. An attempt still waiting for its answer's start (a head, a
 * first piece) on a worker that stalled after it was sent is given up on at once when another
 * worker could take it: nothing reached the client, and the stalled worker's queue is not moving.
 */
export function progressDeadlines(
  clock: Clock,
  worker: Worker,
  stream: boolean,
  body: unknown,
  headSecs: number,
  idleSecs: number,
  firstPiece: () => boolean,
  elsewhere: () => boolean = () => false,
): ProgressDeadlines {
  const sentAt = clock.now();
  const idleMs = idleSecs * 1000;
  let headMs = headSecs * 1000;
  if (!stream && headMs > 0) {
    const budget = tokenBudget(body);
    headMs = budget === null ? 0 : headMs + budget * WHOLE_ANSWER_MS_PER_TOKEN;
  }
  const busyFor = idleMs > 0 ? idleMs : headMs;
  const busy = () => worker.progress.recent(clock.now(), busyFor);
  const excused = stream
    ? (phase: "head" | "body") => phase === "body" && !firstPiece() && busy()
    : (phase: "head" | "body") => phase === "head" && busy();
  const doomed = (phase: "head" | "body") => {
    if (phase === "body" && (!stream || firstPiece())) return false;
    const since = worker.progress.stalledSince(clock.now());
    return since !== null && since > sentAt && elsewhere();
  };
  return { headTimeoutMs: headMs, idleTimeoutMs: idleMs, excused, doomed };
}

/** One call watched for progress (`ProgressWatch`). */
export interface Watched {
  /** When it last progressed (clock ms); set by the watch. */
  at: number;
  /** Its longest silence now (ms). */
  limitMs: number;
  /** Whether a passed limit is waived once (the wait starts over). */
  excused(): boolean;
  /** Whether to give up now, before its limit (checked every tick). */
  doomed?(): boolean;
  /** Its limit passed: ends it. */
  expire(): void;
}

/**
 * Progress deadlines of calls whose client has none of its own (gRPC workers): each touched on
 * every message, all checked on one timer every second (or a quarter of the shortest limit)
 * while any is watched.
 */
export class ProgressWatch {
  readonly #clock: Clock;
  readonly #tickMs: number;
  readonly #items = new Set<Watched>();
  #stop: (() => void) | null = null;

  /** Checks every `tickMs`. */
  constructor(clock: Clock, tickMs: number) {
    this.#clock = clock;
    this.#tickMs = tickMs;
  }

  /** Watches `w` from now. */
  add(w: Watched): void {
    w.at = this.#clock.now();
    this.#items.add(w);
    this.#stop ??= every(this.#clock, this.#tickMs, () => this.#sweep());
  }

  /** `w` progressed now. */
  touch(w: Watched): void {
    w.at = this.#clock.now();
  }

  /** Stops watching `w`. */
  remove(w: Watched): void {
    if (this.#items.delete(w) && this.#items.size === 0) {
      this.#stop?.();
      this.#stop = null;
    }
  }

  #sweep(): void {
    const now = this.#clock.now();
    for (const w of this.#items) {
      if (w.doomed?.()) {
        this.remove(w);
        w.expire();
        continue;
      }
      if (now - w.at < w.limitMs) continue;
      if (w.excused()) {
        w.at = now;
        continue;
      }
      this.remove(w);
      w.expire();
    }
  }
}
