/**
 * Throwaway certificates for TLS tests, made by the `openssl` command in a fresh temporary
 * directory: two CAs (so a client trusting only one of them tells which server certificate it
 * was shown), a server certificate from each for 127.0.0.1 (subjectAltName IP:127.0.0.1), a
 * client certificate from the first, and a stranger CA that signs nothing used here. EC P-256
 * keys, valid two days. `OPENSSL` is false where the command is missing; tests then skip, saying
 * so in their name.
 */

/** A certificate and its key, as paths and as PEM text. */
export interface Pair {
  cert: string;
  key: string;
  certPem: string;
  keyPem: string;
}

/** What `makePki` wrote. */
export interface Pki {
  dir: string;
  /** CA 1: signs `server` and `client`. */
  ca: string;
  caPem: string;
  /** CA 2: signs `server2`. */
  ca2: string;
  ca2Pem: string;
  /** A CA that signs none of these. */
  stranger: string;
  /** For 127.0.0.1, from CA 1 (CN server-1). */
  server: Pair;
  /** For 127.0.0.1, from CA 2 (CN server-2). */
  server2: Pair;
  /** A client certificate from CA 1 (CN gateway). */
  client: Pair;
  /** Another client certificate from CA 1 (CN gateway-2), a renewal of `client`. */
  client2: Pair;
  /** Removes the directory. */
  remove(): Promise<void>;
}

async function openssl(args: string[], cwd?: string): Promise<void> {
  const out = await new Deno.Command("openssl", { args, cwd, stdout: "null", stderr: "piped" })
    .output();
  if (!out.success) {
    throw new Error(`openssl ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/** Whether the `openssl` command runs here. */
export const OPENSSL: boolean = await openssl(["version"]).then(() => true, () => false);

/** The suffix of a test's name when it cannot run without openssl. */
export const NO_OPENSSL = OPENSSL ? "" : " (skipped: the openssl command is not installed)";

const KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];

async function makeCa(dir: string, name: string): Promise<void> {
  await openssl([
    "req",
    "-x509",
    ...KEY,
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.pem`,
    "-days",
    "2",
    "-subj",
    `/CN=smg-test-${name}`,
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ], dir);
}

