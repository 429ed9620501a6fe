/**
 * Free ports, bound and released at once: for the launcher's workers when `--worker-base-port`
 * is 0, and for the tests and benchmarks that need a port number before the server that takes
 * it starts (flags that cannot take 0). The one definition of both. Known gap: another process
 * may take the port between the release and its use.
 */

/** A port on `hostname` (default 127.0.0.1) that was free a moment ago. */
export function freePort(hostname = "127.0.0.1"): number {
  return freePorts(1, hostname)[0];
}

/**
 * `n` distinct ports on `hostname` (default 127.0.0.1) that were free a moment ago: all `n` are
 * held at once before any is released, so no two are the same.
 */
export function freePorts(n: number, hostname = "127.0.0.1"): number[] {
  const listeners = Array.from({ length: n }, () => Deno.listen({ hostname, port: 0 }));
  const ports = listeners.map((l) => (l.addr as Deno.NetAddr).port);
  listeners.forEach((l) => l.close());
  return ports;
}
