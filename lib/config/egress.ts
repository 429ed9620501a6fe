/**
 * The egress policy a config asks for (see `core/egress.ts`): its allow-list and the gateway's
 * own listen sockets, and the start-up check of the workers given on the command line
 * (`--worker-urls`, `--prefill`, `--decode`) against it, which fails start-up naming the flag.
 */

import { EgressPolicy, type OwnEndpoint } from "../core/egress.ts";
import { badValue } from "../core/errors.ts";
import type { GatewayConfig } from "./types.ts";

/** The sockets the gateway listens on as configured (port 0 until bound). */
export function ownEndpoints(c: GatewayConfig): OwnEndpoint[] {
  const own: OwnEndpoint[] = [
    { role: "main", host: c.host, port: c.port },
    { role: "metrics", host: c.prometheusHost, port: c.prometheusPort },
  ];
  if (c.mesh.enabled) own.push({ role: "mesh", host: c.mesh.host, port: c.mesh.port });
  return own;
}

/** The egress policy of `c` (`localAddresses` as in `EgressOptions`). */
export function egressPolicy(c: GatewayConfig, localAddresses?: () => string[]): EgressPolicy {
  return new EgressPolicy({
    allowlist: c.workerHostAllowlist,
    own: ownEndpoints(c),
    localAddresses,
  });
}

/** Refuses a start-up worker the policy refuses, naming its flag. */
export function checkStartupWorkers(c: GatewayConfig, policy = egressPolicy(c)): void {
  const given: [string, string][] = [
    ...c.workerUrls.map((u): [string, string] => ["--worker-urls", u]),
    ...c.pd.prefill.map((p): [string, string] => ["--prefill", p.url]),
    ...c.pd.decode.map((u): [string, string] => ["--decode", u]),
  ];
  for (const [flag, url] of given) {
    const why = policy.refusal(url);
    if (why) throw badValue(flag, url, `refused: ${why}`);
  }
}
