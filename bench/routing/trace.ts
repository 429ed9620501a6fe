/**
 * A request trace in the Mooncake format (kvcache-ai/Mooncake, `FAST25-release/traces`): JSON
 * lines in, the requests out, checked. Each line holds `timestamp` (ms from the trace's start),
 * `input_length` and `output_length` (tokens) and `hash_ids`, the prompt as blocks of 512 tokens
 * named by integers: two requests whose lists start with the same ids share exactly those leading
 * blocks. The last block may be partial, so `hash_ids` has ⌈input_length / 512⌉ entries.
 *
 * A line that breaks any of that is refused with its line number (the first few are listed);
 * blank lines are skipped. Timestamps must not decrease: a replay sends lines in order.
 */

/** Tokens per block of `hash_ids`. */
export const TRACE_BLOCK_TOKENS = 512;

/** One request of a trace. */
export interface TraceRequest {
  /** Arrival, ms from the trace's start (`timestamp`). */
  timestampMs: number;
  /** Prompt tokens (`input_length`). */
  inputLength: number;
  /** Completion tokens (`output_length`), sent as `max_tokens`. */
  outputLength: number;
  /** The prompt's blocks (`hash_ids`), the last one possibly partial. */
  hashIds: number[];
}

/** A trace the parser refused: each problem names its line. */
export class TraceError extends Error {
  /** The problems found, each starting with `line N:`. */
  readonly problems: string[];

  /** `source` names the file in the message. */
  constructor(source: string, problems: string[]) {
    const shown = problems.slice(0, MAX_LISTED);
    const more = problems.length - shown.length;
    super(
      `${source}: not a Mooncake trace: ${shown.join("; ")}` +
        (more > 0 ? `; and ${more} more line(s)` : ""),
    );
    this.name = "TraceError";
    this.problems = problems;
  }
}

/** Problems quoted in a `TraceError`'s message. */
const MAX_LISTED = 5;

const isCount = (v: unknown, min: number): v is number =>
  typeof v === "number" && Number.isInteger(v) && v >= min;

const quote = (v: unknown) => JSON.stringify(v)?.slice(0, 40) ?? String(v);

/** The problem with one parsed line, or null when it is a valid request. */
function check(v: unknown): string | null {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return "not a JSON object";
  const o = v as Record<string, unknown>;
  if (typeof o.timestamp !== "number" || !Number.isFinite(o.timestamp) || o.timestamp < 0) {
    return `timestamp must be a number of ms ≥ 0, got ${quote(o.timestamp)}`;
  }
  if (!isCount(o.input_length, 1)) {
    return `input_length must be an integer ≥ 1, got ${quote(o.input_length)}`;
  }
  if (!isCount(o.output_length, 1)) {
    return `output_length must be an integer ≥ 1, got ${quote(o.output_length)}`;
  }
  const ids = o.hash_ids;
  if (!Array.isArray(ids) || ids.length === 0 || !ids.every((x) => isCount(x, 0))) {
    return `hash_ids must be a non-empty list of integers ≥ 0, got ${quote(ids)}`;
  }
  const blocks = Math.ceil(o.input_length / TRACE_BLOCK_TOKENS);
  if (ids.length !== blocks) {
    return `input_length ${o.input_length} needs ${blocks} hash_ids of ${TRACE_BLOCK_TOKENS} ` +
      `tokens, got ${ids.length}`;
  }
  return null;
}

/** The requests of a trace's text; throws a `TraceError` naming every bad line. */
export function parseTrace(text: string, source = "trace"): TraceRequest[] {
  const requests: TraceRequest[] = [];
  const problems: string[] = [];
  let previous = 0;
  text.split("\n").forEach((line, i) => {
    if (line.trim() === "") return;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      problems.push(`line ${i + 1}: not JSON: ${quote(line)}`);
      return;
    }
    const problem = check(v);
    if (problem) {
      problems.push(`line ${i + 1}: ${problem}`);
      return;
    }
    const o = v as Record<string, number & number[]>;
    if (o.timestamp < previous) {
      problems.push(`line ${i + 1}: timestamp ${o.timestamp} is before the previous ${previous}`);
      return;
    }
    previous = o.timestamp;
    requests.push({
      timestampMs: o.timestamp,
      inputLength: o.input_length,
      outputLength: o.output_length,
      hashIds: o.hash_ids,
    });
  });
  if (problems.length === 0 && requests.length === 0) problems.push("no request in it");
  if (problems.length) throw new TraceError(source, problems);
  return requests;
}

/** Reads and parses the trace at `path`. */
export async function loadTrace(path: string): Promise<TraceRequest[]> {
  return parseTrace(await Deno.readTextFile(path), path);
}
