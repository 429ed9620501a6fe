/**
 * The inference path: admission → body read once → validation and routing inputs → candidate
 * workers for the model → eligibility (decided once per attempt) → policy → dispatch with the
 * same bytes → response relayed untouched (SSE through `SseRelay`).
 *
 * Failures: a connect error, 5xx, 408 or 429 is retried after a jittered backoff on a worker
 * that has not failed this request yet (upstream may re-pick the failed one); a stream is
 * retried only before its first byte reached the client. The last failure is returned as the
 * worker sent it, or as a gateway error (502 unreachable, 504 timeout). One deadline
 * (`--request-timeout-secs`) covers the whole request, stream included; a client that leaves
 * cancels the worker request.
 *
 * Everything a request holds (admission slot, in-flight count, deadline, abort listener) is
 * released once, when `ctx.completed` settles: the response was delivered or abandoned.
 */

import { errorReply, GatewayError } from "../core/errors.ts";
import { type Inbound, type Reply, replyHeader } from "../core/http.ts";
import type { Endpoint, RouteRequest, SelectionNote } from "../core/types.ts";
import { Cancel } from "../upstream/types.ts";
import type { Worker } from "../workers/worker.ts";
import { extractRouteRequest } from "../routing/route_request.ts";
import { isGrpcUrl } from "../config/validate.ts";
import { Calls } from "./attempt.ts";
import { GrpcCalls } from "./grpc_attempt.ts";
import { type GrpcInput, grpcInput } from "./grpc_request.ts";
import { runAttempts } from "./attempts.ts";
import { parseJson } from "./body.ts";
import { type DeadlineEntry, Deadlines } from "./deadlines.ts";
import { PdPlan } from "./pd.ts";
import { Holds, ProxyMetrics, type RouteSeries } from "./proxy_metrics.ts";
import { newNote, noCandidates, type SelectEnv, selectWorker } from "./select.ts";
import type {
  AttemptPlan,
  AttemptResult,
  CallContext,
  ProxyDeps,
  RequestContext,
} from "./types.ts";

export type { PdPolicies, PolicyLookup, ProxyDeps, RequestContext } from "./types.ts";

/** One worker per attempt, chosen by the model's policy (an `AttemptPlan`). */
class RegularPlan implements AttemptPlan<readonly Worker[], Worker> {
  readonly label = "regular";
  readonly code = "no_available_workers";
  readonly retryMessage = "attempt failed; retrying on another worker";
  readonly #d: ProxyDeps;
  readonly #env: SelectEnv;
  readonly #calls: Calls;

  readonly #grpc: GrpcCalls | null;

  constructor(d: ProxyDeps, env: SelectEnv, calls: Calls, grpc: GrpcCalls | null) {
    this.#d = d;
    this.#env = env;
    this.#calls = calls;
    this.#grpc = grpc;
  }

