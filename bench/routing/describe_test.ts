/** The preamble's sentence on the workers' tokens: the default tokenizer or `--chars-per-token`. */

import assert from "node:assert/strict";
import { tokenizerLine } from "./describe.ts";

Deno.test("describe: the tokenizer line names --chars-per-token and the measured ratio", () => {
  assert.equal(
    tokenizerLine({ charsPerToken: 8, measured: 7.912, sample: "the tenants' system prompts" }),
    "Engine tokens: `--chars-per-token 8` on every worker (content-defined pieces; 7.91 " +
      "characters per token on the tenants' system prompts); prompt sizes are counted in them.\n",
  );
  assert.match(
    tokenizerLine({ charsPerToken: null, measured: 2.31, sample: "x" }),
    /^Engine tokens: the workers' default tokenizer \(whitespace runs, word chunks of at most 4 characters; 2\.31 characters per token on x\)/,
  );
});
