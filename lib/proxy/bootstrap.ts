/**
 * The bootstrap fields of a prefill/decode pair, built once per attempt and shared by its two
 * legs: the prefill worker's host, its bootstrap port (null when none was configured: the engine
 * applies its own default), and a fresh room per sequence of a batched request. Each protocol
 * encodes them its own way (HTTP: body fields, arrays when batched; gRPC: `DisaggregatedParams`).
 */

import type { Random } from "../core/clock.ts";
import type { Worker } from "../workers/worker.ts";
import type { Bootstrap } from "./types.ts";

/** Rooms are drawn below 2^53, every integer a JSON number carries exactly. */
const ROOMS = 2 ** 53;

/** How many sequences a body carries when batched (null: one, not batched). */
function batchSize(body: Record<string, unknown>): number | null {
  const many = (v: unknown) =>
    Array.isArray(v) && (v.length === 0 || typeof v[0] !== "number") ? v.length : null;
  const n = many(body.text) ?? many(body.input_ids) ?? many(body.prompt);
  if (n !== null) return n;
  return typeof body.n === "number" && body.n > 1 ? body.n : null;
}

/** The bootstrap of one PD attempt on `prefill` for `body`, with fresh rooms from `random`. */
export function bootstrapFor(
  prefill: Worker,
  body: Record<string, unknown>,
  random: Random,
): Bootstrap {
  const n = batchSize(body);
  const room = () => Math.floor(random() * ROOMS);
  return {
    host: new URL(prefill.url).hostname.replace(/^\[|\]$/g, ""),
    port: prefill.bootstrapPort,
    rooms: n === null ? [room()] : Array.from({ length: n }, room),
    batched: n !== null,
  };
}
