/**
 * The proxy's shared vocabulary, imported by every proxy module and importing none of them:
 * what the proxy is built from, what one request carries through its attempts, and what an
 * attempt comes to (told apart by `kind`).
 */

import type { GatewayConfig } from "../config/config.ts";
import type { Clock, Random } from "../core/clock.ts";
import type { GatewayError } from "../core/errors.ts";
import type { Inbound, Reply } from "../core/http.ts";
import type { Logger } from "../core/log.ts";
import type { RouteRequest, SelectionNote } from "../core/types.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { Policy } from "../policies/policy.ts";
import type { Cancel, HeaderList, Upstream, UpstreamResponse } from "../upstream/types.ts";
import type { Worker } from "../workers/worker.ts";
import type { WorkerRegistry } from "../workers/registry.ts";
import type { Admission } from "./admission.ts";
import type { GrpcBackend } from "./grpc_attempt.ts";
import type { GrpcInput } from "./grpc_request.ts";
import type { Holds, RouteSeries } from "./proxy_metrics.ts";

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
  /** Clock for breaker, deadline and latency readings. */
  clock: Clock;
  /** Randomness for backoff jitter and bootstrap rooms. */
  random: Random;
  /** HTTP client toward workers. */
  upstream: Upstream;
  /** Admission control. */
  admission: Admission;
  /** PD mode: the leg policies; absent for regular routing. */
  pd?: PdPolicies;
  /** gRPC workers' clients and the gateway's tokenizer (`--model-path`); absent without one. */
  grpc?: GrpcBackend;
}

/** Per-request context from the server. */
export interface RequestContext {
  /** The request id echoed as `x-request-id`. */
  requestId: string;
  /** Settles once the response is delivered or abandoned. */
  completed: Promise<unknown>;
}

/** Everything about the request an attempt needs. */
export interface CallContext {
  /** The client request. */
  inb: Inbound;
  /** Its routing inputs. */
  rr: RouteRequest;
  /** The parsed body. */
  body: unknown;
  /** The body bytes as received. */
  bytes: Uint8Array<ArrayBuffer>;
  /** Request id and completion. */
  ctx: RequestContext;
  /** Released when the response is done. */
  holds: Holds;
  /** Clock reading at arrival. */
  start: number;
  /** Metric series of the request. */
  series: RouteSeries;
  /** Cancels worker requests (client gone or deadline). */
  readonly cancel: Cancel;
  /** The request prepared for gRPC workers (tokenized), when its model has any; else null. */
  readonly grpc: GrpcInput | null;
  /** Whether the deadline fired. */
  timedOut(): boolean;
  /** The selection notes of this request's picks, by worker id (the latest per worker). */
  readonly notes: Map<string, SelectionNote>;
}

/** Status answered when the client left (nobody reads it). */
export const CLIENT_CLOSED = 499;

/** Worker paths per endpoint. */
export const ENDPOINT_PATHS: Record<RouteRequest["endpoint"], string> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
  generate: "/generate",
  embeddings: "/v1/embeddings",
  rerank: "/v1/rerank",
};

/** A failed attempt, kept in case it is the last. */
export interface Failure {
  /** Whether another worker may be tried. */
  retryable: boolean;
  /** The worker's own error response, passed through verbatim if it is the last. */
  worker?: { status: number; headers: HeaderList; body: Uint8Array<ArrayBuffer> };
  /** Or the gateway's error. */
  error?: GatewayError;
}

/** A worker response head, with the in-flight count it holds. */
export interface Sent extends Slot {
  readonly kind: "sent";
  /** The worker's response. */
  res: UpstreamResponse;
}

/** A request counted on a worker (`Calls.hold`). */
export interface Slot {
  /** Gives the worker's in-flight slot back (idempotent). */
  release: () => void;
  /** The first token arrived: its prefill leaves the worker's backlog (idempotent). */
  started: () => void;
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

/**
 * One way of serving a request with attempts (regular: one worker; PD: a pair). The attempt
 * loop (`attempts.ts`) owns retries, backoff, exclusion of failed workers and their metrics;
 * a plan only finds candidates, picks for one attempt and runs it.
 */
export interface AttemptPlan<C, P> {
  /** `router` label of the retry metrics. */
  readonly label: "regular" | "pd";
  /** Error code when no attempt could be made at all. */
  readonly code: string;
  /** Log line of a retry. */
  readonly retryMessage: string;
  /** The request's candidate workers; throws (404/503) when there are none. */
  candidates(c: CallContext): C;
  /** Workers for one attempt, never one in `failed`; null when a retry has nothing left. */
  pick(c: CallContext, cands: C, failed: ReadonlySet<string>, retrying: boolean): P | null;
  /** Runs one attempt on `pick`. */
  run(c: CallContext, pick: P): Promise<AttemptResult>;
  /** Log fields naming the attempt's workers. */
  describe(pick: P, failed: Failed): Record<string, unknown>;
}
