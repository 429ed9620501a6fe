/**
 * The non-Deno proxies of the overhead benchmark, as config files: HAProxy (roundrobin,
 * nbthread 1, `http-reuse always`, `option http-no-delay`, health check of `GET /health` every
 * 2 s) and nginx (round robin, one worker process in the foreground without a master,
 * keep-alive toward the workers, response buffering off so that SSE passes as it comes).
 */

import { nginxConfigWith } from "../routing/peers.ts";
import { HOST } from "./processes.ts";

/** The HAProxy config listening on `port` in front of the worker `ports`. */
export function haproxyConfig(port: number, workers: number[]): string {
  return `global
  nbthread 1
  maxconn 4096

defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  option http-no-delay
  http-reuse always

frontend fe
  bind ${HOST}:${port}
  default_backend workers

backend workers
  balance roundrobin
  option httpchk GET /health
${workers.map((p, i) => `  server w${i + 1} ${HOST}:${p} check inter 2s`).join("\n")}
`;
}

/** The nginx config (round robin) listening on `port` in front of the worker `ports`. */
export function nginxConfig(port: number, workers: number[], prefix: string): string {
  const urls = workers.map((p) => `http://${HOST}:${p}`);
  return nginxConfigWith("", port, urls, prefix, `${prefix}/error.log warn`);
}
