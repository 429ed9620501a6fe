/**
 * The TLS flags, SMG's names: the main port's certificate and key (HTTPS on both fronts, reloaded
 * when the files change), and what the gateway trusts and presents toward `https://` and
 * `grpcs://` workers. Paths only: the files are read and checked at start by `lib/tls/`.
 */

import { nonEmpty } from "./checks.ts";
import type { Flags } from "./flag.ts";
import { list, str } from "./kinds.ts";
import type { TlsConfig } from "./types.ts";

/** TLS, in --help order. */
export const TLS_FLAGS: Flags<TlsConfig> = {
  certPath: {
    name: "tls-cert-path",
    kind: str,
    default: null,
    help: "PEM certificate chain: serve HTTPS on --port (with --tls-key-path; reloaded on change)",
    check: nonEmpty,
  },
  keyPath: {
    name: "tls-key-path",
    kind: str,
    default: null,
    help: "PEM private key of --tls-cert-path",
    check: nonEmpty,
  },
  clientCertPath: {
    name: "client-cert-path",
    kind: str,
    default: null,
    help:
      "PEM certificate presented to https:// and grpcs:// workers (mTLS, with --client-key-path)",
    check: nonEmpty,
  },
  clientKeyPath: {
    name: "client-key-path",
    kind: str,
    default: null,
    help: "PEM private key of --client-cert-path",
    check: nonEmpty,
  },
  caCertPaths: {
    name: "ca-cert-paths",
    kind: list,
    default: [],
    help: "PEM CA files trusted for https:// and grpcs:// workers, besides the system's",
  },
};
