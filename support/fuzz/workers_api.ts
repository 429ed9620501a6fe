/**
 * Fuzz family `workers`: the worker API (`POST /workers`, `GET`/`DELETE /workers/{id}`,
 * `GET /workers?model=`) with mutated specs, ids, queries and methods, one request at a time,
 * against a gateway with two workers whose allow-list admits 127.0.0.1 only. A spec the gateway
 * would accept at a port this run does not own is pointed at the run's sink worker first, so no
 * health check reaches anyone else's port; a worker a request added is deleted right after.
 *
 * Oracles: never 5xx; a 4xx with a body is SMG's flat error (`{"error", "code"}`) or its
 * envelope; the registry is unchanged (each worker's id, URL, models, type, labels, priority,
 * cost, bootstrap port) unless the request was accepted (202), and then changed by exactly the
 * worker it named (added, or removed or draining).
 */

import type { Random } from "../../lib/core/clock.ts";
import { parseWorkerSpec } from "../../lib/workers/manager.ts";
import { startGateway, type TestGateway } from "../gateway.ts";
import type { FuzzFamily, FuzzTarget, Outcome } from "./driver.ts";
import { type Json, mutateValue, serialise } from "./json_mutate.ts";
import { AWKWARD_STRINGS, chance, pick, randomText, weighted } from "./mutate.ts";
import { RecordingWorker } from "./recording_worker.ts";

type Snapshot = Map<string, string>;

class WorkersTarget implements FuzzTarget {
  readonly #gw: TestGateway;
  readonly #workers: RecordingWorker[];
  readonly #sink: RecordingWorker;
  /** Ports a spec may point at: the run's workers' (and 0, which nobody answers). */
  readonly #ports: Set<string>;

  constructor(gw: TestGateway, workers: RecordingWorker[], sink: RecordingWorker) {
    this.#gw = gw;
    this.#workers = workers;
    this.#sink = sink;
    this.#ports = new Set(["0", ...[...workers, sink].map((w) => new URL(w.url).port)]);
  }

