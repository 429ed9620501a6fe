/**
 * The gateway under test, as a process (`main.ts` through `bench/routing/gateway.ts`'s
 * `gatewayCommand`), with the flags every row shares: round robin (every worker gets its share
 * of each fault), a short request timeout so hangs resolve in seconds, and health checks and
 * breakers quick enough that a row's fault is gone before the next row. Ready when `/readiness`
 * counts every worker healthy.
 */

import { type Child, HOST, spawn, stop, waitFor } from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import { gatewayCommand } from "../routing/gateway.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** A started gateway. */
export interface GatewayProc {
  child: Child;
  /** Base URL of its main port. */
  url: string;
  /** Base URL of its metrics port. */
  promUrl: string;
  port: number;
  pid: number;
}

/** The gateway flags of every row (besides workers and ports). */
export function faultFlags(timeoutSecs: number): string[] {
  return [
    "--policy",
    "round_robin",
    "--request-timeout-secs",
    String(timeoutSecs),
    // A stream's head is held past a third of the deadline: retried elsewhere (30 s by default,
    // scaled down with the bench's short deadline).
    "--stream-head-timeout-secs",
    String(Math.max(1, Math.floor(timeoutSecs / 3))),
    "--health-check-interval-secs",
    "2",
    "--health-check-timeout-secs",
    "1",
    "--cb-timeout-duration-secs",
    "3",
  ];
}

/** What else a gateway of the matrix gets. */
export interface GatewayExtras {
  /** Flags after the shared ones. */
  extra?: string[];
  /** Grant every environment variable (a mesh router's gRPC library reads its own). */
  allEnv?: boolean;
  /** Its main and metrics ports (fresh ones by default). */
  ports?: [number, number];
  /** Rewrites the command before it is started (e.g. to start it inside a cgroup). */
  wrap?: (cmd: string[]) => string[];
}

/**
 * Starts a gateway named `name` on `cpu` in front of `workers`, with `faultFlags` and `x`'s
 * flags, and waits until it counts every worker healthy.
 */
export async function startGateway(
  name: string,
  workers: string[],
  timeoutSecs: number,
  cpu: number,
  dir: string,
  x: GatewayExtras = {},
): Promise<GatewayProc> {
  const [port, promPort] = x.ports ?? freePorts(2);
  const cmd = gatewayCommand(ROOT, port, promPort, 1, [
    "--worker-urls",
    ...workers,
    ...faultFlags(timeoutSecs),
    ...(x.extra ?? []),
  ]).map((a) => (x.allEnv && a.startsWith("--allow-env=") ? "--allow-env" : a));
  const argv = [Deno.execPath(), ...cmd];
  const child = await spawn(name, cpu, x.wrap ? x.wrap(argv) : argv, dir, ROOT);
  const g = {
    child,
    url: `http://${HOST}:${port}`,
    promUrl: `http://${HOST}:${promPort}`,
    port,
    pid: child.proc.pid,
  };
  try {
    await waitUntilHealthy(g, workers.length);
  } catch (e) {
    await stop([child]);
    throw e;
  }
  return g;
}

/** Waits (up to `attempts` × 100 ms) until the gateway counts `n` healthy workers. */
export function waitUntilHealthy(g: GatewayProc, n: number, attempts = 300): Promise<void> {
  return waitFor(
    g.child.name,
    g.child,
    `${g.url}/readiness`,
    (s, b) => s === 200 && JSON.parse(b).healthy_workers === n,
    attempts,
  );
}
