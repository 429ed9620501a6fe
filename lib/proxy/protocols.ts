/**
 * The one protocol switch: a worker's connection mode, decided when it was registered, picks
 * how it is spoken to (`Protocols`); the attempt numbering the protocols share; and the stand-in
 * for a mode this gateway cannot speak (gRPC workers without a tokenizer, which only a mesh peer
 * can hand it: registration here refuses them).
 */

import { GatewayError } from "../core/errors.ts";
import type { Worker } from "../workers/worker.ts";
import type { Attempt, AttemptResult, Bootstrap, Leg, Protocol } from "./types.ts";

let attemptSeq = 0;

/** A fresh attempt (PD: with its pair's bootstrap). */
export function nextAttempt(bootstrap: Bootstrap | null): Attempt {
  return { seq: ++attemptSeq, bootstrap };
}

/** A protocol this gateway cannot speak: every attempt fails, retryably, without blame. */
export class Unspoken implements Protocol {
  readonly #why: string;

  /** `why`: what the gateway lacks, as the client's error says it. */
  constructor(why: string) {
    this.#why = why;
  }

  open(_c: unknown, worker: Worker): Leg {
    const result: AttemptResult = {
      kind: "failure",
      worker,
      failure: {
        retryable: true,
        error: new GatewayError(502, "call_upstream_failed", `worker ${worker.url}: ${this.#why}`),
      },
    };
    return {
      worker,
      ready: () => Promise.resolve(result),
      answer: () => Promise.resolve(result),
      drain: () => Promise.resolve(),
      stop: () => {},
    };
  }
}
