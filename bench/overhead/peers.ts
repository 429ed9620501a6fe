/**
 * The non-Deno proxies of the overhead benchmark, as config files: HAProxy (roundrobin,
 * nbthread 1, `http-reuse always`, `option http-no-delay`, health check of `GET /health` every
 * 2 s) and nginx (round robin, one worker process in the foreground without a master,
 * keep-alive toward the workers, response buffering off so that SSE passes as it comes).
 */

import { haproxyConfig as routingHaproxy, nginxConfigWith } from "../routing/peers.ts";
import { HOST } from "../../support/processes.ts";

/** The HAProxy config (roundrobin, `http-reuse always`) on `port` before the worker `ports`. */
export function haproxyConfig(port: number, workers: number[]): string {
  const urls = workers.map((p) => `http://${HOST}:${p}`);
  return routingHaproxy("roundrobin", port, urls, "always");
}

/** The nginx config (round robin) listening on `port` in front of the worker `ports`. */
export function nginxConfig(port: number, workers: number[], prefix: string): string {
  const urls = workers.map((p) => `http://${HOST}:${p}`);
  return nginxConfigWith("", port, urls, prefix, `${prefix}/error.log warn`);
}
