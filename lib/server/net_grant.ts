/**
 * The runtime net grant a gateway config needs: the `--allow-net` list the launcher gives the
 * thread the gateway runs in (Deno fixes permissions when a thread starts, so the list is
 * computed from the flags before it). In each mode:
 * - static (workers and PD legs from flags, no discovery, no mesh): the listen sockets, the
 *   workers' `host:port`s, the `--worker-host-allowlist` entries and, with `--enable-trace`,
 *   the OTLP collector's `host:port`;
 * - with discovery or the mesh, workers arrive at run time (pods, peers' registrations) and the
 *   mesh learns routers by gossip: with an allow-list, the grant is the static one plus the
 *   mesh seeds and the Kubernetes API server; without one nothing bounds them, and the grant
 *   stays the process's own (the tasks' `--allow-net --deny-net=169.254.0.0/16,...`);
 * - an allow-list entry `--allow-net` cannot express (an IPv6 block wider than one address)
 *   keeps the process's own grant too; the allow-list still holds in code.
 */

import type { GatewayConfig } from "../config/config.ts";
import { parseAllowEntry, urlHostPort } from "../core/egress.ts";
import { kubeApiHostPort } from "../discovery/kube_server.ts";
import {
  collectorGrant,
  type EnvReader,
  processEnv,
  tracingSettings,
} from "../tracing/settings.ts";

/** What the gateway thread may connect to and listen on. */
export type NetGrant =
  /** Exactly these `--allow-net` entries. */
  | { mode: "narrow"; allow: string[] }
  /** The process's own grant, and why it cannot be narrowed. */
  | { mode: "inherit"; why: string };

const bracket = (h: string) => (h.includes(":") && !h.startsWith("[") ? `[${h}]` : h);

/** `--allow-net` spelling of an allow-list entry; null when Deno cannot express it. */
export function grantEntry(raw: string): string | null {
  const e = parseAllowEntry(raw);
  if (!e) return null;
  if (e.kind !== "cidr") return e.text;
  const v6 = !e.cidr.base.v4;
  if (v6 && e.cidr.bits < 128) return null; // Deno 2.9 reads IPv4 blocks only
  return v6 ? bracket(e.text) : e.text;
}

/**
 * The listen sockets' grant entries (port 0 is granted as such: Deno checks the asked port).
 * `Deno.serve` behind HTTPS (`--http-server deno` with `--tls-cert-path`) listens on a loopback
 * port picked at start and each client's stream is piped to it (`main_server.ts`): the loopback
 * address at any port, as a port cannot be named before it is picked.
 */
function listens(c: GatewayConfig): string[] {
  const out = [`${bracket(c.host)}:${c.port}`, `${bracket(c.prometheusHost)}:${c.prometheusPort}`];
  if (c.mesh.enabled) out.push(`${bracket(c.mesh.host)}:${c.mesh.port}`);
  if (c.httpServer === "deno" && c.tls.certPath !== null) out.push(TLS_PIPE_HOST);
  return out;
}

/** Where `Deno.serve` listens behind the HTTPS terminator (`--http-server deno`). */
export const TLS_PIPE_HOST = "127.0.0.1";

/**
 * The grant of a validated gateway config. `kubeApi` finds the API server's `host:port` (only
 * asked with discovery and an allow-list); tests pass their own.
 */
export function gatewayNetGrant(
  c: GatewayConfig,
  kubeApi: () => string | null = kubeApiHostPort,
  env: EnvReader = processEnv,
): NetGrant {
  const dynamic = [
    c.discovery.enabled ? "--service-discovery" : null,
    c.mesh.enabled ? "--enable-mesh" : null,
  ].filter((x) => x !== null);
  if (dynamic.length > 0 && c.workerHostAllowlist.length === 0) {
    return {
      mode: "inherit",
      why: `${dynamic.join(" and ")} register workers at run time and no ` +
        "--worker-host-allowlist bounds them",
    };
  }
  const allow = listens(c);
  for (const url of [...c.workerUrls, ...c.pd.prefill.map((p) => p.url), ...c.pd.decode]) {
    const hp = urlHostPort(url);
    if (hp) allow.push(`${bracket(hp.host)}:${hp.port}`);
  }
  if (c.mesh.enabled) allow.push(...c.mesh.peerUrls);
  const tracing = tracingSettings(c.tracing, env);
  if (tracing !== null) allow.push(...collectorGrant(tracing));
  for (const raw of c.workerHostAllowlist) {
    const g = grantEntry(raw);
    if (g === null) {
      return {
        mode: "inherit",
        why: `Deno's --allow-net cannot express the --worker-host-allowlist entry ${raw} ` +
          "(IPv6 blocks); the allow-list is enforced in code only",
      };
    }
    allow.push(g);
  }
  if (c.discovery.enabled) {
    const api = kubeApi();
    if (api === null) {
      return {
        mode: "inherit",
        why: "the Kubernetes API server's address is not known before start " +
          "(no KUBERNETES_SERVICE_HOST, no readable kubeconfig)",
      };
    }
    allow.push(api);
  }
  return { mode: "narrow", allow: [...new Set(allow)] };
}
