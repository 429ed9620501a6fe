/**
 * Ended spans on their way to the collector, never in a request's way: a bounded queue (a full
 * one drops the span and counts it), exported in batches of at most `batch` spans every
 * `delayMs` (sooner when a batch is full), one export in flight at a time, each bounded by
 * `timeoutMs`; an export that fails drops its batch and counts it (no retry: a collector that is
 * down must not make the gateway hold spans it cannot send). Drops are logged at most once a
 * minute. `close()` sends what is queued within a deadline, for shutdown.
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

/** What the queue counts (the tracing metrics). */
export interface ExportCounters {
  /** Spans the collector accepted. */
  exported(n: number): void;
  /** Spans dropped, by why: `queue_full` or `export_failed`. */
  dropped(reason: "queue_full" | "export_failed", n: number): void;
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

/** The exporting queue. */
export class SpanQueue implements SpanSink {
  readonly #q: Span[] = [];
  readonly #o: QueueOptions;
  readonly #encoder: OtlpEncoder;
  readonly #transport: Transport;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #counters: ExportCounters;
  #timer: (() => void) | null = null;
  #inFlight: Promise<void> | null = null;
  #closed = false;
  /** Drops since the last log line, and when that line was written. */
  #unlogged = { queueFull: 0, failed: 0, lastError: "", at: -Infinity };

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
    return this.#q.length;
  }

  push(span: Span): void {
    if (this.#closed || this.#q.length >= this.#o.maxQueue) {
      this.#counters.dropped("queue_full", 1);
      this.#unlogged.queueFull++;
      this.#maybeLog();
      return;
    }
    this.#q.push(span);
    if (this.#q.length >= this.#o.batch && this.#inFlight === null) this.#schedule(0);
    else if (this.#timer === null) this.#schedule(this.#o.delayMs);
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
    if (this.#inFlight !== null || this.#q.length === 0) return this.#inFlight ?? Promise.resolve();
    const spans = this.#q.splice(0, this.#o.batch);
    const done = this.#send(spans).finally(() => {
      this.#inFlight = null;
      if (this.#q.length > 0 && !this.#closed) {
        this.#schedule(this.#q.length >= this.#o.batch ? 0 : this.#o.delayMs);
      }
    });
    this.#inFlight = done;
    return done;
  }

  async #send(spans: Span[]): Promise<void> {
    try {
      await this.#transport.send(this.#encoder.encode(spans), this.#o.timeoutMs);
      this.#counters.exported(spans.length);
    } catch (e) {
      this.#counters.dropped("export_failed", spans.length);
      this.#unlogged.failed += spans.length;
      this.#unlogged.lastError = (e as Error)?.message ?? String(e);
      this.#maybeLog();
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
      err: u.lastError || undefined,
    });
    u.queueFull = 0;
    u.failed = 0;
    u.lastError = "";
  }

  /** Exports everything queued now (tests; shutdown through `close`). */
  async flush(): Promise<void> {
    this.#timer?.();
    this.#timer = null;
    while (this.#q.length > 0 || this.#inFlight !== null) {
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
    if (this.#q.length > 0) this.#counters.dropped("export_failed", this.#q.splice(0).length);
    this.#transport.close();
  }
}
