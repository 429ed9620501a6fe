/**
 * What an HTTP worker's answer says it used, for the tenant limits to settle on: a whole body's
 * `prompt_tokens` and `completion_tokens` (OpenAI's `usage`, sglang's `meta_info`; summed over a
 * batch's items), or a stream's last ones (sglang's events carry running counts; an OpenAI
 * stream's usage chunk comes last, with `stream_options.include_usage`). Keys inside generated
 * text cannot match: JSON escapes its quotes. Also counts a stream's `data:` events, the tokens
 * delivered when the stream reports no usage or the client leaves before its end, and meters a
 * whole answer relayed piece by piece.
 */

import type { ChunkSource } from "../../core/http.ts";
import type { UsageMeter } from "../types.ts";

const decoder = new TextDecoder();
const PROMPT = /"prompt_tokens"\s*:\s*(\d+)/g;
const COMPLETION = /"completion_tokens"\s*:\s*(\d+)/g;

/** Prompt and completion tokens reported in `chunks`: summed (`sum`) or the last; null if none. */
export function reportedUsage(
  chunks: readonly Uint8Array[],
  sum: boolean,
): { prompt: number; completion: number } | null {
  let text = "";
  for (const c of chunks) text += decoder.decode(c);
  const read = (re: RegExp) => {
    let v: number | null = null;
    for (const m of text.matchAll(re)) v = sum ? (v ?? 0) + Number(m[1]) : Number(m[1]);
    return v;
  };
  const prompt = read(PROMPT);
  const completion = read(COMPLETION);
  if (prompt === null && completion === null) return null;
  return { prompt: prompt ?? 0, completion: completion ?? 0 };
}

const DATA = [100, 97, 116, 97, 58]; // "data:"
const DONE = " [DONE]";

/** `data:` events in an SSE chunk, `[DONE]` not counted (one split across chunks may be missed). */
export function countEvents(chunk: Uint8Array): number {
  let n = 0;
  for (let i = chunk.indexOf(100); i >= 0 && i + 5 <= chunk.length; i = chunk.indexOf(100, i + 1)) {
    if (
      chunk[i + 1] !== DATA[1] || chunk[i + 2] !== DATA[2] || chunk[i + 3] !== DATA[3] ||
      chunk[i + 4] !== DATA[4] || (i > 0 && chunk[i - 1] !== 10 && chunk[i - 1] !== 13)
    ) continue;
    const rest = decoder.decode(chunk.subarray(i + 5, i + 5 + DONE.length + 1));
    if (!rest.startsWith(DONE) && !rest.startsWith(DONE.slice(1))) n++;
  }
  return n;
}

/**
 * A whole (non-streamed) answer relayed as it comes, metered: its last two pieces are kept and
 * its usage reported to `meter` when it ends.
 */
export class MeteredBody implements ChunkSource {
  readonly #source: ChunkSource;
  readonly #meter: UsageMeter;
  #prev: Uint8Array | null = null;
  #last: Uint8Array | null = null;

  constructor(source: ChunkSource, meter: UsageMeter) {
    this.#source = source;
    this.#meter = meter;
  }

  get done(): boolean | undefined {
    return this.#source.done;
  }

  async read(): Promise<Uint8Array | null> {
    const chunk = await this.#source.read();
    if (chunk === null) {
      const tail = [this.#prev, this.#last].filter((c) => c !== null);
      const u = reportedUsage(tail, false);
      if (u) this.#meter.final(u.prompt, u.completion);
    } else {
      this.#prev = this.#last;
      this.#last = chunk;
    }
    return chunk;
  }

  cancel(): void {
    this.#source.cancel();
  }
}
