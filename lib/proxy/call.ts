/**
 * One request on its way through the proxy (`Call`): what its attempts read (routing inputs,
 * body, metric series, selection notes), its one cancellation (the client leaving or the
 * deadline), its deadline entry, what it holds until its response is done (`Holds`: the
 * admission slot, worker slots, listeners), its gRPC form prepared at most once, and its
 * background work, handed to the proxy's `Tasks` so shutdown awaits it.
 */

import type { Inbound } from "../core/http.ts";
import type { Tasks } from "../core/tasks.ts";
import type { RouteRequest, SelectionNote } from "../core/types.ts";
import { Cancel } from "../core/cancel.ts";
import type { DeadlineEntry, Deadlines } from "./deadlines.ts";
import type { GrpcInput } from "./grpc/request.ts";
import type { RouteSeries } from "./series.ts";
import type { Span } from "../tracing/span.ts";
import type { CallContext, RequestContext, Resume, UsageMeter } from "./types.ts";

/** What a request holds until its response is done; released once. */
export class Holds {
  readonly #release: (() => void)[] = [];
  /** Runs `fn` when the request is done. */
  add(fn: () => void): void {
    this.#release.push(fn);
  }
  /** Releases everything (idempotent). */
  readonly done = (): void => {
    for (const fn of this.#release.splice(0)) fn();
  };
}

/** Why a request's worker calls were cancelled when its deadline passed. */
class DeadlineExceeded extends Error {}

/** What a `Call` is made of. */
export interface CallInit extends
  Pick<
    CallContext,
    "inb" | "rr" | "body" | "bytes" | "ctx" | "start" | "series" | "tasks" | "meter"
  > {
  /** What the request holds until its response is done. */
  holds: Holds;
  /** Clock time of the deadline. */
  at: number;
  /** The deadline sweeper the call registers with (`arm`). */
  deadlines: Deadlines;
  /** The request prepared for gRPC workers, if already done (it routes on its tokens). */
  grpc: GrpcInput | null;
  /** Prepares it (null: no gRPC worker can serve this gateway). */
  prepareGrpc: (() => Promise<GrpcInput>) | null;
  /** Continues its stream elsewhere (null: not continued). */
  resume?: Resume | null;
  /** The call whose stream this one continues (it shares its cancellation and deadline). */
  parent?: Call;
  /** Workers its picks exclude from the start. */
  excluded?: ReadonlySet<string> | null;
}

/** One request on its way: see the module comment. */
export class Call implements CallContext, DeadlineEntry {
  readonly cancel: Cancel;
  readonly notes = new Map<string, SelectionNote>();
  slot = -1;
  readonly inb: Inbound;
  readonly rr: RouteRequest;
  readonly body: unknown;
  readonly bytes: Uint8Array<ArrayBuffer>;
  readonly ctx: RequestContext;
  readonly start: number;
  readonly series: RouteSeries;
  readonly at: number;
  readonly tasks: Tasks;
  readonly meter: UsageMeter | null;
  readonly resume: Resume | null;
  readonly continuing: boolean;
  readonly excluded: ReadonlySet<string> | null;
  spans: Map<string, Span> | null = null;
  readonly #holds: Holds;
  readonly #deadlines: Deadlines;
  #grpc: GrpcInput | null;
  #preparing: Promise<GrpcInput> | null = null;
  readonly #prepareGrpc: (() => Promise<GrpcInput>) | null;

  constructor(i: CallInit) {
    this.inb = i.inb;
    this.rr = i.rr;
    this.body = i.body;
    this.bytes = i.bytes;
    this.ctx = i.ctx;
    this.#holds = i.holds;
    this.start = i.start;
    this.series = i.series;
    this.at = i.at;
    this.#deadlines = i.deadlines;
    this.#grpc = i.grpc;
    this.#prepareGrpc = i.prepareGrpc;
    this.tasks = i.tasks;
    this.meter = i.meter;
    this.resume = i.resume ?? null;
    this.cancel = i.parent?.cancel ?? new Cancel();
    this.continuing = i.parent !== undefined;
    this.excluded = i.excluded ?? null;
  }

  /**
   * A call for the rest of this one's stream (`body`, routed on `rr`): its cancellation, deadline
   * and holds are this call's; it is not continued itself and never armed.
   */
  child(
    o: Pick<CallInit, "rr" | "body" | "bytes" | "meter" | "excluded"> & { grpc?: GrpcInput },
  ): Call {
    return new Call({
      ...o,
      inb: this.inb,
      ctx: this.ctx,
      holds: this.#holds,
      start: this.start,
      series: this.series,
      at: this.at,
      deadlines: this.#deadlines,
      tasks: this.tasks,
      grpc: o.grpc ?? null,
      prepareGrpc: null,
      parent: this,
    });
  }

  /** Starts the deadline and the client-gone listener; both end with the response. */
  arm(): void {
    this.inb.gone.on(this.onClientGone);
    this.#deadlines.addEntry(this);
    this.#holds.add(this.release);
  }

  hold(fn: () => void): void {
    this.#holds.add(fn);
  }

  readyGrpc(): Promise<GrpcInput> {
    if (this.#grpc) return Promise.resolve(this.#grpc);
    if (!this.#prepareGrpc) {
      return Promise.reject(new Error("no tokenizer to prepare a gRPC request"));
    }
    return this.#preparing ??= this.#prepareGrpc().then((g) => this.#grpc = g);
  }

  grpcInput(): GrpcInput {
    if (!this.#grpc) throw new Error("the gRPC request is not prepared (await readyGrpc)");
    return this.#grpc;
  }

  timedOut(): boolean {
    return this.cancel.reason instanceof DeadlineExceeded;
  }

  /** The deadline passed (called by `Deadlines`). */
  expire(): void {
    this.cancel.cancel(new DeadlineExceeded("request timeout"));
  }

  /** The client went away. */
  readonly onClientGone = (): void => this.cancel.cancel(this.inb.gone.reason);

  /** The response is done: the deadline and the client listener go. */
  readonly release = (): void => {
    this.#deadlines.remove(this);
    this.inb.gone.off(this.onClientGone);
  };
}
