/**
 * The one protocol switch: a worker's connection mode, decided when it was registered, picks
 * how it is spoken to (`Protocols`); the attempt numbering the protocols share; and the stand-in
 * for a mode this gateway cannot speak (gRPC workers without a tokenizer, which only a mesh peer
 * can hand it: registration here refuses them).
 */

import type { Worker } from "../workers/worker.ts";
import type { Cancel } from "../core/cancel.ts";
import type { Slot, WorkerLedger } from "./ledger.ts";
import type { Attempt, Bootstrap, CallContext, Leg, Protocol } from "./types.ts";

let attemptSeq = 0;

/** A fresh attempt (PD: with its pair's bootstrap). */
export function nextAttempt(bootstrap: Bootstrap | null): Attempt {
  return { seq: ++attemptSeq, bootstrap };
}

/**
 * A protocol this gateway cannot speak: every attempt fails as a worker that cannot be reached
 * would (a retryable 502, counted against the worker, whose breaker then opens), so the pool
 * routes around it.
 */
export class Unspoken implements Protocol {
  readonly #ledger: WorkerLedger;
  readonly #why: string;

  /** `why`: what the gateway lacks, as the client's error says it. */
  constructor(ledger: WorkerLedger, why: string) {
    this.#ledger = ledger;
    this.#why = why;
  }

  open(c: CallContext, worker: Worker, _attempt: Attempt, _cancel: Cancel, slot: Slot): Leg {
    const fail = () => {
      slot.release();
      return Promise.resolve(
        this.#ledger.failure(c, worker, new Error(this.#why), "cannot be spoken to", "grpc"),
      );
    };
    return { worker, ready: fail, answer: fail, drain: () => Promise.resolve(), stop: () => {} };
  }
}
