/**
 * Ended spans on their way to the collector, never in a request's way: each encoded as it ends,
 * held as bytes in a bounded queue (a full one drops the span and counts it), exported in
 * batches of at most `batch` spans every
 * `delayMs` (sooner when a batch is full), one export in flight at a time, each bounded by
 * `timeoutMs`; an export that fails drops its batch and counts it (no retry: a collector that is
 * down must not make the gateway hold spans it cannot send). After `DOWN_AFTER` failures in a
 * row the collector counts as down: new spans are dropped unencoded for 1 s, doubling to 30 s,
 * until an export succeeds. Drops are logged at most once a minute. `close()` sends what is queued within a deadline, for shutdown.
 */

import type { Clock } from "../core/clock.ts";
import type { Logger } from "../core/log.ts";
import type { OtlpEncoder } from "./otlp.ts";
import type { Span, SpanSink } from "./span.ts";

/** Sends one encoded `ExportTraceServiceRequest`; rejects on any failure. */
export interface Transport {
  /** Where it sends, for the logs. */
  readonly target: string;
  /** Sends `body`, giving up after `timeoutMs`. */
  send(body: Uint8Array<ArrayBuffer>, timeoutMs: number): Promise<void>;
  /** Releases its connections. */
  close(): void;
}

/**
 * Why spans were dropped: the queue was full; the collector refused or failed their export; or
 * it was down (exports failing in a row), so they were not even encoded.
 */
export type DropReason = "queue_full" | "export_failed" | "collector_down";

/** Failed exports in a row after which the collector counts as down. */
export const DOWN_AFTER = 3;
/** The longest pause before the next try while it is down (the first is 1 s, then doubling). */
export const MAX_DOWN_MS = 30_000;

/** What the queue counts (the tracing metrics). */
export interface ExportCounters {
  /** Spans the collector accepted. */
  exported(n: number): void;
  /** Spans dropped, by why. */
  dropped(reason: DropReason, n: number): void;
}

/** The queue's bounds and pace (OpenTelemetry's batch processor settings). */
export interface QueueOptions {
  /** Most spans held (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048). */
  maxQueue: number;
  /** Most spans per export (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, 512). */
  batch: number;
  /** Time between exports (`OTEL_BSP_SCHEDULE_DELAY`, 500 ms as SMG). */
  delayMs: number;
  /** An export's bound (`OTEL_BSP_EXPORT_TIMEOUT`, 10 s). */
  timeoutMs: number;
}

const LOG_EVERY_MS = 60_000;

/** A batch ready to go: its request's bytes and how many spans it holds. */
interface Sealed {
  body: Uint8Array<ArrayBuffer>;
  spans: number;
}

/**
 * The exporting queue. A span is encoded as it ends (`OtlpEncoder.add`) and the object let go:
 * what waits is bytes, in the batch being built and in sealed batches, `maxQueue` spans at most.
 */
export class SpanQueue implements SpanSink {
  readonly #o: QueueOptions;
  readonly #encoder: OtlpEncoder;
  readonly #transport: Transport;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #counters: ExportCounters;
  readonly #sealed: Sealed[] = [];
  /** Spans held: sealed and being built. */
  #held = 0;
  #timer: (() => void) | null = null;
  #inFlight: Promise<void> | null = null;
  #closed = false;
  /** Failed exports in a row, and until when (clock ms) new spans are dropped unencoded. */
  #failures = 0;
  #downUntil = -Infinity;
  /** Drops since the last log line, and when that line was written. */
  #unlogged = { queueFull: 0, failed: 0, down: 0, lastError: "", at: -Infinity };

  constructor(
    o: QueueOptions,
    encoder: OtlpEncoder,
    transport: Transport,
    clock: Clock,
    log: Logger,
    counters: ExportCounters,
  ) {
    this.#o = o;
    this.#encoder = encoder;
    this.#transport = transport;
    this.#clock = clock;
    this.#log = log;
    this.#counters = counters;
  }

  /** Spans waiting. */
  get size(): number {
    return this.#held;
  }

