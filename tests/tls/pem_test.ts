/**
 * The TLS files the flags name, read and checked at start: a good pair and chain load; every
 * bad file (missing, not PEM, the wrong key, an encrypted key, a CA file without certificates)
 * is a `ConfigError` naming the flag and the path, for the main port's pair, the workers' and
 * the mesh's.
 */

import assert from "node:assert/strict";
import { defaultConfig } from "../../lib/config/config.ts";
import { ConfigError } from "../../lib/core/errors.ts";
import { loadTls, NO_TLS, readCertifiedKey } from "../../lib/tls/pem.ts";
import { NO_OPENSSL, OPENSSL, withPki } from "../../support/certs.ts";

function config(tls: Partial<ReturnType<typeof defaultConfig>["tls"]>) {
  const c = defaultConfig();
  c.tls = { ...c.tls, ...tls };
  return c;
}

/** Asserts `p` rejects with a ConfigError whose message matches `re`. */
async function refused(p: Promise<unknown>, re: RegExp): Promise<void> {
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof ConfigError, String(e));
    assert.match(e.message, re);
    return true;
  });
}

Deno.test("tls pem: no TLS flags read nothing", async () => {
  assert.equal(await loadTls(defaultConfig()), NO_TLS);
});

Deno.test({
  name: "tls pem: the main port's pair, the client pair and several CA files load" + NO_OPENSSL,
  ignore: !OPENSSL,
  fn: () =>
    withPki(async (pki) => {
      // A chain file (leaf, then its CA) is served whole.
      const chain = `${pki.dir}/chain.pem`;
      await Deno.writeTextFile(chain, pki.server.certPem + pki.caPem);
      const m = await loadTls(config({
        certPath: chain,
        keyPath: pki.server.key,
        clientCertPath: pki.client.cert,
        clientKeyPath: pki.client.key,
        caCertPaths: [pki.ca, pki.ca2],
      }));
      assert.equal(m.server?.subject, "CN=server-1");
      assert.equal(m.server?.cert.match(/BEGIN CERTIFICATE/g)?.length, 2);
      assert.ok(m.server!.notAfter.getTime() > Date.now());
      assert.equal(m.worker.client?.subject, "CN=gateway");
      assert.equal(m.worker.caCerts.length, 2);
    }),
});

Deno.test({
  name: "tls pem: the mesh's mTLS files load through the same checks, named by their flags" +
    NO_OPENSSL,
  ignore: !OPENSSL,
  fn: () =>
    withPki(async (pki) => {
      const mesh = (tlsKey: string) => {
        const c = defaultConfig();
        c.mesh = {
          ...c.mesh,
          enabled: true,
          tlsCaCert: pki.ca,
          tlsCert: pki.server.cert,
          tlsKey,
        };
        return c;
      };
      const m = await loadTls(mesh(pki.server.key));
      assert.equal(m.mesh?.own.subject, "CN=server-1");
      assert.match(m.mesh!.ca, /BEGIN CERTIFICATE/);
      assert.equal(m.server, null);
      await refused(
        loadTls(mesh(pki.client.key)),
        new RegExp(
          `^--mesh-tls-key: '${pki.client.key}' is not the private key of the certificate in --mesh-tls-cert`,
        ),
      );
      // Named but not enabled: no mesh, nothing read.
      const off = mesh(pki.client.key);
      off.mesh.enabled = false;
      assert.equal((await loadTls(off)).mesh, null);
    }),
});

Deno.test({
  name: "tls pem: a bad certificate or key stops the start naming the flag and the path" +
    NO_OPENSSL,
  ignore: !OPENSSL,
  fn: () =>
    withPki(async (pki) => {
      const junk = `${pki.dir}/junk.pem`;
      await Deno.writeTextFile(junk, "not a certificate\n");
      const encrypted = `${pki.dir}/encrypted.key`;
      await Deno.writeTextFile(
        encrypted,
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
      );
      const broken = `${pki.dir}/broken.pem`;
      await Deno.writeTextFile(
        broken,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
      );
      const missing = `${pki.dir}/missing.pem`;
      const server = (cert: string, key: string) =>
        readCertifiedKey("--tls-cert-path", cert, "--tls-key-path", key);
      await refused(
        server(missing, pki.server.key),
        new RegExp(`^--tls-cert-path: cannot read '${missing}': no such file$`),
      );
      await refused(
        server(pki.server.cert, missing),
        new RegExp(`^--tls-key-path: cannot read '${missing}': no such file$`),
      );
      await refused(
        server(junk, pki.server.key),
        new RegExp(`^--tls-cert-path: '${junk}' holds no PEM certificate$`),
      );
      await refused(
        server(broken, pki.server.key),
        new RegExp(`^--tls-cert-path: '${broken}': certificate 1 does not parse`),
      );
      await refused(
        server(pki.server.cert, junk),
        new RegExp(`^--tls-key-path: '${junk}' holds no PEM private key$`),
      );
      await refused(server(pki.server.cert, encrypted), /--tls-key-path: '.*' is encrypted/);
      await refused(
        server(pki.server.cert, pki.server2.key),
        new RegExp(
          `^--tls-key-path: '${pki.server2.key}' is not the private key of the certificate in ` +
            `--tls-cert-path \\('${pki.server.cert}'\\)$`,
        ),
      );
      // The workers' files are checked the same way, under their own flags.
      await refused(
        loadTls(config({ clientCertPath: pki.client.cert, clientKeyPath: pki.server.key })),
        /^--client-key-path: '.*server\.key' is not the private key of the certificate in --client-cert-path/,
      );
      await refused(
        loadTls(config({ caCertPaths: [pki.ca, junk] })),
        new RegExp(`^--ca-cert-paths: '${junk}' holds no PEM certificate$`),
      );
      await refused(
        loadTls(config({ caCertPaths: [missing] })),
        new RegExp(`^--ca-cert-paths: cannot read '${missing}'`),
      );
    }),
});
