/**
 * The fault modes of the faulty worker (`faulty_worker.ts`) and how the bench sets them: one
 * `POST /fault` to a worker's control port. Shared by the worker and the bench, so neither can
 * name a mode the other does not know.
 */

/** What a faulty worker does instead of answering (see `faulty_worker.ts`). */
export type FaultMode = "none" | "hang-head" | "hang-mid" | "garbage" | "5xx" | "reset" | "no-read";

/** Every mode, for validation. */
export const FAULT_MODES: readonly FaultMode[] = [
  "none",
  "hang-head",
  "hang-mid",
  "garbage",
  "5xx",
  "reset",
  "no-read",
];

/** A worker's counters from `GET /stats` on its control port. */
export interface WorkerStats {
  /** Inference requests answered in full. */
  served: number;
  /** Inference requests open now (queued, served or held by a fault). */
  open: number;
  /** Requests whose connection closed before their answer was complete. */
  cancelled: number;
  /** Requests given the fault instead of an answer. */
  faulted: number;
}

/** Applies `mode` to `share` of the inference requests of the worker controlled at `controlUrl`. */
export async function setFault(controlUrl: string, mode: FaultMode, share = 1): Promise<void> {
  const res = await fetch(`${controlUrl}/fault`, {
    method: "POST",
    body: JSON.stringify({ mode, share }),
    signal: AbortSignal.timeout(2000),
  });
  const text = await res.text();
  if (res.status !== 200) {
    throw new Error(`POST ${controlUrl}/fault ${mode}: ${res.status} ${text}`);
  }
}

/** The worker's counters. */
export async function workerStats(controlUrl: string): Promise<WorkerStats> {
  const res = await fetch(`${controlUrl}/stats`, { signal: AbortSignal.timeout(2000) });
  return await res.json() as WorkerStats;
}
