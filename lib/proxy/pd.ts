/**
 * Prefill/decode disaggregation, the way sglang pairs workers: per attempt the prefill policy
 * picks a prefill worker and the decode policy a decode worker (each leg with its own instance
 * and state); the body gets `bootstrap_host`, `bootstrap_port` and `bootstrap_room` (arrays, one
 * fresh room per element, for batched requests) and goes to both at once; the client gets the
 * decode response, streamed or whole, while the prefill response is drained in the background
 * (cancelling it could abort the prefill the decode waits for).
 *
 * A failure on either leg frees the other and fails the attempt; the attempt loop
 * (`attempts.ts`) re-selects the pair without the worker that failed (retryable: connect
 * errors, 5xx, 408, 429, a stream dying before its first byte). A leg's own error status is
 * passed through as the worker sent it. No usable pair: 503 `server_selection_failed`.
 *
 * A pair speaks one protocol, that of the model's first prefill worker: gRPC pairs run through
 * `GrpcCalls.runPd` (the bootstrap fields in `DisaggregatedParams`), the rest as above.
 */

import { GatewayError } from "../core/errors.ts";
import type { Worker } from "../workers/worker.ts";
import { isGrpcUrl } from "../config/validate.ts";
import type { Calls } from "./attempt.ts";
import type { GrpcCalls } from "./grpc_attempt.ts";
import { isRetryableStatus } from "./retry.ts";
import { newNote, noCandidates, type SelectEnv, selectWorker } from "./select.ts";
import type {
  AttemptPlan,
  AttemptResult,
  CallContext,
  Failed,
  PdPolicies,
  ProxyDeps,
  Sent,
} from "./types.ts";

const encoder = new TextEncoder();

/** How many sequences a body carries when batched (null: one, not batched). */
export function batchSize(body: Record<string, unknown>): number | null {
  const many = (v: unknown) =>
    Array.isArray(v) && (v.length === 0 || typeof v[0] !== "number") ? v.length : null;
  const n = many(body.text) ?? many(body.input_ids) ?? many(body.prompt);
  if (n !== null) return n;
  return typeof body.n === "number" && body.n > 1 ? body.n : null;
}

/** The body with the bootstrap fields for `prefill` (fresh rooms from `random`). */
export function withBootstrap(
  body: Record<string, unknown>,
  prefill: Worker,
  random: () => number,
): Uint8Array<ArrayBuffer> {
  const host = new URL(prefill.url).hostname.replace(/^\[|\]$/g, "");
  const port = prefill.bootstrapPort;
  const room = () => Math.floor(random() * 2 ** 53);
  const n = batchSize(body);
  const fields = n === null
    ? { bootstrap_host: host, bootstrap_port: port, bootstrap_room: room() }
    : {
      bootstrap_host: Array(n).fill(host),
      bootstrap_port: Array(n).fill(port),
      bootstrap_room: Array.from({ length: n }, room),
    };
  return encoder.encode(JSON.stringify({ ...body, ...fields }));
}

/** A prefill/decode pair for one attempt. */
export interface Pair {
  /** The prefill worker. */
  prefill: Worker;
  /** The decode worker. */
  decode: Worker;
}

/** The request's candidates per leg. */
export interface PdCandidates {
  /** Prefill workers for the model. */
  prefills: readonly Worker[];
  /** Decode workers for the model. */
  decodes: readonly Worker[];
}

const CODE = "server_selection_failed";

/** Serves requests with prefill/decode pairs (an `AttemptPlan`). */
export class PdPlan implements AttemptPlan<PdCandidates, Pair> {
  readonly label = "pd";
  readonly code = CODE;
  readonly retryMessage = "PD attempt failed; retrying with another pair";
  readonly #d: ProxyDeps;
  readonly #env: SelectEnv;
  readonly #calls: Calls;
  readonly #legs: PdPolicies;
  readonly #grpc: GrpcCalls | null;

  /** Over the proxy's dependencies and attempt machinery (`grpc`: for gRPC pairs). */
  constructor(
    d: ProxyDeps,
    env: SelectEnv,
    calls: Calls,
    legs: PdPolicies,
    grpc: GrpcCalls | null,
  ) {
    this.#d = d;
    this.#env = env;
    this.#calls = calls;
    this.#legs = legs;
    this.#grpc = grpc;
  }

