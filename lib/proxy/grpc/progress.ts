/**
 * One gRPC call's progress deadline (`../progress.ts`): a stream's messages within
 * `--stream-idle-timeout-secs`, its first one waived while the worker answers others; a whole
 * answer (sent in one message at its end) within the head deadline plus its token budget. A miss
 * ends the call with a timeout (`GenerateStream.expire`), which the leg fails, retries or ends
 * its client's stream with, as for HTTP workers; the metric names what was awaited.
 */

import type { GenerateStream } from "../../grpc/sglang_client.ts";
import { UpstreamError } from "../../upstream/types.ts";
import type { Worker } from "../../workers/worker.ts";
import type { WorkerLedger } from "../ledger.ts";
import { elsewhere, progressDeadlines, type ProgressWatch, type Watched } from "../progress.ts";
import type { ProxyDeps } from "../types.ts";

/** A call's deadline and what it saw (see the module comment). */
export class CallProgress {
  /** Its first message has come. */
  first = false;
  readonly #d: ProxyDeps;
  readonly #ledger: WorkerLedger;
  readonly #worker: Worker;
  readonly #stream: boolean;
  readonly #body: unknown;
  readonly #call: GenerateStream;
  readonly #model: string | null;
  #watched: { watch: ProgressWatch; w: Watched } | null = null;

  constructor(
    d: ProxyDeps,
    ledger: WorkerLedger,
    worker: Worker,
    stream: boolean,
    body: unknown,
    call: GenerateStream,
    model: string | null,
  ) {
    this.#model = model;
    this.#d = d;
    this.#ledger = ledger;
    this.#worker = worker;
    this.#stream = stream;
    this.#body = body;
    this.#call = call;
  }

  /** Starts the deadline on `watch` (none when the flags set none). */
  watch(watch: ProgressWatch): void {
    const d = this.#d;
    const t = progressDeadlines(
      d.clock,
      this.#worker,
      this.#stream,
      this.#body,
      d.config.streamHeadTimeoutSecs,
      d.config.streamIdleTimeoutSecs,
      () => this.first,
      elsewhere(d.registry, d.clock, this.#worker, this.#model),
    );
    const limitMs = (this.#stream ? t.idleTimeoutMs : t.headTimeoutMs) ?? 0;
    if (limitMs <= 0) return;
    const phase = this.#stream ? "body" : "head";
    const w: Watched = {
      at: 0,
      limitMs,
      excused: () => t.excused!(phase),
      doomed: () => !this.first && t.doomed!(phase),
      expire: () => {
        const what = this.first ? "next message" : "first message";
        const e = new UpstreamError("timeout", `no ${what} from the worker within ${limitMs} ms`);
        this.#call.expire?.(e);
      },
    };
    watch.add(w);
    this.#watched = { watch, w };
  }

  /** A message came: the call and its worker are progressing. */
  saw(): void {
    const watched = this.#watched;
    if (watched) watched.watch.touch(watched.w);
    this.#ledger.saw(this.#worker);
  }

  /** The call is over: its deadline goes. */
  end(): void {
    const watched = this.#watched;
    if (!watched) return;
    this.#watched = null;
    watched.watch.remove(watched.w);
  }

  /** Counts a missed deadline (`err` the watch's timeout) by what was awaited. */
  missed(err: unknown): void {
    if (!(err instanceof UpstreamError) || err.kind !== "timeout") return;
    const phase = !this.#stream ? "head" : this.first ? "idle" : "first_piece";
    this.#d.metrics.progressMisses.with(this.#worker.url, phase).inc();
  }
}
