/**
 * Worker control over gRPC: each call one of sglang's scheduler RPCs on the worker's client
 * (`HealthCheck`, `GetModelInfo`, `GetServerInfo`, `GetLoads`, `FlushCache`), the RPC's deadline
 * the call's timeout. Probes and `/health_generate` are `HealthCheck` (200 "OK", or 503 with its
 * message); the info pass-throughs are the RPC's message as JSON; a flush the worker refuses is
 * a 400 with its message. A failed call is a transport error (`gRPC UNAVAILABLE: ...`), a timeout
 * `timed out after N ms`, as over HTTP.
 */

import type { SglangClient } from "../../grpc/sglang_client.ts";
import type {
  ControlCall,
  ControlReply,
  ControlTarget,
  WorkerControl,
} from "../../workers/control.ts";
import { parseLoads } from "../../workers/load_report.ts";
import { capacityOf } from "../../workers/model_discovery.ts";

/** Either what the RPC answered or why it did not. */
type Outcome<T> = { ok: true; value: T } | { ok: false; error: string };

/**
 * Runs one RPC of `url`'s client with `call`'s timeout as its deadline; an abort of `call.signal`
 * (or the timeout) ends the wait at once. Never throws.
 */
async function attempt<T>(
  client: (url: string) => SglangClient,
  url: string,
  call: ControlCall,
  rpc: (c: SglangClient, timeoutMs: number) => Promise<T>,
): Promise<Outcome<T>> {
  const ms = call.timeoutMs;
  const timeout = AbortSignal.timeout(ms);
  const signal = call.signal ? AbortSignal.any([call.signal, timeout]) : timeout;
  let stop = () => {};
  try {
    signal.throwIfAborted();
    const aborted = new Promise<never>((_, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      stop = () => signal.removeEventListener("abort", onAbort);
    });
    return { ok: true, value: await Promise.race([rpc(client(url), ms), aborted]) };
  } catch (e) {
    const status = (e as { statusName?: unknown } | null)?.statusName;
    if (timeout.aborted || status === "DEADLINE_EXCEEDED") {
      return { ok: false, error: `timed out after ${ms} ms` };
    }
    // A failed call (`GrpcCallError`) keeps its status name, as the HTTP control's fetch errors.
    const message = (e as Error)?.message ?? String(e);
    return {
      ok: false,
      error: typeof status === "string" ? `gRPC ${status}: ${message}` : message,
    };
  } finally {
    stop();
  }
}

/** An outcome as the HTTP worker's answer would be: its status and body. */
function reply<T>(o: Outcome<T>, answer: (value: T) => ControlReply): ControlReply {
  return o.ok ? answer(o.value) : { status: 0, text: "", error: o.error };
}

/** Worker control over the gRPC clients `client(url)` gives (one per worker, reused). */
export function grpcWorkerControl(client: (url: string) => SglangClient): WorkerControl {
  const run = <T>(
    w: ControlTarget,
    call: ControlCall,
    rpc: (c: SglangClient, ms: number) => Promise<T>,
  ) => attempt(client, w.url, call, rpc);
  const health = async (w: ControlTarget, call: ControlCall) =>
    reply(
      await run(w, call, (c, ms) => c.healthCheck(ms)),
      (h) => h.healthy ? { status: 200, text: "OK" } : { status: 503, text: h.message },
    );
  const json = (value: unknown): ControlReply => ({ status: 200, text: JSON.stringify(value) });
  return {
    probe: (w, _endpoint, call) => health(w, call),
    healthGenerate: health,
    async models(w, call) {
      const o = await run(w, call, (c, ms) => c.modelInfo(ms));
      const id = o.ok ? o.value.served_model_name || o.value.model_path : "";
      return id ? [id] : null;
    },
    async kvCapacity(w, call) {
      const o = await run(w, call, (c, ms) => c.serverInfo(ms));
      return o.ok ? capacityOf(o.value) : null;
    },
    async load(w, call) {
      const o = await run(w, call, (c, ms) => c.loads(ms));
      return o.ok ? parseLoads(o.value) : null;
    },
    serverInfo: async (w, call) => reply(await run(w, call, (c, ms) => c.serverInfo(ms)), json),
    modelInfo: async (w, call) => reply(await run(w, call, (c, ms) => c.modelInfo(ms)), json),
    flushCache: async (w, call) =>
      reply(
        await run(w, call, (c, ms) => c.flushCache(ms)),
        (r) => ({ status: r.success ? 200 : 400, text: r.message }),
      ),
  };
}
