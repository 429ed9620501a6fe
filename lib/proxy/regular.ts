/**
 * The regular attempt: one worker, chosen by the model's policy among its available workers and
 * charged in the same step (in flight, prefill backlog, sticky key), spoken to in its own
 * connection mode; the client gets that worker's answer.
 */

import type { ConnectionMode, RouteRequest } from "../core/types.ts";
import type { Worker } from "../workers/worker.ts";
import { newNote, noCandidates, type SelectEnv, selectWorker } from "./select.ts";
import type { AttemptPlan, AttemptResult, CallContext, Protocols, ProxyDeps } from "./types.ts";
import type { Slot, WorkerLedger } from "./ledger.ts";
import { nextAttempt } from "./protocols.ts";
import type { ProxyMetrics, RouteSeries } from "./series.ts";

/** A worker picked for an attempt, and its slot, taken when it was picked. */
export interface Charged {
  /** The worker. */
  worker: Worker;
  /** Its in-flight slot (`WorkerLedger.hold`). */
  slot: Slot;
}

/** One worker per attempt (`AttemptPlan`). */
export class RegularPlan implements AttemptPlan<readonly Worker[], Charged> {
  readonly label = "regular";
  readonly code = "no_available_workers";
  readonly retryMessage = "attempt failed; retrying on another worker";
  readonly #d: ProxyDeps;
  readonly #env: SelectEnv;
  readonly #protocols: Protocols;
  readonly #ledger: WorkerLedger;

  constructor(d: ProxyDeps, env: SelectEnv, protocols: Protocols, ledger: WorkerLedger) {
    this.#d = d;
    this.#env = env;
    this.#protocols = protocols;
    this.#ledger = ledger;
  }

  /** The route series of `rr`, spoken to `connection` workers. */
  series(pm: ProxyMetrics, rr: RouteRequest, connection: ConnectionMode): RouteSeries {
    return pm.route(rr, connection, "regular", this.#d.policies.forModel(rr.model).name);
  }

  candidates(c: CallContext): readonly Worker[] {
    const candidates = this.#d.registry.forModel(c.rr.model);
    if (candidates.length === 0) throw noCandidates(this.#d.registry.size, c.rr);
    return candidates;
  }

  pick(
    c: CallContext,
    candidates: readonly Worker[],
    failed: ReadonlySet<string>,
    retrying: boolean,
  ): Charged | null {
    const policy = this.#d.policies.forModel(c.rr.model);
    const note = newNote(c.rr, true, policy.name);
    const w = selectWorker(this.#env, { candidates, failed, rr: c.rr, retrying, policy, note });
    if (!w) return null;
    c.notes.set(w.id, note);
    return { worker: w, slot: this.#ledger.hold(c, w) };
  }

  describe(pick: Charged): Record<string, unknown> {
    return { worker: pick.worker.url };
  }

  async run(c: CallContext, { worker, slot }: Charged): Promise<AttemptResult> {
    const protocol = this.#protocols[worker.connection];
    if (protocol.prepare) {
      try {
        await protocol.prepare(c);
      } catch (e) {
        slot.release();
        throw e;
      }
    }
    const leg = protocol.open(c, worker, nextAttempt(null), c.cancel, slot);
    const r = await leg.ready();
    return r.kind === "ready" ? await leg.answer() : r;
  }
}
