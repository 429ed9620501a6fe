/**
 * The workers' client certificate reload as a feature (`--client-cert-path`,
 * `--client-key-path`): the pair's files watched and read again on a change or on SIGHUP, with
 * the checks of start (`pem.ts`), and a valid new pair handed to every client toward workers
 * through the `WorkerTlsSource` they read (`worker_tls.ts`). Off without a client certificate.
 */

import type { GatewayConfig } from "../config/config.ts";
import type { Clock } from "../core/clock.ts";
import type { Feature } from "../core/feature.ts";
import type { Logger } from "../core/log.ts";
import { CertificateReloader } from "./reload.ts";
import type { WorkerTlsSource } from "./worker_tls.ts";

/** The reload of `source`'s client certificate, or null when the config names none. */
export function workerTlsReload(
  config: GatewayConfig,
  source: WorkerTlsSource,
  log: Logger,
  clock: Clock,
): Feature | null {
  const t = config.tls;
  const current = source.current.client;
  if (t.clientCertPath === null || t.clientKeyPath === null || current === null) return null;
  const reloader = new CertificateReloader({
    certPath: t.clientCertPath,
    keyPath: t.clientKeyPath,
    flags: { cert: "--client-cert-path", key: "--client-key-path" },
    current,
    apply: (next) => source.update(next),
    log: log.child({ module: "tls", side: "workers" }),
    clock,
  });
  return {
    name: "worker_tls",
    start: () => reloader.start(),
    stop: () => reloader.stop(),
    reload: (reason) => reloader.reload(reason),
  };
}
