/**
 * TLS material read from the files the flags name and checked before anything listens or
 * connects, so that a wrong path or file stops the gateway at start (`ConfigError`, exit 2)
 * with the flag and the path, not at the first handshake. In: `GatewayConfig.tls` and the
 * mesh's `--mesh-tls-*`. Out: the main port's certificate and key (`CertifiedKey`), what the
 * gateway trusts and presents toward workers (`WorkerTls`) and the mesh's mTLS (`MeshPem`), as
 * PEM text.
 *
 * Checked: each file is readable; a certificate file holds PEM certificates that parse (the
 * first is the leaf, the rest its chain); a key file holds one PEM private key, unencrypted
 * (nothing could prompt for a passphrase); the key is the leaf's; a CA file holds at least one
 * certificate. An expired certificate is not refused (the caller logs it): the clients decide.
 * `node:crypto` parses; it is imported on first use, as only a gateway with TLS needs it.
 */

import type { GatewayConfig } from "../config/config.ts";
import { ConfigError } from "../core/errors.ts";

/** A certificate chain, its private key, and what a log line says of them. */
export interface CertifiedKey {
  /** The PEM certificate chain, leaf first. */
  cert: string;
  /** The PEM private key. */
  key: string;
  /** The leaf's subject, e.g. `CN=gateway.example`. */
  subject: string;
  /** When the leaf expires. */
  notAfter: Date;
}

/** What the gateway trusts and presents toward `https://` and `grpcs://` workers. */
export interface WorkerTls {
  /** CA certificates (one PEM block each) trusted besides the system's (`--ca-cert-paths`). */
  caCerts: string[];
  /** The client certificate and key presented to workers, or null (`--client-cert-path`). */
  client: CertifiedKey | null;
}

/** The mesh's mutual TLS: the CA every router's certificate is signed by, and this router's. */
export interface MeshPem {
  /** The mesh CA's certificates (`--mesh-tls-ca-cert`), PEM. */
  ca: string;
  /** This router's certificate and key (`--mesh-tls-cert`, `--mesh-tls-key`). */
  own: CertifiedKey;
}

/** Every TLS file the configuration names, read and checked. */
export interface TlsMaterial {
  /** The main port's certificate, or null for plain HTTP. */
  server: CertifiedKey | null;
  /** Toward workers. */
  worker: WorkerTls;
  /** The mesh's mTLS, or null for a plaintext mesh (or none). */
  mesh: MeshPem | null;
}

/** No TLS anywhere (what a gateway without TLS flags runs with). */
export const NO_TLS: TlsMaterial = {
  server: null,
  worker: { caCerts: [], client: null },
  mesh: null,
};

/** Whether the mesh of `c` runs over mTLS. */
function meshTls(c: GatewayConfig): boolean {
  return c.mesh.enabled && c.mesh.tlsCaCert !== null;
}

/** Whether `c` names any TLS file (then `loadTls` must have read them). */
export function wantsTls(c: GatewayConfig): boolean {
  const t = c.tls;
  return t.certPath !== null || t.clientCertPath !== null || t.caCertPaths.length > 0 ||
    meshTls(c);
}

/** Reads and checks every file `c.tls` names; throws `ConfigError` naming the flag and path. */
export async function loadTls(c: GatewayConfig): Promise<TlsMaterial> {
  if (!wantsTls(c)) return NO_TLS;
  const t = c.tls;
  const server = t.certPath !== null && t.keyPath !== null
    ? await readCertifiedKey("--tls-cert-path", t.certPath, "--tls-key-path", t.keyPath)
    : null;
  const client = t.clientCertPath !== null && t.clientKeyPath !== null
    ? await readCertifiedKey(
      "--client-cert-path",
      t.clientCertPath,
      "--client-key-path",
      t.clientKeyPath,
    )
    : null;
  const caCerts: string[] = [];
  for (const path of t.caCertPaths) {
    caCerts.push(...await readCertificates("--ca-cert-paths", path));
  }
  const m = c.mesh;
  const mesh = meshTls(c)
    ? {
      ca: (await readCertificates("--mesh-tls-ca-cert", m.tlsCaCert!)).join(""),
      own: await readCertifiedKey("--mesh-tls-cert", m.tlsCert!, "--mesh-tls-key", m.tlsKey!),
    }
    : null;
  return { server, worker: { caCerts, client }, mesh };
}

const BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n[\s\S]*?-----END \1-----/g;

/** The PEM blocks of `text` labelled `label` (e.g. `CERTIFICATE`), each as its own text. */
function blocks(text: string, label: (l: string) => boolean): string[] {
  return [...text.matchAll(BLOCK)].filter((m) => label(m[1])).map((m) => m[0] + "\n");
}

/**
 * Reads a certificate chain and its key: both files readable, the chain parses, the key is
 * unencrypted and the leaf's. Throws `ConfigError` naming the flag and path at fault.
 */
export async function readCertifiedKey(
  certFlag: string,
  certPath: string,
  keyFlag: string,
  keyPath: string,
): Promise<CertifiedKey> {
  const crypto = await import("node:crypto");
  const chain = await readCertificates(certFlag, certPath);
  const keyText = await readText(keyFlag, keyPath);
  const keys = blocks(keyText, (l) => l.endsWith("PRIVATE KEY"));
  if (keys.length !== 1) {
    const why = keys.length === 0 ? "holds no PEM private key" : "holds more than one private key";
    throw new ConfigError(`${keyFlag}: '${keyPath}' ${why}`);
  }
  if (keys[0].includes("ENCRYPTED")) {
    throw new ConfigError(`${keyFlag}: '${keyPath}' is encrypted; give an unencrypted key`);
  }
  let key;
  try {
    key = crypto.createPrivateKey(keys[0]);
  } catch (e) {
    throw new ConfigError(`${keyFlag}: '${keyPath}' is not a usable private key: ${message(e)}`);
  }
  const leaf = new crypto.X509Certificate(chain[0]);
  if (!leaf.checkPrivateKey(key)) {
    throw new ConfigError(
      `${keyFlag}: '${keyPath}' is not the private key of the certificate in ${certFlag} ` +
        `('${certPath}')`,
    );
  }
  return {
    cert: chain.join(""),
    key: keys[0],
    subject: leaf.subject.replaceAll("\n", ", "),
    notAfter: new Date(leaf.validTo),
  };
}

/** The certificates of a PEM file, each checked to parse; at least one. */
async function readCertificates(flag: string, path: string): Promise<string[]> {
  const { X509Certificate } = await import("node:crypto");
  const certs = blocks(await readText(flag, path), (l) => l === "CERTIFICATE");
  if (certs.length === 0) throw new ConfigError(`${flag}: '${path}' holds no PEM certificate`);
  certs.forEach((pem, i) => {
    try {
      new X509Certificate(pem);
    } catch (e) {
      throw new ConfigError(
        `${flag}: '${path}': certificate ${i + 1} does not parse: ${message(e)}`,
      );
    }
  });
  return certs;
}

async function readText(flag: string, path: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    const why = e instanceof Deno.errors.NotFound
      ? "no such file"
      : e instanceof Deno.errors.NotCapable
      ? `no read permission (run with --allow-read=${path})`
      : message(e);
    throw new ConfigError(`${flag}: cannot read '${path}': ${why}`);
  }
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
