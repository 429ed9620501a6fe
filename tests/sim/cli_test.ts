/**
 * `smg sim-worker`'s flags: `--chars-per-token` reaches the options (absent: null, the default
 * tokenizer), a bad value or one beside `--model-path` is a ConfigError naming the flag and the
 * value, and the command exits 2 with that one line.
 */

import assert from "node:assert/strict";
import { ConfigError } from "../../lib/core/errors.ts";
import { parseSimWorkerArgs, SIM_FLAGS } from "../../lib/sim/cli.ts";
import { runFlags } from "../../support/gateway_process.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

function parsed(args: string[]) {
  const o = parseSimWorkerArgs(args);
  assert.ok(o !== "help");
  return o;
}

Deno.test("sim-worker flags: --chars-per-token takes a number from 1 up, absent is null", () => {
  assert.equal(parsed([]).charsPerToken, null);
  assert.equal(parsed(["--chars-per-token", "8"]).charsPerToken, 8);
  assert.equal(parsed(["--chars-per-token=2.5"]).charsPerToken, 2.5);
  assert.equal(parsed(["--chars-per-token", "1"]).charsPerToken, 1);
  assert.ok(SIM_FLAGS.has("--chars-per-token"), "smg serve passes it to its simulated workers");
});

Deno.test("sim-worker flags: a bad --chars-per-token names the flag and the value", () => {
  for (const bad of ["0", "0.5", "-4", "abc", "", "Infinity", "2000"]) {
    assert.throws(
      () => parseSimWorkerArgs(["--chars-per-token", bad]),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.message === `--chars-per-token: invalid value '${bad}'; expected a number in 1..1024`,
      bad,
    );
  }
  assert.throws(
    () => parseSimWorkerArgs(["--model-path", "/m", "--chars-per-token", "4"]),
    /^ConfigError: --chars-per-token: invalid value '4'; not with --model-path/,
  );
});

Deno.test("sim-worker: a bad --chars-per-token exits 2 with one line", async () => {
  for (
    const [args, message] of [
      [["--chars-per-token", "zero"], /^smg: --chars-per-token: invalid value 'zero'/],
      [["--chars-per-token", "8", "--model-path", "/m"], /not with --model-path/],
    ] as const
  ) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", ...runFlags(MAIN), MAIN, "sim-worker", "--port", "0", ...args],
      stdout: "null",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    const lines = new TextDecoder().decode(out.stderr).trim().split("\n");
    assert.equal(out.code, 2, args.join(" "));
    assert.equal(lines.length, 1, lines.join("\n"));
    assert.match(lines[0], message);
  }
});