  push(span: Span): void {
    if (this.#closed || this.#held >= this.#o.maxQueue) {
      this.#counters.dropped("queue_full", 1);
      this.#unlogged.queueFull++;
      this.#maybeLog();
      return;
    }
    if (this.#failures >= DOWN_AFTER && this.#clock.now() < this.#downUntil) {
      // The collector is down: a span it would not get is not encoded either.
      this.#counters.dropped("collector_down", 1);
      this.#unlogged.down++;
      this.#maybeLog();
      return;
    }
    this.#encoder.add(span);
    this.#held++;
    if (this.#encoder.count >= this.#o.batch) {
      this.#seal();
      if (this.#inFlight === null) this.#schedule(0);
    } else if (this.#timer === null) this.#schedule(this.#o.delayMs);
  }

  #seal(): void {
    const spans = this.#encoder.count;
    if (spans > 0) this.#sealed.push({ body: this.#encoder.seal(), spans });
  }

  #schedule(ms: number): void {
    this.#timer?.();
    this.#timer = this.#clock.after(ms, () => {
      this.#timer = null;
      void this.#exportOne();
    });
  }

  /** Exports one batch unless one is in flight; schedules the next while spans remain. */
  #exportOne(): Promise<void> {
    if (this.#inFlight !== null) return this.#inFlight;
    if (this.#sealed.length === 0) this.#seal();
    const batch = this.#sealed.shift();
    if (batch === undefined) return Promise.resolve();
    const done = this.#send(batch).finally(() => {
      this.#inFlight = null;
      if (this.#held > 0 && !this.#closed) {
        this.#schedule(this.#sealed.length > 0 ? 0 : this.#o.delayMs);
      }
    });
    this.#inFlight = done;
    return done;
  }

  async #send(batch: Sealed): Promise<void> {
    try {
      await this.#transport.send(batch.body, this.#o.timeoutMs);
      this.#counters.exported(batch.spans);
      this.#failures = 0;
    } catch (e) {
      if (++this.#failures >= DOWN_AFTER) {
        const pause = Math.min(MAX_DOWN_MS, 1000 * 2 ** (this.#failures - DOWN_AFTER));
        this.#downUntil = this.#clock.now() + pause;
      }
      this.#counters.dropped("export_failed", batch.spans);
      this.#unlogged.failed += batch.spans;
      this.#unlogged.lastError = (e as Error)?.message ?? String(e);
      this.#maybeLog();
    } finally {
      this.#held -= batch.spans;
    }
  }

  #maybeLog(): void {
    const u = this.#unlogged;
    const now = this.#clock.now();
    if (now - u.at < LOG_EVERY_MS) return;
    u.at = now;
    this.#log.warn("trace spans dropped", {
      collector: this.#transport.target,
      queue_full: u.queueFull,
      export_failed: u.failed,
      collector_down: u.down,
      err: u.lastError || undefined,
    });
    u.queueFull = 0;
    u.failed = 0;
    u.down = 0;
    u.lastError = "";
  }

  /** Exports everything queued now (tests; shutdown through `close`). */
  async flush(): Promise<void> {
    this.#timer?.();
    this.#timer = null;
    while (this.#held > 0 || this.#inFlight !== null) {
      await (this.#inFlight ?? this.#exportOne());
    }
  }

  /**
   * Sends what is queued, waiting at most `ms` (the shutdown's drain deadline); then stops taking
   * spans and releases the transport. What is left unsent is counted as dropped.
   */
  async close(ms: number): Promise<void> {
    let cancel = () => {};
    const late = new Promise<void>((resolve) => cancel = this.#clock.after(ms, resolve));
    await Promise.race([this.flush(), late]);
    cancel();
    this.#closed = true;
    this.#timer?.();
    this.#seal();
    const left = this.#sealed.splice(0).reduce((n, b) => n + b.spans, 0);
    if (left > 0) {
      this.#counters.dropped("export_failed", left);
      this.#held -= left;
    }
    this.#transport.close();
  }
}
