/**
 * The mesh's mTLS material as grpc-js reads it: a certificate provider (grpc-js's
 * `experimental.CertificateProvider`, met structurally, so this file loads without grpc-js)
 * holding the mesh CA and this router's certificate and key, checked when read
 * (`lib/tls/pem.ts`). `update` swaps the router's pair: connections made from then on, both ways,
 * present the new one (the certificate reload, `lib/tls/reload.ts`); open ones keep theirs. The
 * CA is read once, at start.
 */

import { Buffer } from "node:buffer";

/** grpc-js's CA update. */
interface CaUpdate {
  caCertificate: Buffer;
}

/** grpc-js's identity update. */
interface IdentityUpdate {
  certificate: Buffer;
  privateKey: Buffer;
}

/** The CA and this router's certificate, for both the mesh server and its clients. */
export class MeshCertificates {
  readonly #ca: CaUpdate;
  #identity: IdentityUpdate;
  readonly #caListeners = new Set<(u: CaUpdate | null) => void>();
  readonly #identityListeners = new Set<(u: IdentityUpdate | null) => void>();

  /** The mesh CA's certificates and this router's chain and key, all PEM. */
  constructor(ca: string, cert: string, key: string) {
    this.#ca = { caCertificate: Buffer.from(ca) };
    this.#identity = { certificate: Buffer.from(cert), privateKey: Buffer.from(key) };
  }

  /** Presents `cert` and `key` on every connection made from now on. */
  update(cert: string, key: string): void {
    this.#identity = { certificate: Buffer.from(cert), privateKey: Buffer.from(key) };
    for (const l of this.#identityListeners) l(this.#identity);
  }

  // grpc-js's CertificateProvider: a listener hears the current material once it is added (on
  // the next tick, as grpc-js's own providers do: its server registers what the update reaches
  // only after adding the listener), then every change.

  addCaCertificateListener(listener: (u: CaUpdate | null) => void): void {
    this.#caListeners.add(listener);
    queueMicrotask(() => this.#caListeners.has(listener) && listener(this.#ca));
  }

  removeCaCertificateListener(listener: (u: CaUpdate | null) => void): void {
    this.#caListeners.delete(listener);
  }

  addIdentityCertificateListener(listener: (u: IdentityUpdate | null) => void): void {
    this.#identityListeners.add(listener);
    queueMicrotask(() => this.#identityListeners.has(listener) && listener(this.#identity));
  }

  removeIdentityCertificateListener(listener: (u: IdentityUpdate | null) => void): void {
    this.#identityListeners.delete(listener);
  }
}
