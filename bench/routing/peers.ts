/**
 * The peers our gateway is compared with, fronting the same simulated fleet: HAProxy
 * (`roundrobin`, `leastconn`, and a consistent hash of the `X-Session-Id` header) and nginx
 * (`random two least_conn`, and `hash $http_x_session_id consistent`). Each gets a config file
 * in the run's temp dir and runs in the foreground, single-threaded, pinned to the target CPU,
 * with response buffering off so that SSE chunks pass through as they come.
 */

import { type Child, HOST, spawn, stop, waitFor } from "../../support/processes.ts";
import type { TargetContext } from "./target_context.ts";

/** HAProxy balancing variants, by target suffix. */
export const HAPROXY_VARIANTS = {
  roundrobin: "balance roundrobin",
  leastconn: "balance leastconn",
  "hash-session": "balance hdr(X-Session-Id)\n  hash-type consistent",
} as const;

/** nginx balancing variants, by target suffix. */
export const NGINX_VARIANTS = {
  "random-two-least-conn": "random two least_conn;",
  "hash-session": "hash $http_x_session_id consistent;",
} as const;

/** A HAProxy variant name. */
export type HaproxyVariant = keyof typeof HAPROXY_VARIANTS;
/** An nginx variant name. */
export type NginxVariant = keyof typeof NGINX_VARIANTS;

/**
 * The HAProxy config for `variant` listening on `port` in front of `workers` (base URLs); `reuse`
 * is its `http-reuse` mode (the overhead benchmark uses `always`).
 */
export function haproxyConfig(
  variant: HaproxyVariant,
  port: number,
  workers: string[],
  reuse: "safe" | "always" = "safe",
): string {
  return `global
  nbthread 1
  maxconn 4096

defaults
  mode http
  timeout connect 5s
  timeout client 120s
  timeout server 120s
  option http-no-delay
  http-reuse ${reuse}

frontend fe
  bind ${HOST}:${port}
  default_backend workers

backend workers
  ${HAPROXY_VARIANTS[variant]}
  option httpchk GET /health
${workers.map((u, i) => `  server w${i + 1} ${new URL(u).host} check inter 2s`).join("\n")}
`;
}

/** The nginx config for `variant` on `port`; pid, logs and temp files go under `prefix`. */
export function nginxConfig(
  variant: NginxVariant,
  port: number,
  workers: string[],
  prefix: string,
): string {
  return nginxConfigWith(NGINX_VARIANTS[variant], port, workers, prefix);
}

/**
 * An nginx config balancing with `balance` (an `upstream` directive; "" for round robin): one
 * worker process in the foreground, keep-alive toward the workers, no response buffering (SSE
 * passes as it comes); also used by the overhead benchmark.
 */
export function nginxConfigWith(
  balance: string,
  port: number,
  workers: string[],
  prefix: string,
  errorLog = "stderr warn",
): string {
  return `daemon off;
master_process off;
worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${errorLog};

events {
  worker_connections 4096;
}

http {
  access_log off;
  client_body_temp_path ${prefix}/body;
  proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi;
  uwsgi_temp_path ${prefix}/uwsgi;
  scgi_temp_path ${prefix}/scgi;
  keepalive_requests 1000000;

  upstream workers {
    ${balance}
${workers.map((u) => `    server ${new URL(u).host};`).join("\n")}
    keepalive 64;
    keepalive_requests 1000000;
  }

  server {
    listen ${HOST}:${port};
    client_max_body_size 64m;
    location / {
      proxy_pass http://workers;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 120s;
    }
  }
}
`;
}

/** Writes the config, starts HAProxy and waits until /health answers through it. */
export async function startHaproxy(variant: HaproxyVariant, c: TargetContext): Promise<Child> {
  const cfg = `${c.dir}/${c.tag}-haproxy.cfg`;
  await Deno.writeTextFile(cfg, haproxyConfig(variant, c.port, c.workers));
  const child = await spawn(`${c.tag}-haproxy`, c.cpu, ["haproxy", "-db", "-f", cfg], c.dir, c.dir);
  return await ready(child, `haproxy ${variant}`, c.port);
}

/** Writes the config, starts nginx and waits until /health answers through it. */
export async function startNginx(variant: NginxVariant, c: TargetContext): Promise<Child> {
  const prefix = `${c.dir}/${c.tag}-nginx`;
  await Deno.mkdir(prefix, { recursive: true });
  const cfg = `${prefix}/nginx.conf`;
  await Deno.writeTextFile(cfg, nginxConfig(variant, c.port, c.workers, prefix));
  const cmd = ["nginx", "-e", "stderr", "-p", prefix, "-c", cfg];
  const child = await spawn(`${c.tag}-nginx`, c.cpu, cmd, c.dir, c.dir);
  return await ready(child, `nginx ${variant}`, c.port);
}

async function ready(child: Child, what: string, port: number): Promise<Child> {
  try {
    await waitFor(what, child, `http://${HOST}:${port}/health`, (s) => s === 200);
    return child;
  } catch (e) {
    await stop([child]);
    throw e;
  }
}
