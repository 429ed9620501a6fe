/**
 * The inference path: admission → body read once → routing inputs → a `Call` → the attempt loop
 * (`attempts.ts`) running the gateway's one `AttemptPlan`: what an attempt is, `RegularPlan`
 * (one worker) or `PdPlan` (a prefill/decode pair). An attempt speaks to each of its workers
 * through the `Protocol` of the worker's connection mode, fixed at registration (`http/leg.ts`,
 * `grpc/leg.ts`), which record their outcomes in one `WorkerLedger`.
 *
 * Failures: a connect error, 5xx, 408 or 429 is retried after a jittered backoff on a worker
 * that has not failed this request yet (upstream may re-pick the failed one); a stream is
 * retried only before its first byte reached the client. The last failure is returned as the
 * worker sent it, or as a gateway error (502 unreachable, 504 timeout). One deadline
 * (`--request-timeout-secs`) covers the whole request, stream included; a client that leaves
 * cancels the worker request.
 *
 * Tenant limits (`--tenant-rate-limit-enabled`): once the request is read and its prompt counted
 * (exactly when it was tokenized for gRPC workers, else at its model's characters per token,
 * learned from the answers' usage), before routing and
 * outside the attempt loop, so retries never reserve again, its tenant's reservation is made or
 * the request denied (429 `tenant_rate_limit_exceeded`). The answering attempt reports the usage
 * to the request's meter; the reservation is settled on it, or on what was delivered when the
 * request ends without it.
 *
 * Everything a request holds (admission slot, in-flight count, deadline, abort listener, the
 * tenant reservation) is released once, when `ctx.completed` settles: the response was
 * delivered or abandoned. What
 * outlives the response (a PD prefill drained) is a task of the proxy, stopped and awaited by
 * `close()`.
 */

import { errorReply, GatewayError } from "../core/errors.ts";
import { type Inbound, type Reply, replyHeader } from "../core/http.ts";
import { Tasks } from "../core/tasks.ts";
import type { ConnectionMode, Endpoint, RouteRequest } from "../core/types.ts";
import type { Worker } from "../workers/worker.ts";
import { type ExtractOptions, extractRouteRequest } from "../requests/route_request.ts";
import type { Charge } from "../limits/limiter.ts";
import { promptTokens } from "../policies/expected_wait.ts";
import { runAttempts } from "./attempts.ts";
import { parseJson } from "./body.ts";
import { Call, Holds } from "./call.ts";
import { Deadlines } from "./deadlines.ts";
import { GrpcProtocol } from "./grpc/leg.ts";
import { type GrpcInput, grpcInput } from "./grpc/request.ts";
import { promptEncodeChars, promptOfAsync } from "../tokenizer/prompt.ts";
import { HttpProtocol } from "./http/leg.ts";
import { WorkerLedger } from "./ledger.ts";
import { PdPlan } from "./pd.ts";
import { Unspoken } from "./protocols.ts";
import { RegularPlan } from "./regular.ts";
import { ProxyMetrics, type RouteSeries } from "./series.ts";
import { requestOnSpan, tenantLimitOnSpan, tokenizing } from "./trace.ts";
import { type Span, timed } from "../tracing/span.ts";
import type { SelectEnv } from "./select.ts";
import type {
  AttemptPlan,
  Protocols,
  ProxyDeps,
  RequestContext,
  Rest,
  UsageMeter,
} from "./types.ts";

const encoder = new TextEncoder();

export type { PdPolicies, PolicyLookup, ProxyDeps, RequestContext } from "./types.ts";

/**
 * Characters of a prompt left to encode (its cached prefix aside) past which a request to HTTP
 * workers publishing KV events is routed on its text rather than wait: about 2 ms of encoding.
 */
export const KV_ENCODE_MAX_CHARS = 4096;

const allGrpc = (ws: readonly Worker[]) =>
  ws.length > 0 && ws.every((w) => w.connection === "grpc");