  candidates(c: CallContext): PdCandidates {
    const d = this.#d;
    let prefills = d.registry.forModel(c.rr.model, "prefill");
    let decodes = d.registry.forModel(c.rr.model, "decode");
    // A pair speaks one protocol: that of the first available prefill worker, as upstream pairs
    // them, unless only the other protocol has an available pair.
    const mixed = (ws: readonly Worker[]) =>
      ws.some((w) => isGrpcUrl(w.url) !== isGrpcUrl(ws[0].url));
    if (
      prefills.length > 0 && (mixed(prefills) || mixed(decodes) ||
        (decodes.length > 0 && isGrpcUrl(decodes[0].url) !== isGrpcUrl(prefills[0].url)))
    ) {
      const now = d.clock.now();
      const up = (ws: readonly Worker[], grpc: boolean) =>
        ws.some((w) => isGrpcUrl(w.url) === grpc && w.available(now));
      let grpc = isGrpcUrl((prefills.find((w) => w.available(now)) ?? prefills[0]).url);
      if (!(up(prefills, grpc) && up(decodes, grpc)) && up(prefills, !grpc) && up(decodes, !grpc)) {
        grpc = !grpc;
      }
      const same = (w: Worker) => isGrpcUrl(w.url) === grpc;
      prefills = prefills.filter(same);
      decodes = decodes.filter(same);
    }
    if (prefills.length === 0 && decodes.length === 0) throw noCandidates(d.registry.size, c.rr);
    if (prefills.length === 0 || decodes.length === 0) {
      throw new GatewayError(
        503,
        CODE,
        `No available servers: no ${
          prefills.length === 0 ? "prefill" : "decode"
        } worker serves model '${c.rr.model ?? "any"}'`,
        { retryAfter: 1 },
      );
    }
    return { prefills, decodes };
  }

  pick(
    c: CallContext,
    cands: PdCandidates,
    failed: ReadonlySet<string>,
    retrying: boolean,
  ): Pair | null {
    const env = this.#env;
    const pn = newNote(c.rr);
    const prefill = selectWorker(
      env,
      cands.prefills,
      failed,
      c.rr,
      retrying,
      this.#legs.prefill,
      CODE,
      pn,
    );
    if (!prefill) return null;
    // The decode leg prefills nothing: the prompt's KV comes from the prefill leg.
    const dn = newNote(c.rr, false);
    const decode = selectWorker(
      env,
      cands.decodes,
      failed,
      c.rr,
      retrying,
      this.#legs.decode,
      CODE,
      dn,
    );
    if (!decode) return null;
    // What a decode worker reports cached says nothing of the prefill leg's prediction.
    dn.predictedCached = null;
    c.notes.set(prefill.id, pn);
    c.notes.set(decode.id, dn);
    return { prefill, decode };
  }

  describe(pair: Pair, f: Failed): Record<string, unknown> {
    return {
      leg: f.worker === pair.prefill ? "prefill" : "decode",
      prefill: pair.prefill.url,
      decode: pair.decode.url,
    };
  }

  async run(c: CallContext, pair: Pair): Promise<AttemptResult> {
    const calls = this.#calls;
    const { prefill: p, decode: w } = pair;
    if (this.#grpc && isGrpcUrl(p.url)) {
      const r = await this.#grpc.runPd(c, p, w);
      return r.kind === "failure" ? pdFailure(r) : r;
    }
    const bytes = withBootstrap(c.body as Record<string, unknown>, p, this.#d.random);
    const [ps, ds] = await Promise.all([calls.send(c, p, bytes), calls.send(c, w, bytes)]);
    if (ps.kind !== "sent" || ds.kind !== "sent") {
      drop(ps);
      drop(ds);
      const bad = ps.kind !== "sent" ? ps : ds as AttemptResult;
      return bad.kind === "response" ? bad : pdFailure(bad);
    }
    if (ps.res.status >= 300) {
      drop(ds);
      return await this.#legError(c, p, ps);
    }
    this.#drain(c, p, ps);
    if (ds.res.status >= 300) return await this.#legError(c, w, ds);
    return await calls.respond(c, w, ds);
  }

  /** A leg answered with an error status: retried elsewhere if retryable, else passed through. */
  #legError(c: CallContext, worker: Worker, sent: Sent): Promise<AttemptResult> {
    if (isRetryableStatus(sent.res.status)) return this.#calls.retryableStatus(worker, sent);
    return this.#calls.respond(c, worker, sent);
  }

  /**
   * Reads the prefill's response to its end without holding up the client, keeping its slot
   * until then. Bounded: by the request's cancellation while the client's answer is under way,
   * and by the request timeout from now on (a prefill that never ends is cut then); never
   * rejects.
   */
  #drain(c: CallContext, p: Worker, ps: Sent): void {
    const body = ps.res.body;
    let cut = false;
    const timer = setTimeout(() => {
      cut = true;
      body.cancel();
    }, this.#d.config.requestTimeoutSecs * 1000);
    (async () => {
      try {
        while ((await body.read()) !== null) { /* discard */ }
        this.#calls.record(p, "success");
      } catch {
        if (!cut && !c.inb.gone.aborted && !c.timedOut()) this.#calls.record(p, "failure");
      } finally {
        clearTimeout(timer);
        ps.release();
      }
    })();
  }
}

/** Frees a leg that got a response head (its body is abandoned). */
function drop(s: Sent | AttemptResult): void {
  if (s.kind !== "sent") return;
  s.res.body.cancel();
  s.release();
}

function pdFailure(f: Failed): Failed {
  const e = f.failure.error;
  if (!e) return f;
  return {
    ...f,
    failure: {
      ...f.failure,
      error: new GatewayError(e.status, e.code, `PD disaggregation request failed: ${e.message}`, {
        type: e.type,
        param: e.param ?? undefined,
        retryAfter: e.retryAfter,
      }),
    },
  };
}
