/**
 * The attempt loop, one for every way of serving a request (regular, PD): up to
 * `--retry-max-retries` attempts, a jittered backoff before each retry (cut short when the
 * client leaves or the deadline fires), the workers that failed this request excluded from
 * later picks (upstream may re-pick the failed one), a retry log line, and the retry metrics.
 * A plan (`AttemptPlan`) says which workers are candidates, picks for one attempt and runs it.
 * The last failure is returned as the worker sent it, or as the gateway's error.
 */

import type { Clock } from "../core/clock.ts";
import { GatewayError } from "../core/errors.ts";
import type { Reply } from "../core/http.ts";
import type { Cancel } from "../core/cancel.ts";
import { clientClosedReply, finalReply, timeoutError } from "./ledger.ts";
import { backoffMs, maxAttempts } from "./retry.ts";
import { failedLeg, legSpan } from "./trace.ts";
import { type AttemptPlan, type CallContext, type Failure, type ProxyDeps } from "./types.ts";

const NONE: ReadonlySet<string> = new Set();

/** Waits `ms` on `clock` (no backoff: not at all); false as soon as `cancel` fires. */
function pause(clock: Clock, ms: number, cancel: Cancel): Promise<boolean> {
  return new Promise((resolve) => {
    if (cancel.aborted || ms <= 0) return resolve(!cancel.aborted);
    const stop = () => {
      cancelTimer();
      resolve(false);
    };
    const cancelTimer = clock.after(ms, () => {
      cancel.off(stop);
      resolve(true);
    });
    cancel.on(stop);
  });
}

/** Serves `c` with `plan`'s attempts; see the module comment. */
export async function runAttempts<C, P>(
  d: ProxyDeps,
  timeoutMs: number,
  c: CallContext,
  plan: AttemptPlan<C, P>,
): Promise<Reply> {
  const cands = plan.candidates(c);
  const attempts = maxAttempts(d.config.retry);
  const ep = c.series.endpoint;
  let failed: Set<string> | null = c.excluded === null ? null : new Set(c.excluded);
  let last: Failure | null = null;
  for (let attempt = 0; attempt < attempts; attempt++) {
    if (attempt > 0) {
      const delay = backoffMs(attempt - 1, d.config.retry, d.random);
      d.metrics.retries.with(plan.label, ep).inc();
      d.metrics.retryBackoff.with(String(attempt)).observe(delay / 1000);
      if (!(await pause(d.clock, delay, c.cancel))) break;
    }
    const pick = plan.pick(c, cands, failed ?? NONE, last !== null);
    if (pick === null) break;
    for (const s of c.series.selection) s.inc();
    const r = await plan.run(c, pick);
    if (r.kind === "response") return r.reply;
    (failed ??= new Set()).add(r.worker.id);
    last = r.failure;
    if (c.spans !== null) failedLeg(legSpan(c, r.worker), last);
    if (!last.retryable) break;
    d.log.warn(plan.retryMessage, {
      request_id: c.ctx.requestId,
      trace_id: c.ctx.trace?.traceId,
      ...plan.describe(pick, r),
      status: last.worker?.status ?? last.error?.status,
      attempt: attempt + 1,
    });
  }
  if (c.inb.gone.aborted) return clientClosedReply();
  if (c.timedOut() && (!last || last.retryable)) {
    last = { retryable: false, error: timeoutError(timeoutMs) };
  }
  if (!last) {
    throw new GatewayError(503, plan.code, "No available servers: no usable worker", {
      retryAfter: 1,
    });
  }
  if (last.retryable && attempts > 1) d.metrics.retriesExhausted.with(plan.label, ep).inc();
  return finalReply(last, c.ctx.requestId);
}
