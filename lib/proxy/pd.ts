/**
 * The PD attempt, the way sglang pairs workers: per attempt the prefill policy picks a prefill
 * worker and the decode policy a decode worker (each leg with its own instance and state), both
 * get the request with the pair's bootstrap (`bootstrap.ts`) at once, and the client gets the
 * decode leg's answer, streamed or whole, while the prefill leg is drained in the background
 * from the moment it is ready (cancelling it could abort the prefill the decode waits for): a
 * task of the request, stopped and awaited at shutdown.
 *
 * The leg that fails first fails the attempt, and the other is stopped, unless it is a prefill
 * already draining and the decode answered (an error status); the attempt loop (`attempts.ts`)
 * re-selects the pair without the worker that failed (retryable: connect errors, 5xx, 408, 429,
 * a stream dying before its first byte). A leg's own error status is passed through as the
 * worker sent it. No usable pair: 503 `server_selection_failed`. A pair speaks one protocol:
 * that of the model's first available prefill worker, unless only the other protocol has an
 * available pair.
 */

import { GatewayError } from "../core/errors.ts";
import type { ConnectionMode, RouteRequest, SelectionNote } from "../core/types.ts";
import type { Policy } from "../policies/policy.ts";
import { Cancel } from "../core/cancel.ts";
import type { Worker } from "../workers/worker.ts";
import { bootstrapFor } from "./bootstrap.ts";
import { nextAttempt } from "./protocols.ts";
import { newNote, noCandidates, type SelectEnv, selectWorker } from "./select.ts";
import type { ProxyMetrics, RouteSeries } from "./series.ts";
import type { Slot, WorkerLedger } from "./ledger.ts";
import type {
  AttemptPlan,
  AttemptResult,
  CallContext,
  Failed,
  PdPolicies,
  Protocols,
  ProxyDeps,
  Ready,
} from "./types.ts";

/** A prefill/decode pair for one attempt, each charged when it was picked. */
export interface Pair {
  /** The prefill worker. */
  prefill: Worker;
  /** The decode worker. */
  decode: Worker;
  /** The prefill worker's slot (`WorkerLedger.hold`). */
  prefillSlot: Slot;
  /** The decode worker's slot. */
  decodeSlot: Slot;
}

/** The request's candidates per leg. */
export interface PdCandidates {
  /** Prefill workers for the model. */
  prefills: readonly Worker[];
  /** Decode workers for the model. */
  decodes: readonly Worker[];
}

const CODE = "server_selection_failed";

/** The workers of `ws` that speak `mode`. */
const speaking = (ws: readonly Worker[], mode: ConnectionMode) =>
  ws.filter((w) => w.connection === mode);

/** Serves requests with prefill/decode pairs (an `AttemptPlan`). */
export class PdPlan implements AttemptPlan<PdCandidates, Pair> {
  readonly label = "pd";
  readonly code = CODE;
  readonly retryMessage = "PD attempt failed; retrying with another pair";
  readonly #d: ProxyDeps;
  readonly #env: SelectEnv;
  readonly #legs: PdPolicies;
  readonly #protocols: Protocols;
  readonly #ledger: WorkerLedger;

  /** Over the proxy's dependencies, the legs' policies, the protocols and the ledger. */
  constructor(
    d: ProxyDeps,
    env: SelectEnv,
    legs: PdPolicies,
    protocols: Protocols,
    ledger: WorkerLedger,
  ) {
    this.#d = d;
    this.#env = env;
    this.#legs = legs;
    this.#protocols = protocols;
    this.#ledger = ledger;
  }