  #snapshot(): Snapshot {
    const now = this.#gw.gw.clock.now();
    const out: Snapshot = new Map();
    for (const w of this.#gw.gw.registry.all()) {
      const i = w.info(now);
      const fixed = [
        i.url,
        i.models,
        i.worker_type,
        i.connection_mode,
        i.labels,
        i.priority,
        i.cost,
        i.bootstrap_port,
      ];
      out.set(w.id, JSON.stringify(fixed));
    }
    return out;
  }

  /** A spec body aimed at 127.0.0.1 only at the run's own ports. */
  #safeBody(r: Random, body: Json): Uint8Array {
    let { bytes } = serialise(r, body);
    for (let tries = 0; tries < 2; tries++) {
      let spec: unknown;
      try {
        spec = JSON.parse(new TextDecoder().decode(bytes));
      } catch {
        return bytes; // not JSON: refused before any URL is read
      }
      const url = this.#wouldProbe(spec);
      if (url === null || this.#ports.has(url.port || "80")) return bytes;
      (spec as Record<string, unknown>).url = this.#sink.url;
      bytes = new TextEncoder().encode(JSON.stringify(spec));
    }
    return new TextEncoder().encode("{}");
  }

  /** The URL the gateway would register for `spec` and probe, if its host is this machine's. */
  #wouldProbe(spec: unknown): URL | null {
    try {
      const url = new URL(parseWorkerSpec(spec).url);
      return url.hostname === "127.0.0.1" ? url : null;
    } catch {
      return null;
    }
  }

  #ids(): string[] {
    return this.#gw.gw.registry.all().map((w) => w.id);
  }

  /** An id as a client might get it wrong. */
  #id(r: Random): string {
    const real = pick(r, this.#ids()) ?? uuid(r);
    return pick(r, [
      () => real.toUpperCase(),
      () => real.replace("-", "%2D"),
      () => `${real}/`,
      () => `${real}x`,
      () => real.slice(0, -1),
      () => uuid(r),
      () => "",
      () => "%",
      () => "%ff%fe",
      () => "%E0%A4%A",
      () => "..%2f..%2fhealth",
      () => "a".repeat(5000),
      () => encodeURIComponent(pick(r, AWKWARD_STRINGS).toWellFormed()),
      () => `${real}%00`,
      () => real,
    ])();
  }

  async run(_index: number, r: Random): Promise<Outcome> {
    const base = this.#gw.url;
    const kind = weighted(
      r,
      [[9, "post"], [3, "get"], [3, "delete"], [2, "list"], [1, "other"]] as const,
    );
    let method = "GET";
    let url = `${base}/workers`;
    let body: Uint8Array | undefined;
    let type = "application/json";
    if (kind === "post") {
      method = "POST";
      let spec: Json = {
        url: chance(r, 0.9) ? this.#sink.url : pick(r, this.#workers).url,
        model_id: "fuzz-model",
        worker_type: "regular",
        labels: { zone: "a" },
        priority: 50,
        cost: 1,
      };
      for (let i = weighted(r, [[1, 0], [4, 1], [2, 2], [1, 3]] as const); i > 0; i--) {
        spec = mutateValue(r, spec);
      }
      if (isObject(spec) && chance(r, 0.1)) {
        spec.url = pick(r, [
          "127.0.0.1:0",
          "http://localhost:0",
          "http://[::1]:0",
          "http://169.254.169.254/",
          "http://10.0.0.1:8000",
          "ftp://127.0.0.1:0",
          "grpc://127.0.0.1:0",
          "http://127.0.0.1:0/?q",
          "http://user:pw@127.0.0.1:0",
          "http://127.0.0.1:99999",
        ]);
      }
      body = this.#safeBody(r, spec);
      if (chance(r, 0.05)) type = pick(r, ["text/plain", "", "application/x-www-form-urlencoded"]);
    } else if (kind === "get" || kind === "delete") {
      method = kind.toUpperCase();
      url = `${base}/workers/${this.#id(r)}`;
    } else if (kind === "list") {
      url += pick(r, [
        "?model=fuzz-model",
        "?model=",
        "?model",
        "?model=%ff",
        "?model=a&model=b",
        `?model=${encodeURIComponent(randomText(r, 8).toWellFormed())}`,
        "?x=1",
      ]);
    } else {
      [method, url] = pick(r, [
        ["PUT", `${base}/workers`],
        ["PATCH", `${base}/workers/${this.#id(r)}`],
        ["POST", `${base}/workers/${this.#id(r)}`],
        ["DELETE", `${base}/workers`],
        ["GET", `${base}/workers/`],
        ["GET", `${base}/workersx`],
      ]);
    }
    const input = `${method} ${url.slice(base.length, base.length + 80)} ${
      body ? new TextDecoder().decode(body.subarray(0, 160)) : ""
    }`;
    const before = this.#snapshot();
    const res = await fetch(url, {
      method,
      headers: type ? { "content-type": type } : {},
      body: body as Uint8Array<ArrayBuffer> | undefined,
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    const after = this.#snapshot();
    const violations: string[] = [];
    const s = res.status;
    if (s >= 500) violations.push(`answered ${s}: ${text.slice(0, 200)}`);
    if (s >= 400 && s < 500 && text !== "" && !isError(text)) {
      violations.push(`${s} without an error body: ${text.slice(0, 200)}`);
    }
    const id = s === 202 ? (JSON.parse(text) as { worker_id?: string }).worker_id ?? "" : "";
    const problem = changed(before, after, s === 202 ? { method, id } : null);
    if (problem) violations.push(problem);
    if (s === 202 && method === "POST") await this.#remove(id);
    await this.#restore();
    return { labels: [`${method} ${s}`], violations, input };
  }

  /** Deletes a worker a request added (pending or idle: it leaves the registry at once). */
  async #remove(id: string): Promise<void> {
    const res = await fetch(`${this.#gw.url}/workers/${id}`, { method: "DELETE" });
    await res.body?.cancel();
  }

  /** Adds back a base worker a valid delete removed. */
  async #restore(): Promise<void> {
    const urls = new Set(this.#gw.gw.registry.all().map((w) => w.url));
    for (const w of this.#workers) {
      if (urls.has(w.url)) continue;
      const res = await fetch(`${this.#gw.url}/workers`, {
        method: "POST",
        // Its model named: nothing of it changes later when its first probe would discover it.
        body: JSON.stringify({ url: w.url, model_id: w.model }),
      });
      await res.body?.cancel();
    }
  }

  finish(): Promise<string[]> {
    const out: string[] = [];
    for (const w of this.#workers) {
      if (!this.#gw.gw.registry.byUrl(w.url)) out.push(`worker ${w.url} missing after the run`);
    }
    return Promise.resolve(out);
  }

  async close(): Promise<void> {
    await this.#gw.close();
    await Promise.all([...this.#workers, this.#sink].map((w) => w.close()));
  }
}

function isObject(v: Json): v is { [k: string]: Json } {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A version-4 UUID drawn from `r`. */
function uuid(r: Random): string {
  const hex = Array.from({ length: 32 }, () => Math.floor(r() * 16).toString(16)).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${
    hex.slice(20)
  }`;
}

/** SMG's flat worker-API error (`{error, code}`) or its envelope (`{error: {message}}`). */
function isError(text: string): boolean {
  try {
    const e = JSON.parse(text);
    return (typeof e?.error === "string" && typeof e?.code === "string") ||
      typeof e?.error?.message === "string";
  } catch {
    return false;
  }
}

/** Why `after` is not `before` changed by `accepted` (or unchanged), or null. */
function changed(
  before: Snapshot,
  after: Snapshot,
  accepted: { method: string; id: string } | null,
): string | null {
  const expect = new Map(before);
  if (accepted?.method === "POST") {
    if (!after.has(accepted.id)) return `202 but worker ${accepted.id} is not registered`;
    expect.set(accepted.id, after.get(accepted.id)!);
  } else if (accepted?.method === "DELETE") {
    // Removed at once, or draining until its requests finish.
    if (!after.has(accepted.id)) expect.delete(accepted.id);
  }
  const a = JSON.stringify([...after].sort());
  const e = JSON.stringify([...expect].sort());
  return a === e ? null : `registry changed: before ${JSON.stringify([...before])} after ${a}`;
}

/** The worker API family. */
export const workersApi: FuzzFamily = {
  name: "workers",
  concurrency: 1,
  async start(seed) {
    const workers = [new RecordingWorker(), new RecordingWorker()];
    const sink = new RecordingWorker(() => {}, "sink-model");
    const all = [...workers, sink];
    const gw = await startGateway(workers.map((w) => w.url), {
      workerHostAllowlist: ["127.0.0.1"],
      randomSeed: seed,
    }).catch(async (e) => {
      await Promise.all(all.map((w) => w.close()));
      throw e;
    });
    return new WorkersTarget(gw, workers, sink);
  },
};