  candidates(c: CallContext): readonly Worker[] {
    const candidates = this.#d.registry.forModel(c.rr.model);
    if (candidates.length === 0) throw noCandidates(this.#d.registry.size, c.rr);
    return candidates;
  }

  pick(
    c: CallContext,
    cands: readonly Worker[],
    failed: ReadonlySet<string>,
    retrying: boolean,
  ): Worker | null {
    const policy = this.#d.policies.forModel(c.rr.model);
    const note = newNote(c.rr, true, policy.name);
    const w = selectWorker(this.#env, cands, failed, c.rr, retrying, policy, undefined, note);
    if (w) c.notes.set(w.id, note);
    return w;
  }

  describe(worker: Worker): Record<string, unknown> {
    return { worker: worker.url };
  }

  async run(c: CallContext, worker: Worker): Promise<AttemptResult> {
    if (this.#grpc && isGrpcUrl(worker.url)) return await this.#grpc.run(c, worker);
    const sent = await this.#calls.send(c, worker, c.bytes);
    return sent.kind === "sent" ? await this.#calls.respond(c, worker, sent) : sent;
  }
}

class DeadlineExceeded extends Error {}

const allGrpc = (ws: readonly Worker[]) => ws.length > 0 && ws.every((w) => isGrpcUrl(w.url));

/** The inference request handler. */
export class InferenceProxy {
  readonly #d: ProxyDeps;
  readonly #timeoutMs: number;
  readonly #deadlines: Deadlines;
  readonly #pm: ProxyMetrics;
  readonly #plan: RegularPlan | PdPlan;

  /** Builds the handler over its dependencies. */
  constructor(deps: ProxyDeps) {
    this.#d = deps;
    this.#timeoutMs = deps.config.requestTimeoutSecs * 1000;
    this.#pm = new ProxyMetrics(deps.metrics);
    const calls = new Calls(deps, this.#pm, this.#timeoutMs);
    const env: SelectEnv = {
      clock: deps.clock,
      shed: deps.metrics.overloadShed.with("selection"),
      overloadedRetryAfter: deps.config.loadMonitor.intervalSecs,
    };
    const grpc = deps.grpc ? new GrpcCalls(deps, calls, deps.grpc) : null;
    this.#plan = deps.pd
      ? new PdPlan(deps, env, calls, deps.pd, grpc)
      : new RegularPlan(deps, env, calls, grpc);
    this.#deadlines = new Deadlines(deps.clock, Math.min(1000, Math.max(5, this.#timeoutMs / 20)));
  }

  /** Stops the deadline timer (shutdown, tests). */
  close(): void {
    this.#deadlines.stop();
  }

  /** Handles one inference request on `endpoint`. */
  async handle(inb: Inbound, endpoint: Endpoint, ctx: RequestContext): Promise<Reply> {
    const d = this.#d;
    const start = d.clock.now();
    const holds = new Holds();
    ctx.completed.then(holds.done, holds.done);
    let series: RouteSeries | null = null;
    try {
      const slot = d.admission.acquire(inb.gone);
      holds.add(slot instanceof Promise ? await slot : slot);
      const bytes = await inb.bytes(d.config.maxPayloadSize);
      const body = parseJson(bytes);
      let rr = extractRouteRequest(endpoint, body, inb.headers, {
        routingKeyHeaders: d.config.routingKeyHeaders,
        routingKeyOverride: d.config.routingKeyOverride,
      });
      // A model served by gRPC workers is tokenized now, so policies route on its exact tokens.
      let grpc: GrpcInput | null = null;
      if (d.grpc && this.#servesGrpc(rr.model)) {
        const obj = body as Record<string, unknown>;
        grpc = grpcInput(endpoint, obj, d.grpc.tokenizer, rr.model ?? "default");
        if (rr.tokens === null) rr = { ...rr, tokens: grpc.ids };
      }
      series = this.#pm.route(rr, d.policies.forModel(rr.model).name, grpc ? "grpc" : "http");
      series.requests[rr.stream ? 1 : 0].inc();
      const at = start + this.#timeoutMs;
      const call = new Call(inb, rr, body, bytes, ctx, holds, start, series, at, this.#deadlines);
      call.grpc = grpc;
      const res = await this.#dispatch(call);
      const ms = d.clock.now() - start;
      if (res.status < 400) series.duration.observe(ms / 1000);
      else this.#pm.error(series, res.status);
      if (d.log.enabled("debug")) {
        d.log.debug("request routed", {
          request_id: ctx.requestId,
          endpoint,
          model: rr.model,
          stream: rr.stream,
          status: res.status,
          worker: replyHeader(res.headers, "x-smg-routed-worker-id") ?? undefined,
          head_ms: Math.round(ms * 10) / 10,
        });
      }
      return res;
    } catch (e) {
      const err = e instanceof GatewayError
        ? e
        : new GatewayError(500, "internal_error", String(e));
      if (err.status === 500) d.log.error("request failed", { request_id: ctx.requestId, err });
      else if (d.log.enabled("debug")) {
        d.log.debug("request refused", {
          request_id: ctx.requestId,
          endpoint,
          status: err.status,
          code: err.code,
        });
      }
      if (series) this.#pm.error(series, err.status);
      return errorReply(err, ctx.requestId);
    }
  }

  /**
   * Whether the workers that may serve `model` are all gRPC workers (then the request is
   * tokenized before routing; a fleet that mixes in HTTP workers routes on text, and gRPC
   * attempts tokenize when they run, so HTTP-only requests still reach the HTTP workers).
   */
  #servesGrpc(model: string | null): boolean {
    const r = this.#d.registry;
    if (!this.#d.pd) return allGrpc(r.forModel(model));
    return allGrpc(r.forModel(model, "prefill")) && allGrpc(r.forModel(model, "decode"));
  }

  /** Starts the request's cancellation and deadline, then its attempts. */
  #dispatch(call: Call): Promise<Reply> {
    // One cancellation for the worker requests: the client leaving or the deadline.
    call.inb.gone.on(call.onClientGone);
    this.#deadlines.addEntry(call);
    call.holds.add(call.release);
    return runAttempts<unknown, unknown>(
      this.#d,
      this.#timeoutMs,
      call,
      this.#plan as AttemptPlan<unknown, unknown>,
    );
  }
}

/** One request on its way: what attempts read, its cancellation and its deadline entry. */
class Call implements CallContext, DeadlineEntry {
  readonly cancel = new Cancel();
  readonly notes = new Map<string, SelectionNote>();
  grpc: GrpcInput | null = null;
  readonly at: number;
  slot = -1;
  readonly inb: Inbound;
  readonly rr: RouteRequest;
  readonly body: unknown;
  readonly bytes: Uint8Array<ArrayBuffer>;
  readonly ctx: RequestContext;
  readonly holds: Holds;
  readonly start: number;
  readonly series: RouteSeries;
  readonly #deadlines: Deadlines;

  constructor(
    inb: Inbound,
    rr: RouteRequest,
    body: unknown,
    bytes: Uint8Array<ArrayBuffer>,
    ctx: RequestContext,
    holds: Holds,
    start: number,
    series: RouteSeries,
    at: number,
    deadlines: Deadlines,
  ) {
    this.inb = inb;
    this.rr = rr;
    this.body = body;
    this.bytes = bytes;
    this.ctx = ctx;
    this.holds = holds;
    this.start = start;
    this.series = series;
    this.at = at;
    this.#deadlines = deadlines;
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
