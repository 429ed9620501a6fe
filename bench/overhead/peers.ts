/**
 * The non-Deno proxies of the overhead benchmark, as config files: HAProxy (roundrobin,
 * nbthread 1, `http-reuse always`, `option http-no-delay`, health check of `GET /health` every
 * 2 s) and nginx (round robin, one worker process in the foreground without a master,
 * keep-alive toward the workers, response buffering off so that SSE passes as it comes).
 */

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

/**
 * The nginx config listening on `port` in front of the worker `ports`; pid, error log and temp
 * files under `prefix`. `keepalive_requests` is raised on both sides so that neither wrk's nor
 * the workers' connections are closed every 1,000 requests (HAProxy reuses them without limit).
 */
export function nginxConfig(port: number, workers: number[], prefix: string): string {
  return `daemon off;
master_process off;
worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;

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
${workers.map((p) => `    server ${HOST}:${p};`).join("\n")}
    keepalive 64;
    keepalive_requests 1000000;
  }

  server {
    listen ${HOST}:${port};
    location / {
      proxy_pass http://workers;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`;
}