  /** The route series of `rr`, spoken to `connection` workers. */
  series(pm: ProxyMetrics, rr: RouteRequest, connection: ConnectionMode): RouteSeries {
    return pm.route(rr, connection, "pd", this.#legs.prefill.name, this.#legs.decode.name);
  }

  candidates(c: CallContext): PdCandidates {
    const d = this.#d;
    let prefills = d.registry.forModel(c.rr.model, "prefill");
    let decodes = d.registry.forModel(c.rr.model, "decode");
    const mode = this.#mode(prefills, decodes);
    if (mode !== null) {
      prefills = speaking(prefills, mode);
      decodes = speaking(decodes, mode);
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

  /**
   * The connection mode pairs speak when the model's workers mix them (null: they do not): the
   * first available prefill's, unless only the other mode has an available pair.
   */
  #mode(prefills: readonly Worker[], decodes: readonly Worker[]): ConnectionMode | null {
    if (prefills.length === 0) return null;
    const first = prefills[0].connection;
    const mixed = (ws: readonly Worker[]) => ws.some((w) => w.connection !== first);
    if (!mixed(prefills) && !mixed(decodes)) return null;
    const now = this.#d.clock.now();
    const up = (ws: readonly Worker[], mode: ConnectionMode) =>
      ws.some((w) => w.connection === mode && w.available(now));
    const mode = (prefills.find((w) => w.available(now)) ?? prefills[0]).connection;
    const other: ConnectionMode = mode === "grpc" ? "http" : "grpc";
    const pairs = (m: ConnectionMode) => up(prefills, m) && up(decodes, m);
    return !pairs(mode) && pairs(other) ? other : mode;
  }

  pick(
    c: CallContext,
    cands: PdCandidates,
    failed: ReadonlySet<string>,
    retrying: boolean,
  ): Pair | null {
    const rr = c.rr;
    const select = (candidates: readonly Worker[], policy: Policy, note: SelectionNote) =>
      selectWorker(this.#env, { candidates, failed, rr, retrying, policy, note, code: CODE });
    const pn = newNote(rr);
    const prefill = select(cands.prefills, this.#legs.prefill, pn);
    if (!prefill) return null;
    c.notes.set(prefill.id, pn);
    const prefillSlot = this.#ledger.hold(c, prefill);
    // The decode leg prefills nothing: the prompt's KV comes from the prefill leg.
    const dn = newNote(rr, false);
    let decode: Worker | null;
    try {
      decode = select(cands.decodes, this.#legs.decode, dn);
    } catch (e) {
      prefillSlot.release();
      throw e;
    }
    if (!decode) {
      prefillSlot.release();
      return null;
    }
    // What a decode worker reports cached says nothing of the prefill leg's prediction.
    dn.predictedCached = null;
    c.notes.set(decode.id, dn);
    return { prefill, decode, prefillSlot, decodeSlot: this.#ledger.hold(c, decode) };
  }

  describe(pair: Pair, f: Failed): Record<string, unknown> {
    return {
      leg: f.worker === pair.prefill ? "prefill" : "decode",
      prefill: pair.prefill.url,
      decode: pair.decode.url,
    };
  }

  async run(c: CallContext, pair: Pair): Promise<AttemptResult> {
    const protocol = this.#protocols[pair.prefill.connection];
    if (protocol.prepare) {
      try {
        await protocol.prepare(c);
      } catch (e) {
        pair.prefillSlot.release();
        pair.decodeSlot.release();
        throw e;
      }
    }
    const body = c.body as Record<string, unknown>;
    const attempt = nextAttempt(bootstrapFor(pair.prefill, body, this.#d.random));
    // Each leg can be stopped on its own; both stop with the request.
    const prefill = protocol.open(c, pair.prefill, attempt, linked(c.cancel), pair.prefillSlot);
    const decode = protocol.open(c, pair.decode, attempt, linked(c.cancel), pair.decodeSlot);
    let draining = false;
    const pr = prefill.ready().then((r) => {
      if (r.kind === "ready") {
        draining = true;
        c.tasks.add(prefill.drain(), () => prefill.stop());
      }
      return r;
    });
    const early = await firstFailure(pr, decode.ready());
    if (early) {
      const [leg, result] = early;
      if (leg === "prefill") decode.stop();
      // A decode that answered (an error status) ran its course: a draining prefill finishes.
      // One that failed without an answer never took the prompt's KV: its prefill is stopped.
      else if (!draining || !answered(result)) prefill.stop();
      return pdResult(result);
    }
    return pdResult(await decode.answer());
  }
}

/** Whether a leg's failure is the worker's own answer (an error status), not a broken call. */
function answered(r: AttemptResult): boolean {
  return r.kind === "response" || r.failure.worker !== undefined;
}

/** A cancellation of its own that also fires with `parent`. */
function linked(parent: Cancel): Cancel {
  const own = new Cancel();
  parent.on(() => own.cancel(parent.reason));
  return own;
}

/**
 * The first of a pair's first answers that is not `ready`, with its leg; null once both are
 * ready. On a tie the prefill's comes first (it was asked first).
 */
function firstFailure(
  prefill: Promise<Ready | AttemptResult>,
  decode: Promise<Ready | AttemptResult>,
): Promise<["prefill" | "decode", AttemptResult] | null> {
  return new Promise((resolve, reject) => {
    let ready = 0;
    const settle = (leg: "prefill" | "decode") => (r: Ready | AttemptResult) => {
      if (r.kind !== "ready") resolve([leg, r]);
      else if (++ready === 2) resolve(null);
    };
    prefill.then(settle("prefill"), reject);
    decode.then(settle("decode"), reject);
  });
}

/** An attempt's result, its gateway error (if any) said to be the PD request's. */
function pdResult(r: AttemptResult): AttemptResult {
  const e = r.kind === "failure" ? r.failure.error : undefined;
  if (!e) return r;
  const f = r as Failed;
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
