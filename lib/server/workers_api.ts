/**
 * The worker control plane: `GET /workers[?model=]`, `POST /workers`, `GET /workers/{id}`,
 * `DELETE /workers/{id}`, with SMG's bodies (flat `{error, code}` errors, 202 + `Location` on
 * accepted changes, a `job_status` while a new worker is still pending). A worker host the
 * egress allow-list refuses is a 403 `WORKER_HOST_NOT_ALLOWED` saying why; one the allow-list
 * admits but the runtime's net grant does not reach is accepted with a `warning`.
 */

import { isGrpcUrl } from "../config/validate.ts";
import type { Clock } from "../core/clock.ts";
import { EgressRefusedError, runtimeReaches } from "../core/egress.ts";
import { flatErrorResponse, GatewayError } from "../core/errors.ts";
import { parseWorkerSpec, type WorkerManager } from "../workers/manager.ts";
import { DuplicateWorkerError, type WorkerRegistry } from "../workers/registry.ts";
import type { Worker } from "../workers/worker.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What the worker API reads and changes. */
export interface WorkersApiDeps {
  /** The registry. */
  registry: WorkerRegistry;
  /** Adds and removes workers. */
  manager: WorkerManager;
  /** Clock for breaker states in the output. */
  clock: Clock;
  /** Whether `grpc://` workers can be served (the gateway has a tokenizer). */
  grpc: boolean;
}

function info(w: Worker, now: number): Record<string, unknown> {
  const out = w.info(now);
  if (w.status === "pending") {
    out.job_status = {
      job_type: "add_worker",
      worker_url: w.url,
      status: "pending",
      message: "waiting for the worker to answer its health check",
    };
  }
  return out;
}

/** `GET /workers`. */
export function listWorkers(d: WorkersApiDeps, url: URL): Response {
  const model = url.searchParams.get("model");
  const now = d.clock.now();
  const workers = d.registry.all().filter((w) => model === null || w.serves(model));
  const count = (t: string) => workers.filter((w) => w.type === t).length;
  return Response.json({
    workers: workers.map((w) => info(w, now)),
    total: workers.length,
    stats: {
      prefill_count: count("prefill"),
      decode_count: count("decode"),
      regular_count: count("regular"),
    },
  });
}

/** `POST /workers`. */
export async function createWorker(d: WorkersApiDeps, req: Request): Promise<Response> {
  let body: unknown;
  try {
    body = await req.json();
  } catch (e) {
    return flatErrorResponse(
      400,
      "BAD_REQUEST",
      `worker spec is not valid JSON: ${(e as Error).message}`,
    );
  }
  try {
    const spec = parseWorkerSpec(body);
    if (!d.grpc && isGrpcUrl(spec.url)) {
      return flatErrorResponse(
        400,
        "BAD_REQUEST",
        "gRPC workers take token ids: start the gateway with --model-path or --tokenizer-path",
      );
    }
    const w = d.manager.add(spec);
    const location = `/workers/${w.id}`;
    const accepted: Record<string, unknown> = {
      status: "accepted",
      worker_id: w.id,
      url: w.url,
      location,
      message: `worker ${w.url} accepted; it becomes ready once it answers its health check`,
    };
    if (!runtimeReaches(w.url)) {
      // Accepted by the allow-list, but outside what the runtime lets this process connect to.
      accepted.warning = `this process's runtime net grant does not reach ${w.url}: Deno will ` +
        "refuse its connections; start the gateway with a --worker-host-allowlist that covers it";
    }
    return Response.json(accepted, { status: 202, headers: { location } });
  } catch (e) {
    if (e instanceof EgressRefusedError) {
      return flatErrorResponse(403, "WORKER_HOST_NOT_ALLOWED", e.message);
    }
    if (e instanceof DuplicateWorkerError) {
      return flatErrorResponse(409, "WORKER_ALREADY_EXISTS", e.message);
    }
    if (e instanceof GatewayError) return flatErrorResponse(400, "BAD_REQUEST", e.message);
    throw e;
  }
}

function lookup(d: WorkersApiDeps, id: string): Worker | Response {
  if (!UUID.test(id)) {
    return flatErrorResponse(400, "BAD_REQUEST", `'${id}' is not a worker id (UUID)`);
  }
  return d.registry.get(id.toLowerCase()) ??
    flatErrorResponse(404, "WORKER_NOT_FOUND", `no worker with id ${id}`);
}

/** `GET /workers/{id}`. */
export function getWorker(d: WorkersApiDeps, id: string): Response {
  const w = lookup(d, id);
  return w instanceof Response ? w : Response.json(info(w, d.clock.now()));
}

/** `DELETE /workers/{id}`. */
export function deleteWorker(d: WorkersApiDeps, id: string): Response {
  const w = lookup(d, id);
  if (w instanceof Response) return w;
  d.manager.remove(w.id);
  return Response.json({
    status: "accepted",
    worker_id: w.id,
    message: `worker ${w.url} is draining and will be removed`,
  }, { status: 202 });
}
