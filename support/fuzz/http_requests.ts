/**
 * Raw HTTP/1.1 inputs for the framing fuzzer (`http_framing.ts`): one to four requests per
 * connection (`http_request.ts`), each valid or bent by one to three mutations or a smuggling
 * shape (`http_mutations.ts`), the last one sometimes asking to close; byte-level mutations of
 * the whole; the bytes written in pieces (a few, or byte by byte); early closes.
 */

import type { Random } from "../../lib/core/clock.ts";
import { MUTATIONS, SMUGGLES } from "./http_mutations.ts";
import { baseRequest, render, setHeader } from "./http_request.ts";
import { chance, concatBytes, int, mutateBytes, pick, weighted } from "./mutate.ts";

/** One connection's worth of input. */
export interface RawInput {
  /** The bytes, in the writes that send them. */
  segments: Uint8Array[];
  /** The client closes right after writing, without reading. */
  earlyClose: boolean;
  /** The mutations applied, for reports. */
  describe: string;
}

/** Input `index`: its requests, mutations, segmentation and whether it closes early. */
export function framingInput(r: Random, index: number): RawInput {
  const count = weighted(r, [[6, 1], [2, 2], [1, 3], [1, 4]] as const);
  const parts: Uint8Array[] = [];
  const names: string[] = [];
  const mutationNames = Object.keys(MUTATIONS);
  for (let k = 0; k < count; k++) {
    const q = baseRequest(r, index, k);
    if (q.method === "POST" && chance(r, 0.15)) {
      const name = pick(r, Object.keys(SMUGGLES));
      SMUGGLES[name](r, q, index);
      q.muts.push(name);
    }
    const n = weighted(r, [[3, 0], [5, 1], [2, 2], [1, 3]] as const);
    for (let m = 0; m < n; m++) {
      const name = pick(r, mutationNames);
      MUTATIONS[name](r, q, index);
      q.muts.push(name);
    }
    if (k === count - 1 && chance(r, 0.5)) setHeader(q, "Connection", "close");
    names.push(`${q.method.slice(0, 8)} ${q.target.slice(0, 24)} [${q.muts.join(",")}]`);
    parts.push(render(q));
  }
  let bytes = concatBytes(...parts);
  if (chance(r, 0.2)) {
    const n = int(r, 1, 3);
    for (let i = 0; i < n; i++) bytes = mutateBytes(r, bytes);
    names.push(`+${n} byte mutations`);
  }
  const earlyClose = chance(r, 0.08);
  if (earlyClose) bytes = bytes.slice(0, int(r, 0, bytes.length));
  const segments = split(r, bytes);
  if (segments.length > 1) names.push(`${segments.length} writes`);
  return { segments, earlyClose, describe: names.join(" | ") };
}

/** The bytes as one write, a few, or byte by byte at the start. */
function split(r: Random, b: Uint8Array): Uint8Array[] {
  const how = weighted(r, [[7, "one"], [2, "few"], [1, "bytes"]] as const);
  if (how === "one" || b.length < 2) return [b];
  const cuts = how === "few"
    ? Array.from({ length: int(r, 1, 4) }, () => int(r, 1, b.length - 1)).sort((x, y) => x - y)
    : Array.from({ length: Math.min(b.length - 1, 120) }, (_, i) => i + 1);
  const out: Uint8Array[] = [];
  let at = 0;
  for (const c of cuts) {
    if (c > at) out.push(b.subarray(at, c));
    at = Math.max(at, c);
  }
  out.push(b.subarray(at));
  return out;
}
