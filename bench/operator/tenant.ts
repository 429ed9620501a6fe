/**
 * What `bench:limits` and `bench:cost` share: the tiny chat request, the tenant it is sent as
 * (the trusted header), a limits file, and the instant worker behind the gateways.
 */

import { type Child, HOST, spawn, waitFor } from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";

/** The tenant every request is sent as, in the header `TENANT_HEADER` (trusted). */
export const TENANT = "bench";
export const TENANT_HEADER = "x-smg-tenant-id";

/** A chat request for one token. */
export const TINY_CHAT = JSON.stringify({
  model: "sim-model",
  messages: [{ role: "user", content: "hi" }],
  max_tokens: 1,
});

const OUT_OF_REACH = 1_000_000_000;

/**
 * A limits file: `TENANT` held to `rpm` requests a minute (out of reach when null), its tokens
 * and every other tenant out of reach.
 */
export function limitsYaml(rpm: number | null): string {
  return `default_policy:
  tokens_per_minute: ${OUT_OF_REACH}
  requests_per_minute: ${OUT_OF_REACH}
tenants:
  - tenant_key: header:${TENANT}
    tokens_per_minute: ${OUT_OF_REACH}
    requests_per_minute: ${rpm ?? OUT_OF_REACH}
`;
}

const WORKER = new URL("../overhead/instant_worker.ts", import.meta.url).pathname;

/** The instant worker on `cpu`, healthy: its URL and process. */
export async function startInstantWorker(
  dir: string,
  root: string,
  cpu = 1,
): Promise<{ url: string; child: Child }> {
  const [port] = freePorts(1);
  const child = await spawn(
    "worker",
    cpu,
    [Deno.execPath(), "run", `--allow-net=${HOST}`, WORKER, "--port", String(port)],
    dir,
    root,
  );
  const url = `http://${HOST}:${port}`;
  await waitFor("worker", child, `${url}/health`, (s) => s === 200);
  return { url, child };
}
