/**
 * The proxy's shared vocabulary, imported by every proxy module and importing none of them at
 * run time: what the proxy is built from, what one request carries through its attempts, how a
 * worker is spoken to (`Leg`, one per protocol), what an attempt is (`AttemptPlan`, regular or a
 * PD pair), and what an attempt comes to (told apart by `kind`).
 */

import type { GatewayConfig } from "../config/config.ts";
import type { Clock, Random } from "../core/clock.ts";
import type { GatewayError } from "../core/errors.ts";
import type { Inbound, Reply } from "../core/http.ts";
import type { Logger } from "../core/log.ts";
import type { Tasks } from "../core/tasks.ts";
import type { ConnectionMode, RouteRequest, SelectionNote } from "../core/types.ts";
import type { GenerateStream } from "../grpc/sglang_client.ts";
import type { GenerateRequestPb } from "../grpc/sglang_proto.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { LastDecision, Policy } from "../policies/policy.ts";
import type { Decoder } from "../tokenizer/detokenize.ts";
import type { HeaderList, Upstream } from "../upstream/types.ts";
import type { Cancel } from "../core/cancel.ts";
import type { Worker } from "../workers/worker.ts";
import type { TextRatios } from "../workers/text_ratios.ts";
import type { WorkerRegistry } from "../workers/registry.ts";
import type { TenantLimiter } from "../limits/limiter.ts";
import type { Admission } from "./admission.ts";
import type { GrpcInput, PromptTokenizer } from "./grpc/request.ts";
import type { RouteSeries } from "./series.ts";
import type { RequestTrace, Span } from "../tracing/span.ts";

/** Which policy routes a model. */
export interface PolicyLookup {
  /** The policy for `model` (null: any model). */
  forModel(model: string | null): Policy;
}

/** The policies of the two PD legs. */
export interface PdPolicies {
  /** Picks the prefill worker. */
  prefill: Policy;
  /** Picks the decode worker. */
  decode: Policy;
}

/** A gRPC worker's client, as an attempt uses it. */
export interface GenerateClient {
  /** Starts a `Generate` call with `metadata` (the trace context); `cancel` ends it. */
  generate(
    req: GenerateRequestPb,
    cancel?: Cancel,
    metadata?: readonly [string, string][],
  ): GenerateStream;
  /** Asks the worker to abort request `requestId`. */
  abort(requestId: string, reason: string): Promise<unknown>;
}

/** What gRPC attempts are built from. */
export interface GrpcBackend {
  /** The client of a worker URL. */
  client(url: string): GenerateClient;
  /** The gateway's tokenizer (cached encode, template, decode). */
  tokenizer: PromptTokenizer & Decoder;
  /** Releases what the tokenizer holds (its threads); called by the proxy's `close`. */
  close?(): void;
}

/** What the proxy is built from. */
export interface ProxyDeps {
  /** Gateway configuration. */
  config: GatewayConfig;
  /** The worker registry. */
  registry: WorkerRegistry;
  /** The routing policies by model. */
  policies: PolicyLookup;
  /** Metrics. */
  metrics: Metrics;
  /** Logger (module `proxy`). */
  log: Logger;
  /** Clock for breaker, deadline, backoff and latency readings. */
  clock: Clock;
  /** Randomness for backoff jitter and bootstrap rooms. */
  random: Random;
  /** HTTP client toward workers. */
  upstream: Upstream;
  /** Admission control. */
  admission: Admission;
  /** Per-tenant rate limits (`--tenant-rate-limit-enabled`); absent when off. */
  limits?: TenantLimiter;
  /** PD mode: the leg policies; absent for regular routing. */
  pd?: PdPolicies;
  /** gRPC workers' clients and the gateway's tokenizer (`--model-path`); absent without one. */
  grpc?: GrpcBackend;
  /**
   * Characters per token per model and worker, learned from the answers (the estimate requests
   * are routed with); absent: 4 a token, nothing learned.
   */
  ratios?: TextRatios;
  /** Where the policies' observer keeps its last branch (the attempt span's `smg.route.branch`). */
  lastDecision?: LastDecision;
  /**
   * Whether requests for `model` are routed on their token ids though its workers speak HTTP
   * (their engines publish KV events, indexed by token); needs `grpc`'s tokenizer. Default no.
   */
  routesOnTokens?: (model: string) => boolean;
}

