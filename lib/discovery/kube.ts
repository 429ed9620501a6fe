/**
 * The Kubernetes API for discovery: `@kubernetes/client-node` (imported only here, only when
 * discovery is on: it costs about half a second and 100 MB) loads the configuration (in a pod:
 * the service account's token and CA and `KUBERNETES_SERVICE_HOST`/`_PORT`; elsewhere
 * `KUBECONFIG` or `~/.kube/config`), authenticates, and lists pods; the watch runs over Deno's
 * `fetch` with the same authentication and TLS (see `watch.ts` for why). A CA or client
 * certificate in the configuration becomes a `Deno.HttpClient`; `insecure-skip-tls-verify` is
 * refused (Deno's fetch has no per-client switch for it).
 */

import { ConfigError } from "../core/errors.ts";
import type { Pod } from "./pods.ts";
import { ApiStatusError, type PodPage, type WatchSource } from "./watch.ts";

/** What discovery asks of the API server, on pods: all its Role must grant (`deploy/`). */
export const KUBE_VERBS = ["list", "watch"] as const;

/** Pods per list page. */
const PAGE = 500;

/** The parts of client-node used here. */
interface KubeConfigLike {
  loadFromCluster(): void;
  loadFromDefault(): void;
  getCurrentCluster():
    | { server: string; caData?: string; caFile?: string; skipTLSVerify?: boolean }
    | null;
  getCurrentUser():
    | { certData?: string; certFile?: string; keyData?: string; keyFile?: string }
    | null;
  applyToHTTPSOptions(o: { headers?: Record<string, string> }): Promise<void>;
  makeApiClient<T>(api: new (...a: never[]) => T): T;
}

interface CoreApi {
  listNamespacedPod(p: Record<string, unknown>): Promise<PodListLike>;
  listPodForAllNamespaces(p: Record<string, unknown>): Promise<PodListLike>;
}

interface PodListLike {
  items: Pod[];
  metadata?: { resourceVersion?: string; _continue?: string; continue?: string };
}

/** A connection to the API server for pods of one namespace (or all) and label selector. */
export interface PodApi {
  /** The list/watch source for `labelSelector`. */
  source(labelSelector: string): WatchSource;
  /** Where the configuration came from, for the start-up log. */
  origin: string;
  /** The API server. */
  server: string;
  /** Releases the TLS client. */
  close(): void;
}

const decode64 = (s: string) =>
  new TextDecoder().decode(Uint8Array.from(atob(s), (c) => c.charCodeAt(0)));

/** Whether a kubeconfig file is there to load (KUBECONFIG's, or ~/.kube/config). */
function hasKubeconfig(): boolean {
  const paths = Deno.env.get("KUBECONFIG")?.split(":").filter(Boolean) ??
    [`${Deno.env.get("HOME") ?? ""}/.kube/config`];
  return paths.some((p) => {
    try {
      return Deno.statSync(p).isFile;
    } catch {
      return false;
    }
  });
}

/** Loads the configuration and builds the pod API; throws ConfigError when there is none. */
export async function connectPods(namespace: string | null): Promise<PodApi> {
  const k8s = await import("@kubernetes/client-node");
  const kc = new k8s.KubeConfig() as unknown as KubeConfigLike;
  const inCluster = Deno.env.get("KUBERNETES_SERVICE_HOST") !== undefined &&
    Deno.env.get("KUBECONFIG") === undefined;
  try {
    if (inCluster) kc.loadFromCluster();
    else kc.loadFromDefault();
  } catch (e) {
    const why = e instanceof Deno.errors.NotCapable
      ? `${e.message} (run with --allow-read for the kubeconfig or the service account)`
      : String(e);
    throw new ConfigError(`--service-discovery: cannot load the Kubernetes configuration: ${why}`);
  }
  const cluster = kc.getCurrentCluster();
  // client-node falls back to http://localhost:8080 when it finds no configuration at all.
  if (!inCluster && cluster?.server === "http://localhost:8080" && !hasKubeconfig()) {
    throw new ConfigError(
      "--service-discovery: no Kubernetes configuration found (run in a pod, or set KUBECONFIG)",
    );
  }
  if (!cluster?.server) {
    throw new ConfigError(
      "--service-discovery: no Kubernetes API server configured (run in a pod, or set KUBECONFIG)",
    );
  }
  if (cluster.skipTLSVerify && cluster.server.startsWith("https:")) {
    throw new ConfigError(
      "--service-discovery: insecure-skip-tls-verify is not supported; give the cluster's CA",
    );
  }
  const user = kc.getCurrentUser();
  const read = (data?: string, file?: string) =>
    data ? decode64(data) : file ? Deno.readTextFileSync(file) : undefined;
  const ca = read(cluster.caData, cluster.caFile);
  const cert = read(user?.certData, user?.certFile);
  const key = read(user?.keyData, user?.keyFile);
  const client = ca || (cert && key)
    ? Deno.createHttpClient({
      ...(ca ? { caCerts: [ca] } : {}),
      ...(cert && key ? { cert, key } : {}),
    })
    : undefined;
  const api = kc.makeApiClient(k8s.CoreV1Api as never) as unknown as CoreApi;
  const server = cluster.server.replace(/\/+$/, "");
  const path = namespace === null
    ? "/api/v1/pods"
    : `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`;
  return {
    origin: inCluster ? "in-cluster service account" : "kubeconfig",
    server,
    close: () => client?.close(),
    source: (labelSelector) => ({
      async list(continueToken): Promise<PodPage> {
        const params = {
          labelSelector,
          limit: PAGE,
          ...(continueToken ? { _continue: continueToken } : {}),
        };
        let res: PodListLike;
        try {
          res = namespace === null
            ? await api.listPodForAllNamespaces(params)
            : await api.listNamespacedPod({ namespace, ...params });
        } catch (e) {
          const code = (e as { code?: number }).code;
          if (typeof code === "number") throw new ApiStatusError(code, `list: HTTP ${code}`);
          throw e;
        }
        const next = res.metadata?._continue ?? res.metadata?.continue ?? null;
        return {
          items: res.items ?? [],
          resourceVersion: res.metadata?.resourceVersion ?? "",
          continueToken: next || null,
        };
      },
      async watch(resourceVersion, signal) {
        const headers: Record<string, string> = {};
        const o: { headers?: Record<string, string> } = { headers };
        await kc.applyToHTTPSOptions(o);
        const q = new URLSearchParams({
          watch: "1",
          labelSelector,
          resourceVersion,
          allowWatchBookmarks: "true",
          timeoutSeconds: "300",
        });
        return await fetch(`${server}${path}?${q}`, {
          headers: { ...o.headers, accept: "application/json" },
          signal,
          ...(client ? { client } : {}),
        });
      },
    }),
  };
}
