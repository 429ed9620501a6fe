/**
 * A Kubernetes API stand-in on loopback that speaks the real pod list and watch protocol:
 * `GET /api/v1/pods` and `/api/v1/namespaces/NS/pods` with `labelSelector` (equality pairs),
 * `limit` and `continue`; `watch=1` from a `resourceVersion` as JSON event lines (`ADDED`,
 * `MODIFIED`, `DELETED`, `BOOKMARK`), 410 Gone for a version older than its history (as the
 * HTTP status, or as an `ERROR` event with `goneAsEvent`), bearer-token checks, and controls
 * to reset every open watch connection or to refuse everything (unreachable).
 */

import type { Pod } from "../../lib/discovery/pods.ts";

interface Event {
  rv: number;
  type: "ADDED" | "MODIFIED" | "DELETED";
  pod: Pod;
}

interface Watcher {
  ns: string | null;
  selector: Record<string, string>;
  push: (line: string) => void;
  fail: () => void;
}

const enc = new TextEncoder();

/** A running stand-in. */
export class FakeKube {
  readonly token = "test-token";
  /** Requests seen, as `METHOD path?query`. */
  readonly requests: string[] = [];
  /** Answer 410 as an `ERROR` event in a 200 stream rather than as the HTTP status. */
  goneAsEvent = false;
  /** Refuse every request with 503 (the API server is down). */
  down = false;
  readonly #server: Deno.HttpServer<Deno.NetAddr>;
  readonly #pods = new Map<string, Pod>();
  #rv = 100;
  #history: Event[] = [];
  #oldest = 100;
  readonly #watchers = new Set<Watcher>();