/** Per-request context from the server. */
export interface RequestContext {
  /** The request id echoed as `x-request-id`. */
  requestId: string;
  /** Settles once the response is delivered or abandoned. */
  completed: Promise<unknown>;
  /** The request's tenant key (`auth:`, `header:`, `ip:` or `anonymous`), when resolved. */
  tenant?: string;
  /** Its trace (`--enable-trace`), or undefined with tracing off. */
  trace?: RequestTrace;
}

/**
 * Where the answering attempt reports the tokens its answer used (the tenant limits settle the
 * request's reservation on it; `Charge` in `lib/limits/limiter.ts`).
 */
export interface UsageMeter {
  /** The answer's usage, as the worker (or, for gRPC workers, the gateway) counted it. */
  final(prompt: number, completion: number): void;
  /** How to read the tokens delivered so far, should the client leave before the end. */
  live(read: () => { prompt: number; completion: number }): void;
}

/** Everything about the request an attempt needs (`Call` in `call.ts`). */
export interface CallContext {
  /** The client request. */
  readonly inb: Inbound;
  /** Its routing inputs. */
  readonly rr: RouteRequest;
  /** The parsed body. */
  readonly body: unknown;
  /** The body bytes as received. */
  readonly bytes: Uint8Array<ArrayBuffer>;
  /** Request id and completion. */
  readonly ctx: RequestContext;
  /** Clock reading at arrival. */
  readonly start: number;
  /** Metric series of the request. */
  readonly series: RouteSeries;
  /** Cancels worker requests (client gone or deadline). */
  readonly cancel: Cancel;
  /** The selection notes of this request's picks, by worker id (the latest per worker). */
  readonly notes: Map<string, SelectionNote>;
  /** Whether the deadline fired. */
  timedOut(): boolean;
  /** Runs `fn` once the client's response is done (delivered or abandoned). */
  hold(fn: () => void): void;
  /**
   * Prepares the request as gRPC workers take it (template, token ids, sampling) on first use
   * and keeps it, so a request is tokenized at most once; rejects with a 400 on bad input.
   * Awaited by the gRPC protocol before a leg opens (a gateway without a tokenizer has none).
   */
  readyGrpc(): Promise<GrpcInput>;
  /** The request as gRPC workers take it, once `readyGrpc` has resolved. */
  grpcInput(): GrpcInput;
  /** Background work of this request (a prefill drain), awaited by the proxy's shutdown. */
  readonly tasks: Tasks;
  /** Where the answer's usage goes (tenant limits on); null when nobody needs it. */
  readonly meter: UsageMeter | null;
  /**
   * Serves the rest of this request's stream (`Rest`) on a worker not in `exclude`, as part of
   * this request (its deadline, cancellation and holds); `sent` pieces were generated before it.
   * Null where a broken stream is not continued (PD, a mixed fleet, a continuation itself).
   */
  readonly resume: Resume | null;
  /** This call continues another's stream: its relay rejects on a break (the outer one goes on). */
  readonly continuing: boolean;
  /** Workers its picks exclude from the start (a continuation's broken ones). */
  readonly excluded: ReadonlySet<string> | null;
  /** Its attempts' spans by worker id, when its trace is recorded (`trace.ts`). */
  spans: Map<string, Span> | null;
}

/**
 * What the rest of a stream is asked as: an HTTP worker's request body, or a gRPC worker's
 * prepared request (the prompt's ids followed by those generated so far).
 */
export type Rest = { body: Record<string, unknown>; grpc?: undefined } | {
  grpc: GrpcInput;
  body?: undefined;
};

/** Serves the rest of a stream elsewhere (`CallContext.resume`). */
export type Resume = (
  rest: Rest,
  exclude: ReadonlySet<string>,
  sent: number,
) => Promise<Reply>;

/** A request counted on a worker (`WorkerLedger.hold`). */
export interface Slot {
  /** Gives the worker's in-flight slot back (idempotent). */
  release: () => void;
  /** The first token arrived: its prefill leaves the worker's backlog (idempotent). */
  firstToken: () => void;
  /** The trace context the worker is sent (null: tracing off; the client's passes through). */
  trace: LegTrace | null;
}

/** The trace context a worker is sent with one attempt. */
export interface LegTrace {
  /** The attempt's span (null when the request is not sampled). */
  span: Span | null;
  /** `traceparent` for the worker. */
  traceparent: string;
  /** `tracestate` for the worker, or null. */
  tracestate: string | null;
}

/** Status answered when the client left (nobody reads it). */
export const CLIENT_CLOSED = 499;

/** A failed attempt, kept in case it is the last. */
export interface Failure {
  /** Whether another worker may be tried. */
  retryable: boolean;
  /** The worker's own error response, passed through verbatim if it is the last. */
  worker?: { status: number; headers: HeaderList; body: Uint8Array<ArrayBuffer> };
  /** Or the gateway's error. */
  error?: GatewayError;
}

