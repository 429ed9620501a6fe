/**
 * Where the Kubernetes API server is, read the way `kube.ts` loads its configuration but
 * without `@kubernetes/client-node` (half a second and 100 MB at import): in a pod,
 * `KUBERNETES_SERVICE_HOST`/`_PORT`; elsewhere the current context's cluster `server` in
 * `KUBECONFIG` (the first file naming a current context wins, as kubectl merges) or
 * `~/.kube/config`. The launcher adds it to the runtime net grant; null when it cannot be told
 * (then the grant stays the process's own).
 */

import { parse } from "yaml";
import { urlHostPort } from "../core/egress.ts";

interface Named<T> {
  name?: string;
  context?: T;
  cluster?: T;
}

interface KubeconfigFile {
  "current-context"?: string;
  contexts?: Named<{ cluster?: string }>[];
  clusters?: Named<{ server?: string }>[];
}

const bracket = (h: string) => (h.includes(":") && !h.startsWith("[") ? `[${h}]` : h);

function readConfigs(): KubeconfigFile[] {
  const paths = Deno.env.get("KUBECONFIG")?.split(":").filter(Boolean) ??
    [`${Deno.env.get("HOME") ?? ""}/.kube/config`];
  const out: KubeconfigFile[] = [];
  for (const p of paths) {
    try {
      const doc = parse(Deno.readTextFileSync(p));
      if (doc && typeof doc === "object") out.push(doc as KubeconfigFile);
    } catch {
      // Missing or unreadable: kubectl skips it too.
    }
  }
  return out;
}

/** `host:port` of the API server discovery will talk to, or null when it cannot be told. */
export function kubeApiHostPort(): string | null {
  try {
    const host = Deno.env.get("KUBERNETES_SERVICE_HOST");
    if (host !== undefined && Deno.env.get("KUBECONFIG") === undefined) {
      return `${bracket(host)}:${Deno.env.get("KUBERNETES_SERVICE_PORT") ?? "443"}`;
    }
    const files = readConfigs();
    const current = files.find((f) => f["current-context"])?.["current-context"];
    if (!current) return null;
    const cluster = files.flatMap((f) => f.contexts ?? []).find((c) => c.name === current)
      ?.context?.cluster;
    const server = files.flatMap((f) => f.clusters ?? []).find((c) => c.name === cluster)
      ?.cluster?.server;
    const hp = server ? urlHostPort(server) : null;
    return hp ? `${bracket(hp.host)}:${hp.port}` : null;
  } catch {
    // NotCapable on the environment or the file: the grant cannot name the server.
    return null;
  }
}
