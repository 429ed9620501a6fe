/** The Mooncake trace parser: valid lines in order, bad lines refused with their line numbers. */

import assert from "node:assert/strict";
import { loadTrace, parseTrace, TraceError } from "./trace.ts";

const line = (o: Record<string, unknown>) => JSON.stringify(o);
const ok = (timestamp: number, input: number, ids: number[], output = 8) =>
  line({ timestamp, input_length: input, output_length: output, hash_ids: ids });

/** The `TraceError` that `f` throws. */
function refusal(f: () => unknown): TraceError {
  try {
    f();
  } catch (e) {
    if (e instanceof TraceError) return e;
    throw e;
  }
  throw new Error("not refused");
}

Deno.test("trace: lines become requests in order, blank lines skipped, the last block partial", () => {
  const text = [ok(0, 1024, [1, 2]), "", ok(40, 700, [1, 3], 3), ok(40, 512, [4]), ""].join("\n");
  assert.deepEqual(parseTrace(text), [
    { timestampMs: 0, inputLength: 1024, outputLength: 8, hashIds: [1, 2] },
    { timestampMs: 40, inputLength: 700, outputLength: 3, hashIds: [1, 3] },
    { timestampMs: 40, inputLength: 512, outputLength: 8, hashIds: [4] },
  ]);
});

Deno.test("trace: every bad line is refused with its line number and what is wrong", () => {
  const text = [
    ok(0, 512, [1]),
    "{not json",
    line({ timestamp: -1, input_length: 10, output_length: 1, hash_ids: [1] }),
    line({ timestamp: 5, input_length: 0, output_length: 1, hash_ids: [1] }),
    line({ timestamp: 5, input_length: 10, output_length: 1.5, hash_ids: [1] }),
    line({ timestamp: 5, input_length: 10, output_length: 1, hash_ids: [] }),
    line({ timestamp: 5, input_length: 10, output_length: 1, hash_ids: [1, "2"] }),
    ok(5, 1025, [1, 2]),
    ok(9, 100, [7]),
    ok(8, 100, [7]),
    "[1, 2]",
  ].join("\n");
  const e = refusal(() => parseTrace(text, "t.jsonl"));
  assert.deepEqual(e.problems.map((p) => p.split(":")[0]), [
    "line 2",
    "line 3",
    "line 4",
    "line 5",
    "line 6",
    "line 7",
    "line 8",
    "line 10",
    "line 11",
  ]);
  assert.match(e.problems[0], /not JSON/);
  assert.match(e.problems[1], /timestamp must be a number of ms ≥ 0, got -1/);
  assert.match(e.problems[2], /input_length must be an integer ≥ 1, got 0/);
  assert.match(e.problems[3], /output_length must be an integer ≥ 1, got 1.5/);
  assert.match(e.problems[4], /hash_ids must be a non-empty list/);
  assert.match(e.problems[5], /hash_ids .* got \[1,"2"\]/);
  assert.match(e.problems[6], /input_length 1025 needs 3 hash_ids of 512 tokens, got 2/);
  assert.match(e.problems[7], /timestamp 8 is before the previous 9/);
  assert.match(e.problems[8], /not a JSON object/);
  // The message names the file and the first five problems, then how many more.
  assert.match(e.message, /^t\.jsonl: not a Mooncake trace: line 2: .*; and 4 more line\(s\)$/);
});

Deno.test("trace: an empty file is refused", () => {
  assert.throws(() => parseTrace("\n\n", "empty.jsonl"), /empty\.jsonl: .*no request in it/);
});

Deno.test("trace: loadTrace reads a file and names it in errors", async () => {
  const path = await Deno.makeTempFile({ dir: "/tmp", suffix: ".jsonl" });
  try {
    await Deno.writeTextFile(path, ok(0, 600, [1, 2]) + "\n");
    assert.equal((await loadTrace(path)).length, 1);
    await Deno.writeTextFile(path, ok(0, 600, [1]) + "\n");
    await assert.rejects(() => loadTrace(path), (e: Error) => e.message.startsWith(`${path}: `));
  } finally {
    await Deno.remove(path);
  }
});
