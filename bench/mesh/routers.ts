/**
 * Routers for the benchmarks that put several gateways behind HAProxy (`bench:mesh-failover`,
 * `bench:limits`): N gateway processes on one CPU, on a mesh if asked (the first the seed of the
 * others), ready when every worker is healthy and, with the mesh, every peer is ALIVE with its
 * stream open (members turn ALIVE before their store streams open, and shares sent before then
 * reach only some peers); and HAProxy's configuration in front of them.
 */

import { type Child, HOST, spawn, waitFor } from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import { gatewayCommand } from "../routing/gateway.ts";

/** A started router. */
export interface Router {
  child: Child;
  port: number;
  promPort: number;
  meshPort: number;
}

/** What to start. */
export interface RouterSpec {
  /** How many. */
  n: number;
  /** On a mesh (`--enable-mesh`, names r1…rN). */
  mesh: boolean;
  /** Worker URLs (`--worker-urls`), all expected healthy. */
  workers: string[];
  /** Gateway flags after the workers (policy and the rest). */
  flags: string[];
  /** Log names: `${tag}-r1`… */
  tag: string;
  /** `--random-seed` of the first; the next ones count on. */
  seed: number;
  cpu: number;
  dir: string;
  root: string;
  /** Deno flags added before `main.ts` (e.g. `--allow-read=DIR`). */
  denoFlags?: string[];
}

/** A router's `GET /mesh/status` (the fields the benches read). */
export interface MeshStatus {
  name: string;
  members: { name: string; status: string; stream: boolean }[];
}

/** The mesh flags of router `i` (named r1…), the first (`i` 0) the seed at `seedMeshPort`. */
export function meshFlags(i: number, meshPort: number, seedMeshPort: number): string[] {
  return [
    "--enable-mesh",
    "--mesh-server-name",
    `r${i + 1}`,
    "--mesh-host",
    HOST,
    "--mesh-port",
    String(meshPort),
    ...(i === 0 ? [] : ["--mesh-peer-urls", `${HOST}:${seedMeshPort}`]),
  ];
}

/** Waits until the router at `url` sees its `n - 1` peers ALIVE, each with its stream open. */
export function waitMeshReady(child: Child, url: string, n: number): Promise<void> {
  return waitFor(`${child.name} mesh`, child, `${url}/mesh/status`, (st, b) => {
    if (st !== 200) return false;
    const m = JSON.parse(b) as MeshStatus;
    const peers = m.members.filter((p) => p.name !== m.name);
    return peers.length === n - 1 && peers.every((p) => p.status === "ALIVE" && p.stream);
  });
}

/** Starts the routers of `s` and waits until they are ready. */
export async function startRouters(s: RouterSpec): Promise<Router[]> {
  const ports = freePorts(s.n * 3);
  const routers: Router[] = [];
  for (let i = 0; i < s.n; i++) {
    const [port, promPort, meshPort] = ports.slice(i * 3, i * 3 + 3);
    const mesh = s.mesh ? meshFlags(i, meshPort, ports[2]) : [];
    const cmd = gatewayCommand(s.root, port, promPort, s.seed + i, [
      "--worker-urls",
      ...s.workers,
      ...s.flags,
      ...mesh,
    ]).toSpliced(2, 0, ...(s.denoFlags ?? []))
      // grpc-js reads its GRPC_* variables, the yaml package LOG_TOKENS and LOG_STREAM.
      .map((a) => (a.startsWith("--allow-env=") ? "--allow-env" : a));
    const child = await spawn(
      `${s.tag}-r${i + 1}`,
      s.cpu,
      [Deno.execPath(), ...cmd],
      s.dir,
      s.root,
    );
    routers.push({ child, port, promPort, meshPort });
  }
  for (const r of routers) {
    await waitFor(
      r.child.name,
      r.child,
      `http://${HOST}:${r.port}/readiness`,
      (st, b) => st === 200 && JSON.parse(b).healthy_workers === s.workers.length,
    );
    if (s.mesh) await waitMeshReady(r.child, `http://${HOST}:${r.port}`, s.n);
  }
  return routers;
}

/**
 * HAProxy on `port`, `balance roundrobin` over `routers`; with `checks`, health checks every
 * 500 ms and retries with redispatch on connection failures (a router may be killed).
 */
export function haproxyConfig(port: number, routers: { port: number }[], checks: boolean): string {
  const retries = checks
    ? "  retries 3\n  option redispatch 1\n  retry-on conn-failure empty-response\n"
    : "";
  const check = checks ? " check inter 500ms fall 2 rise 2" : "";
  return `global
  nbthread 1
  maxconn 4096

defaults
  mode http
  timeout connect 2s
  timeout client 120s
  timeout server 120s
  option http-no-delay
${retries}
frontend fe
  bind ${HOST}:${port}
  default_backend routers

backend routers
  balance roundrobin
${checks ? "  option httpchk GET /health\n" : ""}${
    routers.map((r, i) => `  server r${i + 1} ${HOST}:${r.port}${check}`).join("\n")
  }
`;
}
