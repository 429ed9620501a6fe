/**
 * What a worker's answer means, in one table: whether the request is tried again on another
 * worker (the proxy's retry, `lib/proxy/retry.ts`), and what the worker's circuit breaker counts
 * (`circuit_breaker.ts`). The HTTP API page's table of worker failures is rendered from it
 * (`deno task docs`; `tests/workers/failures_test.ts` fails when the page differs).
 */

import type { Outcome } from "./circuit_breaker.ts";

/** How an attempt ended: a worker status, no answer at all, or no answer in time. */
export type AttemptEnd = number | "transport" | "timeout";

/** One class of answers. */
export interface FailureClass {
  /** The answers of this class, as the docs name them. */
  what: string;
  /** Whether the ends in it belong here. */
  matches: (end: AttemptEnd) => boolean;
  /** Tried again on another worker (nothing has reached the client yet). */
  retried: boolean;
  /** What the worker's breaker counts. */
  breaker: Outcome;
  /** Why, in a few words. */
  why: string;
}

const busy = new Set([408, 429]);
const failed = new Set([500, 502, 503, 504]);

/** The classes, first match wins. */
export const FAILURE_CLASSES: readonly FailureClass[] = [
  {
    what: "no answer: connect error, reset, broken HTTP",
    matches: (e) => e === "transport",
    retried: true,
    breaker: "failure",
    why: "the worker failed, not the request",
  },
  {
    what: "no answer in time (a stream's head)",
    matches: (e) => e === "timeout",
    retried: true,
    breaker: "failure",
    why: "the worker failed (past the request's deadline, nothing is tried again)",
  },
  {
    what: "500, 502, 503, 504",
    matches: (e) => typeof e === "number" && failed.has(e),
    retried: true,
    breaker: "failure",
    why: "the worker failed; another may not",
  },
  {
    what: "408, 429",
    matches: (e) => typeof e === "number" && busy.has(e),
    retried: true,
    breaker: "neutral",
    why: "busy, not broken",
  },
  {
    what: "any other 5xx (501, 505, ...)",
    matches: (e) => typeof e === "number" && e >= 500,
    retried: false,
    breaker: "failure",
    why: "the worker cannot serve it; relayed as it came",
  },
  {
    what: "any other status (2xx, 3xx, other 4xx)",
    matches: () => true,
    retried: false,
    breaker: "success",
    why: "the worker answered; a 4xx is the request's fault",
  },
];

/** The class of `end`. */
export function failureClass(end: AttemptEnd): FailureClass {
  return FAILURE_CLASSES.find((c) => c.matches(end))!;
}

/** Whether a worker status is retried on another worker. */
export function isRetryableStatus(status: number): boolean {
  return failureClass(status).retried;
}

/** What an attempt that ended so counts on its worker's breaker. */
export function classifyStatus(end: AttemptEnd): Outcome {
  return failureClass(end).breaker;
}

/** The line before the rendered table in docs/http-api.md. */
export const FAILURES_BEGIN =
  "<!-- failures:begin: rendered by `deno task docs` from lib/workers/failures.ts; edit that -->";
/** The line after it. */
export const FAILURES_END = "<!-- failures:end -->";

/** The table of `FAILURE_CLASSES` as markdown, between its marker lines. */
export function renderFailureTable(): string {
  const rows = [
    ["worker's answer", "tried on another worker", "its circuit breaker counts", "why"],
    ...FAILURE_CLASSES.map((c) => [c.what, c.retried ? "yes" : "no", c.breaker, c.why]),
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i])).join(" | ")} |`;
  return [
    FAILURES_BEGIN,
    "",
    line(rows[0]),
    line(widths.map((w) => "-".repeat(w))),
    ...rows.slice(1).map(line),
    "",
    FAILURES_END,
  ].join("\n");
}
