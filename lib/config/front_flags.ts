/**
 * The own front's limits on its clients, declared once (see `flag.ts`). SMG has no such flags
 * (its hyper server has none of these limits), so the names are ours, in the style of
 * `--request-timeout-secs`. Each 0 turns its limit off. The defaults leave ordinary clients, and a
 * load balancer that is the only client address, well inside them.
 */

import { atLeast } from "./checks.ts";
import type { Flags } from "./flag.ts";
import { int } from "./kinds.ts";
import type { FrontLimitsConfig } from "./front_types.ts";

/** The front's limits, in --help order. */
export const FRONT_FLAGS: Flags<FrontLimitsConfig> = {
  maxConnections: {
    name: "max-connections",
    kind: int,
    default: 10_000,
    help: "open client connections on --port (own front); one more is closed at once; 0 is no cap",
    check: atLeast(0),
  },
  maxConnectionsPerClient: {
    name: "max-connections-per-client",
    kind: int,
    default: 5_000,
    help: "open connections from one client address (own front; a load balancer is one " +
      "address); one more is closed at once; 0 is no cap",
    check: atLeast(0),
  },
  requestHeadTimeoutSecs: {
    name: "request-head-timeout-secs",
    kind: int,
    default: 15,
    help: "time for a request head, from accept (first request) or its first byte (own " +
      "front); then 408 and close; 0 is none",
    check: atLeast(0),
  },
  requestBodyTimeoutSecs: {
    name: "request-body-timeout-secs",
    kind: int,
    default: 30,
    help: "time for a request body from when the gateway reads it, plus 1 s per " +
      "--request-body-min-rate bytes received (own front); then 408 and close; 0 is none",
    check: atLeast(0),
  },
  requestBodyMinRate: {
    name: "request-body-min-rate",
    kind: int,
    default: 1024,
    help: "minimum request body rate (bytes/s): each such many bytes earn 1 s more of " +
      "--request-body-timeout-secs; 0 makes that a flat deadline",
    check: atLeast(0),
  },
};