  /** Starts listening on 127.0.0.1 (an ephemeral port). */
  constructor() {
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      (req) => this.#handle(req),
    );
  }

  /** Base URL. */
  get url(): string {
    return `http://127.0.0.1:${this.#server.addr.port}`;
  }

  /** Watches currently open. */
  get watching(): number {
    return this.#watchers.size;
  }

  /** A kubeconfig pointing at this server with its token, written to a temp file. */
  kubeconfig(namespace = "default"): string {
    const path = Deno.makeTempFileSync({ suffix: ".kubeconfig" });
    Deno.writeTextFileSync(
      path,
      JSON.stringify({
        apiVersion: "v1",
        kind: "Config",
        // Plain HTTP: client-node allows it only with the skip flag (nothing to verify).
        clusters: [{
          name: "fake",
          cluster: { server: this.url, "insecure-skip-tls-verify": true },
        }],
        users: [{ name: "fake", user: { token: this.token } }],
        contexts: [{ name: "fake", context: { cluster: "fake", user: "fake", namespace } }],
        "current-context": "fake",
      }),
    );
    return path;
  }

  /** Creates or replaces a pod (by namespace/name); its resourceVersion is bumped. */
  apply(pod: Pod): Pod {
    const key = `${pod.metadata!.namespace ?? "default"}/${pod.metadata!.name}`;
    const type = this.#pods.has(key) ? "MODIFIED" : "ADDED";
    const stored = structuredClone(pod);
    stored.metadata!.namespace ??= "default";
    stored.metadata!.resourceVersion = String(++this.#rv);
    this.#pods.set(key, stored);
    this.#emit({ rv: this.#rv, type, pod: stored });
    return stored;
  }

  /** Deletes a pod. */
  delete(namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    const pod = this.#pods.get(key);
    if (!pod) return;
    this.#pods.delete(key);
    const gone = structuredClone(pod);
    gone.metadata!.resourceVersion = String(++this.#rv);
    this.#emit({ rv: this.#rv, type: "DELETED", pod: gone });
  }

  /** Forgets the event history: watches from any earlier version get 410 Gone. */
  compact(): void {
    this.#history = [];
    this.#oldest = this.#rv;
  }

  /** Sends a bookmark at the current version to every open watch. */
  bookmark(): void {
    const line = JSON.stringify({
      type: "BOOKMARK",
      object: { kind: "Pod", metadata: { resourceVersion: String(this.#rv) } },
    });
    for (const w of this.#watchers) w.push(line);
  }

  /** Breaks every open watch connection (the client sees a reset, not an end). */
  resetWatches(): void {
    for (const w of [...this.#watchers]) w.fail();
  }

  /** Stops the server. */
  async close(): Promise<void> {
    this.resetWatches();
    await this.#server.shutdown();
  }

  #emit(e: Event): void {
    this.#history.push(e);
    for (const w of this.#watchers) {
      if (this.#visible(e.pod, w.ns, w.selector)) w.push(eventLine(e));
    }
  }

  #visible(pod: Pod, ns: string | null, selector: Record<string, string>): boolean {
    if (ns !== null && pod.metadata?.namespace !== ns) return false;
    return Object.entries(selector).every(([k, v]) => pod.metadata?.labels?.[k] === v);
  }

  #handle(req: Request): Response {
    const u = new URL(req.url);
    this.requests.push(`${req.method} ${u.pathname}${u.search}`);
    if (this.down) return json(503, status(503, "ServiceUnavailable", "down"));
    if (req.headers.get("authorization") !== `Bearer ${this.token}`) {
      return json(401, status(401, "Unauthorized", "bad token"));
    }
    const m = /^\/api\/v1(?:\/namespaces\/([^/]+))?\/pods$/.exec(u.pathname);
    if (!m || req.method !== "GET") return json(404, status(404, "NotFound", u.pathname));
    const ns = m[1] ? decodeURIComponent(m[1]) : null;
    const selector = parseSelector(u.searchParams.get("labelSelector") ?? "");
    if (u.searchParams.get("watch") === "1" || u.searchParams.get("watch") === "true") {
      return this.#watch(ns, selector, Number(u.searchParams.get("resourceVersion") ?? "0"));
    }
    const all = [...this.#pods.values()].filter((p) => this.#visible(p, ns, selector))
      .sort((a, b) => a.metadata!.name!.localeCompare(b.metadata!.name!));
    const limit = Number(u.searchParams.get("limit") ?? "0") || all.length;
    const from = Number(u.searchParams.get("continue") ?? "0");
    const items = all.slice(from, from + limit);
    const next = from + limit < all.length ? String(from + limit) : undefined;
    return json(200, {
      kind: "PodList",
      apiVersion: "v1",
      metadata: { resourceVersion: String(this.#rv), ...(next ? { continue: next } : {}) },
      items,
    });
  }

  #watch(ns: string | null, selector: Record<string, string>, since: number): Response {
    if (since < this.#oldest) {
      const gone = status(410, "Expired", `too old resource version: ${since} (${this.#oldest})`);
      if (!this.goneAsEvent) return json(410, gone);
      return new Response(JSON.stringify({ type: "ERROR", object: gone }) + "\n", {
        headers: { "content-type": "application/json" },
      });
    }
    let watcher: Watcher;
    const body = new ReadableStream<Uint8Array>({
      start: (c) => {
        watcher = {
          ns,
          selector,
          push: (line) => c.enqueue(enc.encode(line + "\n")),
          fail: () => {
            this.#watchers.delete(watcher);
            c.error(new Error("fake API server: watch connection reset on purpose"));
          },
        };
        for (const e of this.#history) {
          if (e.rv > since && this.#visible(e.pod, ns, selector)) watcher.push(eventLine(e));
        }
        this.#watchers.add(watcher);
      },
      cancel: () => void this.#watchers.delete(watcher),
    });
    return new Response(body, { headers: { "content-type": "application/json" } });
  }
}

function eventLine(e: Event): string {
  return JSON.stringify({ type: e.type, object: { kind: "Pod", apiVersion: "v1", ...e.pod } });
}

function status(code: number, reason: string, message: string) {
  return { kind: "Status", apiVersion: "v1", status: "Failure", code, reason, message };
}

function json(code: number, body: unknown): Response {
  return Response.json(body, { status: code });
}

function parseSelector(s: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of s.split(",").filter(Boolean)) {
    const [k, v] = part.split("=");
    out[k] = v ?? "";
  }
  return out;
}

/** A pod as the API server would hold it (Running and Ready unless told otherwise). */
export function pod(
  name: string,
  ip: string,
  labels: Record<string, string>,
  over: { ready?: boolean; phase?: string; annotations?: Record<string, string>; ns?: string } = {},
): Pod {
  return {
    metadata: {
      name,
      namespace: over.ns ?? "default",
      uid: `uid-${over.ns ?? "default"}-${name}`,
      labels,
      annotations: over.annotations ?? {},
    },
    status: {
      phase: over.phase ?? "Running",
      podIP: ip,
      conditions: [{ type: "Ready", status: over.ready === false ? "False" : "True" }],
    },
  };
}