/** The inference request handler. */
export class InferenceProxy {
  readonly #d: ProxyDeps;
  readonly #timeoutMs: number;
  readonly #deadlines: Deadlines;
  readonly #pm: ProxyMetrics;
  readonly #plan: RegularPlan | PdPlan;
  readonly #extract: ExtractOptions;
  /** Background work of requests (PD prefill drains). */
  readonly #tasks = new Tasks();

  /** Builds the handler over its dependencies. */
  constructor(deps: ProxyDeps) {
    this.#d = deps;
    this.#timeoutMs = deps.config.requestTimeoutSecs * 1000;
    this.#pm = new ProxyMetrics(deps.metrics);
    const { streamIdleTimeoutSecs: idle, streamHeadTimeoutSecs: head } = deps.config;
    const ledger = new WorkerLedger(
      this.#pm,
      deps.clock,
      this.#timeoutMs,
      deps.ratios ?? null,
      (idle || head) * 1000,
    );
    const ratios = deps.ratios;
    this.#extract = {
      routingKeyHeaders: deps.config.routingKeyHeaders,
      routingKeyOverride: deps.config.routingKeyOverride,
      charsPerToken: ratios ? (model) => ratios.forModel(model) : undefined,
    };
    const protocols: Protocols = {
      http: new HttpProtocol(deps, ledger),
      grpc: deps.grpc ? new GrpcProtocol(deps, ledger, deps.grpc) : new Unspoken(
        ledger,
        "gRPC workers need this gateway to have --model-path or --tokenizer-path",
      ),
    };
    const env: SelectEnv = {
      clock: deps.clock,
      shed: deps.metrics.overloadShed.with("selection"),
      overloadedRetryAfter: deps.config.loadMonitor.intervalSecs,
      lastDecision: deps.lastDecision,
    };
    this.#plan = deps.pd
      ? new PdPlan(deps, env, deps.pd, protocols, ledger)
      : new RegularPlan(deps, env, protocols, ledger);
    this.#deadlines = new Deadlines(deps.clock, Math.min(1000, Math.max(5, this.#timeoutMs / 20)));
  }

  /**
   * Stops the deadline timer and the requests' background work (prefill drains), and resolves
   * once that work has settled (shutdown, tests).
   */
  close(): Promise<void> {
    this.#deadlines.stop();
    this.#d.grpc?.close?.();
    return this.#tasks.close();
  }

  /**
   * Handles one inference request on `endpoint`, in named stages: admit (an admission slot),
   * read (the body, once, into routing inputs), tokenize (where routing needs the tokens),
   * reserve (the tenant's limits), attempt (route and try, `attempts.ts`), observe (metrics and
   * the debug line); any refusal on the way is answered in the error envelope.
   */
  async handle(inb: Inbound, endpoint: Endpoint, ctx: RequestContext): Promise<Reply> {
    const d = this.#d;
    const start = d.clock.now();
    const holds = new Holds();
    ctx.completed.then(holds.done, holds.done);
    let series: RouteSeries | null = null;
    const server = ctx.trace?.server ?? null;
    try {
      const slot = d.admission.acquire(inb.gone);
      // Queued, the wait is a span of its own.
      holds.add(slot instanceof Promise ? await timed(server?.child("smg.admission"), slot) : slot);
      const bytes = await inb.bytes(d.config.maxPayloadSize);
      const body = parseJson(bytes);
      const extracted = extractRouteRequest(endpoint, body, inb.headers, this.#extract);
      if (server) requestOnSpan(server, extracted);
      const t = await this.#tokenize(endpoint, body, extracted, server);
      const { rr, grpc } = t;
      const plan = this.#plan;
      series = plan.series(this.#pm, rr, t.connection);
      series.requests[rr.stream ? 1 : 0].inc();
      const meter = d.limits ? this.#reserve(ctx, rr, grpc, holds) : null;
      const call: Call = new Call({
        inb,
        rr,
        body,
        bytes,
        ctx,
        holds,
        start,
        series,
        at: start + this.#timeoutMs,
        deadlines: this.#deadlines,
        grpc,
        prepareGrpc: t.prepare,
        tasks: this.#tasks,
        meter,
        resume: this.#continues(rr)
          ? (b, exclude, sent): Promise<Reply> => this.#resume(call, b, exclude, sent)
          : null,
      });
      // One cancellation for the worker requests: the client leaving or the deadline.
      call.arm();
      const res = await runAttempts<unknown, unknown>(
        d,
        this.#timeoutMs,
        call,
        plan as AttemptPlan<unknown, unknown>,
      );
      this.#observe(endpoint, ctx, rr, series, res, start);
      return res;
    } catch (e) {
      return this.#refused(endpoint, ctx, series, e);
    }
  }

  /** Whether a stream of `rr` that breaks mid-way may go on elsewhere (`http/continuer.ts`). */
  #continues(rr: RouteRequest): boolean {
    const d = this.#d;
    if (!rr.stream || d.pd || d.config.streamMigrationLimit <= 0) return false;
    const ws = d.registry.forModel(rr.model);
    return ws.every((w) => w.connection === "http") || allGrpc(ws);
  }

  /**
   * The rest of `call`'s stream: `body` (the prompt and the text so far) routed and tried like a
   * request of its own, on workers not in `exclude`, within `call`'s deadline; its usage counts
   * toward the tenant's as the original prompt plus every generated piece (`sent` before it).
   */
  #resume(call: Call, rest: Rest, exclude: ReadonlySet<string>, sent: number): Promise<Reply> {
    const m = call.meter;
    const meter: UsageMeter | null = m && {
      final: (prompt, completion) => m.final(Math.max(0, prompt - sent), completion + sent),
      live: (read) =>
        m.live(() => {
          const r = read();
          return { prompt: r.prompt, completion: r.completion + sent };
        }),
    };
    let child: Call;
    if (rest.grpc) {
      // Routed on the prompt's ids followed by those generated: where that prefix is cached.
      const rr = { ...call.rr, tokens: rest.grpc.ids };
      // No meter: the continued stream counts its usage whole (`grpc/sse.ts`).
      const o = { rr, body: call.body, bytes: call.bytes, meter: null, grpc: rest.grpc };
      child = call.child({ ...o, excluded: exclude });
    } else {
      const body = rest.body;
      const rr = extractRouteRequest(call.rr.endpoint, body, call.inb.headers, this.#extract);
      const bytes = encoder.encode(JSON.stringify(body));
      child = call.child({ rr, body, bytes, meter, excluded: exclude });
    }
    return runAttempts(
      this.#d,
      this.#timeoutMs,
      child,
      this.#plan as AttemptPlan<unknown, unknown>,
    );
  }

  /**
   * The tokenize stage. The request as gRPC workers take it (token ids, sampling) is prepared at
   * most once: now, for a model served only by gRPC workers (policies then route on its exact
   * tokens), or by its first gRPC attempt (`prepare`). For HTTP workers publishing KV events,
   * only the prompt's token ids are made, where they come at once.
   */
  async #tokenize(
    endpoint: Endpoint,
    body: unknown,
    rr: RouteRequest,
    server: Span | null,
  ): Promise<Tokenized> {
    const d = this.#d;
    const tok = d.grpc?.tokenizer;
    const prepare = tok
      ? () => grpcInput(endpoint, body as Record<string, unknown>, tok, rr.model ?? "default")
      : null;
    if (prepare === null) return { rr, grpc: null, prepare, connection: "http" };
    if (this.#servesGrpc(rr.model)) {
      const grpc = await tokenizing(server, prepare());
      return {
        rr: rr.tokens === null ? { ...rr, tokens: grpc.ids } : rr,
        grpc,
        prepare,
        connection: "grpc",
      };
    }
    if (
      rr.tokens === null && d.routesOnTokens?.(rr.model ?? "unknown") &&
      this.#encodesQuickly(endpoint, body as Record<string, unknown>)
    ) {
      // HTTP workers publishing KV events: route on the prompt's tokens, as the engine holds
      // them; a body the tokenizer refuses still goes, on its text.
      try {
        const work = promptOfAsync(endpoint, body as Record<string, unknown>, tok!);
        const { ids } = await tokenizing(server, work);
        const tokenized = { ...rr, tokens: ids, tokenizedText: true };
        return { rr: tokenized, grpc: null, prepare, connection: "http" };
      } catch { /* routed on text */ }
    }
    return { rr, grpc: null, prepare, connection: "http" };
  }

  /** The observe stage: the route's duration or error, and the debug line. */
  #observe(
    endpoint: Endpoint,
    ctx: RequestContext,
    rr: RouteRequest,
    series: RouteSeries,
    res: Reply,
    start: number,
  ): void {
    const d = this.#d;
    const ms = d.clock.now() - start;
    if (res.status < 400) series.duration.observe(ms / 1000);
    else this.#pm.error(series, res.status);
    if (d.log.enabled("debug")) {
      d.log.debug("request routed", {
        request_id: ctx.requestId,
        trace_id: ctx.trace?.traceId,
        endpoint,
        model: rr.model,
        stream: rr.stream,
        status: res.status,
        worker: replyHeader(res.headers, "x-smg-routed-worker-id") ?? undefined,
        head_ms: Math.round(ms * 10) / 10,
      });
    }
  }

  /** A refusal or failure on the way, in the error envelope (a 500 logged as an error). */
  #refused(
    endpoint: Endpoint,
    ctx: RequestContext,
    series: RouteSeries | null,
    e: unknown,
  ): Reply {
    const d = this.#d;
    const err = e instanceof GatewayError ? e : new GatewayError(500, "internal_error", String(e));
    const ids = { request_id: ctx.requestId, trace_id: ctx.trace?.traceId };
    if (err.status === 500) d.log.error("request failed", { ...ids, err });
    else if (d.log.enabled("debug")) {
      d.log.debug("request refused", {
        ...ids,
        endpoint,
        status: err.status,
        code: err.code,
      });
    }
    if (series) this.#pm.error(series, err.status);
    return errorReply(err, ctx.requestId);
  }

  /**
   * The tenant's reservation for `rr` (its prompt tokens and one request), settled when the
   * request is done if its answer did not settle it; a 429 `tenant_rate_limit_exceeded` when
   * denied, with `Retry-After` unless the ask exceeds a limit outright.
   */
  #reserve(
    ctx: RequestContext,
    rr: RouteRequest,
    grpc: GrpcInput | null,
    holds: Holds,
  ): Charge {
    const estimate = grpc ? grpc.ids.length : promptTokens(rr);
    const r = this.#d.limits!.reserve(ctx.tenant ?? "anonymous", rr.model, estimate);
    tenantLimitOnSpan(ctx.trace?.server, typeof r !== "number", estimate);
    if (typeof r === "number") {
      throw new GatewayError(
        429,
        "tenant_rate_limit_exceeded",
        "Tenant rate limit exceeded for this request",
        { retryAfter: Number.isFinite(r) ? r : undefined },
      );
    }
    holds.add(() => r.finish());
    return r;
  }

  /**
   * Whether `body`'s prompt is cheap to tokenize: at most `KV_ENCODE_MAX_CHARS` characters left
   * to encode once the tokenizer's cache is used (a conversation's next turn, a repeated prompt,
   * a short one). A long prompt seen for the first time is routed on its text instead of waiting
   * for its encoding (an 11k-token prompt takes 20-35 ms of a core): nobody can hold much of what
   * this gateway never sent, and its text tree knows what it did send.
   */
  #encodesQuickly(endpoint: Endpoint, body: Record<string, unknown>): boolean {
    const tok = this.#d.grpc?.tokenizer;
    if (!tok) return false;
    try {
      return promptEncodeChars(endpoint, body, tok) <= KV_ENCODE_MAX_CHARS;
    } catch {
      return false; // the gRPC form refuses it: routed on text
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
}

/** What the tokenize stage gives the rest of the request. */
interface Tokenized {
  /** The routing inputs, with the prompt's token ids where they were prepared. */
  rr: RouteRequest;
  /** The request as gRPC workers take it, when prepared now. */
  grpc: GrpcInput | null;
  /** Prepares it (at most once, by the first gRPC attempt), or null without a tokenizer. */
  prepare: (() => Promise<GrpcInput>) | null;
  /** Where the metrics count the request. */
  connection: ConnectionMode;
}
