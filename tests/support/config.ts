/** Flag-validation helpers: parse and validate a command line, or expect its one-line refusal. */

import assert from "node:assert/strict";
import { parseGatewayArgs } from "../../lib/config/cli.ts";
import type { GatewayConfig } from "../../lib/config/config.ts";
import { validateConfig } from "../../lib/config/validate.ts";
import { ConfigError } from "../../lib/core/errors.ts";

/** The validated configuration of `args`. */
export function check(args: string[]): GatewayConfig {
  return validateConfig(parseGatewayArgs(args));
}

/** Asserts that `args` is refused with a one-line ConfigError matching `want`. */
export function refused(args: string[], want: RegExp): void {
  assert.throws(() => check(args), (e) => {
    assert.ok(e instanceof ConfigError, String(e));
    assert.match(e.message, want);
    assert.ok(!e.message.includes("\n"));
    return true;
  }, args.join(" "));
}