/** A random 63-bit certificate serial, in hex. */
function serial(): string {
  const b = crypto.getRandomValues(new Uint8Array(8));
  b[0] &= 0x7f;
  return "0x" + [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

async function makeLeaf(
  dir: string,
  name: string,
  ca: string,
  cn: string,
  ext: string,
): Promise<Pair> {
  await Deno.writeTextFile(`${dir}/${name}.ext`, `basicConstraints=CA:FALSE\n${ext}\n`);
  await openssl([
    "req",
    ...KEY,
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.csr`,
    "-subj",
    `/CN=${cn}`,
  ], dir);
  await openssl([
    "x509",
    "-req",
    "-in",
    `${name}.csr`,
    "-CA",
    `${ca}.pem`,
    "-CAkey",
    `${ca}.key`,
    // A serial of its own: two leaves of one CA made at once would race on `-CAcreateserial`'s
    // shared serial file.
    "-set_serial",
    serial(),
    "-out",
    `${name}.pem`,
    "-days",
    "2",
    "-extfile",
    `${name}.ext`,
  ], dir);
  const cert = `${dir}/${name}.pem`;
  const key = `${dir}/${name}.key`;
  return {
    cert,
    key,
    certPem: await Deno.readTextFile(cert),
    keyPem: await Deno.readTextFile(key),
  };
}

/**
 * Every promise's value, once all have settled: the first failure is thrown only after the
 * others are done, so nothing still writes into the directory a failure removes.
 */
async function settled<T>(ps: Promise<T>[]): Promise<T[]> {
  const rs = await Promise.allSettled(ps);
  const failed = rs.find((r) => r.status === "rejected");
  if (failed) throw failed.reason;
  return rs.map((r) => (r as PromiseFulfilledResult<T>).value);
}

/** Writes a fresh set of certificates (see the module comment); needs `OPENSSL`. */
export async function makePki(): Promise<Pki> {
  const dir = await Deno.makeTempDir({ prefix: "smg-tls-" });
  try {
    await settled([makeCa(dir, "ca"), makeCa(dir, "ca2"), makeCa(dir, "stranger")]);
    const serverExt = "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth";
    const [server, server2, client, client2] = await settled([
      makeLeaf(dir, "server", "ca", "server-1", serverExt),
      makeLeaf(dir, "server2", "ca2", "server-2", serverExt),
      makeLeaf(dir, "client", "ca", "gateway", "extendedKeyUsage=clientAuth"),
      makeLeaf(dir, "client2", "ca", "gateway-2", "extendedKeyUsage=clientAuth"),
    ]);
    return {
      dir,
      ca: `${dir}/ca.pem`,
      caPem: await Deno.readTextFile(`${dir}/ca.pem`),
      ca2: `${dir}/ca2.pem`,
      ca2Pem: await Deno.readTextFile(`${dir}/ca2.pem`),
      stranger: `${dir}/stranger.pem`,
      server,
      server2,
      client,
      client2,
      remove: () => Deno.remove(dir, { recursive: true }),
    };
  } catch (e) {
    await Deno.remove(dir, { recursive: true });
    throw e;
  }
}

/** Runs `fn` with fresh certificates, removing them after. */
export async function withPki(fn: (pki: Pki) => Promise<void>): Promise<void> {
  const pki = await makePki();
  try {
    await fn(pki);
  } finally {
    await pki.remove();
  }
}

/** A `fetch` client trusting `caPems` (and presenting `client`, if given); close it after use. */
export function httpsClient(caPems: string[], client?: Pair): Deno.HttpClient {
  return Deno.createHttpClient({
    caCerts: caPems,
    ...(client ? { cert: client.certPem, key: client.keyPem } : {}),
  });
}

/**
 * `ln -s target path`: `Deno.symlink` needs unscoped read and write permissions, the test task
 * grants writes to /tmp only.
 */
export async function symlink(target: string, path: string): Promise<void> {
  const o = await new Deno.Command("ln", { args: ["-s", target, path], stderr: "piped" }).output();
  if (!o.success) throw new Error(`ln -s ${target} ${path}: ${new TextDecoder().decode(o.stderr)}`);
}

/** A certificate path pair whose files can be swapped with no event in a watched directory. */
export interface HiddenLinks {
  /** `live/tls.crt`, the path handed to the gateway. */
  cert: string;
  /** `live/tls.key`. */
  key: string;
  /** Points the links at `pair`, changing what `cert` and `key` read. */
  point(pair: Pair): Promise<void>;
}

/**
 * `live/tls.crt -> links/tls.crt -> pair.cert` (and the key alike) under `pki.dir`: re-pointing
 * the links in `links/`, a directory nobody watches, changes what the live paths read without
 * any event a watch of `live/` could see (what only SIGHUP picks up).
 */
export async function hiddenLinks(pki: Pki, first: Pair): Promise<HiddenLinks> {
  const live = `${pki.dir}/live`;
  const links = `${pki.dir}/links`;
  await Deno.mkdir(live);
  await Deno.mkdir(links);
  const point = async (pair: Pair) => {
    await Deno.remove(`${links}/tls.crt`).catch(() => {});
    await Deno.remove(`${links}/tls.key`).catch(() => {});
    await symlink(pair.cert, `${links}/tls.crt`);
    await symlink(pair.key, `${links}/tls.key`);
  };
  await point(first);
  await symlink(`${links}/tls.crt`, `${live}/tls.crt`);
  await symlink(`${links}/tls.key`, `${live}/tls.key`);
  return { cert: `${live}/tls.crt`, key: `${live}/tls.key`, point };
}