/** The client got its reply (success, a pass-through error, or 499 when it left). */
export interface Answered {
  readonly kind: "response";
  reply: Reply;
}

/** The attempt failed on `worker`, which this request will not try again. */
export interface Failed {
  readonly kind: "failure";
  failure: Failure;
  worker: Worker;
}

/** What an attempt came to. */
export type AttemptResult = Answered | Failed;

/** A leg's worker answered well enough to answer the client from, or to drain. */
export interface Ready {
  readonly kind: "ready";
}

/** Bootstrap fields of a PD pair: where the decode leg fetches the prompt's KV. */
export interface Bootstrap {
  /** The prefill worker's host (brackets of an IPv6 literal removed). */
  host: string;
  /** Its bootstrap port; null when none was configured (the engine's own default applies). */
  port: number | null;
  /** One fresh room per sequence (batched requests have several). */
  rooms: number[];
  /** Whether the request is batched (the fields are then arrays). */
  batched: boolean;
}

/**
 * One request to one worker: how a worker is spoken to, whatever the protocol. The worker's
 * in-flight slot, taken when the worker was picked (`WorkerLedger.hold`), is the leg's from
 * `open` until the leg ends.
 */
export interface Leg {
  /** The worker. */
  readonly worker: Worker;
  /**
   * Sends the request (called once, right after `open`: a pair's two legs then run at once)
   * and waits for the worker's first answer: `ready` (HTTP: a 2xx head; gRPC: the first
   * message), or what the attempt came to (a retryable failure, a pass-through error, 499 when
   * the client left or the leg was stopped).
   */
  ready(): Promise<Ready | AttemptResult>;
  /** The client's reply from a ready leg; a stream that breaks before its first byte fails. */
  answer(): Promise<AttemptResult>;
  /**
   * Reads a ready leg to its end, discarding it, keeping its slot until then; the worker is
   * blamed if it breaks. Bounded by the request timeout; never rejects.
   */
  drain(): Promise<void>;
  /**
   * Ends the leg without blaming the worker (the other PD leg failed, or shutdown). It fires the
   * leg's `Cancel`: only for legs opened with a cancellation of their own (PD's), not the
   * request's.
   */
  stop(): void;
}

/** One attempt of a request, shared by its legs. */
export interface Attempt {
  /** Unique in this process (gRPC request ids are the request id and this). */
  readonly seq: number;
  /** A PD pair's bootstrap fields; null on a regular attempt. */
  readonly bootstrap: Bootstrap | null;
}

/** How the gateway speaks to workers of one connection mode. */
export interface Protocol {
  /**
   * What `open` needs of `c` that takes time (gRPC: its tokens), awaited before it and after the
   * pick's charge: a decision and its bookkeeping are never split by an await.
   */
  prepare?(c: CallContext): Promise<unknown>;
  /** Sends `c` to `worker` for `attempt`, cancelled by `cancel`; the leg releases `slot`. */
  open(c: CallContext, worker: Worker, attempt: Attempt, cancel: Cancel, slot: Slot): Leg;
}

/** How workers of each connection mode are spoken to. */
export type Protocols = { readonly [m in ConnectionMode]: Protocol };

/**
 * One way of serving a request with attempts (regular: one worker; PD: a pair). The attempt
 * loop (`attempts.ts`) owns retries, backoff, exclusion of failed workers and their metrics;
 * a plan only finds candidates, picks for one attempt and runs it.
 */
export interface AttemptPlan<C, P> {
  /** `router` label of the retry metrics, and the requests' `backend_type`. */
  readonly label: "regular" | "pd";
  /** Error code when no attempt could be made at all. */
  readonly code: string;
  /** Log line of a retry. */
  readonly retryMessage: string;
  /** The request's candidate workers; throws (404/503) when there are none. */
  candidates(c: CallContext): C;
  /**
   * Workers for one attempt, never one in `failed`, each charged (`WorkerLedger.hold`) in the
   * same synchronous step as its selection, so the next decision sees it; null when a retry has
   * nothing left.
   */
  pick(c: CallContext, cands: C, failed: ReadonlySet<string>, retrying: boolean): P | null;
  /** Runs one attempt on `pick`, whose slots it releases however it ends. */
  run(c: CallContext, pick: P): Promise<AttemptResult>;
  /** Log fields naming the attempt's workers. */
  describe(pick: P, failed: Failed): Record<string, unknown>;
}
