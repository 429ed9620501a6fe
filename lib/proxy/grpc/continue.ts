/**
 * How a gRPC worker's stream goes on after its worker broke mid-way (`GrpcSse`): another gRPC
 * worker, picked as a retry is, is asked for the rest with the prompt's ids followed by those
 * generated so far and the budget less them (sglang's scheduler takes ids, so nothing is
 * re-tokenized: the new worker's context is exactly the old one's), up to
 * `--stream-migration-limit` times a request. The gateway's decoder, stop matcher and SSE shape
 * carry on across the change, so the client sees one stream. Not continued: constrained output
 * (its grammar would restart), continuation off, a continuation itself.
 */

import { type Reply, replyHeader } from "../../core/http.ts";
import type { Worker } from "../../workers/worker.ts";
import type { CallContext, ProxyDeps } from "../types.ts";
import type { GrpcInput } from "./request.ts";
import { type Adopted, GrpcSse } from "./sse.ts";

/**
 * How this stream goes on after a break (`GrpcSse`): another gRPC worker, picked as a retry
 * is, asked for the rest with the prompt's ids followed by those generated so far and the
 * budget less them, up to `--stream-migration-limit` times; undefined where it is not
 * (continuation off, a continuation itself, constrained output).
 */
export function grpcResumer(
  d: ProxyDeps,
  c: CallContext,
  input: GrpcInput,
  first: Worker,
): ((generated: readonly number[]) => Promise<Adopted | null>) | undefined {
  const resume = c.resume;
  const sp = input.sampling;
  const constrained = !!(sp.json_schema || sp.regex || sp.ebnf_grammar || sp.structural_tag);
  if (resume === null || d.config.streamMigrationLimit <= 0 || constrained) return undefined;
  const exclude = new Set([first.id]);
  let left = d.config.streamMigrationLimit;
  const outcome = (result: string, why?: string) => {
    d.metrics.continuations.with(first.url, result).inc();
    const line = { request_id: c.ctx.requestId, worker: first.url, result, why };
    if (result === "continued") d.log.info("worker stream broke; continued elsewhere", line);
    else d.log.warn("worker stream broke; client got an error event", line);
  };
  return async (generated) => {
    if (left-- <= 0) return outcome("limit"), null;
    const max = sp.max_new_tokens;
    if (max !== undefined && max - generated.length <= 0) {
      return outcome("failed", "token budget spent"), null;
    }
    const rest: GrpcInput = {
      ...input,
      ids: [...input.ids, ...generated],
      text: "",
      sampling: { ...sp, max_new_tokens: max === undefined ? undefined : max - generated.length },
    };
    let reply: Reply;
    try {
      reply = await resume({ grpc: rest }, exclude, generated.length);
    } catch (e) {
      return outcome("failed", (e as Error)?.message), null;
    }
    const body = reply.body;
    if (reply.status !== 200 || !(body instanceof GrpcSse)) {
      (body as { cancel?: () => void } | null)?.cancel?.();
      return outcome("failed", `status ${reply.status}`), null;
    }
    const worker = replyHeader(reply.headers, "x-smg-routed-worker-id");
    if (worker) exclude.add(worker);
    outcome("continued");
    return body.adopt();
  };
}
